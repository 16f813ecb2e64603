//! Simulation speed, measured against itself in the same run:
//! - simulated decisions per wall-clock second on one core (the target is 100,000), and as a
//!   share of what the same scripts cost called on the model directly (no network, no
//!   limiter, no scheduler), which varies less with the machine than the absolute figure;
//! - linearity: the same load over twice the simulated time must cost at most 2.2x;
//! - seeds spread across cores: the same runs on 2 threads against 1.
//!
//! Run with `cargo bench -p sim --bench simulate` (or `cargo xtask bench`).

#![allow(clippy::disallowed_methods)] // a benchmark measures real time

use std::time::Instant;

// Measure what `simulate` ships with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use redis_ratelimit::harness::scripts;
use redis_ratelimit::Algorithm;
use sim_engine::run::run_many;
use sim_engine::scenario::{self, RunSpec};
use sim_engine::subject::Subject;
use sim_engine::workload::{Spread, Workload};

mod support;

fn specs(seeds: std::ops::Range<u64>, duration_ms: u64) -> Vec<RunSpec> {
    let mut s = scenario::find("baseline").expect("baseline").runs(
        &[Subject::Library(Algorithm::Gcra), Subject::Library(Algorithm::SlidingLog)],
        &seeds.collect::<Vec<_>>(),
        None,
        duration_ms,
    );
    for spec in &mut s {
        // Heavy load on many keys: the cost per decision, not per idle tick, is measured.
        spec.workload =
            Workload::Poisson { rate_x: 4.0, keys: 50, hot_share: 0.2, max_cost: 1, spread: Spread::Random };
    }
    s
}

/// (decisions, seconds).
fn measure(specs: &[RunSpec], threads: usize) -> (u64, f64) {
    let started = Instant::now();
    let results = run_many(specs, threads, &|| {}).expect("runs");
    (results.iter().map(|r| r.requests).sum(), started.elapsed().as_secs_f64())
}

fn main() {
    // Warm up (page in the binary, build the Lua states once).
    measure(&specs(0..1, 1_000), 1);

    let (n1, t1) = measure(&specs(0..4, 10_000), 1);
    let (n2, t2) = measure(&specs(0..4, 20_000), 1);
    let rate = n1 as f64 / t1;
    println!(
        "one core: {n1} decisions in {t1:.2} s = {rate:.0} decisions/s ({:.2}x the 100,000/s target)",
        rate / 100_000.0
    );
    // The runs' two algorithms, called on the model in process, half each.
    let bare = 2.0
        / [Algorithm::Gcra, Algorithm::SlidingLog]
            .map(|a| 1.0 / support::in_process(&scripts::for_algorithm(a), 100_000))
            .iter()
            .sum::<f64>();
    println!(
        "reference: the same scripts called on the model in process run {bare:.0}/s; a simulated decision \
         (network, limiter, scheduler, oracle included) runs at {:.2}x that",
        rate / bare
    );
    println!(
        "linearity: {n2} decisions ({:.2}x) in {t2:.2} s ({:.2}x the time; must be at most 2.2x for 2x the requests)",
        n2 as f64 / n1 as f64,
        t2 / t1
    );
    let (n, serial) = measure(&specs(10..18, 10_000), 1);
    let (_, parallel) = measure(&specs(10..18, 10_000), 2);
    println!(
        "cores: {n} decisions over 8 seeds: 1 thread {serial:.2} s, 2 threads {parallel:.2} s ({:.2}x faster)",
        serial / parallel
    );
}
