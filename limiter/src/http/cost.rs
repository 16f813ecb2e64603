//! [`CostLimitLayer`]: a rate limit on a cost known only after the work, as a tower layer. A
//! request is checked at an estimate of its cost (by default 1); its real cost is counted while
//! the response is made (a handler's [`CostMeter`], or a response header the upstream sets),
//! and when the response's body ends the request is reconciled with it
//! ([`Limiter::reconcile`]): the surplus refunded, the excess charged as a debt the key's next
//! requests wait out, up to [`crate::LimiterBuilder::max_excess`]. The tokens of a streamed
//! LLM response are the case it is made for: known token by token, charged when the stream ends.
//!
//! The reconciliation runs in a task of its own when the body ends, is dropped unfinished (the
//! client went away: what was counted so far is the cost), or its request's future is dropped
//! after the handler answered; outside a Tokio runtime, or with Redis unreachable, it does not
//! happen, and the key keeps the estimate. A response that counted nothing keeps the estimate.
//!
//! ```
//! use redis_ratelimit::http::{CostLimitLayer, CostMeter};
//! use redis_ratelimit::{Algorithm, Limiter, Quota};
//! use tower::{Layer, Service, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // 1,000 tokens a minute per API key, each request checked at an estimate of 100.
//! let tokens = Limiter::builder(Algorithm::Gcra, Quota::per_minute(1_000)).build().unwrap();
//! let layer = CostLimitLayer::new(tokens.clone(), |req: &http::Request<()>| {
//!     req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned)
//! })
//! .estimate(|_req: &http::Request<()>| 100);
//! let mut svc = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
//!     // The handler counts what the work cost as it goes: here, 700 tokens.
//!     req.extensions().get::<CostMeter>().expect("the layer's meter").add(700);
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("a long answer")))
//! }));
//! let req = || http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
//! let response = svc.ready().await.unwrap().call(req()).await.unwrap();
//! assert_eq!(response.status(), 200);
//! drop(response); // the body was sent (or abandoned): the 600 over the estimate are charged
//! # for _ in 0..100 { if tokens.state("k1").await.unwrap().remaining < 900 { break } tokio::task::yield_now().await }
//! assert_eq!(tokens.state("k1").await.unwrap().remaining, 300);
//! # });
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::HeaderName;
use http::{Request, Response};
use tower::{Layer, Service};

use super::{error_response, set_rate_headers, take_ready, too_many_requests, BoxFuture, HeldBody, KeyExtractor};
use crate::limiter::Limiter;

/// The real cost of one request, counted while its response is made: the layer puts one in
/// the request's extensions, and the handler (or the stream making its body) adds to it or
/// sets it. Clones count into the same total. Nothing counted: the estimate stands.
#[derive(Debug, Clone, Default)]
pub struct CostMeter {
    /// The units counted, plus one; 0 while nothing was.
    counted: Arc<AtomicU64>,
}

impl CostMeter {
    /// Adds `units` to the cost.
    pub fn add(&self, units: u64) {
        let _ =
            self.counted.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| Some(c.max(1).saturating_add(units)));
    }

    /// Sets the cost to `units`, whatever was counted before.
    pub fn set(&self, units: u64) {
        self.counted.store(units.saturating_add(1), Ordering::Release);
    }

    /// The cost counted, if anything was.
    pub fn cost(&self) -> Option<u64> {
        self.counted.load(Ordering::Acquire).checked_sub(1)
    }
}

/// The estimate of a request's cost that it is checked at.
type Estimate<B> = Arc<dyn Fn(&Request<B>) -> u64 + Send + Sync>;

/// Wraps services in [`CostLimit`].
#[must_use = "a layer limits nothing until it wraps a service"]
pub struct CostLimitLayer<B> {
    limiter: Limiter,
    extractor: Arc<dyn KeyExtractor<B>>,
    estimate: Estimate<B>,
    header: Option<HeaderName>,
}

impl<B> Clone for CostLimitLayer<B> {
    fn clone(&self) -> Self {
        CostLimitLayer {
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            estimate: self.estimate.clone(),
            header: self.header.clone(),
        }
    }
}

