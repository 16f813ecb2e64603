//! [`RulesLayer`]: the enforcement point as a tower layer. Every request is decided by an
//! [`Enforcer`] before the handler runs:
//!
//! | ruling | response |
//! |---|---|
//! | no rule matches, or allow-listed | the handler's, untouched |
//! | admitted | the handler's, with `RateLimit-Policy` and `RateLimit` ([`super::headers`]) |
//! | over quota | `429`, `Retry-After`, the RateLimit fields, a `quota-exceeded` problem |
//! | Redis unreachable and a fail-closed rule refuses | `503`, `Retry-After` (when the breaker next tries Redis, at the earliest), a `temporary-reduced-capacity` problem |
//! | deny-listed | `403` problem |
//! | no usable key, or a key the limiter refuses | `400` problem naming the rule and part |
//! | a header saying who the client is, sent twice | `400` problem naming the header |
//! | a Redis reply the limiter cannot use | `500` problem |
//!
//! Problem bodies are `application/problem+json` ([`super::problem`]). The response body type
//! only needs `From<String>` (axum's `Body`, `String`, `http_body_util::Full<Bytes>`).
//!
//! Every refusal can be answered differently through one hook, [`RulesLayer::on_rejection`]: it
//! hears the [`Rejection`] and returns the whole response (status, headers, body), and may start
//! from [`Rejection::default_response`] to keep the fields and `Retry-After`.
//!
//! ```
//! use redis_ratelimit::enforce::Enforcer;
//! use redis_ratelimit::http::RulesLayer;
//! use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};
//! use redis_ratelimit::{Algorithm, Quota};
//! use tower::{Layer, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let rules = RuleSet::builder()
//!     .rule(Rule::new("per-key", Algorithm::SlidingLog, Quota::per_minute(1)).key([KeyPart::header("x-api-key")]))
//!     .build()
//!     .unwrap();
//! let layer = RulesLayer::new(Enforcer::builder(rules).build().unwrap());
//! let svc = layer.layer(tower::service_fn(|_req: http::Request<()>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
//! }));
//! let req = || http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
//! let ok = svc.clone().oneshot(req()).await.unwrap();
//! assert_eq!(ok.headers()["ratelimit"].to_str().unwrap().split(';').nth(1), Some("r=0"));
//! let denied = svc.oneshot(req()).await.unwrap();
//! assert_eq!((denied.status().as_u16(), denied.headers()["retry-after"].to_str().unwrap()), (429, "60"));
//! assert!(denied.body().contains("\"violated-policies\":[\"per-key\"]"));
//! # });
//! ```

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, StatusCode};
use tower::{Layer, Service};

use super::{headers, problem, BoxFuture};
use crate::enforce::{DirectLimit, Enforcer, RulesDecision, Ruling};
use crate::error::Error;

