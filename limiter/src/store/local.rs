//! The algorithms in process: for a single instance, for tests, and as the local budget.

use std::collections::BTreeMap;

use crate::algo::batch::{self, BatchOutcome};
use crate::algo::{self, Outcome, State};
use crate::quota::{Algorithm, Quota};
use crate::sync::{lock, Mutex};

/// One rule of [`LocalStore::apply_batch`].
#[derive(Debug, Clone, Copy)]
pub struct BatchItem<'a> {
    /// The rule's algorithm.
    pub algorithm: Algorithm,
    /// Its quota.
    pub quota: &'a Quota,
    /// Its key in the store.
    pub key: &'a str,
    /// The clock reading (ms).
    pub now_ms: u64,
    /// The cost under this rule.
    pub cost: u64,
    /// A shadow rule never denies the request.
    pub shadow: bool,
}

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
    // Each state with the quota it was written under: one store may serve several rules, and
    // whether a state is at rest depends on its own quota.
    states: Mutex<BTreeMap<String, (State, Quota)>>,
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
        let mut state = states.remove(key).map(|(s, _)| s);
        let outcome = algo::step(algorithm, quota, &mut state, now_ms, cost);
        if let Some(state) = state {
            self.insert(&mut states, key, state, *quota, now_ms);
        }
        outcome
    }

    /// Decides several rules of one request all-or-nothing (`algo::batch`), under one lock.
    /// Each item is a rule's algorithm, quota, key, clock reading, cost and shadow flag; the
    /// keys must differ (each rule keys its own state). With `commit` false nothing is
    /// consumed.
    pub fn apply_batch(&self, items: &[BatchItem<'_>], commit: bool) -> BatchOutcome {
        let mut states = lock(&self.states);
        let mut taken: Vec<Option<State>> = items.iter().map(|i| states.remove(i.key).map(|(s, _)| s)).collect();
        let outcome = {
            let mut twins: Vec<batch::Item<'_>> = items
                .iter()
                .zip(&mut taken)
                .map(|(i, state)| batch::Item {
                    algorithm: i.algorithm,
                    quota: i.quota,
                    state,
                    now_ms: i.now_ms,
                    cost: i.cost,
                    shadow: i.shadow,
                })
                .collect();
            batch::decide(&mut twins, commit)
        };
        for (item, state) in items.iter().zip(taken) {
            if let Some(state) = state {
                self.insert(&mut states, item.key, state, *item.quota, item.now_ms);
            }
        }
        outcome
    }

    /// Keeps `state` for `key`, first making room if the store is full: states at rest go
    /// first (that changes no decision), then the first key in order.
    fn insert(
        &self,
        states: &mut BTreeMap<String, (State, Quota)>,
        key: &str,
        state: State,
        quota: Quota,
        now_ms: u64,
    ) {
        if states.len() >= self.max_keys {
            states.retain(|_, (s, q)| !algo::is_idle(q, s, now_ms));
            if states.len() >= self.max_keys {
                states.pop_first();
            }
        }
        states.insert(key.to_owned(), (state, quota));
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
