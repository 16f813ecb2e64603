//! The HTTP enforcement point (the HLD card in `docs/ORIGINS.md`: "middleware before the
//! API handler, reject fast"), as tower layers:
//!
//! - [`RulesLayer`]: [`crate::rules`] per endpoint from code or a file, several limits per
//!   request decided all-or-nothing, allow and deny lists, shadow mode, the RateLimit header
//!   fields of draft-ietf-httpapi-ratelimit-headers-11 ([`headers`]) and problem-details
//!   bodies ([`problem`]). What a gateway uses.
//! - [`RateLimitLayer`] (below): one limiter, one key extractor, `429` with `Retry-After`,
//!   and the same draft-11 fields written by the same writer (one policy, named by the
//!   limiter's [`Limiter::state_name`]), with the legacy `X-RateLimit-*` names on request
//!   ([`RateLimitLayer::legacy_headers`]).
//! - [`ConcurrencyLimitLayer`]: at most N requests of a key in flight (a
//!   [`crate::ConcurrencyLimiter`]), each holding its permit until its response body ends.
//! - [`CostLimitLayer`]: a limit on a cost known only after the work (the tokens of a streamed
//!   response): checked at an estimate, reconciled with the real cost when the body ends.
//!
//! The limiter inside is shared by every clone of the service: tower's own `RateLimit`
//! keeps its state per clone, so behind a router that clones services per connection it
//! limits nothing (1,500 concurrent requests all got 200 at 5 req/s in one report).
//!
//! ```
//! use redis_ratelimit::http::RateLimitLayer;
//! use redis_ratelimit::{Algorithm, Limiter, Quota};
//! use tower::{Layer, Service, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let limiter = Limiter::builder(Algorithm::FixedWindow, Quota::per_minute(1)).build().unwrap();
//! let layer = RateLimitLayer::new(limiter, |req: &http::Request<()>| {
//!     req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned)
//! });
//! let mut svc = layer.layer(tower::service_fn(|_req: http::Request<()>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
//! }));
//! let req = || http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
//! assert_eq!(svc.ready().await.unwrap().call(req()).await.unwrap().status(), 200);
//! let denied = svc.ready().await.unwrap().call(req()).await.unwrap();
//! assert_eq!(denied.status(), 429);
//! assert!(denied.headers().contains_key("retry-after"));
//! # });
//! ```

mod body;
mod cost;
pub mod headers;
mod in_flight;
pub mod problem;
mod rules_layer;

pub use body::HeldBody;
pub use cost::{CostBody, CostLimit, CostLimitLayer, CostMeter, CostSettlement};
pub use in_flight::{ConcurrencyLimit, ConcurrencyLimitLayer, PermitBody};
pub use rules_layer::{EnforceRules, Rejection, RulesLayer};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use tower::{Layer, Service};

use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::Limiter;

/// Picks the rate-limit key of a request (user id, API key, client IP, route...). `None`
/// lets the request through unlimited: return a constant key instead to limit such
/// requests together.
pub trait KeyExtractor<B>: Send + Sync + 'static {
    /// The key for `req`.
    fn key(&self, req: &Request<B>) -> Option<String>;
}

impl<B, F> KeyExtractor<B> for F
where
    F: Fn(&Request<B>) -> Option<String> + Send + Sync + 'static,
{
    fn key(&self, req: &Request<B>) -> Option<String> {
        self(req)
    }
}

/// Wraps services in [`RateLimit`].
#[must_use = "a layer limits nothing until it wraps a service"]
pub struct RateLimitLayer<B> {
    limiter: Limiter,
    extractor: Arc<dyn KeyExtractor<B>>,
    legacy: bool,
}

impl<B> Clone for RateLimitLayer<B> {
    fn clone(&self) -> Self {
        RateLimitLayer { limiter: self.limiter.clone(), extractor: self.extractor.clone(), legacy: self.legacy }
    }
}

impl<B> RateLimitLayer<B> {
    /// Limits with `limiter`, keying requests with `extractor`. Every request costs 1.
    pub fn new(limiter: Limiter, extractor: impl KeyExtractor<B>) -> Self {
        RateLimitLayer { limiter, extractor: Arc::new(extractor), legacy: false }
    }

    /// Adds the legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` fields beside the
    /// draft-11 `RateLimit-Policy` and `RateLimit`, for clients that read only the old names.
    pub fn legacy_headers(mut self) -> Self {
        self.legacy = true;
        self
    }
}

impl<S, B> Layer<S> for RateLimitLayer<B> {
    type Service = RateLimit<S, B>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit { inner, limiter: self.limiter.clone(), extractor: self.extractor.clone(), legacy: self.legacy }
    }
}

/// The middleware service; see the module docs.
pub struct RateLimit<S, B> {
    inner: S,
    limiter: Limiter,
    extractor: Arc<dyn KeyExtractor<B>>,
    legacy: bool,
}

impl<S: Clone, B> Clone for RateLimit<S, B> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            legacy: self.legacy,
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB> Service<Request<B>> for RateLimit<S, B>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<RB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mut inner = take_ready(&mut self.inner);
        let limiter = self.limiter.clone();
        let key = self.extractor.key(&req);
        let legacy = self.legacy;
        Box::pin(async move {
            let Some(key) = key else { return inner.call(req).await };
            match limiter.check(&key).await {
                Ok(d) if d.allowed => {
                    let mut response = inner.call(req).await?;
                    set_rate_headers(&mut response, &limiter, &d, legacy);
                    Ok(response)
                }
                Ok(d) => {
                    let mut response = too_many_requests(&d);
                    set_rate_headers(&mut response, &limiter, &d, legacy);
                    Ok(response)
                }
                Err(e) => Ok(error_response(&e)),
            }
        })
    }
}