impl<B> CostLimitLayer<B> {
    /// Limits the cost of requests with `limiter`, keying them with `extractor` (a request it
    /// gives no key goes through unlimited and uncounted). Each is checked at a cost of 1 until
    /// [`CostLimitLayer::estimate`] says otherwise.
    pub fn new(limiter: Limiter, extractor: impl KeyExtractor<B>) -> Self {
        CostLimitLayer { limiter, extractor: Arc::new(extractor), estimate: Arc::new(|_| 1), header: None }
    }

    /// The cost a request is checked at when it arrives (an estimate above the quota's
    /// capacity is refused as the limiter refuses it: 500, the server's fault).
    pub fn estimate(mut self, estimate: impl Fn(&Request<B>) -> u64 + Send + Sync + 'static) -> Self {
        self.estimate = Arc::new(estimate);
        self
    }

    /// Reads the real cost from this response header when the upstream sets it (a whole
    /// number; another value counts nothing), in place of what the handler's [`CostMeter`]
    /// counted.
    pub fn real_cost_header(mut self, name: HeaderName) -> Self {
        self.header = Some(name);
        self
    }
}

impl<S, B> Layer<S> for CostLimitLayer<B> {
    type Service = CostLimit<S, B>;
    fn layer(&self, inner: S) -> Self::Service {
        CostLimit { inner, layer: self.clone() }
    }
}

/// The middleware service; see the module docs.
pub struct CostLimit<S, B> {
    inner: S,
    layer: CostLimitLayer<B>,
}

impl<S: Clone, B> Clone for CostLimit<S, B> {
    fn clone(&self) -> Self {
        CostLimit { inner: self.inner.clone(), layer: self.layer.clone() }
    }
}

impl<S, B, RB> Service<Request<B>> for CostLimit<S, B>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = Response<CostBody<RB>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let mut inner = take_ready(&mut self.inner);
        let CostLimitLayer { limiter, header, .. } = self.layer.clone();
        let key = self.layer.extractor.key(&req);
        let reserved = (self.layer.estimate)(&req);
        let meter = CostMeter::default();
        req.extensions_mut().insert(meter.clone());
        Box::pin(async move {
            let Some(key) = key else { return Ok(inner.call(req).await?.map(CostBody::empty)) };
            let d = match limiter.check_n(&key, reserved).await {
                Ok(d) => d,
                Err(e) => return Ok(error_response(&e)),
            };
            if !d.allowed {
                let mut response = too_many_requests(&d);
                set_rate_headers(&mut response, &limiter, &d, false);
                return Ok(response);
            }
            let mut response = inner.call(req).await?;
            set_rate_headers(&mut response, &limiter, &d, false);
            // A value that is no whole number counts nothing.
            let told = header.as_ref().and_then(|h| response.headers().get(h)).map(|v| v.to_str().map(str::parse));
            if let Some(Ok(Ok(units))) = told {
                meter.set(units);
            }
            let settle = CostSettlement { limiter, key, reserved, meter };
            Ok(response.map(|body| CostBody::holding(body, settle)))
        })
    }
}

/// What a response owes its limit until its body ends: dropped (when the body ends, or is
/// dropped unfinished), it reconciles what the meter counted, in a task on the current Tokio
/// runtime.
#[derive(Debug)]
pub struct CostSettlement {
    limiter: Limiter,
    key: String,
    reserved: u64,
    meter: CostMeter,
}

impl Drop for CostSettlement {
    fn drop(&mut self) {
        let Some(actual) = self.meter.cost() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (limiter, key, reserved) = (self.limiter.clone(), std::mem::take(&mut self.key), self.reserved);
        runtime.spawn(async move {
            let _settled = limiter.reconcile(&key, reserved, actual).await;
        });
    }
}

/// A response body that settles its request's real cost when it ends: when its last frame
/// has been read, or when it is dropped unfinished.
pub type CostBody<B> = HeldBody<B, CostSettlement>;

impl<B> CostBody<B> {
    /// Whether its request's cost is still to be settled.
    pub fn settles(&self) -> bool {
        self.holds()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use std::convert::Infallible;

    use std::pin::Pin;

    use http::StatusCode;
    use http_body::Body;
    use tower::ServiceExt;

    use super::super::test_support::{req, user_key};
    use super::*;
    use crate::{Algorithm, Quota};

    /// 10 a minute, no refill while a test runs.
    fn limiter() -> Limiter {
        Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(10)).max_key_len(8).build().expect("valid")
    }

