//! [`RulesLayer`]: the enforcement point as a tower layer. Every request is decided by an
//! [`Enforcer`] before the handler runs:
//!
//! | ruling | response |
//! |---|---|
//! | no rule matches, or allow-listed | the handler's, untouched |
//! | admitted | the handler's, with `RateLimit-Policy` and `RateLimit` ([`super::headers`]) |
//! | over quota | `429`, `Retry-After`, the RateLimit fields, a `quota-exceeded` problem |
//! | Redis unreachable and a fail-closed rule refuses | `503`, `Retry-After` (when the breaker next tries Redis, at the earliest), a `temporary-reduced-capacity` problem |
//! | every permit of an in-flight rule held ([`crate::rules::InFlightRule`]) | `429`, `Retry-After` (when the earliest lease ends, at the latest), a `quota-exceeded` problem naming the rule |
//! | deny-listed | `403` problem |
//! | no usable key, or a key the limiter refuses | `400` problem naming the rule and part |
//! | a header saying who the client is, sent twice | `400` problem naming the header |
//! | a Redis reply the limiter cannot use | `500` problem |
//!
//! Problem bodies are `application/problem+json` ([`super::problem`]). The handler's body
//! type only needs `From<String>` (axum's `Body`, `String`, `http_body_util::Full<Bytes>`);
//! the layer answers it as a [`HeldBody`] holding the request's in-flight permits, which go
//! back when the body has been sent to the end or is dropped unfinished, so a streamed
//! response counts as long as it streams ([`HeldBody::into_inner`] unwraps it).
//!
//! The rate rules decide first: a request they admit then takes a permit of every in-flight
//! rule it matches, all or nothing ([`Enforcer::acquire`]). A request refused for want of a
//! permit has been counted by its rate rules, as a request it made.
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
//! assert!(denied.body().get_ref().contains("\"violated-policies\":[\"per-key\"]"));
//! # });
//! ```

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, StatusCode};
use tower::{Layer, Service};

use super::{headers, problem, BoxFuture, HeldBody};
use crate::concurrency::Permit;
use crate::decision::{Decision, Source};
use crate::enforce::{Acquisition, DirectLimit, Enforcer, RulesDecision, Ruling};
use crate::error::Error;

/// Why the layer refuses a request, for [`RulesLayer::on_rejection`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Rejection<'a> {
    /// The rules deny it: over quota (429), or refused while Redis cannot be asked because a
    /// fail-closed rule refuses everything until it can (503,
    /// [`RulesDecision::refused_without_redis`]).
    Limited(&'a RulesDecision),
    /// Every permit of an in-flight rule is held (429), or Redis cannot be asked and the rule
    /// fails closed (503).
    InFlight {
        /// The rule.
        rule: &'a str,
        /// Its decision: `retry_after` is when the earliest lease ends, the longest the wait
        /// can be.
        decision: &'a Decision,
    },
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
            Rejection::InFlight { decision, .. } if decision.source == Source::FailClosed => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Rejection::InFlight { .. } => StatusCode::TOO_MANY_REQUESTS,
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
            Rejection::InFlight { rule, decision } => {
                // Whole seconds, rounded up: an obedient client is never early.
                let wait = (decision.retry_after.as_millis().div_ceil(1000) as u64).max(1);
                let mut response = with_problem(status, problem::in_flight(rule, status.as_u16(), wait));
                response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(wait));
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
    /// assert_eq!((denied.status().as_u16(), denied.body().get_ref().as_str()), (429, r#"{"error":"slow down","status":429}"#));
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
    type Response = Response<HeldBody<RB, Vec<Permit>>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mut inner = super::take_ready(&mut self.inner);
        // The request is read once for both; the permits are taken only once the rate rules admit.
        let (check, acquire) = self.enforcer.check_and_acquire(&req);
        let enforcer = self.enforcer.clone();
        let on_rejection = self.on_rejection.clone();
        let legacy = self.legacy;
        Box::pin(async move {
            let refuse = |rejection: Rejection<'_>| {
                let mut response = match &on_rejection {
                    Some(respond) => respond(&rejection),
                    None => rejection.default_response(),
                };
                if let (true, Rejection::Limited(d)) = (legacy, &rejection) {
                    headers::apply_legacy_rules(response.headers_mut(), d);
                }
                Ok(response.map(|text| HeldBody::empty(RB::from(text))))
            };
            let ruling = check.await;
            let decided = match &ruling {
                Ok(Ruling::Allowlisted) => return Ok(inner.call(req).await?.map(HeldBody::empty)),
                Ok(Ruling::Unmatched) => None,
                Ok(Ruling::Decided(d)) if d.allowed => Some(d),
                Ok(Ruling::Decided(d)) => return refuse(Rejection::Limited(d)),
                Ok(Ruling::Denylisted) => return refuse(Rejection::Denylisted),
                Ok(Ruling::MissingKey { rule, part }) => return refuse(Rejection::MissingKey { rule, part }),
                Ok(Ruling::RepeatedHeader { header, count }) => {
                    return refuse(Rejection::RepeatedHeader { header, count: *count })
                }
                Err(e) => return refuse(Rejection::Error(e)),
            };
            // The rate rules admit it: now its permits, all or nothing.
            let permits = match acquire.await {
                Ok(Acquisition::Unlimited) => None,
                Ok(Acquisition::Held(permits)) => Some(permits),
                Ok(Acquisition::Full { rule, decision }) => {
                    return refuse(Rejection::InFlight { rule: &rule, decision: &decision })
                }
                Ok(Acquisition::MissingKey { rule, part }) => {
                    return refuse(Rejection::MissingKey { rule: &rule, part: &part })
                }
                Ok(Acquisition::RepeatedHeader { header, count }) => {
                    return refuse(Rejection::RepeatedHeader { header: &header, count })
                }
                Ok(Acquisition::Denylisted) => return refuse(Rejection::Denylisted),
                Err(e) => return refuse(Rejection::Error(&e)),
            };
            let mut response = inner.call(req).await?;
            if let Some(d) = decided {
                settle_real_costs(&enforcer, d, response.headers());
                headers::apply(response.headers_mut(), d);
                if legacy {
                    headers::apply_legacy_rules(response.headers_mut(), d);
                }
            }
            // The permits go back when the body has been sent, or dropped unfinished.
            Ok(response.map(|body| match permits {
                Some(permits) => HeldBody::holding(body, permits),
                None => HeldBody::empty(body),
            }))
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
mod tests;
