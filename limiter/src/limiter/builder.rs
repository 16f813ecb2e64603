//! [`LimiterBuilder`]: every option of a [`Limiter`], checked together when it is built.

use super::*;
use crate::error::ConfigError;

/// Builds a [`Limiter`]; nothing is checked until [`LimiterBuilder::build`], which checks
/// everything and names the first field at fault.
#[must_use = "a builder does nothing until it is built"]
pub struct LimiterBuilder {
    algorithm: Algorithm,
    quota: Quota,
    redis: Option<RedisStore>,
    clock: Arc<dyn Clock>,
    time_source: TimeSource,
    policy: FailurePolicy,
    breaker: BreakerConfig,
    on_store_event: Option<OnStoreEvent>,
    prefix: String,
    name: Option<String>,
    max_key_len: usize,
    max_local_keys: usize,
    modes: ModeConfig,
    near_limit_ratio: f64,
    blockable: bool,
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
            redis: None,
            clock: Arc::new(SystemClock),
            time_source: TimeSource::Server,
            policy: FailurePolicy::FailOpen,
            breaker: BreakerConfig::default(),
            on_store_event: None,
            prefix: crate::key::DEFAULT_PREFIX.into(),
            name: None,
            max_key_len: crate::key::DEFAULT_MAX_KEY_LEN,
            max_local_keys: crate::store::local::DEFAULT_MAX_KEYS,
            modes: ModeConfig::default(),
            near_limit_ratio: crate::metrics::DEFAULT_NEAR_LIMIT_RATIO,
            blockable: false,
            #[cfg(feature = "harness")]
            ledger: None,
        }
    }
}

impl LimiterBuilder {
    /// Keeps state in Redis.
    pub fn redis(mut self, store: RedisStore) -> Self {
        self.redis = Some(store);
        self
    }

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

    /// Keeps state in this process (the default).
    pub fn local(mut self) -> Self {
        // Built in `build`, so a `max_local_keys` set after this still applies.
        self.redis = None;
        self
    }

    /// The instance's clock (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Server time (default) or client time.
    pub fn time_source(mut self, source: TimeSource) -> Self {
        self.time_source = source;
        self
    }

    /// What to do when Redis cannot be asked (default: fail open, as ADR-002).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Circuit breaker thresholds.
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// Hears each change of the store's health: the breaker opening (with the cause: the
    /// server and what it said, a timeout, a refused password or certificate), its cause
    /// changing, and its closing again. One call per change, never one per request; log it.
    pub fn on_store_event(mut self, report: impl Fn(&StoreEvent) + Send + Sync + 'static) -> Self {
        self.on_store_event = Some(Arc::new(report));
        self
    }

    /// Key prefix (default `ratelimiter`).
    pub fn key_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.into();
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
        self.name = Some(name.to_owned());
        self
    }

    /// Longest user key accepted, in bytes (default 512).
    pub fn max_key_len(mut self, bytes: usize) -> Self {
        self.max_key_len = bytes;
        self
    }

    /// Most keys kept in process by the local store, the local budget and the leases, each
    /// (default 100,000; the denial cache has its own, `DenialCache::with_max_keys`): memory stays bounded whatever keys clients send, and
    /// a full table makes room in O(1) amortized by giving up a key not asked for lately.
    pub fn max_local_keys(mut self, keys: usize) -> Self {
        self.max_local_keys = keys;
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

    /// Validates everything and builds the limiter.
    pub fn build(self) -> Result<Limiter, ConfigError> {
        self.quota.validate(self.algorithm)?;
        self.policy.validate()?;
        self.breaker.validate()?;
        crate::metrics::check_near_limit_ratio(self.near_limit_ratio)?;
        if self.max_local_keys == 0 {
            return Err(ConfigError::new("max_local_keys", "must be at least 1, got 0".into()));
        }
        let keys = KeySpace::new(&self.prefix, self.max_key_len)?;
        let state = match &self.name {
            Some(name) => {
                crate::key::check_name(name).map_err(|m| ConfigError::new("name", m))?;
                name.clone()
            }
            None => crate::scripts::quota_state(self.algorithm, &self.quota),
        };
        let key_state =
            crate::charge::state_name(self.algorithm, self.name.as_deref(), self.quota.period_ms(), &self.quota);
        self.modes.validate(self.algorithm, &self.quota, self.redis.is_some(), self.blockable)?;
        let health = Health::new(self.breaker, self.on_store_event, &state);
        let gate = Gate::new(self.redis.map(Arc::new), self.max_local_keys, keys, self.clock, health);
        #[allow(unused_mut)] // only the harness records leases
        let mut modes =
            modes::Runtime::new(self.modes, self.algorithm, &self.quota, self.max_local_keys, self.blockable);
        #[cfg(feature = "harness")]
        if let (Some(book), Some(ledger)) = (&mut modes.leases, self.ledger) {
            book.set_ledger(ledger);
        }
        Ok(Limiter {
            inner: Arc::new(Inner {
                algorithm: self.algorithm,
                quota: self.quota,
                gate,
                time_source: self.time_source,
                policy: self.policy,
                named: self.name.is_some(),
                key_state,
                counter: crate::metrics::DecisionCounter::new(&state),
                state,
                near_limit_ratio: self.near_limit_ratio,
                blockable: self.blockable,
                modes,
            }),
        })
    }
}
