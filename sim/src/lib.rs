//! The harness's commands: `simulate` and `verify` (the binaries behind `cargo xtask simulate`
//! and `cargo xtask verify`), over the crates that hold each concern:
//!
//! - `redis-model` (`sim/model/`): the in-process Redis (RESP2 + Lua 5.1) that simulated hosts
//!   and tests talk to with the limiter's own redis-rs client;
//! - `sim-engine` (`sim/engine/`): scenarios, runs in turmoil, the oracle and the checkers;
//! - `sim-real` (`sim/real/`): the same runs in real time on redis-server, a Redis Cluster or
//!   mini-redis;
//! - `sim-verify` (`sim/verify/`): any script described by a subject file, judged by its promise.
//!
//! This crate holds what every command that runs the catalogue shares: [`cli`] (the options:
//! `cli::RunArgs`, flattened by `cli::SimulateArgs`) and [`campaign`] (the executor for the
//! backend, the runs and sweeps, the results JSON and the report).

#![forbid(unsafe_code)]

pub mod campaign;
pub mod cli;
