//! Connection reuse: one multiplexed connection per limiter against a pool of 20
//! connections (ADR-002's `max-active=20`), same redis-server, same run. Prints checks per
//! second for each and their ratio; the library ships whichever is faster.
//!
//! Run with `cargo bench -p redis-tests --bench store` (or `cargo xtask bench`).

#![allow(clippy::disallowed_methods)] // a benchmark measures real time

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use redis_ratelimit::{Algorithm, Limiter, Quota, RedisStore};
use redis_tests::RedisServer;

const CHECKS: usize = 40_000;

fn limiter(server: &RedisServer) -> Limiter {
    Limiter::builder(Algorithm::Gcra, Quota::per_second(1_000_000).with_burst(1_000_000))
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .build()
        .expect("valid")
}

/// Runs CHECKS checks from `tasks` concurrent tasks spread over `limiters`; checks/s.
async fn measure(limiters: &[Limiter], tasks: usize) -> f64 {
    // Warm up every connection (and load the script) before timing.
    for l in limiters {
        let _warm = l.check("warm").await.expect("decides");
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let l = limiters[t % limiters.len()].clone();
            let next = next.clone();
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < CHECKS {
                    let _measured = l.check(&format!("k{}", t % 64)).await.expect("decides");
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    CHECKS as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let server = RedisServer::start().expect("redis-server");
    runtime.block_on(async {
        let one = vec![limiter(&server)];
        let pool: Vec<_> = (0..20).map(|_| limiter(&server)).collect();
        println!("{:>6} {:>16} {:>16} {:>8}", "tasks", "multiplexed/s", "pool of 20/s", "pool/mux");
        for tasks in [1, 8, 64, 256] {
            let mux = measure(&one, tasks).await;
            let pooled = measure(&pool, tasks).await;
            println!("{tasks:>6} {mux:>16.0} {pooled:>16.0} {:>8.2}", pooled / mux);
        }
    });
}
