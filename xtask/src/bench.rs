//! `cargo xtask bench`: every speed goal, each as a ratio against a reference measured in the
//! same run (these machines are shared and noisy, so only ratios mean much), on a
//! `redis-server` the bench starts, with `redis-benchmark` (Debian's `redis-tools`) for the
//! references that are Redis's own, and `wrk` (Debian's `wrk`) to load the example gateway.
//! `tests/benches/goals/main.rs` lists the goals; it prints one
//! table, met or not met for each, and for each goal missed by how much and where the time or
//! the memory goes.
//!
//! The narrower benches stay for when one figure needs a closer look:
//! `cargo bench -p redis-tests --bench store` (one multiplexed connection against a pool),
//! `-p sim --bench model_eval` (the model against redis-server per script),
//! `-p sim --bench simulate` (simulation speed and its use of cores).

use anyhow::Result;

use crate::tools::{self, cargo, ensure_installed};

pub fn run() -> Result<()> {
    // valgrind counts where a script's time goes; libclang builds the Redis module it measures.
    ensure_installed(&[
        ("redis-server", "redis-server"),
        ("redis-benchmark", "redis-tools"),
        ("wrk", "wrk"),
        ("valgrind", "valgrind"),
        (tools::LIBCLANG, "libclang-dev"),
    ])?;
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "redis-tests", "--bench", "goals"]);
    tools::run(cmd)
}
