//! The algorithms in process: for a single instance, for tests, and as the local budget.

use crate::algo::all_or_nothing::{self, RulesOutcome};
use crate::algo::{self, Outcome, State};
use crate::quota::{Algorithm, Quota};
use crate::table::{Key, Table};

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
    /// For a blockable rule, the key of its blocks ([`LocalStore::block`]); None reads none.
    pub block: Option<&'a str>,
}

/// Default bound on the number of keys kept in process.
pub(crate) const DEFAULT_MAX_KEYS: usize = 100_000;

/// Key states in a bounded table (`crate::table`): sharded maps behind mutexes, each lock held
/// for one pure `decide`, no I/O. A known key is decided in place: one lookup, no allocation.
///
/// Memory is bounded: a full table gives up, in O(1) amortized, a key not asked for since the
/// table's clock hand last passed it, the likeliest to be at rest (a state at rest changes no
/// decision when it goes). If it was still live, that one key starts afresh, which can let it
/// through early. A flood of hostile keys thus costs bounded memory and constant time per
/// request, and degrades only the keys it pushes out.
///
/// Blocks ([`crate::Limiter::block`]) are kept in a table of their own, bounded alike, read only
/// by blockable limiters and rules: the instant each block ends.
#[derive(Debug)]
pub struct LocalStore {
    states: Table<Option<State>>,
    blocks: Table<u64>,
}

impl Default for LocalStore {
    fn default() -> Self {
        LocalStore::new(DEFAULT_MAX_KEYS)
    }
}

impl LocalStore {
    /// A store keeping at most `max_keys` keys (at least 1).
    pub fn new(max_keys: usize) -> Self {
        LocalStore { states: Table::new(max_keys), blocks: Table::new(max_keys) }
    }

    /// Decides one request.
    pub fn apply(&self, algorithm: Algorithm, quota: &Quota, key: &str, now_ms: u64, cost: u64) -> Outcome {
        self.apply_to(self.states.key(key), algorithm, quota, now_ms, cost, None)
    }

    /// Decides one request of a blockable limiter: as [`LocalStore::apply`], behind the block
    /// kept under `block` (`algo::block`).
    pub fn apply_blockable(
        &self,
        block: &str,
        algorithm: Algorithm,
        quota: &Quota,
        key: &str,
        now_ms: u64,
        cost: u64,
    ) -> Outcome {
        let ends = self.block_at(block, now_ms);
        self.apply_to(self.states.key(key), algorithm, quota, now_ms, cost, ends)
    }

    /// Blocks `key` until `ends_ms` (`algo::block::ends`), or lifts its block (None).
    pub fn block(&self, key: &str, ends_ms: Option<u64>) {
        let key = self.blocks.key(key);
        let mut shard = self.blocks.lock(key);
        match ends_ms {
            Some(ends) => shard.insert(key, ends),
            None => {
                shard.remove(key);
            }
        }
    }

    /// When the block kept under `key` ends, as read at `now_ms`. One past its end is forgotten,
    /// as Redis drops the block's key once its TTL (the block's length) has passed, strictly;
    /// at its very end it is kept and blocks nothing (`algo::block::guarded`).
    fn block_at(&self, key: &str, now_ms: u64) -> Option<u64> {
        let key = self.blocks.key(key);
        let mut shard = self.blocks.lock(key);
        let ends = *shard.get_mut(key)?;
        if now_ms > ends {
            shard.remove(key);
            return None;
        }
        Some(ends)
    }

    /// Decides one request against `key`'s state named `state`: state of its own, apart from
    /// `key`'s under [`LocalStore::apply`] and under every other name, as a Redis key naming
    /// `state` is.
    /// With `block`, behind the block kept under it, as [`LocalStore::apply_blockable`].
    #[allow(clippy::too_many_arguments)] // where the state and the block live, then what `apply` takes
    pub(crate) fn apply_in(
        &self,
        state: &str,
        block: Option<&str>,
        algorithm: Algorithm,
        quota: &Quota,
        key: &str,
        now_ms: u64,
        cost: u64,
    ) -> Outcome {
        let ends = block.and_then(|b| self.block_at(b, now_ms));
        self.apply_to(self.states.key_in(state, key), algorithm, quota, now_ms, cost, ends)
    }

    fn apply_to(
        &self,
        key: Key<'_>,
        algorithm: Algorithm,
        quota: &Quota,
        now_ms: u64,
        cost: u64,
        block: Option<u64>,
    ) -> Outcome {
        let mut shard = self.states.lock(key);
        if let Some(state) = shard.get_mut(key) {
            let outcome = algo::block::guarded(algorithm, quota, state, block, now_ms, cost);
            if state.is_none() {
                shard.remove(key);
            }
            return outcome;
        }
        let mut state = None;
        let outcome = algo::block::guarded(algorithm, quota, &mut state, block, now_ms, cost);
        if state.is_some() {
            shard.insert(key, state);
        }
        outcome
    }

