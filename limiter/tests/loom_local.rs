//! loom models of the in-process store: under every interleaving loom explores, threads
//! admitting against one `LocalStore` key never over-admit (and never under-admit), and a
//! deliberately racy load-then-store counter is shown to over-admit, so the models can
//! fail. Run with `cargo xtask loom` (the feature `loom`).

mod loom_support;

use std::panic::{catch_unwind, AssertUnwindSafe};

use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use loom_support::explore;
use redis_ratelimit::harness::LocalStore;
use redis_ratelimit::{Algorithm, Quota};

/// `threads` threads each send `per_thread` cost-1 requests for one key at the same instant
/// to a store whose quota admits `capacity`: exactly `min(capacity, requests)` are admitted.
fn local_store_admits_exactly_capacity(algorithm: Algorithm, threads: usize, per_thread: usize, capacity: u64) {
    explore(&format!("local store, {algorithm}, {threads} threads x {per_thread}, capacity {capacity}"), move || {
        let store = Arc::new(LocalStore::new(16));
        let quota = Quota::per_second(capacity);
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let store = store.clone();
                thread::spawn(move || {
                    (0..per_thread).filter(|_| store.apply(algorithm, &quota, "k", 1_000, 1).allowed).count() as u64
                })
            })
            .collect();
        let admitted: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let requests = (threads * per_thread) as u64;
        assert!(admitted <= capacity, "{algorithm}: over-admitted {admitted} > capacity {capacity}");
        assert_eq!(admitted, capacity.min(requests), "{algorithm}: under-admitted");
    });
}

#[test]
fn local_store_never_over_admits_fixed_window() {
    local_store_admits_exactly_capacity(Algorithm::FixedWindow, 3, 2, 3);
}

#[test]
fn local_store_never_over_admits_sliding_window() {
    local_store_admits_exactly_capacity(Algorithm::SlidingWindow, 3, 2, 3);
}

#[test]
fn local_store_never_over_admits_sliding_log() {
    local_store_admits_exactly_capacity(Algorithm::SlidingLog, 3, 2, 3);
}

#[test]
fn local_store_never_over_admits_token_bucket() {
    local_store_admits_exactly_capacity(Algorithm::TokenBucket, 3, 2, 3);
}

#[test]
fn local_store_never_over_admits_gcra() {
    local_store_admits_exactly_capacity(Algorithm::Gcra, 3, 2, 3);
}

#[test]
fn local_store_keys_do_not_share_a_budget() {
    explore("local store, two keys", || {
        let store = Arc::new(LocalStore::new(16));
        let quota = Quota::per_second(1);
        let a = {
            let store = store.clone();
            thread::spawn(move || store.apply(Algorithm::TokenBucket, &quota, "a", 0, 1).allowed)
        };
        let b = store.apply(Algorithm::TokenBucket, &quota, "b", 0, 1).allowed;
        assert!(a.join().unwrap() && b, "each key has its own budget");
        assert_eq!(store.len(), 2);
    });
}

/// The mutant: a limiter that loads the count, checks it and stores count + 1 as separate
/// atomic operations (what a GET-then-SET client does against Redis).
struct LoadThenStore {
    admitted: AtomicU64,
    capacity: u64,
}

impl LoadThenStore {
    fn try_admit(&self) -> bool {
        let n = self.admitted.load(SeqCst);
        if n < self.capacity {
            self.admitted.store(n + 1, SeqCst);
            true
        } else {
            false
        }
    }
}

/// The same counter done right: one compare-and-swap loop.
struct CompareAndSwap {
    admitted: AtomicU64,
    capacity: u64,
}

impl CompareAndSwap {
    fn try_admit(&self) -> bool {
        let mut n = self.admitted.load(SeqCst);
        loop {
            if n >= self.capacity {
                return false;
            }
            match self.admitted.compare_exchange(n, n + 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
    }
}

macro_rules! two_threads_admit {
    ($limiter:expr) => {{
        let limiter = Arc::new($limiter);
        let other = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.try_admit())
        };
        let mine = limiter.try_admit();
        let admitted = u64::from(mine) + u64::from(other.join().unwrap());
        assert!(admitted <= limiter.capacity, "over-admitted: {admitted} > capacity {}", limiter.capacity);
    }};
}

#[test]
fn compare_and_swap_counter_never_over_admits() {
    explore("compare-and-swap counter", || {
        two_threads_admit!(CompareAndSwap { admitted: AtomicU64::new(0), capacity: 1 })
    });
}

#[test]
fn load_then_store_counter_is_caught_over_admitting() {
    println!("loom: load-then-store counter: loom must find an over-admission (the panic printed next is expected)");
    let result = catch_unwind(AssertUnwindSafe(|| {
        explore("load-then-store counter (must fail)", || {
            two_threads_admit!(LoadThenStore { admitted: AtomicU64::new(0), capacity: 1 })
        })
    }));
    assert!(result.is_err(), "loom found no interleaving where the load-then-store counter over-admits");
    println!("loom: load-then-store counter: over-admission found, as it must be");
}
