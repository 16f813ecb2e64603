//! [`Limiter`]: one algorithm and quota over a store, a clock, a failure policy and a
//! circuit breaker. Built once, validated once, then shared (it is cheap to clone).

use std::sync::Arc;

mod builder;
#[cfg(test)]
mod future_size;
mod key_ops;

pub use builder::LimiterBuilder;

use crate::algo::Outcome;
use crate::breaker::{BreakerConfig, BreakerState};
use crate::clock::{Clock, SystemClock, TimeSource};
use crate::decision::{Decision, Degraded, Source};
use crate::error::Error;
use crate::health::{Guarded, Health, OnStoreEvent, StoreEvent};
use crate::key::KeySpace;
use crate::modes::lease::Serving;
use crate::modes::{self, Batching, DenialCache, Leases, ModeConfig};
use crate::policy::{self, Asked, FailurePolicy};
use crate::quota::{Algorithm, Quota};
use crate::scripts;
use crate::store::local::LocalStore;
use crate::store::{RedisStore, Store};

struct Inner {
    algorithm: Algorithm,
    quota: Quota,
    store: Store,
    clock: Arc<dyn Clock>,
    time_source: TimeSource,
    policy: FailurePolicy,
    budget: LocalStore,
    health: Health,
    keys: KeySpace,
    /// The limiter's name, or its quota: its metrics label.
    state: String,
    /// Whether `state` is a name given to it ([`LimiterBuilder::name`]).
    named: bool,
    /// What the keys of a decision under `quota` carry after the user key ([`key_state`]).
    key_state: String,
    /// The share of the limit at which an admitted decision counts as near it.
    near_limit_ratio: f64,
    /// Its decisions' counters, labelled by `state`.
    counter: crate::metrics::DecisionCounter,
    /// Its decisions read the block on their key ([`LimiterBuilder::blockable`]).
    blockable: bool,
    modes: modes::Runtime,
}

