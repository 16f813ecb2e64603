//! [`Limiter`]: one algorithm and quota over a store, a clock, a failure policy and a
//! circuit breaker. Built once, validated once, then shared (it is cheap to clone).

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

mod builder;
mod check;
#[cfg(test)]
mod future_size;
mod key_ops;

pub use builder::LimiterBuilder;

use crate::breaker::BreakerState;
use crate::charge::{self, Charge, StateKey};
use crate::clock::TimeSource;
use crate::decision::{Decision, Source};
use crate::error::Error;
use crate::gate::Gate;
use crate::health::Guarded;
use crate::modes::{self, Batching, DenialCache, Leases, ModeConfig};
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};
use crate::store::local::LocalStore;

struct Inner {
    algorithm: Algorithm,
    quota: Quota,
    gate: Gate,
    time_source: TimeSource,
    policy: FailurePolicy,
    /// The limiter's name, or its quota: its metrics label.
    state: String,
    /// Whether `state` is a name given to it ([`LimiterBuilder::name`]).
    named: bool,
    /// What the keys of a decision under `quota` carry after the user key
    /// ([`charge::state_name`]).
    key_state: String,
    /// The share of the limit at which an admitted decision counts as near it.
    near_limit_ratio: f64,
    /// Its decisions' counters, labelled by `state`.
    counter: crate::metrics::DecisionCounter,
    /// Its decisions read the block on their key ([`LimiterBuilder::blockable`]).
    blockable: bool,
    /// The most a reconciliation charges beyond a reservation ([`LimiterBuilder::max_excess`]).
    max_excess: u64,
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
        self.inner.gate.breaker_state()
    }

    /// Checks one request on `key`: whether it may proceed, and what is left. A denial is
    /// `Ok` with `allowed == false` (the decision is `#[must_use]`: dropping it unread admits
    /// everything); `Err` is for a bad key or a Redis reply the caller must hear about
    /// ([`Error::kind`]).
    pub fn check<'a>(&'a self, key: &'a str) -> impl Future<Output = Result<Decision, Error>> + Send + 'a {
        self.check_n(key, 1)
    }

    /// Checks one request of `n` units on `key` (a batch of `n` items, a request weighing
    /// `n`); `n == 0` asks how a request would be answered without consuming anything.
    /// A cost no request could ever fit is [`Error::CostExceedsCapacity`].
    pub fn check_n<'a>(&'a self, key: &'a str, n: u64) -> impl Future<Output = Result<Decision, Error>> + Send + 'a {
        check::Check::new(self, key, n)
    }

    /// Checks one request on `key` under `quota` instead of the limiter's own: the quota of
    /// the client's plan, looked up per request ([`Limiter::check_n_with`] for `n` units). `quota` is validated as
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
    ///     assert!(limiter.check("free-user").await.unwrap().allowed);
    /// }
    /// assert!(!limiter.check("free-user").await.unwrap().allowed);
    /// let upgraded = limiter.check_with("free-user", pro).await.unwrap();
    /// assert_eq!((upgraded.allowed, upgraded.capacity, upgraded.remaining), (true, 5, 2));
    /// # });
    /// ```
    pub async fn check_with(&self, key: &str, quota: Quota) -> Result<Decision, Error> {
        self.check_n_with(key, quota, 1).await
    }

    /// [`Limiter::check_with`] for a request of `n` units.
    pub async fn check_n_with(&self, key: &str, quota: Quota, n: u64) -> Result<Decision, Error> {
        if quota == self.inner.quota {
            return self.check_n(key, n).await;
        }
        let decision = self.decide_under(key, &quota, n).await;
        self.measured(decision)
    }

    /// What a request on `key` would be answered now, without consuming anything: a peek of
    /// its state, for showing a client its quota. Not counted as a decision in the metrics,
    /// since nothing was asked of the limit. No failure policy can stand in for the store's
    /// own reading: with Redis unreachable it is [`Error::Unavailable`].
    pub async fn state(&self, key: &str) -> Result<Decision, Error> {
        let inner = &*self.inner;
        inner.gate.keys().check(key)?;
        let decision = inner.gate.peek(&inner.own_charge(key, 0)).await?;
        Ok(Decision { capacity: inner.capacity(), ..decision })
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
        inner.gate.keys().check(key)?;
        quota.validate(inner.algorithm)?;
        let capacity = quota.capacity(inner.algorithm);
        if cost > capacity {
            return Err(Error::CostExceedsCapacity { cost, capacity });
        }
        let name = inner.named.then_some(inner.state.as_str());
        let state = charge::state_name(inner.algorithm, name, inner.quota.period_ms(), quota);
        let now = inner.gate.clock().now_ms();
        inner.gate.decide(&inner.charge(key, *quota, Some(state), cost), now, None).await
    }

    /// The in-process store, when a decision needs no round trip: state kept in this process
    /// and no mode (the modes serve Redis). None otherwise.
    #[inline]
    fn in_process(&self) -> Option<&LocalStore> {
        let inner = &*self.inner;
        if inner.modes.leases.is_some() || inner.modes.denials.is_some() {
            return None;
        }
        inner.gate.in_process()
    }

    /// [`Limiter::decide`] made now, on the in-process store `local`.
    fn decide_now(&self, local: &LocalStore, key: &str, cost: u64) -> Result<Decision, Error> {
        let inner = &*self.inner;
        self.admissible(key, cost)?;
        // The clock first and the charge (a few hundred bytes) last, built where it is used.
        // Returned from a helper in a `Result`, or built before the clock is read and kept
        // across its call, the charge was copied on the way: each copy a twentieth of an
        // in-process decision's instructions.
        let now = inner.gate.clock().now_ms();
        let charge = inner.own_charge(key, cost);
        Ok(local.decision(&charge, now))
    }

    async fn decide(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        let inner = &*self.inner;
        self.admissible(key, cost)?;
        let (charge, now) = (inner.own_charge(key, cost), inner.gate.clock().now_ms());
        if inner.modes.leases.is_some() || inner.modes.denials.is_some() {
            // Boxed, as the gate boxes its Redis path: the modes only run on Redis.
            return Box::pin(self.decide_with_modes(&charge, key, cost, now)).await;
        }
        inner.gate.decide(&charge, now, inner.modes.batcher.as_ref()).await
    }

    /// Whether a request of `cost` on `key` may be asked of the limiter's own quota at all: the
    /// key within its bounds and the cost within the capacity.
    fn admissible(&self, key: &str, cost: u64) -> Result<(), Error> {
        let inner = &*self.inner;
        inner.gate.keys().check(key)?;
        let capacity = inner.capacity();
        if cost > capacity {
            return Err(Error::CostExceedsCapacity { cost, capacity });
        }
        Ok(())
    }

    /// [`Limiter::decide`] with leases or the denial cache, at `now` on the limiter's clock.
    async fn decide_with_modes(&self, charge: &Charge<'_>, key: &str, cost: u64, now: u64) -> Result<Decision, Error> {
        let inner = &*self.inner;
        let gate = &inner.gate;
        if let (Some(leases), Some(redis), true) = (&inner.modes.leases, gate.redis(), cost > 0) {
            let stem = || charge.stem(gate.keys());
            return match leases.check(gate.clock(), gate.health(), charge, stem, redis, key, cost, now).await? {
                Guarded::Answered(decision) => Ok(decision),
                Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                    Ok(gate.fallback_one(charge, at_ms, why, retry_after_ms))
                }
            };
        }
        if let Some(retry) = inner.modes.denials.as_ref().and_then(|d| d.check(key, cost, now)) {
            return Ok(inner.cached_denial(now, retry));
        }
        let mut decision = gate.decide(charge, now, inner.modes.batcher.as_ref()).await?;
        if let (Some(denials), Source::Store, false) = (&inner.modes.denials, decision.source, decision.allowed) {
            denials.record(key, cost, now, crate::duration::whole_ms(decision.retry_after));
        }
        if decision.source == Source::Store {
            decision.capacity = inner.capacity();
        }
        Ok(decision)
    }
}

