//! Asking a subject for one decision, over HTTP/1.1 or Envoy's RLS, and reading the answer by
//! the file's rules. Each answer keeps the wall-clock instant before the request left and the
//! instant its answer arrived: the decision happened somewhere in between, and the checks
//! place it anywhere there.

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use sim_real::clock::wall_us;
use tonic::transport::{Channel, Endpoint};

use crate::file::{AnswerRules, Ask, ServiceFile, Values};

/// How long one request may take before it counts as unanswered.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// What one request got.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The instance asked.
    pub instance: usize,
    /// Wall-clock µs just before the request left.
    pub sent_us: u64,
    /// Wall-clock µs when its answer arrived (or the request failed).
    pub answered_us: u64,
    /// What it said.
    pub said: Said,
    /// A failure policy answered (a degraded code or the degraded header).
    pub degraded: bool,
    /// The Retry-After the answer carried, in seconds.
    pub retry_after_s: Option<f64>,
}

/// An answer's meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// Admitted.
    Admitted,
    /// Denied: over the limit, or refused by a failure policy (then `degraded`).
    Denied,
    /// No answer the file explains: a transport error, a timeout, an unknown code.
    Error(String),
}

impl Answer {
    /// Whether it admitted.
    pub fn admitted(&self) -> bool {
        self.said == Said::Admitted
    }
}

/// The way to one instance: a gRPC channel for RLS (connected lazily, shared by every request
/// to that instance), nothing kept for HTTP.
#[derive(Clone)]
pub struct Asker {
    channels: Vec<Option<Channel>>,
}

impl Asker {
    /// An asker for instances listening on `ports`.
    pub fn new(file: &ServiceFile, ports: &[u16]) -> anyhow::Result<Asker> {
        let channels = ports
            .iter()
            .enumerate()
            .map(|(instance, &port)| match &file.ask {
                Ask::Rls { url, .. } => {
                    let url = url.render(&Values { port, instance, ..Values::default() });
                    let endpoint = Endpoint::from_shared(url.clone())
                        .map_err(|e| anyhow::anyhow!("ask.rls.url: {url:?} is not a URL: {e}"))?;
                    Ok(Some(endpoint.connect_timeout(Duration::from_secs(2)).connect_lazy()))
                }
                Ask::Http { .. } => Ok(None),
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Asker { channels })
    }

    /// Asks instance `instance` (listening on `port`) for one unit of `key`.
    pub async fn ask(&self, file: &ServiceFile, instance: usize, port: u16, key: &str) -> Answer {
        let v = Values { port, instance, key, ..Values::default() };
        let sent_us = wall_us();
        let got = match &file.ask {
            Ask::Http { method, url, headers, body } => {
                let headers: Vec<(http::HeaderName, String)> =
                    headers.iter().map(|(n, t)| (n.clone(), t.render(&v))).collect();
                tokio::time::timeout(PATIENCE, http_request(method.clone(), &url.render(&v), &headers, body.render(&v)))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {PATIENCE:?}")))
            }
            Ask::Rls { domain, descriptors, .. } => {
                let channel = self.channels[instance].clone().expect("an RLS subject has a channel per instance");
                let request = RateLimitRequest {
                    domain: domain.clone(),
                    descriptors: descriptors
                        .iter()
                        .map(|d| RateLimitDescriptor {
                            entries: d.iter().map(|(k, t)| Entry { key: k.clone(), value: t.render(&v) }).collect(),
                            ..RateLimitDescriptor::default()
                        })
                        .collect(),
                    hits_addend: 1,
                };
                tokio::time::timeout(PATIENCE, rls_request(channel, request))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {PATIENCE:?}")))
            }
        };
        let answered_us = wall_us();
        let (said, degraded, retry_after_s) = match got {
            Ok(reply) => read(&file.answer, &reply),
            Err(e) => (Said::Error(e), false, None),
        };
        Answer { instance, sent_us, answered_us, said, degraded, retry_after_s }
    }
}

/// A reply before it is read: its code and headers (lower-case names).
struct Reply {
    code: i32,
    headers: Vec<(String, String)>,
}

fn read(rules: &AnswerRules, reply: &Reply) -> (Said, bool, Option<f64>) {
    let header = |name: &Option<String>| {
        name.as_ref().and_then(|n| reply.headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str()))
    };
    let marked = header(&rules.degraded_header).is_some();
    let retry_after_s = header(&rules.retry_after_header).and_then(seconds);
    let said = if rules.admitted.contains(&reply.code) {
        Said::Admitted
    } else if rules.denied.contains(&reply.code) || rules.degraded.contains(&reply.code) {
        Said::Denied
    } else {
        Said::Error(format!("answered {}, which the file's [answer] does not name", reply.code))
    };
    (said, marked || rules.degraded.contains(&reply.code), retry_after_s)
}