/// A rate limiter. See the crate docs for an example.
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("algorithm", &self.inner.algorithm)
            .field("state", &self.inner.state)
            .field("quota", &self.inner.quota)
            .field("time_source", &self.inner.time_source)
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The quota.
    pub fn quota(&self) -> Quota {
        self.inner.quota
    }

    /// The failure policy.
    pub fn policy(&self) -> FailurePolicy {
        self.inner.policy
    }

    /// The time source.
    pub fn time_source(&self) -> TimeSource {
        self.inner.time_source
    }

    /// What this limiter's Redis keys carry after the user key, `prefix:{key}:STATE:suffix`:
    /// its name ([`LimiterBuilder::name`]; a named token bucket's keys add its period,
    /// `NAME:p60000`), or else its quota (`q=100/60000ms`, see the README on keys and on
    /// migrating keys written without it). Its metrics are labelled by it.
    pub fn state_name(&self) -> &str {
        &self.inner.state
    }

    /// A snapshot of the circuit breaker's state, for metrics and tests.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.health.state()
    }

    /// Checks one request of `cost` units (0 = peek: report without consuming) against
    /// `key`. A denial is `Ok` with `allowed == false`; `Err` is for a bad key, a cost that
    /// could never fit, or a Redis reply the caller must hear about.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        let decision = self.decide(key, cost).await;
        self.measured(decision)
    }

    /// Checks one request of `cost` units against `key` under `quota` instead of the limiter's
    /// own: the quota of the client's plan, looked up per request. `quota` is validated as
    /// [`LimiterBuilder::build`] validates the limiter's, and the decision's `limit` is its.
    ///
    /// Which state it counts against is the rule a change of quota follows: a named limiter
    /// keeps one state per key for every quota (a client moving to a larger plan keeps what it
    /// used), except a token bucket under another period (its units are counted in periods:
    /// another period is another bucket); a limiter without a name keeps each quota's state
    /// apart, since its keys carry the quota. The round-trip modes (denial cache, leases,
    /// batching) serve the limiter's own quota: a request under another is one script call.
    ///
    /// ```
    /// use redis_ratelimit::{Algorithm, Limiter, Quota};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(2)).name("api").build().unwrap();
    /// let pro = Quota::per_minute(5);
    /// for _ in 0..2 {
    ///     assert!(limiter.check("free-user", 1).await.unwrap().allowed);
    /// }
    /// assert!(!limiter.check("free-user", 1).await.unwrap().allowed);
    /// let upgraded = limiter.check_with("free-user", pro, 1).await.unwrap();
    /// assert_eq!((upgraded.allowed, upgraded.limit, upgraded.remaining), (true, 5, 2));
    /// # });
    /// ```
    pub async fn check_with(&self, key: &str, quota: Quota, cost: u64) -> Result<Decision, Error> {
        if quota == self.inner.quota {
            return self.check(key, cost).await;
        }
        let decision = self.decide_under(key, &quota, cost).await;
        self.measured(decision)
    }

    /// What a request on `key` would be answered now, without consuming anything: a peek
    /// (`check(key, 0)`), for showing a client its quota. Not counted as a decision in the
    /// metrics, since nothing was asked of the limit.
    pub async fn state(&self, key: &str) -> Result<Decision, Error> {
        self.decide(key, 0).await
    }

    fn measured(&self, decision: Result<Decision, Error>) -> Result<Decision, Error> {
        if let Ok(d) = &decision {
            self.inner.counter.count(d, self.inner.near_limit_ratio);
        }
        decision
    }

    /// [`Limiter::check_with`] for a quota other than the limiter's own.
    async fn decide_under(&self, key: &str, quota: &Quota, cost: u64) -> Result<Decision, Error> {
        let inner = &*self.inner;
        inner.keys.check(key)?;
        quota.validate(inner.algorithm)?;
        let capacity = quota.capacity(inner.algorithm);
        if cost > capacity {
            return Err(Error::CostExceedsCapacity { cost, capacity });
        }
        let state = key_state(inner.algorithm, inner.named.then_some(inner.state.as_str()), quota);
        let now = inner.clock.now_ms();
        match &inner.store {
            Store::Local(local) => {
                let block = inner.blockable.then_some(key);
                let outcome = match (inner.local_space(&state, quota), block) {
                    (None, None) => local.apply(inner.algorithm, quota, key, now, cost),
                    (None, Some(block)) => local.apply_blockable(block, inner.algorithm, quota, key, now, cost),
                    (Some(space), block) => local.apply_in(&space, block, inner.algorithm, quota, key, now, cost),
                };
                Ok(Decision::from_store(outcome, capacity, now))
            }
            // Boxed, as in `decide`.
            Store::Redis(redis) => Box::pin(self.decide_under_on_redis(redis, key, quota, &state, now, cost)).await,
        }
    }

    /// [`Limiter::decide_under`] on Redis, at `now` on the limiter's clock.
    async fn decide_under_on_redis(
        &self,
        redis: &RedisStore,
        key: &str,
        quota: &Quota,
        state: &str,
        now: u64,
        cost: u64,
    ) -> Result<Decision, Error> {
        let inner = &*self.inner;
        let capacity = quota.capacity(inner.algorithm);
        let stem = inner.stem_in(key, state);
        let request = scripts::Request {
            algorithm: inner.algorithm,
            quota,
            stem: &stem,
            now_ms: (inner.time_source == TimeSource::Client).then_some(now),
            cost,
        };
        let block = inner.block_key(key);
        match inner.health.guard(&*inner.clock, now, redis, || redis.evaluate(request, block.as_deref())).await? {
            Guarded::Answered((outcome, decided_at_ms)) => Ok(Decision::from_store(outcome, capacity, decided_at_ms)),
            Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                Ok(inner.fallback(key, quota, at_ms, cost, why, retry_after_ms))
            }
        }
    }

    async fn decide(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        let inner = &*self.inner;
        inner.keys.check(key)?;
        let capacity = inner.capacity();
        if cost > capacity {
            return Err(Error::CostExceedsCapacity { cost, capacity });
        }
        let now = inner.clock.now_ms();
        match &inner.store {
            Store::Local(local) => {
                let outcome = match inner.blockable {
                    false => local.apply(inner.algorithm, &inner.quota, key, now, cost),
                    true => local.apply_blockable(key, inner.algorithm, &inner.quota, key, now, cost),
                };
                Ok(inner.store_decision(outcome, now))
            }
            // Boxed: the Redis path's future (the modes, the breaker, the round trip) is far
            // larger than the rest, and unboxed it would be built and moved on every in-process
            // decision too, which awaits nothing (it was most of the memory an in-process
            // decision touched). One allocation per round trip is nothing beside the trip.
            Store::Redis(redis) => Box::pin(self.decide_on_redis(redis, key, cost, now)).await,
        }
    }

    /// [`Limiter::decide`] on Redis, at `now` on the limiter's clock.
    async fn decide_on_redis(
        &self,
        redis: &Arc<RedisStore>,
        key: &str,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        let inner = &*self.inner;
        if let (Some(leases), true) = (&inner.modes.leases, cost > 0) {
            let serving = Serving {
                clock: &*inner.clock,
                health: &inner.health,
                algorithm: inner.algorithm,
                quota: &inner.quota,
                time_source: inner.time_source,
                stem: &|| inner.stem(key),
            };
            return match leases.check(serving, redis, key, cost, now).await? {
                Guarded::Answered(decision) => Ok(decision),
                Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                    Ok(inner.fallback(key, &inner.quota, at_ms, cost, why, retry_after_ms))
                }
            };
        }
        if let Some(retry) = inner.modes.denials.as_ref().and_then(|d| d.check(key, cost, now)) {
            return Ok(inner.cached_denial(now, retry));
        }
        let stem = inner.stem(key);
        let client_now = (inner.time_source == TimeSource::Client).then_some(now);
        let call = || async move {
            match &inner.modes.batcher {
                Some(batcher) => batcher.evaluate(redis, inner.algorithm, inner.quota, stem, client_now, cost).await,
                None => {
                    let request = scripts::Request {
                        algorithm: inner.algorithm,
                        quota: &inner.quota,
                        stem: &stem,
                        now_ms: client_now,
                        cost,
                    };
                    let block = inner.blockable.then(|| scripts::block_key(inner.algorithm, &stem));
                    redis.evaluate(request, block.as_deref()).await
                }
            }
        };
        match inner.health.guard(&*inner.clock, now, redis, call).await? {
            Guarded::Answered((outcome, decided_at_ms)) => {
                if let (Some(denials), false) = (&inner.modes.denials, outcome.allowed) {
                    denials.record(key, cost, now, outcome.retry_after_ms);
                }
                Ok(inner.store_decision(outcome, decided_at_ms))
            }
            // Down, slow or refusing this client: an outage, the failure policy answers.
            Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                Ok(inner.fallback(key, &inner.quota, at_ms, cost, why, retry_after_ms))
            }
        }
    }
}