/// Why the layer refuses a request, for [`RulesLayer::on_rejection`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Rejection<'a> {
    /// The rules deny it: over quota (429), or refused while Redis cannot be asked because a
    /// fail-closed rule refuses everything until it can (503,
    /// [`RulesDecision::refused_without_redis`]).
    Limited(&'a RulesDecision),
    /// The deny list names it (403).
    Denylisted,
    /// A rule counts by a part the request does not carry (400).
    MissingKey {
        /// The rule.
        rule: &'a str,
        /// The missing part.
        part: &'a str,
    },
    /// A header that says who the client is arrived more than once (400).
    RepeatedHeader {
        /// The header.
        header: &'a str,
        /// How many times it arrived.
        count: usize,
    },
    /// The limiter refused the key (too long: 400) or could not decide (500).
    Error(&'a Error),
}

impl Rejection<'_> {
    /// The status the layer answers with by default.
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::Limited(d) if d.refused_without_redis() => StatusCode::SERVICE_UNAVAILABLE,
            Rejection::Limited(_) => StatusCode::TOO_MANY_REQUESTS,
            Rejection::Denylisted => StatusCode::FORBIDDEN,
            Rejection::MissingKey { .. } | Rejection::RepeatedHeader { .. } => StatusCode::BAD_REQUEST,
            Rejection::Error(Error::InvalidKey(_)) => StatusCode::BAD_REQUEST,
            Rejection::Error(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The layer's own response: a problem body, and for [`Rejection::Limited`] the RateLimit
    /// fields and `Retry-After`.
    pub fn default_response(&self) -> Response<String> {
        let status = self.status();
        match self {
            Rejection::Limited(d) => {
                let text =
                    if d.refused_without_redis() { problem::reduced_capacity(d) } else { problem::quota_exceeded(d) };
                let mut response = with_problem(status, text);
                headers::apply(response.headers_mut(), d);
                response
            }
            Rejection::Denylisted => refusal(status, "Forbidden", "The client or key is on the deny list.".into()),
            Rejection::MissingKey { rule, part } => refusal(
                status,
                "Missing rate-limit key",
                format!("Rule {rule:?} counts requests by {part}, which this request does not carry."),
            ),
            Rejection::RepeatedHeader { header, count } => refusal(
                status,
                "Repeated identifying header",
                format!(
                    "The header {header} arrives {count} times; it says who the client is, so it must arrive once."
                ),
            ),
            // A key the limiter refuses (too long) is the client's fault; anything else (a
            // wrong-type key in Redis, a garbled reply) is ours, told without Redis's words.
            Rejection::Error(Error::InvalidKey(why)) => refusal(status, "Unusable rate-limit key", format!("{why}.")),
            Rejection::Error(_) => {
                refusal(status, "Rate limiter error", "The rate limiter could not decide this request.".into())
            }
        }
    }
}

/// A user's answer to a refusal.
type OnRejection = Arc<dyn Fn(&Rejection<'_>) -> Response<String> + Send + Sync>;

/// Wraps services in [`EnforceRules`].
#[derive(Clone)]
#[must_use = "a layer limits nothing until it wraps a service"]
pub struct RulesLayer {
    enforcer: Enforcer,
    on_rejection: Option<OnRejection>,
    legacy: bool,
}

impl std::fmt::Debug for RulesLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulesLayer").field("enforcer", &self.enforcer).finish_non_exhaustive()
    }
}

impl RulesLayer {
    /// Enforces `enforcer`'s rules (which it may reload while serving).
    pub fn new(enforcer: Enforcer) -> Self {
        RulesLayer { enforcer, on_rejection: None, legacy: false }
    }

    /// Adds the legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` fields beside the
    /// draft-11 ones, for clients that read only the old names. They name one policy, so they
    /// describe the enforced rule that admits least from here
    /// ([`headers::apply_legacy_rules`]); a hook's own response gets them too.
    pub fn legacy_headers(mut self) -> Self {
        self.legacy = true;
        self
    }

    /// Answers every refusal with `respond`'s response instead of the layer's own (status,
    /// headers and body alike); `respond` may build on [`Rejection::default_response`].
    ///
    /// ```
    /// use redis_ratelimit::enforce::Enforcer;
    /// use redis_ratelimit::http::{Rejection, RulesLayer};
    /// use redis_ratelimit::rules::{Rule, RuleSet};
    /// use redis_ratelimit::{Algorithm, Quota};
    /// use tower::{Layer, ServiceExt};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let rules = RuleSet::builder().rule(Rule::new("all", Algorithm::SlidingLog, Quota::per_minute(1))).build().unwrap();
    /// let layer = RulesLayer::new(Enforcer::builder(rules).build().unwrap()).on_rejection(|r: &Rejection<'_>| {
    ///     let mut response = r.default_response();
    ///     *response.body_mut() = format!("{{\"error\":\"slow down\",\"status\":{}}}", r.status().as_u16());
    ///     response.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
    ///     response
    /// });
    /// let svc = layer.layer(tower::service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
    /// }));
    /// assert_eq!(svc.clone().oneshot(http::Request::new(())).await.unwrap().status(), 200);
    /// let denied = svc.oneshot(http::Request::new(())).await.unwrap();
    /// assert_eq!((denied.status().as_u16(), denied.body().as_str()), (429, r#"{"error":"slow down","status":429}"#));
    /// assert!(denied.headers().contains_key("retry-after"));
    /// # });
    /// ```
    pub fn on_rejection(
        mut self,
        respond: impl Fn(&Rejection<'_>) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.on_rejection = Some(Arc::new(respond));
        self
    }
}

impl<S> Layer<S> for RulesLayer {
    type Service = EnforceRules<S>;
    fn layer(&self, inner: S) -> Self::Service {
        EnforceRules {
            inner,
            enforcer: self.enforcer.clone(),
            on_rejection: self.on_rejection.clone(),
            legacy: self.legacy,
        }
    }
}

/// The middleware service; see the module docs.
#[derive(Clone)]
pub struct EnforceRules<S> {
    inner: S,
    enforcer: Enforcer,
    on_rejection: Option<OnRejection>,
    legacy: bool,
}

impl<S: std::fmt::Debug> std::fmt::Debug for EnforceRules<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnforceRules")
            .field("inner", &self.inner)
            .field("enforcer", &self.enforcer)
            .finish_non_exhaustive()
    }
}

