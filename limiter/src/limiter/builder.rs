//! [`LimiterBuilder`]: every option of a [`Limiter`], checked together when it is built.

use super::*;
use crate::error::ConfigError;
use crate::options::{store_setters, StoreOptions};

/// Builds a [`Limiter`]; nothing is checked until [`LimiterBuilder::build`], which checks
/// everything and names the first field at fault.
#[must_use = "a builder does nothing until it is built"]
pub struct LimiterBuilder {
    algorithm: Algorithm,
    quota: Quota,
    store: StoreOptions,
    modes: ModeConfig,
    near_limit_ratio: f64,
    blockable: bool,
    max_excess: Option<u64>,
    #[cfg(feature = "harness")]
    ledger: Option<Arc<modes::lease::LeaseLedger>>,
}

impl Limiter {
    /// Starts building a limiter running `algorithm` with `quota`. Without a store it runs
    /// in process.
    pub fn builder(algorithm: Algorithm, quota: Quota) -> LimiterBuilder {
        LimiterBuilder {
            algorithm,
            quota,
            store: StoreOptions::default(),
            modes: ModeConfig::default(),
            near_limit_ratio: crate::metrics::DEFAULT_NEAR_LIMIT_RATIO,
            blockable: false,
            max_excess: None,
            #[cfg(feature = "harness")]
            ledger: None,
        }
    }
}

impl LimiterBuilder {
    store_setters!();

    /// Denies a key Redis just denied without asking again until its Retry-After (off by
    /// default; see [`crate::modes`]).
    pub fn denial_cache(mut self, cache: DenialCache) -> Self {
        self.modes.denial_cache = Some(cache);
        self
    }

    /// Leases units of busy keys and spends them locally (off by default; token bucket and GCRA
    /// only; see [`crate::modes`]).
    pub fn leases(mut self, leases: Leases) -> Self {
        self.modes.leases = Some(leases);
        self
    }

    /// Sends concurrent checks as one script call (off by default; see [`crate::modes`]).
    pub fn batching(mut self, batching: Batching) -> Self {
        self.modes.batching = Some(batching);
        self
    }

    /// For the harness (`harness::lease_ledger`): records what the leases do, per key, where
    /// it outlives the limiter.
    #[cfg(feature = "harness")]
    pub(crate) fn lease_ledger(mut self, ledger: Arc<modes::lease::LeaseLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Names the limiter's state in Redis (letters, digits, `.`, `_`, `-`; at most 64): its
    /// keys become `prefix:{key}:NAME:suffix` instead of carrying the quota. Limiters of one
    /// prefix and algorithm share state exactly when they have the same name, so a name is how
    /// instances keep their counters across a change of quota (a larger limit applies to what
    /// was already counted). A token bucket's keys carry its period beside the name
    /// (`NAME:p60000`): its units are counted in periods, so a bucket under another period is
    /// another bucket. Without a name, a limiter's keys carry its quota and no limiter of
    /// another quota ever reads them.
    pub fn name(mut self, name: &str) -> Self {
        self.store.name = Some(name.to_owned());
        self
    }

    /// The share of the limit (above 0, at most 1; default 0.8) at which an admitted decision
    /// also counts in `limiter_near_limit_total` ([`crate::metrics`]): an early warning that a
    /// key is about to be limited.
    pub fn near_limit_ratio(mut self, ratio: f64) -> Self {
        self.near_limit_ratio = ratio;
        self
    }

    /// Makes the limiter blockable: its decisions read the block on their key, so
    /// [`Limiter::block`] can stop a key for a while (a support team stopping an abusive
    /// client, a sign-in form locking an account after repeated failures). It costs Redis one
    /// more read per decision, which is why it is off unless asked for. Cannot be combined with
    /// leases, which spend units without asking Redis.
    pub fn blockable(mut self) -> Self {
        self.blockable = true;
        self
    }

    /// The most [`Limiter::reconcile`] charges for one request beyond what it reserved (default
    /// and at most: the quota's capacity, its limit or its burst). The rest of a larger excess
    /// is not charged, and the reconciliation says how much. It bounds how far over its
    /// limit a client whose requests cost more than they reserved can go: in any interval, by
    /// at most this many units for each of its requests in flight at once.
    pub fn max_excess(mut self, units: u64) -> Self {
        self.max_excess = Some(units);
        self
    }

    /// Validates everything and builds the limiter.
    pub fn build(self) -> Result<Limiter, ConfigError> {
        self.quota.validate(self.algorithm)?;
        let keys = self.store.validate()?;
        crate::metrics::check_near_limit_ratio(self.near_limit_ratio)?;
        let capacity = self.quota.capacity(self.algorithm);
        let max_excess = self.max_excess.unwrap_or(capacity);
        if max_excess > capacity {
            return Err(ConfigError::new(
                "max_excess",
                format!(
                    "must be at most the quota's capacity ({capacity}): a key owes at most one capacity, got {max_excess}"
                ),
            ));
        }
        let name = self.store.name.clone();
        let state = name.clone().unwrap_or_else(|| crate::scripts::quota_state(self.algorithm, &self.quota));
        let key_state = crate::charge::state_name(self.algorithm, name.as_deref(), self.quota.period_ms(), &self.quota);
        let has_redis = self.store.redis.is_some();
        self.modes.validate(self.algorithm, &self.quota, has_redis, self.blockable)?;
        let (time_source, policy, max_local_keys) =
            (self.store.time_source, self.store.policy, self.store.max_local_keys);
        let gate = self.store.gate(keys, &state);
        #[allow(unused_mut)] // only the harness records leases
        let mut modes = modes::Runtime::new(self.modes, self.algorithm, &self.quota, max_local_keys, self.blockable);
        #[cfg(feature = "harness")]
        if let (Some(book), Some(ledger)) = (&mut modes.leases, self.ledger) {
            book.set_ledger(ledger);
        }
        Ok(Limiter {
            inner: Arc::new(Inner {
                algorithm: self.algorithm,
                quota: self.quota,
                gate,
                time_source,
                policy,
                named: name.is_some(),
                key_state,
                counter: crate::metrics::DecisionCounter::new(&state),
                state,
                near_limit_ratio: self.near_limit_ratio,
                blockable: self.blockable,
                max_excess,
                modes,
            }),
        })
    }
}
