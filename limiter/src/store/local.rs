//! The algorithms in process: for a single instance, for tests, and as the local budget.

use crate::algo::all_or_nothing::{self, ItemOutcome, RulesOutcome};
use crate::algo::concurrency::{self, PermitOp, Permits};
use crate::algo::{self, Outcome, State};
use crate::charge::{Charge, Claim, StateKey};
use crate::decision::Decision;
use crate::key::KeySpace;
use crate::quota::{Algorithm, Quota};
use crate::rules_script::{ItemReply, RulesReply};
use crate::table::{Key, Table};

use super::{StateStore, StoreError};

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
/// by blockable limiters and rules: the instant each block ends. So are a concurrency limit's
/// holders ([`crate::ConcurrencyLimiter`]): a key given up while permits were held starts with
/// none, as a Redis key evicted under `maxmemory` does.
#[derive(Debug)]
pub struct LocalStore {
    states: Table<Option<State>>,
    blocks: Table<u64>,
    permits: Table<Option<Permits>>,
}

impl Default for LocalStore {
    fn default() -> Self {
        LocalStore::new(DEFAULT_MAX_KEYS)
    }
}

impl LocalStore {
    /// A store keeping at most `max_keys` keys (at least 1).
    pub fn new(max_keys: usize) -> Self {
        LocalStore { states: Table::new(max_keys), blocks: Table::new(max_keys), permits: Table::new(max_keys) }
    }

    /// Decides one request of `cost` on `key`'s state under `algorithm` and `quota` at
    /// `now_ms`: the twin on a state kept in process, for the harness's models.
    pub fn apply(&self, algorithm: Algorithm, quota: &Quota, key: &str, now_ms: u64, cost: u64) -> Outcome {
        self.apply_to(self.states.key(key), algorithm, quota, now_ms, cost, None)
    }

    /// Where `state`'s state is kept: by the user key alone for a limiter's own quota, else in
    /// the namespace of its state name and the rest of its identity.
    fn state_of<'k>(&self, state: &'k StateKey<'_>) -> Key<'k> {
        match state.by_key_alone() {
            true => self.states.key(&state.tag),
            false => self.states.key_in((&*state.state, &*state.rest), &state.tag),
        }
    }

    /// Where the block on `state`'s key is kept: under its own quota's state name.
    fn block_of<'k>(&self, state: &'k StateKey<'_>) -> Key<'k> {
        match state.alone {
            true => self.blocks.key(&state.tag),
            false => self.blocks.key_in((&*state.home, &*state.rest), &state.tag),
        }
    }

    /// When the block on `charge`'s key ends, as read at `now_ms`; None for a charge that reads
    /// no block. One past its end is forgotten, as Redis drops the block's key once its TTL
    /// (the block's length) has passed, strictly; at its very end it is kept and blocks nothing
    /// (`algo::block::guarded`).
    #[inline(always)] // see `decide_charge`
    fn block_at(&self, charge: &Charge<'_>, now_ms: u64) -> Option<u64> {
        if !charge.blockable {
            return None;
        }
        let key = self.block_of(&charge.state);
        let mut shard = self.blocks.lock(key);
        let ends = *shard.get_mut(key)?;
        if now_ms > ends {
            shard.remove(key);
            return None;
        }
        Some(ends)
    }

    /// The decision on one charge at `now_ms` (cost 0 peeks), behind its key's block if it
    /// reads one.
    ///
    /// This and what it calls down to the algorithm's step ([`LocalStore::decide_charge`],
    /// `block_at`, `apply_to`, `algo::block::guarded`, `algo::step`) are inlined into the
    /// caller: as calls, their arguments and saved registers were a tenth of an in-process
    /// decision's instructions (bench goal 5, counted by callgrind: 1012 with the calls, 907
    /// without), and a `Decision` returned from a call of its own was copied into the caller's
    /// `Result` right after its fields were stored, a copy that waits for those stores: with
    /// the key in cache, 56 ns a decision against 51 inlined (bench goal 5's executable).
    #[inline(always)]
    pub(crate) fn decision(&self, charge: &Charge<'_>, now_ms: u64) -> Decision {
        Decision::from_store(self.decide_charge(charge, now_ms), charge.capacity(), now_ms)
    }

    /// The outcome of one charge at `now_ms`, as [`LocalStore::decision`] says.
    #[inline(always)] // see `decision`
    pub(crate) fn decide_charge(&self, charge: &Charge<'_>, now_ms: u64) -> Outcome {
        let ends = self.block_at(charge, now_ms);
        let key = self.state_of(&charge.state);
        self.apply_to(key, charge.algorithm, &charge.quota, now_ms, charge.cost, ends)
    }

    #[inline(always)] // see `decide_charge`
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