impl<S, B, RB> Service<Request<B>> for EnforceRules<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
    RB: From<String> + Send + 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<RB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mut inner = super::take_ready(&mut self.inner);
        let check = self.enforcer.check(&req);
        let enforcer = self.enforcer.clone();
        let on_rejection = self.on_rejection.clone();
        let legacy = self.legacy;
        Box::pin(async move {
            let ruling = check.await;
            let rejection = match &ruling {
                Ok(Ruling::Unmatched | Ruling::Allowlisted) => return inner.call(req).await,
                Ok(Ruling::Decided(d)) if d.allowed => {
                    let mut response = inner.call(req).await?;
                    settle_real_costs(&enforcer, d, response.headers());
                    headers::apply(response.headers_mut(), d);
                    if legacy {
                        headers::apply_legacy_rules(response.headers_mut(), d);
                    }
                    return Ok(response);
                }
                Ok(Ruling::Decided(d)) => Rejection::Limited(d),
                Ok(Ruling::Denylisted) => Rejection::Denylisted,
                Ok(Ruling::MissingKey { rule, part }) => Rejection::MissingKey { rule, part },
                Ok(Ruling::RepeatedHeader { header, count }) => Rejection::RepeatedHeader { header, count: *count },
                Err(e) => Rejection::Error(e),
            };
            let mut response = match &on_rejection {
                Some(respond) => respond(&rejection),
                None => rejection.default_response(),
            };
            if let (true, Rejection::Limited(d)) = (legacy, &rejection) {
                headers::apply_legacy_rules(response.headers_mut(), d);
            }
            Ok(response.map(RB::from))
        })
    }
}

/// Reconciles, each in a task of its own, the rules `d` charged whose real-cost header
/// ([`crate::rules::Rule::real_cost_header`]) the response carries as a whole number: the rule's
/// cost for the request was the reservation.
fn settle_real_costs(enforcer: &Enforcer, d: &RulesDecision, headers: &http::HeaderMap) {
    let rules = enforcer.rules();
    for charged in d.rules.iter().filter(|r| r.consumed) {
        let Some(rule) = rules.rule(&charged.rule) else { continue };
        let told = rule.real_cost_header_name().and_then(|h| headers.get(h)).and_then(|v| v.to_str().ok());
        let Some(actual) = told.and_then(|v| v.parse::<u64>().ok()) else { continue };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let limit =
            DirectLimit { rule: rule.clone(), identity: charged.identity.clone(), quota: charged.quota, cost: actual };
        let settle = enforcer.reconcile_direct(limit, charged.cost);
        runtime.spawn(async move {
            let _settled = settle.await;
        });
    }
}

/// A problem response.
fn refusal(status: StatusCode, title: &str, detail: String) -> Response<String> {
    let text = problem::body("about:blank", title, status.as_u16(), &detail, &[]);
    with_problem(status, text)
}