    /// A handler whose work costs `counted` (by its meter) and whose response says `told` in
    /// `x-cost`.
    fn handler(
        counted: Option<u64>,
        told: Option<&'static str>,
    ) -> impl Service<Request<()>, Response = Response<String>, Error = Infallible, Future: Send> + Clone + Send {
        tower::service_fn(move |req: Request<()>| {
            if let (Some(units), Some(meter)) = (counted, req.extensions().get::<CostMeter>()) {
                meter.add(units);
            }
            let mut response = Response::new("ok".to_owned());
            if let Some(told) = told {
                response.headers_mut().insert("x-cost", told.parse().expect("a header value"));
            }
            std::future::ready(Ok::<_, Infallible>(response))
        })
    }

    /// Waits for the settlement's task: until `user`'s state has `remaining` left.
    async fn settled(limiter: &Limiter, user: &str, remaining: u64) {
        for _ in 0..1_000 {
            if limiter.state(user).await.expect("state").remaining == remaining {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("{user}: {:?}, not {remaining} left", limiter.state(user).await);
    }

    async fn to_end<B: Body + Unpin>(body: &mut B) {
        while std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await.is_some() {}
    }

    #[tokio::test]
    async fn the_cost_a_handler_counts_is_settled_when_the_body_ends() {
        let l = limiter();
        let svc = CostLimitLayer::new(l.clone(), user_key).estimate(|_: &Request<()>| 2).layer(handler(Some(5), None));
        let mut a = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        assert_eq!(a.status(), StatusCode::OK);
        assert_eq!(a.headers()["ratelimit"], "\"q=10/60000ms\";r=8;t=60", "checked at the estimate");
        assert!(a.body().settles());
        assert_eq!(l.state("u").await.expect("state").remaining, 8, "nothing settled before the end");
        to_end(a.body_mut()).await;
        assert!(!a.body().settles());
        settled(&l, "u", 5).await;
        // Dropped unfinished, a body settles what was counted too.
        drop(svc.clone().oneshot(req(Some("u"))).await.expect("infallible"));
        settled(&l, "u", 0).await;
        // Nothing left: refused at the estimate, with nothing to settle.
        let refused = svc.clone().oneshot(req(Some("u"))).await.expect("infallible");
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.headers().contains_key("retry-after") && !refused.body().settles());
        // A request without a key goes through and settles nothing.
        let keyless = svc.oneshot(req(None)).await.expect("infallible");
        assert!(keyless.status() == StatusCode::OK && !keyless.body().settles());
    }

    #[tokio::test]
    async fn an_excess_is_owed_and_a_surplus_told_by_a_header_goes_back() {
        let l = limiter();
        let layer = CostLimitLayer::new(l.clone(), user_key);
        // Checked at 1, it cost 25: 10 of the excess are charged (one request's most), and the
        // key owes 1 beyond its limit.
        drop(layer.clone().layer(handler(Some(25), None)).oneshot(req(Some("debtor"))).await.expect("infallible"));
        settled(&l, "debtor", 0).await;
        let refused = layer.clone().layer(handler(None, None)).oneshot(req(Some("debtor"))).await.expect("infallible");
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

        // The upstream's header says what it cost, in place of the meter: 1 of an estimate of 4.
        let told = layer.clone().estimate(|_: &Request<()>| 4).real_cost_header(HeaderName::from_static("x-cost"));
        drop(told.clone().layer(handler(Some(9), Some("1"))).oneshot(req(Some("u"))).await.expect("infallible"));
        settled(&l, "u", 9).await;
        // A value that is no number counts nothing: the estimate stands.
        drop(told.layer(handler(None, Some("lots"))).oneshot(req(Some("v"))).await.expect("infallible"));
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(l.state("v").await.expect("state").remaining, 6);
    }

    #[test]
    fn a_meter_counts_from_nothing_adds_and_sets() {
        let meter = CostMeter::default();
        assert_eq!(meter.cost(), None);
        meter.clone().add(0);
        assert_eq!(meter.cost(), Some(0), "a cost of 0 is counted");
        meter.add(3);
        meter.add(4);
        assert_eq!(meter.cost(), Some(7));
        meter.set(2);
        assert_eq!(meter.cost(), Some(2));
        meter.set(u64::MAX);
        meter.add(1);
        assert_eq!(meter.cost(), Some(u64::MAX - 1), "saturates");
    }
}