    /// Gives `units` back to `key`'s state (under [`LocalStore::apply`], see `algo::refund`).
    pub(crate) fn refund(&self, algorithm: Algorithm, quota: &Quota, key: &str, now_ms: u64, units: u64) -> bool {
        let key = self.states.key(key);
        let mut shard = self.states.lock(key);
        let Some(state) = shard.get_mut(key) else { return false };
        let given = algo::refund(algorithm, quota, state, now_ms, units);
        if state.is_none() {
            shard.remove(key);
        }
        given
    }

    /// Forgets `key`'s state (under [`LocalStore::apply`]).
    pub(crate) fn forget(&self, key: &str) {
        let key = self.states.key(key);
        self.states.lock(key).remove(key);
    }

    /// Decides several rules of one request all-or-nothing (`algo::all_or_nothing`), under the
    /// locks of every shard their keys live in (taken in shard order, so two requests never wait
    /// for each other in a cycle). Each item is a rule's algorithm, quota, key, clock reading,
    /// cost and shadow flag; the keys must differ (each rule keys its own state). With `commit`
    /// false nothing is consumed.
    pub fn apply_rules(&self, items: &[RuleItem<'_>], commit: bool) -> RulesOutcome {
        let blocks: Vec<Option<u64>> = items.iter().map(|i| i.block.and_then(|b| self.block_at(b, i.now_ms))).collect();
        let keys: Vec<_> = items.iter().map(|i| self.states.key(i.key)).collect();
        let shard_of: Vec<usize> = keys.iter().map(|&k| self.states.shard_of(k)).collect();
        let mut order = shard_of.clone();
        order.sort_unstable();
        order.dedup();
        let mut shards: Vec<_> = order.iter().map(|&i| self.states.lock_shard(i)).collect();
        // Every index is in `order`, so the search always finds it.
        let slot = |shard: usize| order.binary_search(&shard).unwrap_or(0);
        let mut taken: Vec<Option<State>> =
            keys.iter().zip(&shard_of).map(|(&key, &shard)| shards[slot(shard)].remove(key).flatten()).collect();
        let outcome = {
            let mut twins: Vec<all_or_nothing::Item<'_>> = items
                .iter()
                .zip(&mut taken)
                .zip(&blocks)
                .map(|((i, state), &block)| all_or_nothing::Item {
                    algorithm: i.algorithm,
                    quota: i.quota,
                    state,
                    now_ms: i.now_ms,
                    cost: i.cost,
                    shadow: i.shadow,
                    block,
                })
                .collect();
            all_or_nothing::decide(&mut twins, commit)
        };
        for ((&key, state), &shard) in keys.iter().zip(taken).zip(&shard_of) {
            if state.is_some() {
                shards[slot(shard)].insert(key, state);
            }
        }
        outcome
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(all(test, not(feature = "loom")))]
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

    /// A key enters the clock unmarked and is marked each time it is asked for again, so a full
    /// table gives up a key asked for once (a flood's) before one asked for again, whichever the
    /// hand reaches first (where a key sits depends on the table's secret seed).
    #[test]
    fn a_key_asked_for_again_outlives_one_asked_for_once() {
        let store = LocalStore::new(2);
        let q = Quota::per_second(1);
        store.apply(Algorithm::FixedWindow, &q, "once", 0, 1);
        store.apply(Algorithm::FixedWindow, &q, "live", 0, 1);
        // Asked for again (and refused: its window is spent), so marked.
        assert!(!store.apply(Algorithm::FixedWindow, &q, "live", 1, 1).allowed);
        // Full: the new key takes the place of "once".
        store.apply(Algorithm::FixedWindow, &q, "new", 2, 1);
        assert!(!store.apply(Algorithm::FixedWindow, &q, "live", 3, 1).allowed, "\"live\" kept its spent window");
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn rules_in_many_shards_are_decided_together() {
        let store = LocalStore::new(200_000);
        let q = Quota::new(1, 60_000);
        let keys: Vec<String> = (0..40).map(|i| format!("rule-{i}")).collect();
        let items: Vec<RuleItem<'_>> = keys
            .iter()
            .map(|key| RuleItem {
                algorithm: Algorithm::SlidingLog,
                quota: &q,
                key,
                now_ms: 0,
                cost: 1,
                shadow: false,
                block: None,
            })
            .collect();
        assert!(store.apply_rules(&items, true).allowed);
        assert_eq!(store.len(), 40);
        assert!(!store.apply_rules(&items, true).allowed);
    }
}
