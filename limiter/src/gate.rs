//! The one way a front door reaches its store. A [`crate::Limiter`] and an
//! [`crate::enforce::Enforcer`] each hold a [`Gate`], hand it [`Charge`]s, and get decisions
//! back; the gate is what stands between them and the store:
//!
//! - the store itself, in process or on Redis (both a [`StateStore`]: this is the one module
//!   that tells them apart);
//! - the circuit breaker and what an operator hears about it (`crate::health`), around every
//!   call to Redis;
//! - the failure policies (`crate::policy`), which answer, all-or-nothing over a request's
//!   charges as Redis would have, whenever Redis cannot be asked;
//! - the key space, which names every charge's Redis keys.
//!
//! An operation no failure policy can stand in for (a reset, a refund, a block; a renewal or a
//! release of a permit) is an error when Redis cannot be asked: [`Error::Unavailable`], and
//! nothing happened in Redis.

use std::sync::Arc;
use std::time::Duration;

use crate::algo::all_or_nothing::ItemOutcome;
use crate::algo::concurrency::PermitOp;
use crate::algo::Outcome;
use crate::breaker::BreakerState;
use crate::charge::{Charge, Claim};
use crate::clock::Clock;
use crate::decision::{Decision, Degraded, Source};
use crate::error::Error;
use crate::health::{Guarded, Health};
use crate::key::KeySpace;
use crate::modes::batch::Batcher;
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};
use crate::reconcile::Reconciled;
use crate::store::local::LocalStore;
use crate::store::{RedisStore, StateStore, StoreError};

/// Where a front door's state lives: this process's store, or Redis (shared, as a batching
/// limiter's flushing task holds it too).
enum Store {
    Local(LocalStore),
    Redis(Arc<RedisStore>),
}

/// See the module docs.
pub(crate) struct Gate {
    store: Store,
    keys: KeySpace,
    clock: Arc<dyn Clock>,
    health: Health,
    /// The local budgets of the failure policies, kept apart from the store.
    budget: LocalStore,
}

/// One charge's part of a decision of several: its own decision, and whether the request's
/// cost was taken from it.
pub(crate) struct Answer {
    pub(crate) decision: Decision,
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) consumed: bool,
}

/// What a request of several charges was answered.
pub(crate) struct Answers {
    /// Every enforced charge admits the request.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) allowed: bool,
    /// One per charge, in order.
    pub(crate) items: Vec<Answer>,
}

/// An operation on a charge's state that no failure policy can stand in for: a store call
/// whose answer is `Out`, run the same way on either store.
trait Operation: Copy + Send + Sync {
    type Out: Send;
    /// What [`Error::Unavailable`] says did not happen.
    const NAME: &'static str;
    fn run(
        self,
        store: &(impl StateStore + Sync),
        charge: &Charge<'_>,
        keys: &KeySpace,
        now: u64,
    ) -> impl std::future::Future<Output = Result<Self::Out, StoreError>> + Send;
}

/// A peek: the outcome a request of cost 0 gets, and the clock reading of it.
#[derive(Clone, Copy)]
struct Peek;
#[derive(Clone, Copy)]
struct Reset;
/// A refund of so many units: whether anything was given back.
#[derive(Clone, Copy)]
struct Refund(u64);
/// A debit of so many units: how many were charged.
#[derive(Clone, Copy)]
struct Debit(u64);
/// A block of so many ms (0 lifts it).
#[derive(Clone, Copy)]
struct Block(u64);

/// Implements [`Operation`] for `$op`, answering `$out`, called `$name` in errors, running
/// `$run` with the operation, the store, the charge, the key space and the clock reading.
macro_rules! operation {
    ($op:ident -> $out:ty, $name:literal, |$o:pat_param, $store:ident, $charge:ident, $keys:ident, $now:ident| $run:expr) => {
        impl Operation for $op {
            type Out = $out;
            const NAME: &'static str = $name;
            async fn run(
                self,
                $store: &(impl StateStore + Sync),
                $charge: &Charge<'_>,
                $keys: &KeySpace,
                $now: u64,
            ) -> Result<$out, StoreError> {
                let $o = self;
                $run.await
            }
        }
    };
}

