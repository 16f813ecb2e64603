//! [`ConcurrencyLimitLayer`]: at most N requests of a key in flight, a [`ConcurrencyLimiter`]
//! as a tower layer. A request holds its permit until its response's body has been sent to the
//! end, so a streamed response (a download, a model's tokens) counts as long as it streams; the
//! permit goes back when the body ends, when the body is dropped unfinished (the client went
//! away), or when the request's future is dropped before it answered. A request refused gets
//! `429` with `Retry-After` (the longest the wait can be: when the earliest lease ends), or
//! `503` when Redis cannot be asked and the limiter fails closed.
//!
//! Unlike tower's own `ConcurrencyLimit`, which counts per clone of the service and makes
//! callers wait, this counts per key across every instance sharing the Redis, and refuses at
//! once: a client over its limit is told so instead of queued.
//!
//! ```
//! use std::time::Duration;
//! use redis_ratelimit::http::ConcurrencyLimitLayer;
//! use redis_ratelimit::ConcurrencyLimiter;
//! use tower::{Layer, Service, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let limiter = ConcurrencyLimiter::builder(1, Duration::from_secs(60)).build().unwrap();
//! let layer = ConcurrencyLimitLayer::new(limiter, |req: &http::Request<()>| {
//!     req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned)
//! });
//! let mut svc = layer.layer(tower::service_fn(|_req: http::Request<()>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
//! }));
//! let req = || http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
//! let streaming = svc.ready().await.unwrap().call(req()).await.unwrap();
//! assert_eq!(streaming.status(), 200);
//! // Its body is not sent yet: the key's one permit is held.
//! assert_eq!(svc.ready().await.unwrap().call(req()).await.unwrap().status(), 429);
//! drop(streaming); // sent, or abandoned: the permit goes back
//! assert_eq!(svc.ready().await.unwrap().call(req()).await.unwrap().status(), 200);
//! # });
//! ```

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::{error_response, take_ready, too_many_requests, BoxFuture, HeldBody, KeyExtractor};
use crate::concurrency::{Acquired, ConcurrencyLimiter, Permit};

/// Wraps services in [`ConcurrencyLimit`].
#[must_use = "a layer limits nothing until it wraps a service"]
pub struct ConcurrencyLimitLayer<B> {
    limiter: ConcurrencyLimiter,
    extractor: Arc<dyn KeyExtractor<B>>,
}

impl<B> Clone for ConcurrencyLimitLayer<B> {
    fn clone(&self) -> Self {
        ConcurrencyLimitLayer { limiter: self.limiter.clone(), extractor: self.extractor.clone() }
    }
}

impl<B> ConcurrencyLimitLayer<B> {
    /// Limits with `limiter`, keying requests with `extractor` (a request it gives no key goes
    /// through unlimited).
    pub fn new(limiter: ConcurrencyLimiter, extractor: impl KeyExtractor<B>) -> Self {
        ConcurrencyLimitLayer { limiter, extractor: Arc::new(extractor) }
    }
}

impl<S, B> Layer<S> for ConcurrencyLimitLayer<B> {
    type Service = ConcurrencyLimit<S, B>;
    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimit { inner, limiter: self.limiter.clone(), extractor: self.extractor.clone() }
    }
}

/// The middleware service; see the module docs.
pub struct ConcurrencyLimit<S, B> {
    inner: S,
    limiter: ConcurrencyLimiter,
    extractor: Arc<dyn KeyExtractor<B>>,
}

impl<S: Clone, B> Clone for ConcurrencyLimit<S, B> {
    fn clone(&self) -> Self {
        ConcurrencyLimit { inner: self.inner.clone(), limiter: self.limiter.clone(), extractor: self.extractor.clone() }
    }
}

impl<S, B, RB> Service<Request<B>> for ConcurrencyLimit<S, B>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = Response<PermitBody<RB>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mut inner = take_ready(&mut self.inner);
        let limiter = self.limiter.clone();
        let key = self.extractor.key(&req);
        Box::pin(async move {
            let Some(key) = key else { return Ok(inner.call(req).await?.map(PermitBody::empty)) };
            let permit = match limiter.acquire(&key).await {
                Ok(Acquired::Held(permit)) => permit,
                Ok(Acquired::Full(d)) => {
                    let mut response = too_many_requests(&d);
                    super::headers::apply_retry_after(response.headers_mut(), &d);
                    return Ok(response);
                }
                Err(e) => return Ok(error_response(&e)),
            };
            // Held while the handler runs (dropped with this future if it is cancelled), then
            // by the body until it ends.
            let response = inner.call(req).await?;
            Ok(response.map(|body| PermitBody::holding(body, permit)))
        })
    }
}

/// A response body holding its request's permit until it ends: released when the last frame
/// has been read, or when the body is dropped unfinished.
pub type PermitBody<B> = HeldBody<B, Permit>;

impl<B> PermitBody<B> {
    /// Whether it still holds its request's permit.
    pub fn holds_permit(&self) -> bool {
        self.holds()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use std::time::Duration;

    use http::StatusCode;
    use tower::ServiceExt;

    use std::pin::Pin;

    use http_body::{Body, Frame};

    use super::super::test_support::{handler, req, user_key, Handler};
    use super::*;

    fn service(limit: u64) -> ConcurrencyLimit<Handler, ()> {
        let limiter =
            ConcurrencyLimiter::builder(limit, Duration::from_secs(60)).max_key_len(8).build().expect("valid");
        ConcurrencyLimitLayer::new(limiter, user_key).layer(handler())
    }

    async fn next_frame<B: Body + Unpin>(body: &mut B) -> Option<Result<Frame<B::Data>, B::Error>> {
        std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
    }

    #[tokio::test]
    async fn a_permit_is_held_until_the_body_ends_and_clones_share_the_limit() {
        let svc = service(2);
        let mut a = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        let b = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        assert!(a.body().holds_permit() && b.body().holds_permit());
        let refused = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["retry-after"], "60");
        // No rate fields: they describe a quota over time, not a count in flight.
        assert!(!refused.headers().contains_key("ratelimit-policy"), "{:?}", refused.headers());
        assert!(!refused.body().holds_permit());
        // Another key has its own permits.
        assert_eq!(svc.clone().oneshot(req(Some("v"))).await.expect("infallible").status(), StatusCode::OK);

        // Read to its end, a body gives its permit back; the frames are the handler's.
        let frame = next_frame(a.body_mut()).await.expect("a frame").expect("infallible");
        assert_eq!(frame.into_data().expect("data"), "ok");
        assert!(a.body().holds_permit(), "a body not yet ended holds its permit");
        assert!(next_frame(a.body_mut()).await.is_none());
        assert!(!a.body().holds_permit());
        assert_eq!(svc.clone().oneshot(req(Some("u"))).await.expect("infallible").status(), StatusCode::OK);
        // Dropped unfinished (the client went away), a body gives it back too.
        drop(b);
        assert_eq!(svc.oneshot(req(Some("u"))).await.expect("infallible").status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn keyless_requests_pass_and_hostile_keys_get_400() {
        let svc = service(1);
        let held: Vec<_> = futures::future::join_all((0..3).map(|_| svc.clone().oneshot(req(None)))).await;
        assert!(held
            .iter()
            .all(|r| r.as_ref().is_ok_and(|r| r.status() == StatusCode::OK && !r.body().holds_permit())));
        let long = svc.oneshot(req(Some("much-too-long-key"))).await.expect("infallible");
        assert_eq!(long.status(), StatusCode::BAD_REQUEST);
    }
}
