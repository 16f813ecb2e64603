//! The algorithms in process: for a single instance, for tests, and as the local budget.

use std::collections::BTreeMap;

use crate::algo::{self, Outcome, State};
use crate::quota::{Algorithm, Quota};
use crate::sync::{lock, Mutex};

/// Default bound on the number of keys kept in process.
pub(crate) const DEFAULT_MAX_KEYS: usize = 100_000;

/// Key states in a map behind a mutex. The lock is held only for one pure `decide`, no
/// I/O, so a `std` mutex is right (as mini-redis argues for its `Db`).
///
/// Memory is bounded: when `max_keys` is reached, states at rest are dropped first (that
/// changes no decision); if every key is still live, the first key in order is dropped,
/// which can let that one key through early. A flood of hostile keys thus costs bounded
/// memory and degrades only the keys dropped.
#[derive(Debug)]
pub struct LocalStore {
    states: Mutex<BTreeMap<String, State>>,
    max_keys: usize,
}

impl Default for LocalStore {
    fn default() -> Self {
        LocalStore::new(DEFAULT_MAX_KEYS)
    }
}

impl LocalStore {
    /// A store keeping at most `max_keys` keys (at least 1).
    pub fn new(max_keys: usize) -> Self {
        LocalStore { states: Mutex::new(BTreeMap::new()), max_keys: max_keys.max(1) }
    }

    /// Decides one request.
    pub fn apply(&self, algorithm: Algorithm, quota: &Quota, key: &str, now_ms: u64, cost: u64) -> Outcome {
        let mut states = lock(&self.states);
        let mut state = states.remove(key);
        let outcome = algo::step(algorithm, quota, &mut state, now_ms, cost);
        if let Some(state) = state {
            if states.len() >= self.max_keys {
                states.retain(|_, s| !algo::is_idle(quota, s, now_ms));
                if states.len() >= self.max_keys {
                    states.pop_first();
                }
            }
            states.insert(key.to_owned(), state);
        }
        outcome
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        lock(&self.states).len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(all(test, not(limiter_loom)))]
mod tests {
    use super::*;

    #[test]
    fn memory_stays_bounded_under_a_key_flood() {
        let store = LocalStore::new(10);
        let q = Quota::per_second(5);
        for i in 0..1000 {
            store.apply(Algorithm::TokenBucket, &q, &format!("k{i}"), 0, 1);
        }
        assert!(store.len() <= 10, "{}", store.len());
    }

    #[test]
    fn idle_keys_are_dropped_before_live_ones() {
        let store = LocalStore::new(2);
        let q = Quota::per_second(1);
        store.apply(Algorithm::FixedWindow, &q, "old", 0, 1);
        store.apply(Algorithm::FixedWindow, &q, "live", 5_000, 1);
        store.apply(Algorithm::FixedWindow, &q, "new", 5_001, 1);
        // "old" was idle (its window ended) and went; "live" still blocks its window.
        assert!(!store.apply(Algorithm::FixedWindow, &q, "live", 5_002, 1).allowed);
    }
}
