//! The harness's command line, `ratelimit-lab` (`simulate`, `verify`, `report`, `model`; inside
//! this repository `cargo xtask simulate` and `cargo xtask verify` run it), over the crates that
//! hold each concern:
//!
//! - `redis-model` (`sim/model/`): the in-process Redis (RESP2 + Lua 5.1) that simulated hosts
//!   and tests talk to with the limiter's own redis-rs client;
//! - `sim-engine` (`sim/engine/`): scenarios, runs in turmoil, the oracle and the checkers;
//! - `sim-real` (`sim/real/`): the same runs in real time on redis-server, a Redis Cluster or
//!   mini-redis;
//! - `sim-verify` (`sim/verify/`): any script described by a subject file, judged by its promise.
//!
//! This crate holds the commands ([`simulate`], [`verify`]) and what they share: [`cli`] (the
//! options: `cli::RunArgs`, flattened by `cli::SimulateArgs`), [`campaign`] (the executor for the
//! backend, the runs and sweeps, the results JSON, the JUnit file and the report) and
//! [`output`] (standard output for words, or for the JSON alone).

#![forbid(unsafe_code)]

#[macro_use]
pub mod output;
pub mod campaign;
pub mod cli;
pub mod simulate;
pub mod verify;
