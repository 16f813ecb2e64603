//! Distributed rate limiting on Redis.
//!
//! Every algorithm is one atomic Lua script (fixed window, sliding-window counter, sliding
//! log, token bucket, GCRA), mirrored by a pure Rust twin in `harness::algo` that computes
//! the same integers.
//!
//! When Redis is down or slow a limiter fails open, fails closed or falls back to a local
//! static budget ([`FailurePolicy`]) behind a circuit breaker, and every
//! [`Decision`] says who made it ([`Source`]).
//!
//! ```
//! use limiter::{Algorithm, Limiter, Quota};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // 5 requests per second per key, in process (add `.redis(RedisStore::from_url(..)?)`
//! // to share the limit across instances).
//! let limiter = Limiter::builder(Algorithm::Gcra, Quota::per_second(5)).build()?;
//! for _ in 0..5 {
//!     assert!(limiter.check("user:42", 1).await?.allowed);
//! }
//! let denied = limiter.check("user:42", 1).await?;
//! assert!(!denied.allowed);
//! assert!(denied.retry_after_ms > 0 && denied.retry_after_ms <= 200);
//! # Ok::<(), limiter::Error>(())
//! # }).unwrap();
//! ```
//!
//! # What a user sees
//! - [`Limiter`] and its [`LimiterBuilder`]: one [`Algorithm`] and [`Quota`] over a store,
//!   a [`Clock`], a [`FailurePolicy`] and a circuit breaker ([`BreakerConfig`], observed as a
//!   [`BreakerState`]). [`Limiter::check`] answers a [`Decision`]; [`Error`] is for what the
//!   caller must fix.
//! - [`store`]: [`RedisStore`] and the [`store::Connector`] it dials through (TCP here, simulated
//!   sockets in the harness), and [`store::AtomicLimiter`] for one lock-free key in process.
//! - [`http`]: a tower layer answering 429 with Retry-After.
//! - [`modes`]: fewer Redis round trips, each mode off by default and with its cost written
//!   down: a [`DenialCache`], [`Leases`] (token bucket and GCRA) and [`Batching`].
//!
//! The harness that verifies this library (simulator, property suites, conformance tests) also
//! needs the pure algorithm twins, the scripts' wire contract and the breaker's internals. They
//! sit behind the `harness` feature, in the `harness` module, outside the everyday surface and
//! outside semver. `docs/ARCHITECTURE.md` maps the crates and what each may import.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

// Without the `harness` feature nothing outside the crate reaches these modules, so the items
// only the harness uses would be reported as dead or unreachably public.
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
mod algo;
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
mod breaker;
mod clock;
mod decision;
mod error;
#[cfg(feature = "harness")]
pub mod harness;
pub mod http;
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
mod key;
mod limiter;
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
pub mod modes;
mod policy;
mod quota;
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
mod scripts;
pub mod store;
mod sync;

pub use breaker::{BreakerConfig, BreakerState};
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::{Decision, Degraded, Source};
pub use error::Error;
pub use limiter::{Limiter, LimiterBuilder, TimeSource};
pub use modes::{Batching, DenialCache, Leases};
pub use policy::FailurePolicy;
pub use quota::{Algorithm, Quota, SLIDING_LOG_MAX_LIMIT};
pub use store::RedisStore;

/// The README's examples compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