operation!(Peek -> (Outcome, u64), "the state read", |Peek, store, charge, keys, now| store.decide(charge, keys, now));
operation!(Reset -> (), "the reset", |Reset, store, charge, keys, now| store.reset(charge, keys, now));
operation!(Refund -> bool, "the refund", |Refund(units), store, charge, keys, now| store.refund(charge, keys, now, units));
operation!(Debit -> u64, "the debit", |Debit(units), store, charge, keys, now| store.debit(charge, keys, now, units));
operation!(Block -> (), "the block", |Block(ms), store, charge, keys, now| store.block(charge, keys, now, ms));

impl Gate {
    /// A gate to `redis`, or to an in-process store of at most `max_local_keys` keys; the
    /// failure policies' budgets keep as many.
    pub(crate) fn new(
        redis: Option<Arc<RedisStore>>,
        max_local_keys: usize,
        keys: KeySpace,
        clock: Arc<dyn Clock>,
        health: Health,
    ) -> Gate {
        let store = match redis {
            Some(redis) => Store::Redis(redis),
            None => Store::Local(LocalStore::new(max_local_keys)),
        };
        Gate { store, keys, clock, health, budget: LocalStore::new(max_local_keys) }
    }

    /// The instance's clock.
    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    /// How user keys become Redis keys.
    pub(crate) fn keys(&self) -> &KeySpace {
        &self.keys
    }

    /// The breaker and its reporting.
    pub(crate) fn health(&self) -> &Health {
        &self.health
    }

    /// The circuit breaker's state.
    pub(crate) fn breaker_state(&self) -> BreakerState {
        self.health.state()
    }

    /// The Redis store, for the round-trip modes (which only run on Redis); None in process.
    pub(crate) fn redis(&self) -> Option<&Arc<RedisStore>> {
        match &self.store {
            Store::Redis(redis) => Some(redis),
            Store::Local(_) => None,
        }
    }

    /// How many keys the in-process store holds; None on Redis.
    #[cfg(test)]
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn keys_held(&self) -> Option<usize> {
        match &self.store {
            Store::Local(local) => Some(local.len()),
            Store::Redis(_) => None,
        }
    }

    /// Decides one charge at `now` (cost 0 peeks); on Redis through `batcher` when the limiter
    /// batches. When Redis cannot be asked the charge's failure policy answers.
    pub(crate) async fn decide(
        &self,
        charge: &Charge<'_>,
        now: u64,
        batcher: Option<&Arc<Batcher>>,
    ) -> Result<Decision, Error> {
        match &self.store {
            Store::Local(local) => Ok(local.decision(charge, now)),
            // Boxed: the Redis path's future (the breaker, the round trip) is far larger than
            // the rest, and unboxed it would be built and moved on every in-process decision
            // too, which awaits nothing. One allocation per round trip is nothing beside it.
            Store::Redis(redis) => Box::pin(self.decide_on_redis(redis, charge, now, batcher)).await,
        }
    }