impl Inner {
    /// The charge of a request of `cost` on `key` under `quota`, counted against the state
    /// named `state` (None: the limiter's own).
    fn charge<'a>(&'a self, key: &'a str, quota: Quota, state: Option<String>, cost: u64) -> Charge<'a> {
        // Another quota whose state name is the limiter's own shares its state.
        let own = state.as_deref().is_none_or(|s| s == self.key_state);
        let state = state.map_or(Cow::Borrowed(self.key_state.as_str()), Cow::Owned);
        Charge {
            name: Cow::Borrowed(&self.state),
            algorithm: self.algorithm,
            quota,
            state: StateKey {
                tag: Cow::Borrowed(key),
                rest: Cow::Borrowed(""),
                state,
                home: Cow::Borrowed(&self.key_state),
                alone: true,
                own,
            },
            time_source: self.time_source,
            cost,
            blockable: self.blockable,
            shadow: false,
            policy: self.policy,
        }
    }

    /// The charge of `cost` on `key` under the limiter's own quota.
    fn own_charge<'a>(&'a self, key: &'a str, cost: u64) -> Charge<'a> {
        self.charge(key, self.quota, None, cost)
    }

    /// The most one request may cost: the algorithm's capacity, less what leases leave unused.
    fn capacity(&self) -> u64 {
        match &self.modes.leases {
            Some(leases) => leases.capacity(),
            None => self.quota.capacity(self.algorithm),
        }
    }

    /// The denial cache's answer: Redis denied this key moments ago and would still.
    fn cached_denial(&self, now: u64, retry_after_ms: u64) -> Decision {
        Decision {
            allowed: false,
            capacity: self.capacity(),
            remaining: 0,
            retry_after: Duration::from_millis(retry_after_ms),
            reset_after: Duration::from_millis(retry_after_ms),
            source: Source::DenialCache,
            degraded: None,
            decided_at_ms: now,
        }
    }
}