    /// Decides several charges of one request all-or-nothing (`algo::all_or_nothing`), under the
    /// locks of every shard their keys live in (taken in shard order, so two requests never wait
    /// for each other in a cycle). The charges' states must differ (each rule keys its own).
    /// With `commit` false nothing is consumed.
    pub(crate) fn decide_charges(&self, charges: &[Charge<'_>], now_ms: u64, commit: bool) -> RulesOutcome {
        let blocks: Vec<Option<u64>> = charges.iter().map(|c| self.block_at(c, now_ms)).collect();
        let keys: Vec<_> = charges.iter().map(|c| self.state_of(&c.state)).collect();
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
            let mut twins: Vec<all_or_nothing::RuleOnState<'_>> = charges
                .iter()
                .zip(&mut taken)
                .zip(&blocks)
                .map(|((c, state), &block)| all_or_nothing::RuleOnState {
                    algorithm: c.algorithm,
                    quota: &c.quota,
                    state,
                    now_ms,
                    cost: c.cost,
                    shadow: c.shadow,
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

    /// Gives `units` back to `charge`'s state (see `algo::refund`).
    fn refund_charge(&self, charge: &Charge<'_>, now_ms: u64, units: u64) -> bool {
        let key = self.state_of(&charge.state);
        let mut shard = self.states.lock(key);
        let Some(state) = shard.get_mut(key) else { return false };
        let given = algo::refund(charge.algorithm, &charge.quota, state, now_ms, units);
        if state.is_none() {
            shard.remove(key);
        }
        given
    }

    /// Runs `op` for `holder` on `claim`'s permits at `now_ms` (`algo::concurrency`). A store
    /// keeps one limiter's permits, so the user key alone finds them.
    pub(crate) fn permit_now(&self, claim: &Claim<'_>, now_ms: u64, op: PermitOp, holder: &str) -> Outcome {
        self.apply_permit(claim.limit, claim.lease_ms, &claim.tag, now_ms, op, holder)
    }

    /// Runs `op` for `holder` on `key`'s permits, at most `limit` held for `lease_ms` each, at
    /// `now_ms`: the twin on holders kept in process, for the harness's models.
    pub fn apply_permit(
        &self,
        limit: u64,
        lease_ms: u64,
        key: &str,
        now_ms: u64,
        op: PermitOp,
        holder: &str,
    ) -> Outcome {
        let key = self.permits.key(key);
        let mut shard = self.permits.lock(key);
        let mut state = shard.remove(key).flatten();
        let outcome = concurrency::step(limit, lease_ms, &mut state, now_ms, op, holder);
        if state.is_some() {
            shard.insert(key, state);
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

impl StateStore for LocalStore {
    async fn decide(&self, charge: &Charge<'_>, _: &KeySpace, now_ms: u64) -> Result<(Outcome, u64), StoreError> {
        Ok((self.decide_charge(charge, now_ms), now_ms))
    }

    async fn decide_all(&self, charges: &[Charge<'_>], _: &KeySpace, now_ms: u64) -> Result<RulesReply, StoreError> {
        let outcome = self.decide_charges(charges, now_ms, true);
        let items = outcome.items.into_iter().map(|item: ItemOutcome| ItemReply { item, now_ms }).collect();
        Ok(RulesReply { allowed: outcome.allowed, items })
    }

    async fn reset(&self, charge: &Charge<'_>, _: &KeySpace, _: u64) -> Result<(), StoreError> {
        let key = self.state_of(&charge.state);
        self.states.lock(key).remove(key);
        let block = self.block_of(&charge.state);
        self.blocks.lock(block).remove(block);
        Ok(())
    }

    async fn refund(&self, charge: &Charge<'_>, _: &KeySpace, now_ms: u64, units: u64) -> Result<bool, StoreError> {
        Ok(self.refund_charge(charge, now_ms, units))
    }

    async fn debit(&self, charge: &Charge<'_>, _: &KeySpace, now_ms: u64, units: u64) -> Result<u64, StoreError> {
        let key = self.state_of(&charge.state);
        let mut shard = self.states.lock(key);
        let mut state = shard.remove(key).flatten();
        let charged = algo::debit(charge.algorithm, &charge.quota, &mut state, now_ms, units);
        if state.is_some() {
            shard.insert(key, state);
        }
        Ok(charged)
    }

    async fn block(&self, charge: &Charge<'_>, _: &KeySpace, now_ms: u64, duration_ms: u64) -> Result<(), StoreError> {
        let key = self.block_of(&charge.state);
        let mut shard = self.blocks.lock(key);
        match algo::block::ends(now_ms, duration_ms) {
            Some(ends) => shard.insert(key, ends),
            None => {
                shard.remove(key);
            }
        }
        Ok(())
    }

    async fn permit(
        &self,
        claim: &Claim<'_>,
        _: &KeySpace,
        now_ms: u64,
        op: PermitOp,
        holder: &str,
    ) -> Result<(Outcome, u64), StoreError> {
        Ok((self.permit_now(claim, now_ms, op, holder), now_ms))
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
        let q = Quota::new(1, std::time::Duration::from_secs(60));
        let keys: Vec<String> = (0..40).map(|i| format!("rule-{i}")).collect();
        let items: Vec<Charge<'_>> = keys
            .iter()
            .map(|key| Charge {
                name: "rule".into(),
                algorithm: Algorithm::SlidingLog,
                quota: q,
                state: StateKey {
                    tag: key.into(),
                    rest: "".into(),
                    state: "rule".into(),
                    home: "rule".into(),
                    alone: false,
                    own: true,
                },
                time_source: crate::clock::TimeSource::Client,
                cost: 1,
                blockable: false,
                shadow: false,
                policy: crate::policy::FailurePolicy::FailOpen,
            })
            .collect();
        assert!(store.decide_charges(&items, 0, true).allowed);
        assert_eq!(store.len(), 40);
        assert!(!store.decide_charges(&items, 0, true).allowed);
    }
}
