//! The simulation engine: many instances of the real limiter in turmoil against the Redis model
//! (`redis-model`), faults on a schedule, every decision judged against an exact oracle.
//!
//! # Layout
//!
//! - [`subject`]: what a run drives (the library's algorithms, subject files, client-side
//!   subjects) and [`promise`]: what each is held to.
//! - The simulator: [`scenario`] (the catalogue and run specs), [`workload`], [`faults`],
//!   [`simclock`] (skewed instance clocks), [`turmoil_run`] (one run in turmoil, with
//!   [`redis_host`]), [`trace`], [`oracle`] and [`checker`] (judging a trace, with the promises'
//!   bounds in [`bound`]), [`multi_rule`] (several
//!   rules per request: their oracle and checks), [`mode`] (the round-trip modes as runs choose
//!   them), [`rls`] (the rate limit service's scenarios: service instances and proxies), [`run`] (many runs across cores), [`results`] (the JSON schema, its own crate so the
//!   report builds without the simulator), [`table`].
//!
//! The real-Redis lanes (`sim-real`) produce the same traces from real processes; the verifier
//! (`sim-verify`) and the commands (`sim`) build on both.

#![forbid(unsafe_code)]

pub mod bound;
pub mod checker;
pub mod families;
pub mod faults;
pub mod in_flight;
pub mod mode;
pub mod oracle;
pub mod post_hoc;
pub mod promise;
pub mod redis_host;
pub mod rls;
pub mod turmoil_run;
pub use ::results;
pub mod multi_rule;
pub mod run;
pub mod scenario;
pub mod simclock;
pub mod subject;
pub use ::results::table;
pub mod trace;
pub mod workload;
