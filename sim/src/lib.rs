//! Deterministic simulation harness for the rate limiter.
//!
//! # Layout
//!
//! - [`model`]: the in-process Redis (RESP2 + Lua 5.1) that simulated hosts and tests talk to
//!   with the limiter's own redis-rs client.
//! - [`mini`]: the real mini-redis server on loopback, an install-free GET/SET server.
//! - [`subject`]: what a run drives (the library's algorithms, subject files, client-side
//!   subjects) and [`promise`]: what each is held to.
//! - The simulator: [`scenario`] (the catalogue and run specs), [`workload`], [`faults`],
//!   [`simclock`] (skewed instance clocks), [`cluster`] (one run in turmoil, with
//!   [`redis_host`]), [`trace`], [`oracle`] and [`checker`] (judging a trace), [`rules`] (several
//!   rules per request: their oracle and checks), [`run`]
//!   (many runs across cores), [`results`] (the JSON schema, its own crate so the report builds
//!   without the simulator), [`table`], [`cli`] (the options of every command that runs the
//!   catalogue: `cli::RunArgs`, flattened by `cli::SimulateArgs`).

pub mod mini;
pub mod model;

pub mod campaign;
pub mod checker;
pub mod cli;
pub mod cluster;
pub mod faults;
pub mod mode;
pub mod oracle;
pub mod promise;
pub mod real;
pub mod redis_host;
pub use ::results;
pub mod rules;
pub mod run;
pub mod scenario;
pub mod simclock;
pub mod subject;
pub use ::results::table;
pub mod trace;
pub mod verify;
pub mod workload;