    async fn decide_on_redis(
        &self,
        redis: &Arc<RedisStore>,
        charge: &Charge<'_>,
        now: u64,
        batcher: Option<&Arc<Batcher>>,
    ) -> Result<Decision, Error> {
        let call = || async move {
            match batcher {
                Some(batcher) => {
                    let stem = charge.stem(&self.keys);
                    batcher
                        .evaluate(redis, charge.algorithm, charge.quota, stem, charge.client_now(now), charge.cost)
                        .await
                }
                None => redis.decide(charge, &self.keys, now).await,
            }
        };
        match self.health.guard(&*self.clock, now, redis, call).await? {
            Guarded::Answered((outcome, at)) => Ok(Decision::from_store(outcome, charge.capacity(), at)),
            Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                Ok(self.fallback_one(charge, at_ms, why, retry_after_ms))
            }
        }
    }

    /// The failure policy's answer for one charge, the one-rule case of [`Gate::fallback`].
    pub(crate) fn fallback_one(&self, charge: &Charge<'_>, now: u64, why: Degraded, retry_after_ms: u64) -> Decision {
        let mut answers = self.fallback(std::slice::from_ref(charge), now, why, retry_after_ms);
        answers.items.remove(0).decision
    }

    /// Decides `charges`, one request's, all-or-nothing at `now`: a request denied by one
    /// enforced charge consumes from none; a shadow charge never denies.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) async fn decide_all(&self, charges: &[Charge<'_>], now: u64) -> Result<Answers, Error> {
        let redis = match &self.store {
            Store::Local(local) => {
                let outcome = local.decide_charges(charges, now, true);
                return Ok(answers(
                    charges,
                    outcome.allowed,
                    outcome.items.into_iter().map(|i| (i, now)),
                    Source::Store,
                    None,
                ));
            }
            Store::Redis(redis) => redis,
        };
        let call = || redis.decide_all(charges, &self.keys, now);
        match self.health.guard(&*self.clock, now, redis, call).await? {
            Guarded::Answered(reply) => {
                let items = reply.items.into_iter().map(|i| (i.item, i.now_ms));
                Ok(answers(charges, reply.allowed, items, Source::Store, None))
            }
            // Down, slow or refusing this client: an outage, each charge's policy answers.
            Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                Ok(self.fallback(charges, at_ms, why, retry_after_ms))
            }
        }
    }

    /// The failure policies' answer at `now` ([`policies_answer`]); `retry_after_ms` is when
    /// Redis may be asked again.
    pub(crate) fn fallback(&self, charges: &[Charge<'_>], now: u64, why: Degraded, retry_after_ms: u64) -> Answers {
        let answered = policies_answer(&self.budget, charges, now, retry_after_ms);
        let items = charges
            .iter()
            .zip(answered.items)
            .map(|(charge, (item, source))| {
                // What the answer enforced: the local budget when that answered.
                let capacity = match (source, charge.policy) {
                    (Source::LocalBudget, FailurePolicy::LocalBudget { limit, .. }) => limit,
                    _ => charge.capacity(),
                };
                let decision =
                    Decision { source, degraded: Some(why), ..Decision::from_store(item.outcome, capacity, now) };
                Answer { decision, consumed: item.consumed }
            })
            .collect();
        Answers { allowed: answered.allowed, items }
    }

    /// What the charge's state answers a request of its cost now (a peek: build it with cost
    /// 0, which consumes nothing): the store's own reading, which no failure policy can stand
    /// in for.
    pub(crate) async fn peek(&self, charge: &Charge<'_>) -> Result<Decision, Error> {
        let (outcome, at) = self.operate(Peek, charge).await?;
        Ok(Decision::from_store(outcome, charge.capacity(), at))
    }

    /// Forgets the charge's state and its key's block, as if the key had never been seen.
    pub(crate) async fn reset(&self, charge: &Charge<'_>) -> Result<(), Error> {
        self.operate(Reset, charge).await
    }

    /// Gives `units` back to the charge's state, at most its capacity: whether any was.
    pub(crate) async fn refund(&self, charge: &Charge<'_>, units: u64) -> Result<bool, Error> {
        self.operate(Refund(units.min(charge.capacity())), charge).await
    }

    /// Reconciles a request that reserved `reserved` units with its real cost, `actual`: gives
    /// the surplus back, or charges at most `max_excess` of the excess whether it fits or not
    /// (`crate::reconcile`).
    pub(crate) async fn reconcile(
        &self,
        charge: &Charge<'_>,
        reserved: u64,
        actual: u64,
        max_excess: u64,
    ) -> Result<Reconciled, Error> {
        let done = if actual < reserved {
            let units = reserved - actual;
            Reconciled::Refunded { units, given: self.refund(charge, units).await? }
        } else if actual == reserved {
            Reconciled::Exact
        } else {
            let (excess, to_charge) = (actual - reserved, (actual - reserved).min(max_excess));
            let charged = if to_charge == 0 { 0 } else { self.operate(Debit(to_charge), charge).await? };
            Reconciled::Charged { excess, charged }
        };
        crate::metrics::reconciled(&charge.name, &done);
        Ok(done)
    }

    /// Blocks the charge's key for `duration` ([`Duration::ZERO`] lifts the block). Refused,
    /// naming `blockable`, when the charge reads no blocks: the block would be ignored.
    pub(crate) async fn block(&self, charge: &Charge<'_>, duration: Duration) -> Result<(), Error> {
        if !charge.blockable {
            return Err(Error::config(
                "blockable",
                format!(
                    "{:?} reads no blocks, so a block on {:?} would be ignored: make it blockable",
                    charge.name, charge.state.tag
                ),
            ));
        }
        let duration_ms = crate::duration::block_ms(duration)?;
        self.operate(Block(duration_ms), charge).await
    }

    async fn operate<O: Operation>(&self, operation: O, charge: &Charge<'_>) -> Result<O::Out, Error> {
        let now = self.clock.now_ms();
        match &self.store {
            Store::Local(local) => {
                operation.run(local, charge, &self.keys, now).await.map_err(|e| e.into_error(O::NAME))
            }
            // Boxed, as in `decide`.
            Store::Redis(redis) => Box::pin(self.operate_on_redis(redis, operation, charge, now)).await,
        }
    }

    async fn operate_on_redis<O: Operation>(
        &self,
        redis: &RedisStore,
        operation: O,
        charge: &Charge<'_>,
        now: u64,
    ) -> Result<O::Out, Error> {
        let call = || operation.run(redis, charge, &self.keys, now);
        match self.health.guard(&*self.clock, now, redis, call).await? {
            Guarded::Answered(done) => Ok(done),
            Guarded::Unavailable { why, .. } => Err(Error::Unavailable { operation: O::NAME, why }),
        }
    }
}