fn with_problem(status: StatusCode, text: String) -> Response<String> {
    let mut response = Response::new(text);
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(problem::CONTENT_TYPE));
    response
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use tower::ServiceExt;

    use super::*;
    use crate::rules::{Match, Rule, RuleSet};
    use crate::{Algorithm, BreakerConfig, FailurePolicy, Quota, RedisStore};

    fn rule(name: &str, policy: FailurePolicy) -> Rule {
        Rule::new(name, Algorithm::TokenBucket, Quota::per_second(100))
            .matching(Match::any().path(&format!("/{name}")))
            .failure_policy(policy)
    }

    async fn call(layer: &RulesLayer, path: &str) -> Response<String> {
        let svc = layer.layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::from("ok")))
        }));
        svc.oneshot(Request::builder().uri(path).body(()).unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn without_redis_each_answer_describes_the_policy_actually_enforced() {
        let rules = RuleSet::builder()
            .rule(rule("closed", FailurePolicy::FailClosed))
            .rule(rule("budget", FailurePolicy::LocalBudget { limit: 2, period: Duration::from_secs(3600) }))
            .rule(rule("open", FailurePolicy::FailOpen))
            .build()
            .unwrap();
        // Nothing listens on port 1: every call fails at once, and the breaker opens for 5 s.
        let store = RedisStore::from_url("redis://127.0.0.1:1/").unwrap().with_timeout(Duration::from_secs(1)).unwrap();
        // At the start of an hour: the budget's window is whole.
        let clock = std::sync::Arc::new(crate::ManualClock::new(1_767_225_600_000));
        let enforcer = Enforcer::builder(rules)
            .redis(store)
            .clock(clock)
            .breaker(BreakerConfig::new(1, Duration::from_secs(5)))
            .build()
            .unwrap();
        let layer = RulesLayer::new(enforcer);
        for _ in 0..2 {
            let closed = call(&layer, "/closed").await;
            assert_eq!(closed.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(closed.body().contains(problem::TEMPORARY_REDUCED_CAPACITY), "{}", closed.body());
            assert!(closed.body().contains("\"policies\":[\"closed\"]"), "{}", closed.body());
            // The breaker's next probe, at the earliest: the rest of its 5 s open period.
            assert_eq!(closed.headers()["retry-after"], "5");
            // No quota is enforced, so none is described.
            assert!(!closed.headers().contains_key("ratelimit-policy") && !closed.headers().contains_key("ratelimit"));
        }
        for r in [1, 0] {
            let budget = call(&layer, "/budget").await;
            assert_eq!(budget.status(), StatusCode::OK);
            // The local budget answers, and the fields say so: 2 per hour, not 100 per second.
            assert_eq!(budget.headers()["ratelimit-policy"], "\"budget\";q=2;w=3600");
            assert_eq!(budget.headers()["ratelimit"], format!("\"budget\";r={r};t=3600").as_str());
        }
        let over = call(&layer, "/budget").await;
        assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS, "the budget is a quota, and it is spent");
        assert!(over.body().contains(problem::QUOTA_EXCEEDED));
        let open = call(&layer, "/open").await;
        assert_eq!(open.status(), StatusCode::OK);
        assert!(!open.headers().contains_key("ratelimit-policy"), "fail-open enforces nothing");
    }

    #[tokio::test]
    async fn legacy_names_describe_the_rule_that_admits_least() {
        let rules = RuleSet::builder()
            .rule(Rule::new("minute", Algorithm::FixedWindow, Quota::per_minute(3)))
            .rule(Rule::new("hour", Algorithm::FixedWindow, Quota::new(100, Duration::from_secs(3600))))
            .build()
            .unwrap();
        let enforcer = || Enforcer::builder(rules.clone()).build().unwrap();
        let plain = call(&RulesLayer::new(enforcer()), "/").await;
        assert!(!plain.headers().contains_key("x-ratelimit-remaining"), "only when asked for");
        let layer = RulesLayer::new(enforcer()).legacy_headers();
        let first = call(&layer, "/").await;
        let h = first.headers();
        assert_eq!(
            (h["x-ratelimit-limit"].to_str().unwrap(), h["x-ratelimit-remaining"].to_str().unwrap()),
            ("3", "2")
        );
        assert!(h.contains_key("ratelimit") && h.contains_key("x-ratelimit-reset"), "{h:?}");
        call(&layer, "/").await;
        call(&layer, "/").await;
        let denied = call(&layer, "/").await;
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(denied.headers()["x-ratelimit-remaining"], "0", "{:?}", denied.headers());
    }

    #[tokio::test]
    async fn one_hook_replaces_every_refusal() {
        let rules = RuleSet::builder()
            .rule(Rule::new("once", Algorithm::SlidingLog, Quota::per_minute(1)))
            .access(crate::rules::AccessLists::new().deny(crate::rules::AccessList::new().key("banned")))
            .build()
            .unwrap();
        let layer = RulesLayer::new(Enforcer::builder(rules).build().unwrap()).on_rejection(|r| {
            let mut response = Response::new(format!("no ({})", r.status().as_u16()));
            *response.status_mut() = StatusCode::IM_A_TEAPOT;
            response
        });
        assert_eq!(call(&layer, "/").await.status(), StatusCode::OK);
        let denied = call(&layer, "/").await;
        assert_eq!((denied.status(), denied.body().as_str()), (StatusCode::IM_A_TEAPOT, "no (429)"));
        assert!(!denied.headers().contains_key("retry-after"), "the hook's response is the whole response");
    }

    /// An axum server that records each connection's peer (`ConnectInfo`) is all the client-IP
    /// rules need: no middleware copies the address into the request. Over real TCP, so what is
    /// tested is what axum itself puts in the request's extensions.
    #[cfg(feature = "axum")]
    #[tokio::test]
    async fn axum_connect_info_is_the_peer_address() {
        use std::net::SocketAddr;

        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let rules = RuleSet::builder()
            .rule(
                Rule::new("per-ip", Algorithm::SlidingLog, Quota::per_minute(1)).key([crate::rules::KeyPart::ClientIp]),
            )
            .build()
            .unwrap();
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "ok" }))
            .layer(RulesLayer::new(Enforcer::builder(rules).build().unwrap()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
        });
        let get = || async move {
            let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
            conn.write_all(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await.unwrap();
            let mut reply = String::new();
            conn.read_to_string(&mut reply).await.unwrap();
            reply
        };
        let first = get().await;
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        // Another connection from the same address is the same client: without the peer the
        // rule would have no key and the request would be refused as keyless (400) instead.
        let second = get().await;
        assert!(second.starts_with("HTTP/1.1 429"), "{second}");
        server.abort();
    }

    /// Input and output tokens as two rules: the upstream states each real cost in a header
    /// of its own, and each rule is reconciled with it; a rule without its header keeps the
    /// cost it was charged.
    #[tokio::test]
    async fn each_rule_is_reconciled_with_the_real_cost_its_header_states() {
        let tokens = |name: &str, header: &str| {
            Rule::new(name, Algorithm::Gcra, Quota::per_minute(100)).cost(10).real_cost_header(header)
        };
        let rules = RuleSet::builder()
            .rule(tokens("input", "x-input-tokens"))
            .rule(tokens("output", "x-output-tokens"))
            .rule(tokens("cached", "x-cached-tokens"))
            .build()
            .unwrap();
        let enforcer = Enforcer::builder(rules).build().unwrap();
        let svc = RulesLayer::new(enforcer.clone()).layer(tower::service_fn(|_req: Request<()>| async {
            let mut response = Response::new(String::from("ok"));
            response.headers_mut().insert("x-input-tokens", HeaderValue::from_static("4"));
            response.headers_mut().insert("x-output-tokens", HeaderValue::from_static("55"));
            Ok::<_, Infallible>(response)
        }));
        let req = || Request::builder().uri("/v1/chat").body(()).unwrap();
        assert_eq!(svc.oneshot(req()).await.unwrap().status(), StatusCode::OK);
        let left = |rule: &'static str| {
            let enforcer = enforcer.clone();
            async move { enforcer.state(rule, &req()).await.unwrap().remaining }
        };
        for _ in 0..1_000 {
            if (left("input").await, left("output").await) == (96, 45) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!((left("input").await, left("output").await, left("cached").await), (96, 45, 90));
    }
}
