//! `cargo xtask bench`: every speed goal of the project, each as a ratio against a reference
//! measured in the same run on the same machine (these machines are shared and noisy: only
//! ratios mean much), on a `redis-server` this bench starts. It prints one table, says met or
//! not met for each goal and by how much, and for a goal not met where the time (or the memory)
//! goes, from Redis's own accounting.
//!
//! 1. `Limiter::check` throughput through `RedisStore` (GCRA, 50 tasks, 100,000 keys) against
//!    `redis-benchmark -c 50` sending EVALSHA of the same script with the same arguments.
//! 2. Redis CPU per decision with batching on (`INFO cpu` around the decisions) against the
//!    CPU per INCR of 1,000,000 pipelined INCRs (`redis-benchmark -P 16`).
//! 3. Decisions per Redis call on a busy key with leases (the `busy-key` scenario, 8 instances
//!    at twice the limit, on the real-Redis lane) against the plain library's, with the oracle's
//!    verdict: wrongly allowed (beyond the bound) 0, wrongly limited (net under-admission) at
//!    most 1%.
//! 4. Memory per key in Redis (`INFO memory` over 100,000 keys) of each algorithm that keeps one
//!    key per identity (fixed window, token bucket, GCRA) against the floor, a key with a TTL and
//!    an empty value on the same names; and of the buckets against ADR-002's hash on those names.
//! 5. An in-process decision (`Limiter` with its local store, GCRA, 100,000 and 1,000,000 keys,
//!    the library's default features) against `governor`'s keyed limiter, with the instructions
//!    of each counted by callgrind (`tests/benches/in-process-goal`).
//! 6. A simulated decision (one core) against a bare script call on the Redis model; and the
//!    simulation's cost linear in requests.
//! 7. A decision with 1,000,000 distinct live keys in process, and under a fallback (Redis
//!    unreachable, the local budget deciding), against the same decision with one key: the
//!    in-process tables make room in O(1), so a key flood does not make each decision a scan.
//! 8. Redis's µs per decision of every script against the least a stateful script costs (a
//!    `GET` and a `SET PX`; with a `TIME` first for Redis's clock), of the rules script at 2 to
//!    5 rules against the sum of its rules' own scripts, and of the batch script per decision
//!    against one `MGET` and a `SET PX` per key; beside each, the instructions Redis ran for it
//!    under callgrind, split by where they went (`cost.rs`, `profile.rs`).
//! 9. The example gateway under `wrk`, every request with a key of its own: throughput and p99
//!    on a route of one rule and on one of four, against its own route without a rule
//!    (`gateway.rs`).
//! 10. The rate limit service over gRPC (`rls.rs`): distinct keys and a hot key against its own
//!     floor RPC (gRPC without a decision), and Redis calls per decision with quota grants.
//! 11. A concurrency limit's acquire and release, by the script and by the module's command,
//!     Redis's µs for the pair against the floor script of goal 8 on each clock, on keys with no
//!     other holder (and, beside the goal, on keys holding 8 others) (`permits.rs`).
//! 12. A request reconciled with a cost above its estimate, its decision and its debit, Redis's
//!     µs against the same floor (`reconcile.rs`).
//!
//! `cargo bench -p redis-tests --bench goals` (set GOALS_SCALE=0.1 for a quick, rougher run;
//! GOALS_ONLY=in-process,key-flood runs only the steps named, as the progress lines name them).

#![allow(clippy::disallowed_methods)] // a benchmark measures real time

mod cost;
mod gateway;
mod in_process;
mod permits;
mod profile;
mod reconcile;
mod redis_side;
mod rls;
mod simulation;
mod support;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use redis_ratelimit::harness::scripts;
use redis_ratelimit::modes::Batching;
use redis_ratelimit::{Algorithm, Limiter, Quota, RedisStore};
use redis_tests::RedisServer;

/// The quota of the throughput goals: every check admitted, as redis-benchmark's calls are.
const OPEN: Quota = Quota::new(1_000_000, Duration::from_secs(1)).with_burst(1_000_000);
const KEYS: usize = 100_000;

fn scale() -> f64 {
    std::env::var("GOALS_SCALE").ok().and_then(|v| v.parse().ok()).filter(|&s: &f64| s > 0.0).unwrap_or(1.0)
}

fn scaled(n: usize) -> usize {
    ((n as f64 * scale()) as usize).max(1_000)
}

/// One goal's row.
struct Goal {
    what: String,
    measured: String,
    reference: String,
    ratio: f64,
    goal: &'static str,
    met: bool,
    /// By how much it is missed, and where the time or memory goes (empty when met).
    note: String,
}

use in_process::{in_process, key_flood};
use redis_side::{cpu_per_decision, leases, memory, throughput};
use simulation::simulation;

fn main() {
    for (program, package) in [("redis-server", "redis-server"), ("redis-benchmark", "redis-tools"), ("wrk", "wrk")] {
        sim_real::process::require_for_tests(program, package);
    }
    let server = RedisServer::start_real().expect("redis-server starts");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    println!("goals: measuring (GOALS_SCALE={})...", scale());
    let mut goals = Vec::new();
    let only: Option<Vec<String>> =
        std::env::var("GOALS_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let mut step = |name: &str, f: &mut dyn FnMut() -> Vec<Goal>| {
        if only.as_ref().is_some_and(|only| !only.iter().any(|o| o == name)) {
            return;
        }
        let started = Instant::now();
        let got = f();
        println!("  {name}: {:.1} s", started.elapsed().as_secs_f64());
        goals.extend(got);
    };
    step("throughput", &mut || vec![throughput(&server, &rt)]);
    step("cpu", &mut || vec![cpu_per_decision(&server, &rt)]);
    step("leases", &mut || vec![leases()]);
    step("memory", &mut || memory(&server, &rt));
    step("in-process", &mut in_process);
    step("simulation", &mut || vec![simulation()]);
    step("key-flood", &mut || key_flood(&rt));
    step("script-cost", &mut || cost::script_cost(&server));
    step("gateway", &mut || gateway::gateway(&server));
    step("rls", &mut || rls::rls(&server));
    step("permits", &mut || permits::permits(&server));
    step("reconcile", &mut || reconcile::reconcile(&server));
    drop(server);
    std::thread::sleep(Duration::from_millis(10));

    println!();
    println!("{:<76} {:<42} {:>7} {:<32} result", "goal", "reference (same run)", "ratio", "target");
    for g in &goals {
        println!(
            "{:<76} {:<42} {:>6.2}x {:<32} {}",
            g.what,
            g.reference,
            g.ratio,
            g.goal,
            if g.met { "met" } else { "NOT MET" }
        );
        println!("{:<76} measured: {}", "", g.measured);
    }
    let missed: Vec<&Goal> = goals.iter().filter(|g| !g.met).collect();
    println!();
    if missed.is_empty() {
        println!("every goal met");
    } else {
        println!("{} of {} goals not met:", missed.len(), goals.len());
        for g in missed {
            println!("- {}: {}", g.what, g.note);
        }
    }
}
