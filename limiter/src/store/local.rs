//! The algorithms in process: for a single instance, for tests, and as the local budget.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::algo::{self, Outcome, State};
use crate::quota::{Algorithm, Quota};
use crate::sync::{lock, Mutex};

/// Default bound on the number of keys kept in process.
pub(crate) const DEFAULT_MAX_KEYS: usize = 100_000;

/// The map's hasher: SipHash with fixed keys, so the map's order (which key goes when every key
/// is live) is the same on every run, as the simulator needs; a user key never picks its slot.
type Hasher = BuildHasherDefault<DefaultHasher>;

/// Key states in a hash map behind a mutex. The lock is held only for one pure `decide`, no
/// I/O, so a `std` mutex is right (as mini-redis argues for its `Db`). A known key is decided in
/// place: one lookup, no allocation.
///
/// Memory is bounded: when `max_keys` is reached, states at rest are dropped first (that
/// changes no decision); if every key is still live, the first key in the map's order is
/// dropped, which can let that one key through early. A flood of hostile keys thus costs
/// bounded memory and degrades only the keys dropped.
#[derive(Debug)]
pub struct LocalStore {
    states: Mutex<HashMap<String, Option<State>, Hasher>>,
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
        LocalStore { states: Mutex::new(HashMap::default()), max_keys: max_keys.max(1) }
    }

    /// Decides one request.
    pub fn apply(&self, algorithm: Algorithm, quota: &Quota, key: &str, now_ms: u64, cost: u64) -> Outcome {
        let mut states = lock(&self.states);
        if let Some(state) = states.get_mut(key) {
            let outcome = algo::step(algorithm, quota, state, now_ms, cost);
            if state.is_none() {
                states.remove(key);
            }
            return outcome;
        }
        let mut state = None;
        let outcome = algo::step(algorithm, quota, &mut state, now_ms, cost);
        if state.is_some() {
            if states.len() >= self.max_keys {
                states.retain(|_, s| s.as_ref().is_some_and(|s| !algo::is_idle(quota, s, now_ms)));
                if states.len() >= self.max_keys {
                    if let Some(first) = states.keys().next().cloned() {
                        states.remove(&first);
                    }
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