/// The seconds a Retry-After value says, or a draft-11 `RateLimit` field's `t` (the seconds
/// until its quota is back: `"default";r=0;t=5`), the least over its items.
fn seconds(value: &str) -> Option<f64> {
    let value = value.trim();
    if let Ok(s) = value.parse::<f64>() {
        return Some(s);
    }
    value
        .split(',')
        .filter_map(|item| item.split(';').find_map(|p| p.trim().strip_prefix("t=")?.parse::<f64>().ok()))
        .min_by(f64::total_cmp)
}

async fn http_request(
    method: http::Method,
    url: &str,
    headers: &[(http::HeaderName, String)],
    body: String,
) -> Result<Reply, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    let authority = uri.authority().ok_or_else(|| format!("{url:?} names no host"))?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((authority.host(), port)).await.map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("HTTP: {e}"))?;
    let driver = tokio::spawn(conn);
    let mut request = http::Request::builder()
        .method(method)
        .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(http::header::HOST, authority.as_str());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let request = request.body(Full::new(Bytes::from(body))).map_err(|e| format!("cannot build the request: {e}"))?;
    let response = sender.send_request(request).await.map_err(|e| format!("HTTP: {e}"))?;
    let code = i32::from(response.status().as_u16());
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    // Read the body, so the connection ends cleanly and the instance is not left writing.
    let _ = response.into_body().collect().await;
    driver.abort();
    Ok(Reply { code, headers })
}

async fn rls_request(channel: Channel, request: RateLimitRequest) -> Result<Reply, String> {
    let mut client = RateLimitServiceClient::new(channel);
    let response =
        client.should_rate_limit(request).await.map_err(|s| format!("gRPC {:?}: {}", s.code(), s.message()))?;
    let metadata: Vec<(String, String)> = response
        .metadata()
        .iter()
        .filter_map(|kv| match kv {
            tonic::metadata::KeyAndValueRef::Ascii(k, v) => Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())),
            tonic::metadata::KeyAndValueRef::Binary(..) => None,
        })
        .collect();
    let r = response.into_inner();
    let mut headers: Vec<(String, String)> =
        r.response_headers_to_add.iter().map(|h| (h.key.to_ascii_lowercase(), h.value.clone())).collect();
    headers.extend(metadata);
    Ok(Reply { code: r.overall_code, headers })
}

/// Whether a GET of `url` answers 2xx (an instance's readiness).
pub async fn get_ok(url: &str) -> bool {
    let got =
        tokio::time::timeout(Duration::from_secs(2), http_request(http::Method::GET, url, &[], String::new())).await;
    matches!(got, Ok(Ok(Reply { code: 200..=299, .. })))
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn a_wait_is_read_from_retry_after_or_a_draft_11_field() {
        assert_eq!(seconds(" 5 "), Some(5.0));
        assert_eq!(seconds("\"default\";r=0;t=3"), Some(3.0));
        assert_eq!(seconds("\"day\";r=9;t=3600, \"second\";r=0;t=1"), Some(1.0));
        assert_eq!(seconds("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
