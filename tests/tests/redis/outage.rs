//! Killing and pausing a real Redis mid-run: each failure policy answers as it promises,
//! says so in the decision's source, and the circuit breaker opens and closes again.

// The breaker's open period is real time here, because the server is real.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use redis_ratelimit::{
    Algorithm, BreakerConfig, BreakerState, Degraded, FailurePolicy, Limiter, Quota, RedisStore, Source,
};
use redis_tests::RedisServer;

const OPEN_MS: u64 = 300;

fn limiter(server: &RedisServer, policy: FailurePolicy) -> Limiter {
    Limiter::builder(Algorithm::TokenBucket, Quota::per_second(100))
        .redis(
            RedisStore::from_url(&server.url())
                .expect("url")
                .with_timeout(Duration::from_millis(250))
                .expect("timeout"),
        )
        .failure_policy(policy)
        .breaker(BreakerConfig::new(2, Duration::from_millis(OPEN_MS)))
        .build()
        .expect("valid")
}

async fn wait_for_store(l: &Limiter) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = l.check("k").await.expect("decides");
        if d.source == Source::Store {
            return;
        }
        assert!(Instant::now() < deadline, "never recovered: {d:?}, breaker {:?}", l.breaker_state());
        tokio::time::sleep(Duration::from_millis(OPEN_MS / 3)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_policy_answers_while_redis_is_dead_and_recovers_after_restart() {
    let mut server = RedisServer::start().expect("redis-server");
    let open = limiter(&server, FailurePolicy::FailOpen);
    let closed = limiter(&server, FailurePolicy::FailClosed);
    let budget = limiter(&server, FailurePolicy::LocalBudget { limit: 2, period: Duration::from_secs(60) });
    for l in [&open, &closed, &budget] {
        assert_eq!(l.check("k").await.expect("decides").source, Source::Store);
    }

    server.kill();

    // Two failures each (the breaker's threshold).
    for _ in 0..2 {
        let d = open.check("k").await.expect("decides");
        assert_eq!((d.allowed, d.source, d.degraded), (true, Source::FailOpen, Some(Degraded::Unavailable)));
        let d = closed.check("k").await.expect("decides");
        assert_eq!((d.allowed, d.source), (false, Source::FailClosed));
        assert!(d.retry_after.as_millis() > 0, "{d:?}");
    }
    let mut admitted = 0;
    for _ in 0..3 {
        let d = budget.check("k").await.expect("decides");
        assert_eq!(d.source, Source::LocalBudget);
        admitted += d.allowed as u32;
    }
    assert_eq!(admitted, 2, "the local budget admits exactly its 2 per period");

    // Two failures opened every breaker: the next call does not even try Redis.
    for l in [&open, &closed, &budget] {
        assert!(matches!(l.breaker_state(), BreakerState::Open { .. }), "{:?}", l.breaker_state());
        let d = l.check("k").await.expect("decides");
        assert_eq!(d.degraded, Some(Degraded::BreakerOpen));
    }

    server.restart().expect("restart on the same port");
    for l in [&open, &closed, &budget] {
        wait_for_store(l).await;
        assert_eq!(l.breaker_state(), BreakerState::Closed { failures: 0 });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_times_out_per_the_configured_timeout_then_recovers() {
    let server = RedisServer::start().expect("redis-server");
    let l = limiter(&server, FailurePolicy::FailClosed);
    assert_eq!(l.check("k").await.expect("decides").source, Source::Store);

    server.pause().expect("SIGSTOP");
    let started = Instant::now();
    let d = l.check("k").await.expect("decides");
    assert_eq!((d.allowed, d.source, d.degraded), (false, Source::FailClosed, Some(Degraded::Timeout)));
    // Bounded by the timeout, not by Redis: a loose bound, this is not a speed test.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

    server.resume().expect("SIGCONT");
    wait_for_store(&l).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_load_through_a_crash_gets_a_decision_for_every_request() {
    let mut server = RedisServer::start().expect("redis-server");
    let l = limiter(&server, FailurePolicy::LocalBudget { limit: 50, period: Duration::from_secs(1) });
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let l = l.clone();
            tokio::spawn(async move {
                let mut sources = std::collections::BTreeMap::new();
                for i in 0..150 {
                    let d = l.check(&format!("user-{}", (w + i) % 5)).await.expect("every request gets a decision");
                    *sources.entry(d.source).or_insert(0u32) += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                sources
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.restart().expect("restart");
    let mut total = std::collections::BTreeMap::new();
    for w in workers {
        for (s, n) in w.await.expect("worker") {
            *total.entry(s).or_insert(0) += n;
        }
    }
    assert!(total.get(&Source::Store).copied().unwrap_or(0) > 0, "{total:?}");
    assert!(total.get(&Source::LocalBudget).copied().unwrap_or(0) > 0, "{total:?}");
    assert_eq!(total.values().sum::<u32>(), 8 * 150);
}

/// A call that times out may still run: Redis reads it when it resumes, and a sent command
/// cannot be withdrawn. Such a request is decided twice, by the failure policy and later by
/// Redis, and the bound is what the README states: only calls that timed out can count twice,
/// each at most once, and only as a charge (the key admits less afterwards, never more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_time_out_count_at_most_once_more_when_redis_resumes() {
    let server = RedisServer::start().expect("redis-server");
    // A counter of 1,000 per ten days, like a daily quota, and a budget that admits everything.
    let quota = Quota::new(1_000, Duration::from_secs(864_000));
    let build = || {
        Limiter::builder(Algorithm::FixedWindow, quota)
            .redis(
                RedisStore::from_url(&server.url())
                    .expect("url")
                    .with_timeout(Duration::from_millis(200))
                    .expect("timeout"),
            )
            .failure_policy(FailurePolicy::LocalBudget { limit: 1_000, period: Duration::from_secs(60) })
            .breaker(BreakerConfig::new(2, Duration::from_millis(OPEN_MS)))
            .build()
            .expect("valid")
    };
    let l = build();
    for _ in 0..3 {
        assert_eq!(l.check("daily").await.expect("decides").source, Source::Store);
    }
    server.pause().expect("SIGSTOP");
    let mut timed_out = 0;
    let deadline = Instant::now() + Duration::from_millis(3 * OPEN_MS);
    while Instant::now() < deadline {
        let d = l.check("daily").await.expect("decides");
        assert!(d.allowed && d.source == Source::LocalBudget, "{d:?}");
        timed_out += (d.degraded == Some(Degraded::Timeout)) as u64;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.resume().expect("SIGCONT");
    // Whatever of the timed-out calls Redis read runs now; a fresh limiter peeks at the count.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let peek = build().check_n("daily", 0).await.expect("decides");
    assert_eq!(peek.source, Source::Store, "{peek:?}");
    let late = 1_000 - 3 - peek.remaining;
    assert!(timed_out >= 2, "the breaker opened after two timeouts: {timed_out}");
    assert!(late <= timed_out, "{late} late executions, but only {timed_out} calls timed out");
    println!("outage: {timed_out} calls timed out while Redis was stopped; {late} of them ran when it resumed");
}
