//! [`RulesLayer`]: the enforcement point as a tower layer. Every request is decided by an
//! [`Enforcer`] before the handler runs:
//!
//! | verdict | response |
//! |---|---|
//! | no rule matches, or allow-listed | the handler's, untouched |
//! | admitted | the handler's, with `RateLimit-Policy` and `RateLimit` ([`super::headers`]) |
//! | over quota | `429`, `Retry-After`, the RateLimit fields, a `quota-exceeded` problem |
//! | deny-listed | `403` problem |
//! | no usable key, or a key the limiter refuses | `400` problem naming the rule and part |
//! | a header saying who the client is, sent twice | `400` problem naming the header |
//! | a Redis reply the limiter cannot use | `500` problem |
//!
//! Problem bodies are `application/problem+json` ([`super::problem`]). The response body type
//! only needs `From<String>` (axum's `Body`, `String`, `http_body_util::Full<Bytes>`).
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

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, StatusCode};
use tower::{Layer, Service};

use super::{headers, problem};
use crate::enforce::{Enforcer, RulesDecision, Verdict};
use crate::error::Error;

/// Wraps services in [`EnforceRules`].
#[derive(Debug, Clone)]
pub struct RulesLayer {
    enforcer: Enforcer,
}

impl RulesLayer {
    /// Enforces `enforcer`'s rules (which it may reload while serving).
    pub fn new(enforcer: Enforcer) -> Self {
        RulesLayer { enforcer }
    }
}

impl<S> Layer<S> for RulesLayer {
    type Service = EnforceRules<S>;
    fn layer(&self, inner: S) -> Self::Service {
        EnforceRules { inner, enforcer: self.enforcer.clone() }
    }
}

/// The middleware service; see the module docs.
#[derive(Debug, Clone)]
pub struct EnforceRules<S> {
    inner: S,
    enforcer: Enforcer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

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
        // The service polled ready is the one to call; leave a fresh clone in its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let check = self.enforcer.check(&req);
        Box::pin(async move {
            match check.await {
                Ok(Verdict::Unmatched | Verdict::Allowlisted) => inner.call(req).await,
                Ok(Verdict::Decided(d)) if d.allowed => {
                    let mut response = inner.call(req).await?;
                    headers::apply(response.headers_mut(), &d);
                    Ok(response)
                }
                Ok(Verdict::Decided(d)) => Ok(too_many_requests(&d)),
                Ok(Verdict::Denylisted) => {
                    Ok(refusal(StatusCode::FORBIDDEN, "Forbidden", "The client or key is on the deny list.".into()))
                }
                Ok(Verdict::MissingKey { rule, part }) => Ok(refusal(
                    StatusCode::BAD_REQUEST,
                    "Missing rate-limit key",
                    format!("Rule {rule:?} counts requests by {part}, which this request does not carry."),
                )),
                Ok(Verdict::RepeatedHeader { header, count }) => Ok(refusal(
                    StatusCode::BAD_REQUEST,
                    "Repeated identifying header",
                    format!(
                        "The header {header} arrives {count} times; it says who the client is, so it must arrive once."
                    ),
                )),
                Err(e) => Ok(error_response(&e)),
            }
        })
    }
}

/// A problem response.
fn refusal<RB: From<String>>(status: StatusCode, title: &str, detail: String) -> Response<RB> {
    let text = problem::body("about:blank", title, status.as_u16(), &detail, &[]);
    with_problem(status, text)
}

fn with_problem<RB: From<String>>(status: StatusCode, text: String) -> Response<RB> {
    let mut response = Response::new(RB::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(problem::CONTENT_TYPE));
    response
}

/// 429 with Retry-After, the RateLimit fields and the quota-exceeded problem.
fn too_many_requests<RB: From<String>>(d: &RulesDecision) -> Response<RB> {
    let mut response = with_problem(StatusCode::TOO_MANY_REQUESTS, problem::quota_exceeded(d));
    headers::apply(response.headers_mut(), d);
    response
}

/// A key the limiter refuses (too long) is the client's fault: 400. Anything else (a
/// wrong-type key in Redis, a garbled reply) is ours: 500, without Redis's words.
fn error_response<RB: From<String>>(e: &Error) -> Response<RB> {
    match e {
        Error::InvalidKey(why) => refusal(StatusCode::BAD_REQUEST, "Unusable rate-limit key", format!("{why}.")),
        _ => refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Rate limiter error",
            "The rate limiter could not decide this request.".into(),
        ),
    }
}
