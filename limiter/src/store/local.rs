//! The algorithms in process: for a single instance, for tests, and as the local budget.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::algo::all_or_nothing::{self, RulesOutcome};
use crate::algo::{self, Outcome, State};
use crate::quota::{Algorithm, Quota};
use crate::sync::{lock, Mutex};

/// One rule of [`LocalStore::apply_rules`].
#[derive(Debug, Clone, Copy)]
pub struct RuleItem<'a> {
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

/// The map's hasher: SipHash with fixed keys, so the map's order (which key goes when every key
/// is live) is the same on every run, as the simulator needs; a user key never picks its slot.
type Hasher = BuildHasherDefault<DefaultHasher>;

/// Each state with the quota it was written under: one store may serve several rules, and
/// whether a state is at rest depends on its own quota.
type States = HashMap<String, (Option<State>, Quota), Hasher>;

/// Key states in a hash map behind a mutex. The lock is held only for one pure `decide`, no
/// I/O, so a `std` mutex is right (as mini-redis argues for its `Db`). A known key is decided in
/// place: one lookup, no allocation.
///
/// Memory is bounded: when `max_keys` is reached, states at rest are dropped first (that
/// changes no decision); if every key is still live, the first key in the map's order is
/// dropped, which can let that one key through early. A flood of hostile keys thus costs bounded
/// memory and degrades only the keys dropped.
#[derive(Debug)]
pub struct LocalStore {
    states: Mutex<States>,
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
        if let Some((state, written_under)) = states.get_mut(key) {
            let outcome = algo::step(algorithm, quota, state, now_ms, cost);
            *written_under = *quota;
            if state.is_none() {
                states.remove(key);
            }
            return outcome;
        }
        let mut state = None;
        let outcome = algo::step(algorithm, quota, &mut state, now_ms, cost);
        if let Some(state) = state {
            self.insert(&mut states, key, state, *quota, now_ms);
        }
        outcome
    }

    /// Decides several rules of one request all-or-nothing (`algo::all_or_nothing`), under one lock.
    /// Each item is a rule's algorithm, quota, key, clock reading, cost and shadow flag; the
    /// keys must differ (each rule keys its own state). With `commit` false nothing is
    /// consumed.
    pub fn apply_rules(&self, items: &[RuleItem<'_>], commit: bool) -> RulesOutcome {
        let mut states = lock(&self.states);
        let mut taken: Vec<Option<State>> = items.iter().map(|i| states.remove(i.key).and_then(|(s, _)| s)).collect();
        let outcome = {
            let mut twins: Vec<all_or_nothing::Item<'_>> = items
                .iter()
                .zip(&mut taken)
                .map(|(i, state)| all_or_nothing::Item {
                    algorithm: i.algorithm,
                    quota: i.quota,
                    state,
                    now_ms: i.now_ms,
                    cost: i.cost,
                    shadow: i.shadow,
                })
                .collect();
            all_or_nothing::decide(&mut twins, commit)
        };
        for (item, state) in items.iter().zip(taken) {
            if let Some(state) = state {
                self.insert(&mut states, item.key, state, *item.quota, item.now_ms);
            }
        }
        outcome
    }

    /// Keeps `state` for `key`, first making room if the store is full: states at rest go
    /// first (that changes no decision), then the first key in the map's order.
    fn insert(&self, states: &mut States, key: &str, state: State, quota: Quota, now_ms: u64) {
        if states.len() >= self.max_keys {
            states.retain(|_, (s, q)| s.as_ref().is_some_and(|s| !algo::is_idle(q, s, now_ms)));
            if states.len() >= self.max_keys {
                if let Some(first) = states.keys().next().cloned() {
                    states.remove(&first);
                }
            }
        }
        states.insert(key.to_owned(), (Some(state), quota));
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