impl Gate {
    /// Runs `op` for `holder` on `claim`'s permits. When Redis cannot be asked an acquire is
    /// answered by the claim's failure policy ([`Gate::permit_fallback`]); none can stand in
    /// for a renewal, a release or a peek, which are then [`Error::Unavailable`].
    pub(crate) async fn permit(&self, claim: &Claim<'_>, op: PermitOp, holder: &str) -> Result<Decision, Error> {
        let now = self.clock.now_ms();
        let redis = match &self.store {
            Store::Local(local) => {
                return Ok(Decision::from_store(local.permit_now(claim, now, op, holder), claim.limit, now))
            }
            Store::Redis(redis) => redis,
        };
        // Boxed, as in `decide`.
        Box::pin(async move {
            let call = || redis.permit(claim, &self.keys, now, op, holder);
            match self.health.guard(&*self.clock, now, redis, call).await? {
                Guarded::Answered((outcome, at)) => Ok(Decision::from_store(outcome, claim.limit, at)),
                Guarded::Unavailable { at_ms, why, retry_after_ms } if op == PermitOp::Acquire => {
                    Ok(self.permit_fallback(claim, at_ms, why, retry_after_ms, holder))
                }
                Guarded::Unavailable { why, .. } => {
                    let operation = match op {
                        PermitOp::Renew => "the permit's renewal",
                        PermitOp::Release => "the permit's release",
                        PermitOp::Acquire | PermitOp::Peek => "the permits read",
                    };
                    Err(Error::Unavailable { operation, why })
                }
            }
        })
        .await
    }

    /// The failure policy's answer to an acquire Redis could not be asked at `now`: fail-open
    /// admits it holding nothing; fail-closed refuses it until Redis may be asked again
    /// (`retry_after_ms`); a local budget of `limit` lends one of this instance's own `limit`
    /// permits of the key, held in process with the claim's lease ([`Gate::budget_permit`]).
    fn permit_fallback(
        &self,
        claim: &Claim<'_>,
        now: u64,
        why: Degraded,
        retry_after_ms: u64,
        holder: &str,
    ) -> Decision {
        let (outcome, source, capacity) = match claim.policy {
            FailurePolicy::FailOpen => (open(), Source::FailOpen, claim.limit),
            FailurePolicy::FailClosed => (closed(retry_after_ms), Source::FailClosed, claim.limit),
            FailurePolicy::LocalBudget { limit, .. } => {
                (self.budget_permit(claim, PermitOp::Acquire, holder, now), Source::LocalBudget, limit)
            }
        };
        Decision { source, degraded: Some(why), ..Decision::from_store(outcome, capacity, now) }
    }

    /// Runs `op` for `holder` on the permits the local budget lends for `claim` (`limit`
    /// permits of the claim's lease, kept in process whatever Redis's state): where a permit
    /// the budget lent is renewed and released.
    pub(crate) fn budget_permit(&self, claim: &Claim<'_>, op: PermitOp, holder: &str, now: u64) -> Outcome {
        let limit = match claim.policy {
            FailurePolicy::LocalBudget { limit, .. } => limit,
            FailurePolicy::FailOpen | FailurePolicy::FailClosed => 0,
        };
        self.budget.permit_now(&Claim { limit, ..claim.clone() }, now, op, holder)
    }

    /// The store, when state is kept in this process: a decision there is made now
    /// ([`LocalStore::decision`]). None on Redis, where it takes a round trip ([`Gate::decide`]).
    pub(crate) fn in_process(&self) -> Option<&LocalStore> {
        match &self.store {
            Store::Local(local) => Some(local),
            Store::Redis(_) => None,
        }
    }

