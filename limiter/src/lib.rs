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
//! use std::time::Duration;
//! use redis_ratelimit::{Algorithm, ErrorKind, Limiter, Quota};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // 5 requests per second per key, in process (add `.redis(RedisStore::from_url(..)?)`
//! // to share the limit across instances).
//! let limiter = Limiter::builder(Algorithm::Gcra, Quota::per_second(5)).build()?;
//! for _ in 0..5 {
//!     assert!(limiter.check("user:42").await?.allowed);
//! }
//! match limiter.check("user:42").await {
//!     Ok(decision) if decision.allowed => { /* serve the request */ }
//!     Ok(denied) => {
//!         // 429, with `Retry-After: denied.retry_after_secs()`.
//!         assert!(denied.retry_after > Duration::ZERO && denied.retry_after <= Duration::from_millis(200));
//!     }
//!     Err(e) => match e.kind() {
//!         ErrorKind::Request => { /* 400: the key is unusable */ }
//!         _ => { /* 503, and log `e` with its source() */ }
//!     },
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! A decision cannot be dropped unread: it is `#[must_use]`, so the line that would admit
//! everything does not build where warnings are denied.
//!
//! ```compile_fail
//! #![deny(unused_must_use)]
//! # use redis_ratelimit::{Algorithm, Limiter, Quota};
//! # async fn f(limiter: Limiter) -> Result<(), redis_ratelimit::Error> {
//! limiter.check("user:42").await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What a user sees
//! - [`Limiter`] and its [`LimiterBuilder`]: one [`Algorithm`] and [`Quota`] over a store,
//!   a [`Clock`], a [`FailurePolicy`] and a circuit breaker ([`BreakerConfig`], observed as a
//!   [`BreakerState`], each change of it reported once as a [`StoreEvent`]). [`Limiter::check`]
//!   answers a [`Decision`]; [`Error`] is for what the caller must fix. A limiter's Redis keys
//!   carry its name or its quota ([`Limiter::state_name`]).
//! - [`ConcurrencyLimiter`]: at most N requests in flight per key rather than per period. An
//!   acquire answers [`Acquired`]: a [`Permit`] to hold while the work runs (released
//!   explicitly, on drop, or by its lease when its holder died), or the refusal to answer.
//!   Built like a limiter, over the same stores, clock, failure policies and breaker.
//! - [`store`]: [`RedisStore`] (one server by `redis://` or `rediss://` with [`store::Tls`], a
//!   primary found through Sentinel, or a Redis Cluster) and the [`store::Connector`] it can dial
//!   through (TCP here, simulated sockets in the harness), and [`store::AtomicLimiter`] for one
//!   lock-free key in process.
//! - [`modes`]: fewer Redis round trips, each mode off by default and with its cost written
//!   down: a [`DenialCache`](modes::DenialCache), [`Leases`](modes::Leases) (token bucket and GCRA) and
//!   [`Batching`](modes::Batching).
//! - The enforcement point: [`rules`] (rules per endpoint from code or a TOML file: matchers,
//!   key parts, client IP behind trusted proxies, allow and deny lists, shadow mode),
//!   [`enforce`] (the [`enforce::Enforcer`] deciding every rule a request matches
//!   all-or-nothing in one script call, reloadable) and [`http`] (the tower layers:
//!   [`http::RulesLayer`] with the RateLimit header fields and problem details, and the
//!   single-limiter [`http::RateLimitLayer`]). `examples/gateway.rs` is a whole gateway.
//! - [`duration`]: the one way durations are written, in rules files and on command lines
//!   (`250ms`, `30s`, `5m`, `1h`, `1d`; a bare number is refused).
//!
//! # Features
//! None is on by default: a [`Limiter`] needs none of them.
//! - `http`: the enforcement point ([`rules`], [`enforce`], [`http`]) and what it links
//!   (tower, http, sfv, ipnet, ring).
//! - `config` (with `http`): [`rules::RuleSet::from_toml`] and reloading from a file, with
//!   serde and toml. Without it rules come from code only.
//! - `metrics`: [`metrics`] lists what the limiter measures; with the feature it reports
//!   through the `metrics` facade and wraps store calls in `tracing` spans. Off by default, so
//!   an application that exports nothing links neither.
//! - `axum` (with `http`): the client IP rules read axum's `ConnectInfo<SocketAddr>` (what an axum server
//!   served with `into_make_service_with_connect_info::<SocketAddr>()` records) as the peer
//!   address, so an axum application needs no middleware of its own to supply it.
//! - `harness`: the building blocks below, for the harness only.
//!
//! The harness that verifies this library (simulator, property suites, conformance tests) also
//! needs the pure algorithm twins, the scripts' wire contract and the breaker's internals. They
//! sit behind the `harness` feature, in the `harness` module, outside the everyday surface and
//! outside semver. `docs/ARCHITECTURE.md` maps the crates and what each may import.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

// Without the `harness` feature nothing outside the crate reaches these modules, so the items
// only the harness uses would be reported as unreachably public; the items only the harness
// uses are compiled only with it (`cfg(feature = "harness")`), so dead code is still reported.
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
mod algo;
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
mod breaker;
mod charge;
mod clock;
mod concurrency;
mod decision;
pub mod duration;
#[cfg(feature = "http")]
pub mod enforce;
mod error;
mod gate;
#[cfg(feature = "harness")]
pub mod harness;
mod health;
#[cfg(feature = "http")]
pub mod http;
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
mod key;
mod limiter;
pub mod metrics;
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
pub mod modes;
mod options;
mod policy;
mod quota;
mod reconcile;
#[cfg(feature = "http")]
pub mod rules;
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
mod rules_script;
/// The library guide: limiters and stores, failure policies, round-trip modes, keys, the
/// enforcement point and its example gateway, and every way to reach Redis
/// (`limiter/GUIDE.md`). Its examples compile as doc tests.
#[cfg(feature = "http")]
pub mod guide {
    #![doc = include_str!("../GUIDE.md")]
}
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
mod scripts;
pub mod store;
mod sync;
mod table;

pub use breaker::{BreakerConfig, BreakerState};
pub use clock::{Clock, ManualClock, SystemClock, TimeSource};
pub use concurrency::{Acquired, ConcurrencyLimiter, ConcurrencyLimiterBuilder, Permit, PermitTicket};
pub use decision::{Decision, Degraded, Source};
pub use error::{ConfigError, Error, ErrorKind};
pub use health::StoreEvent;
pub use limiter::{Limiter, LimiterBuilder};
pub use policy::FailurePolicy;
pub use quota::{Algorithm, Quota, SLIDING_LOG_MAX_LIMIT};
pub use reconcile::Reconciled;
pub use store::RedisStore;

/// The crate README's examples compile as doc tests (the project README's are the tests crate's).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
