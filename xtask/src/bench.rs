//! `cargo xtask bench`: every speed goal, measured against a reference in the same run
//! (these machines are shared and noisy, so only ratios mean much).
//!
//! - `redis-tests/store`: one multiplexed connection against a pool of 20, same server;
//! - `sim/model_eval`: the Redis model running the algorithm scripts in process, against
//!   `redis-server` driven by `redis-benchmark` with the same script;
//! - `sim/simulate`: simulated decisions per second on one core (against the 100,000/s goal,
//!   and against the same scripts called bare on the model), cost linear in decisions, seeds
//!   across cores.

use anyhow::Result;

use crate::tools::{self, cargo, ensure_installed};

pub fn run() -> Result<()> {
    ensure_installed(&[("redis-server", "redis-server"), ("redis-benchmark", "redis-tools")])?;
    for (package, bench) in [("redis-tests", "store"), ("sim", "model_eval"), ("sim", "simulate")] {
        let mut cmd = cargo();
        cmd.args(["bench", "-p", package, "--bench", bench]);
        tools::run(cmd)?;
    }
    Ok(())
}
