//! Distributed rate limiting on Redis.
//!
//! Every algorithm is one atomic Lua script (fixed window, sliding-window counter, sliding
//! log, token bucket, GCRA), mirrored by a pure Rust model in [`algo`] that computes the
//! same integers. Two *subjects* ship beside them because real systems ship them and they
//! fail: ADR-002's token-bucket script as written, and a naive GET-then-SET counter.
//!
//! When Redis is down or slow a limiter fails open, fails closed or falls back to a local
//! static budget ([`FailurePolicy`]) behind a [`breaker::CircuitBreaker`], and every
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
//! # Layout
//! - [`algo`]: the pure algorithms, `decide(quota, state, now, cost)`.
//! - [`store`]: in-process and Redis stores, and the [`store::Connector`] the Redis client
//!   dials through (TCP here, simulated sockets in the harness).
//! - [`scripts`]: the Lua scripts, embedded from `lua/`.
//! - [`breaker`], [`policy`]: what happens when Redis cannot be asked.
//! - [`http`]: a tower layer answering 429 with Retry-After.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod algo;
pub mod breaker;
mod clock;
mod decision;
mod error;
pub mod http;
mod key;
mod limiter;
pub mod policy;
mod quota;
pub mod scripts;
pub mod store;
mod sync;

pub use breaker::{BreakerConfig, BreakerState};
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::{Decision, Degraded, Source};
pub use error::Error;
pub use key::{KeySpace, DEFAULT_MAX_KEY_LEN, DEFAULT_PREFIX};
pub use limiter::{Limiter, LimiterBuilder, TimeSource};
pub use policy::FailurePolicy;
pub use quota::{Algorithm, Quota, SLIDING_LOG_MAX_LIMIT};
pub use store::{Connector, RedisStore};

/// The README's examples compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