/// The service that was polled ready, which is the one that must be called, leaving a fresh
/// clone in its place (tower's documented pattern for a service called from a future).
fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// 429 with `Retry-After` in whole seconds, rounded up so an obedient client is admitted; 503
/// when the limiter refused because Redis cannot be asked and it fails closed (no quota was
/// exceeded; `Retry-After` is when the breaker next tries Redis, at the earliest).
fn too_many_requests<RB: Default>(d: &Decision) -> Response<RB> {
    let mut response = Response::new(RB::default());
    *response.status_mut() = if d.source == crate::decision::Source::FailClosed {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    response
}

/// The draft-11 fields through the writer the rules layer uses ([`headers::apply_limiter`]:
/// `RateLimit-Policy`, `RateLimit`, and `Retry-After` on a refusal), and the legacy
/// `X-RateLimit-*` names when asked for.
fn set_rate_headers<RB>(response: &mut Response<RB>, limiter: &Limiter, d: &Decision, legacy: bool) {
    headers::apply_limiter(response.headers_mut(), limiter, d);
    if legacy {
        headers::apply_legacy(response.headers_mut(), d);
    }
}

/// A key the limiter refuses (empty, too long) is the client's fault: 400. Anything else
/// (a wrong-type key in Redis, a garbled reply) is ours: 500.
fn error_response<RB: Default>(e: &Error) -> Response<RB> {
    let mut response = Response::new(RB::default());
    *response.status_mut() = match e {
        Error::InvalidKey(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    response
}

/// What the layers' tests share: a handler answering `ok`, the key of a request its `user`
/// header, and requests with or without one.
#[cfg(all(test, not(feature = "loom")))]
mod test_support {
    use std::convert::Infallible;

    use http::{Request, Response};

    pub(super) type Reply = std::future::Ready<Result<Response<String>, Infallible>>;
    pub(super) type Handler = tower::util::ServiceFn<fn(Request<()>) -> Reply>;

    pub(super) fn handler() -> Handler {
        fn answer(_req: Request<()>) -> Reply {
            std::future::ready(Ok(Response::new("ok".to_owned())))
        }
        tower::service_fn(answer as fn(Request<()>) -> Reply)
    }

    pub(super) fn user_key(req: &Request<()>) -> Option<String> {
        req.headers().get("user").and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    pub(super) fn req(user: Option<&str>) -> Request<()> {
        let mut b = Request::builder();
        if let Some(u) = user {
            b = b.header("user", u);
        }
        b.body(()).expect("request")
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use tower::ServiceExt;

    use super::test_support::{handler, req, user_key, Handler};
    use super::*;
    use crate::{Algorithm, Quota};

    fn service(limit: u64) -> RateLimit<Handler, ()> {
        let limiter =
            Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(limit)).max_key_len(8).build().expect("valid");
        RateLimitLayer::new(limiter, user_key).layer(handler())
    }

    #[tokio::test]
    async fn clones_share_one_limit_and_denials_carry_retry_after() {
        let svc = service(2);
        let a = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        assert_eq!(a.status(), StatusCode::OK);
        // The draft-11 fields, as the rules layer writes them: the limiter's policy by its state
        // name, what it still admits and when its quota is whole again; no legacy names unasked.
        assert_eq!(a.headers()["ratelimit-policy"], "\"q=2/60000ms\";q=2;w=60");
        assert_eq!(a.headers()["ratelimit"], "\"q=2/60000ms\";r=1;t=60");
        assert!(!a.headers().contains_key("x-ratelimit-remaining"));
        assert_eq!(svc.clone().oneshot(req(Some("u"))).await.expect("infallible").status(), StatusCode::OK);
        let denied = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(denied.headers()["retry-after"], "60");
        assert_eq!(denied.body(), "");
        // Another key has its own limit.
        assert_eq!(svc.oneshot(req(Some("v"))).await.expect("infallible").status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn legacy_names_are_added_when_asked_for() {
        let limiter =
            Limiter::builder(Algorithm::FixedWindow, Quota::per_minute(3)).name("api").build().expect("valid");
        let svc =
            RateLimitLayer::new(limiter, |_: &Request<()>| Some("k".to_owned())).legacy_headers().layer(handler());
        let a = svc.oneshot(req(None)).await.expect("infallible");
        let h = a.headers();
        assert_eq!(
            (&h["x-ratelimit-limit"], &h["x-ratelimit-remaining"]),
            (&"3".parse().unwrap(), &"2".parse().unwrap())
        );
        assert!(h["x-ratelimit-reset"].to_str().unwrap().parse::<u64>().unwrap() <= 60);
        assert!(h["ratelimit"].to_str().unwrap().starts_with("\"api\";r=2;t="), "{h:?}");
    }

    #[tokio::test]
    async fn keyless_requests_pass_and_hostile_keys_get_400() {
        let svc = service(1);
        for _ in 0..3 {
            assert_eq!(svc.clone().oneshot(req(None)).await.expect("infallible").status(), StatusCode::OK);
        }
        let long = svc.oneshot(req(Some("much-too-long-key"))).await.expect("infallible");
        assert_eq!(long.status(), StatusCode::BAD_REQUEST);
    }
}