/// What the keys of a decision under `quota` carry after the user key: the limiter's `name`
/// (for a token bucket and a fixed window with its period, since a bucket's units are counted
/// in periods and a window's key names its window by its index in periods: under another
/// period they are another bucket and another window, as a rule's are), or without a name the
/// quota itself ([`scripts::quota_state`]).
fn key_state(algorithm: Algorithm, name: Option<&str>, quota: &Quota) -> String {
    match name {
        Some(name) if matches!(algorithm, Algorithm::TokenBucket | Algorithm::FixedWindow) => {
            format!("{name}:p{}", quota.period_ms())
        }
        Some(name) => name.to_owned(),
        None => scripts::quota_state(algorithm, quota),
    }
}

impl Inner {
    /// `prefix:{escaped key}:STATE:`, the stem of every Redis key of `key`.
    fn stem(&self, key: &str) -> String {
        self.stem_in(key, &self.key_state)
    }

    /// For a blockable limiter, the Redis key of the block on `key`: under the limiter's own
    /// stem, whatever quota a request is decided under, so a block stops the key on every plan.
    fn block_key(&self, key: &str) -> Option<String> {
        self.blockable.then(|| scripts::block_key(self.algorithm, &self.stem(key)))
    }

    /// Where the local store keeps a key's state under `quota`, whose keys carry `state`:
    /// `None` where Redis would read the limiter's own keys, else a namespace of its own. A
    /// sliding window's Redis keys name their windows by their index in periods (`:sw:N`), so
    /// windows of another period are other keys even under one name; the local store, one
    /// state per key, keeps them apart by namespace.
    fn local_space(&self, state: &str, quota: &Quota) -> Option<String> {
        if self.algorithm == Algorithm::SlidingWindow && quota.period_ms() != self.quota.period_ms() {
            Some(format!("{state}:p{}", quota.period_ms()))
        } else {
            (state != self.key_state).then(|| state.to_owned())
        }
    }

    /// The stem of `key`'s Redis keys that carry `state`.
    fn stem_in(&self, key: &str, state: &str) -> String {
        let mut stem = self.keys.stem(key);
        stem.push_str(state);
        stem.push(':');
        stem
    }

    /// The most one request may cost: the algorithm's capacity, less what leases leave unused.
    fn capacity(&self) -> u64 {
        match &self.modes.leases {
            Some(leases) => leases.capacity(),
            None => self.quota.capacity(self.algorithm),
        }
    }

    fn store_decision(&self, o: Outcome, decided_at_ms: u64) -> Decision {
        Decision::from_store(o, self.capacity(), decided_at_ms)
    }

    /// The denial cache's answer: Redis denied this key moments ago and would still.
    fn cached_denial(&self, now: u64, retry_after_ms: u64) -> Decision {
        Decision {
            allowed: false,
            limit: self.capacity(),
            remaining: 0,
            retry_after_ms,
            reset_after_ms: retry_after_ms,
            source: Source::DenialCache,
            degraded: None,
            decided_at_ms: now,
        }
    }

    /// The failure policy's answer, the one-rule case of a request's rules
    /// ([`crate::policy::answer`]); `retry_after_ms` is when Redis may be asked again.
    fn fallback(&self, key: &str, quota: &Quota, now: u64, cost: u64, why: Degraded, retry_after_ms: u64) -> Decision {
        let asked = [Asked { policy: self.policy, key, cost, shadow: false }];
        let answered = policy::answer(&self.budget, &asked, now, retry_after_ms);
        let (item, source) = answered.items[0];
        let o = item.outcome;
        Decision {
            allowed: o.allowed,
            // What the answer enforced: the local budget when that answered.
            limit: match self.policy {
                FailurePolicy::LocalBudget { limit, .. } => limit,
                _ => quota.capacity(self.algorithm),
            },
            remaining: o.remaining,
            retry_after_ms: o.retry_after_ms,
            reset_after_ms: o.reset_after_ms,
            source,
            degraded: Some(why),
            decided_at_ms: now,
        }
    }
}