    /// Runs `op` for `holder` on `claim`'s permits now, when they are kept in this process:
    /// None on Redis, where it takes a round trip ([`Gate::permit`]).
    pub(crate) fn permit_in_process(&self, claim: &Claim<'_>, op: PermitOp, holder: &str, now: u64) -> Option<Outcome> {
        match &self.store {
            Store::Local(local) => Some(local.permit_now(claim, now, op, holder)),
            Store::Redis(_) => None,
        }
    }
}

/// What fail-open answers: admitted, with nothing known of the state.
fn open() -> Outcome {
    Outcome { allowed: true, remaining: 0, retry_after_ms: 0, reset_after_ms: 0 }
}

/// What fail-closed answers: refused until Redis may be asked again, `retry_after_ms` from now.
fn closed(retry_after_ms: u64) -> Outcome {
    Outcome {
        allowed: false,
        remaining: 0,
        retry_after_ms: retry_after_ms.max(1),
        reset_after_ms: retry_after_ms.max(1),
    }
}

/// The decisions of `charges` from the store's `items` (each with the clock reading it was
/// decided by), all made by `source`.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
fn answers(
    charges: &[Charge<'_>],
    allowed: bool,
    items: impl Iterator<Item = (ItemOutcome, u64)>,
    source: Source,
    degraded: Option<Degraded>,
) -> Answers {
    let items = charges
        .iter()
        .zip(items)
        .map(|(charge, (item, at))| {
            let o: Outcome = item.outcome;
            let decision = Decision { source, degraded, ..Decision::from_store(o, charge.capacity(), at) };
            Answer { decision, consumed: item.consumed }
        })
        .collect();
    Answers { allowed, items }
}

/// What the policies answered for one request.
struct Answered {
    /// Whether every enforced rule's policy admits the request.
    allowed: bool,
    /// Each rule's answer, in the order asked, and which policy gave it.
    items: Vec<(ItemOutcome, Source)>,
}

/// Answers a request by its rules' failure policies at `now`, all-or-nothing as Redis would
/// have: it proceeds only if every enforced rule's policy admits it, and the local budgets (a
/// fixed window each, kept in `budget`) are consumed only then. `retry_after_ms` is when Redis
/// may be asked again: what a fail-closed answer, or a cost no budget can ever hold, tells the
/// client to wait.
fn policies_answer(budget: &LocalStore, asked: &[Charge<'_>], now: u64, retry_after_ms: u64) -> Answered {
    let closed = closed(retry_after_ms);
    // A cost above the whole budget could never fit; a fail-closed rule denies outright.
    let enforced_denial = asked.iter().any(|a| {
        !a.shadow
            && match a.policy {
                FailurePolicy::FailClosed => true,
                FailurePolicy::LocalBudget { limit, .. } => a.cost > limit,
                FailurePolicy::FailOpen => false,
            }
    });
    // The local budgets of the rules that have one, decided together as one batch: a fixed
    // window each, kept where the rule's state is named.
    let budgets: Vec<(usize, u64, Charge<'_>)> = asked
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a.policy {
            FailurePolicy::LocalBudget { limit, period } => Some((
                i,
                limit,
                Charge {
                    algorithm: Algorithm::FixedWindow,
                    quota: Quota::new(limit, period),
                    // Costs above the budget are answered below without asking it.
                    cost: a.cost.min(limit),
                    // A local budget answers for Redis, whose blocks it cannot read.
                    blockable: false,
                    ..a.clone()
                },
            )),
            _ => None,
        })
        .collect();
    let charges: Vec<Charge<'_>> = budgets.iter().map(|(_, _, c)| c.clone()).collect();
    let decided = budget.decide_charges(&charges, now, !enforced_denial);
    let mut items: Vec<(ItemOutcome, Source)> = asked
        .iter()
        .map(|a| match a.policy {
            FailurePolicy::FailClosed => (ItemOutcome { outcome: closed, consumed: false }, Source::FailClosed),
            _ => (ItemOutcome { outcome: open(), consumed: false }, Source::FailOpen),
        })
        .collect();
    for (&(i, limit, _), item) in budgets.iter().zip(decided.items) {
        let item = if asked[i].cost > limit { ItemOutcome { outcome: closed, consumed: false } } else { item };
        items[i] = (item, Source::LocalBudget);
    }
    let allowed = !enforced_denial
        && decided.allowed
        && items.iter().zip(asked).all(|((item, _), a)| a.shadow || item.outcome.allowed);
    Answered { allowed, items }
}
