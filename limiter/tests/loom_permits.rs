//! loom models of the in-process permits (`ConcurrencyLimiter` without Redis, and the local
//! budget's permits): under every interleaving loom explores, threads that acquire, work and
//! release on one key never hold more than the limit at once, and a holder that releases twice
//! frees nothing of another's. A counter that takes on acquire and gives back on any release,
//! what an INCR/DECR limiter does, is shown to let one too many in, so the model can fail. Run
//! with `cargo xtask loom` (the feature `loom`).

mod loom_support;

use std::panic::{catch_unwind, AssertUnwindSafe};

use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use loom::thread;
use loom_support::explore;
use redis_ratelimit::harness::algo::concurrency::PermitOp;
use redis_ratelimit::harness::LocalStore;

const NOW_MS: u64 = 1_000;
const LEASE_MS: u64 = 60_000;

/// What a concurrency limit offers a holder.
trait Permits: Send + Sync + 'static {
    fn acquire(&self, holder: &str) -> bool;
    fn release(&self, holder: &str);
    fn limit(&self) -> u64;
}

/// The library's in-process permits.
struct Store {
    store: LocalStore,
    limit: u64,
}

impl Permits for Store {
    fn acquire(&self, holder: &str) -> bool {
        self.store.apply_permit(self.limit, LEASE_MS, "k", NOW_MS, PermitOp::Acquire, holder).allowed
    }
    fn release(&self, holder: &str) {
        self.store.apply_permit(self.limit, LEASE_MS, "k", NOW_MS, PermitOp::Release, holder);
    }
    fn limit(&self) -> u64 {
        self.limit
    }
}

/// The mutant: one counter, taken under a lock on acquire and given back on every release,
/// whoever sends it.
struct Counter {
    held: Mutex<u64>,
    limit: u64,
}

impl Permits for Counter {
    fn acquire(&self, _: &str) -> bool {
        let mut held = self.held.lock().unwrap();
        let free = *held < self.limit;
        if free {
            *held += 1;
        }
        free
    }
    fn release(&self, _: &str) {
        let mut held = self.held.lock().unwrap();
        *held = held.saturating_sub(1);
    }
    fn limit(&self) -> u64 {
        self.limit
    }
}

/// `holder` acquires and, if granted, works (counted in `working`, which must never pass the
/// limit) and releases `releases` times.
fn hold(permits: &impl Permits, working: &AtomicU64, holder: &str, releases: usize) {
    if permits.acquire(holder) {
        let now = working.fetch_add(1, SeqCst) + 1;
        assert!(now <= permits.limit(), "{now} holders at once, limit {}", permits.limit());
        working.fetch_sub(1, SeqCst);
        for _ in 0..releases {
            permits.release(holder);
        }
    }
}

/// Three holders on one key: `a` releases twice, `b` and `c` once.
fn at_most_the_limit_work_at_once<P: Permits>(permits: P) {
    let permits = Arc::new(permits);
    let working = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = [("a", 2), ("b", 1)]
        .into_iter()
        .map(|(holder, releases)| {
            let (permits, working) = (permits.clone(), working.clone());
            thread::spawn(move || hold(&*permits, &working, holder, releases))
        })
        .collect();
    hold(&*permits, &working, "c", 1);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn in_process_permits_never_hold_more_than_the_limit() {
    explore("in-process permits, limit 1, 3 holders, one releasing twice", || {
        at_most_the_limit_work_at_once(Store { store: LocalStore::new(16), limit: 1 });
    });
}

#[test]
fn in_process_permits_are_all_free_once_every_holder_released() {
    explore("in-process permits, limit 2, released by every holder", || {
        let permits = Arc::new(Store { store: LocalStore::new(16), limit: 2 });
        let other = {
            let permits = permits.clone();
            thread::spawn(move || {
                let got = permits.acquire("a");
                permits.release("a");
                got
            })
        };
        let mine = permits.acquire("b");
        permits.release("b");
        // With a limit of 2 neither was refused, and nothing is left held.
        assert!(mine && other.join().unwrap());
        let free = permits.store.apply_permit(2, LEASE_MS, "k", NOW_MS, PermitOp::Peek, "");
        assert_eq!(free.remaining, 2);
    });
}

#[test]
fn a_counter_given_back_on_any_release_is_caught_letting_one_too_many_in() {
    println!("loom: release counter: loom must find too many holders (the panic printed next is expected)");
    let result = catch_unwind(AssertUnwindSafe(|| {
        explore("counter released by anyone (must fail)", || {
            at_most_the_limit_work_at_once(Counter { held: Mutex::new(0), limit: 1 });
        })
    }));
    assert!(result.is_err(), "loom found no interleaving where a double release lets two hold a permit of one");
    println!("loom: release counter: over-admission found, as it must be");
}
