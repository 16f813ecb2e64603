//! loom models of the circuit breaker: under every interleaving loom explores, exactly one
//! of several concurrent callers gets the half-open probe, and concurrent failures are all
//! counted (the breaker opens exactly when the count reaches the threshold). Run with
//! `cargo xtask loom` (the feature `loom`).

mod loom_support;

use loom::sync::Arc;
use loom::thread;
use loom_support::explore;
use redis_ratelimit::harness::{Attempt, CircuitBreaker};
use redis_ratelimit::{BreakerConfig, BreakerState};
use std::time::Duration;

const OPEN_MS: u64 = 100;

/// A breaker opened by one failure at t=0, so at t >= OPEN_MS it is due for a probe.
fn opened(threshold: u32) -> CircuitBreaker {
    let b = CircuitBreaker::new(BreakerConfig::new(threshold, Duration::from_millis(OPEN_MS)));
    for _ in 0..threshold {
        b.on_failure(Attempt::Call, 0);
    }
    assert_eq!(b.state(), BreakerState::Open { until_ms: OPEN_MS });
    b
}

#[test]
fn half_open_gives_the_probe_to_exactly_one_of_three_callers() {
    explore("breaker: one probe among 3 callers", || {
        let breaker = Arc::new(opened(1));
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let breaker = breaker.clone();
                thread::spawn(move || breaker.attempt(OPEN_MS + i))
            })
            .collect();
        let attempts: Vec<Attempt> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let probes = attempts.iter().filter(|p| **p == Attempt::Probe).count();
        assert_eq!(probes, 1, "probes handed out: {attempts:?}");
        assert!(attempts.iter().all(|p| matches!(p, Attempt::Probe | Attempt::Reject { .. })), "{attempts:?}");
        assert!(matches!(breaker.state(), BreakerState::HalfOpen { .. }));
    });
}

#[test]
fn probe_result_races_with_callers_and_the_breaker_ends_closed_or_probing_once() {
    // One caller takes the probe and reports success while two others ask: each of them
    // sees either the half-open breaker (rejected) or the closed one (call); nobody gets a
    // second probe.
    explore("breaker: probe success racing 2 callers", || {
        let breaker = Arc::new(opened(1));
        let prober = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                let p = breaker.attempt(OPEN_MS);
                if p == Attempt::Probe {
                    breaker.on_success(p);
                }
                p
            })
        };
        let others: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || breaker.attempt(OPEN_MS + 1))
            })
            .collect();
        let mut attempts = vec![prober.join().unwrap()];
        attempts.extend(others.into_iter().map(|h| h.join().unwrap()));
        assert_eq!(attempts.iter().filter(|p| **p == Attempt::Probe).count(), 1, "{attempts:?}");
        let state = breaker.state();
        match attempts[0] {
            // The prober's probe succeeded: closed, and whoever came after was let through.
            Attempt::Probe => assert_eq!(state, BreakerState::Closed { failures: 0 }),
            // Another caller holds the probe and never reports: still half-open.
            _ => assert!(matches!(state, BreakerState::HalfOpen { .. }), "{state:?}"),
        }
    });
}

/// Three threads report a failure at t=7 to a breaker with `threshold`; its state after.
fn after_three_concurrent_failures(threshold: u32) -> Arc<CircuitBreaker> {
    let breaker = Arc::new(CircuitBreaker::new(BreakerConfig::new(threshold, Duration::from_millis(OPEN_MS))));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.on_failure(Attempt::Call, 7))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    breaker
}

#[test]
fn concurrent_failures_open_the_breaker_exactly_at_the_threshold() {
    explore("breaker: 3 concurrent failures, threshold 3", || {
        let breaker = after_three_concurrent_failures(3);
        assert_eq!(breaker.state(), BreakerState::Open { until_ms: 7 + OPEN_MS }, "a failure was lost");
    });
}

#[test]
fn concurrent_failures_below_the_threshold_are_all_counted() {
    explore("breaker: 3 concurrent failures, threshold 4", || {
        let breaker = after_three_concurrent_failures(4);
        assert_eq!(breaker.state(), BreakerState::Closed { failures: 3 }, "a failure was lost");
        assert_eq!(breaker.attempt(8), Attempt::Call);
    });
}
