//! loom model of the lock-free `AtomicLimiter` (GCRA on one `AtomicU64`, CAS loop): under
//! every interleaving loom explores, concurrent callers are admitted exactly up to the
//! burst, and the same GCRA done as load, decide, store is caught over-admitting. Run with
//! `cargo xtask loom` (the feature `loom`).

mod loom_support;

use std::panic::{catch_unwind, AssertUnwindSafe};

use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use loom_support::explore;
use redis_ratelimit::harness::algo::gcra::{self, GcraState};
use redis_ratelimit::store::AtomicLimiter;
use redis_ratelimit::Quota;

#[test]
fn atomic_limiter_admits_exactly_the_burst_to_three_threads() {
    explore("atomic limiter, 3 threads x 2, burst 3", || {
        let limiter = Arc::new(AtomicLimiter::new(Quota::per_second(3)).unwrap());
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let limiter = limiter.clone();
                thread::spawn(move || (0..2).filter(|_| limiter.check(0, 1).unwrap().allowed).count())
            })
            .collect();
        let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(admitted, 3, "admitted {admitted} of 6 with burst 3");
    });
}

#[test]
fn atomic_limiter_peeks_never_consume_while_others_admit() {
    explore("atomic limiter, peek racing 2 admissions, burst 2", || {
        let limiter = Arc::new(AtomicLimiter::new(Quota::per_second(2)).unwrap());
        let peeker = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.check(0, 0).unwrap())
        };
        let other = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.check(0, 1).unwrap().allowed)
        };
        let mine = limiter.check(0, 1).unwrap().allowed;
        let peek = peeker.join().unwrap();
        assert!(mine && other.join().unwrap(), "both units of the burst must be admitted");
        assert!(peek.allowed && peek.remaining <= 2);
    });
}

/// The mutant: the same GCRA, but the TAT is loaded, decided on and stored as separate
/// steps, so two callers can both decide on the same old TAT.
struct LoadDecideStore {
    quota: Quota,
    tat_us: AtomicU64,
}

impl LoadDecideStore {
    fn check(&self, now_ms: u64, cost: u64) -> bool {
        let mut state = Some(GcraState { tat_us: self.tat_us.load(SeqCst) });
        let outcome = gcra::step(&self.quota, &mut state, now_ms, cost);
        if let Some(s) = state {
            self.tat_us.store(s.tat_us, SeqCst);
        }
        outcome.allowed
    }
}

#[test]
fn load_decide_store_gcra_is_caught_over_admitting() {
    println!("loom: load-decide-store GCRA: loom must find an over-admission (the panic printed next is expected)");
    let result = catch_unwind(AssertUnwindSafe(|| {
        explore("load-decide-store GCRA (must fail)", || {
            let limiter = Arc::new(LoadDecideStore { quota: Quota::per_second(1), tat_us: AtomicU64::new(0) });
            let other = {
                let limiter = limiter.clone();
                thread::spawn(move || limiter.check(0, 1))
            };
            let mine = limiter.check(0, 1);
            let admitted = u64::from(mine) + u64::from(other.join().unwrap());
            assert!(admitted <= 1, "over-admitted: {admitted} > burst 1");
        })
    }));
    assert!(result.is_err(), "loom found no interleaving where load-decide-store GCRA over-admits");
    println!("loom: load-decide-store GCRA: over-admission found, as it must be");
}
