//! What every front door built over a store is given alike: where state lives, the clock and
//! whose clock decides, the failure policy and the breaker, how keys are named and bounded. A
//! [`crate::LimiterBuilder`] and a [`crate::ConcurrencyLimiterBuilder`] each hold one
//! [`StoreOptions`] and take its setters from [`store_setters!`], so an option means the same
//! on both and is checked in one place ([`StoreOptions::gate`]).

use std::sync::Arc;

use crate::breaker::BreakerConfig;
use crate::clock::{Clock, SystemClock, TimeSource};
use crate::error::ConfigError;
use crate::gate::Gate;
use crate::health::{Health, OnStoreEvent};
use crate::key::KeySpace;
use crate::policy::FailurePolicy;
use crate::store::RedisStore;

/// See the module docs.
pub(crate) struct StoreOptions {
    pub(crate) redis: Option<Arc<RedisStore>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) time_source: TimeSource,
    pub(crate) policy: FailurePolicy,
    pub(crate) breaker: BreakerConfig,
    pub(crate) on_store_event: Option<OnStoreEvent>,
    pub(crate) prefix: String,
    pub(crate) name: Option<String>,
    pub(crate) max_key_len: usize,
    pub(crate) max_local_keys: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
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
        }
    }
}

impl StoreOptions {
    /// Checks every option but the name's use, first field at fault named: the policy, the
    /// breaker, the table bound, the key space and the name itself.
    pub(crate) fn validate(&self) -> Result<KeySpace, ConfigError> {
        self.policy.validate()?;
        self.breaker.validate()?;
        if self.max_local_keys == 0 {
            return Err(ConfigError::new("max_local_keys", "must be at least 1, got 0".into()));
        }
        if let Some(name) = &self.name {
            crate::key::check_name(name).map_err(|m| ConfigError::new("name", m))?;
        }
        KeySpace::new(&self.prefix, self.max_key_len)
    }

    /// The gate of a front door whose state and metrics are labelled `state`, over the key
    /// space `keys` ([`StoreOptions::validate`]).
    pub(crate) fn gate(self, keys: KeySpace, state: &str) -> Gate {
        let health = Health::new(self.breaker, self.on_store_event, state);
        Gate::new(self.redis, self.max_local_keys, keys, self.clock, health)
    }
}

/// The setters of [`StoreOptions`] on a builder whose field `store` holds them. `name` is each
/// builder's own: what a name does to the keys depends on what is limited.
macro_rules! store_setters {
    () => {
        /// Keeps state in Redis. An `Arc<RedisStore>` shares one store, and its connections,
        /// with other limiters.
        pub fn redis(mut self, store: impl Into<std::sync::Arc<$crate::RedisStore>>) -> Self {
            self.store.redis = Some(store.into());
            self
        }

        /// Keeps state in this process (the default).
        pub fn local(mut self) -> Self {
            // The store is made when built, so a `max_local_keys` set after this still applies.
            self.store.redis = None;
            self
        }

        /// The instance's clock (default: the system clock).
        pub fn clock(mut self, clock: std::sync::Arc<dyn $crate::Clock>) -> Self {
            self.store.clock = clock;
            self
        }

        /// Server time (default) or client time.
        pub fn time_source(mut self, source: $crate::TimeSource) -> Self {
            self.store.time_source = source;
            self
        }

        /// What to do when Redis cannot be asked (default: fail open, as ADR-002).
        pub fn failure_policy(mut self, policy: $crate::FailurePolicy) -> Self {
            self.store.policy = policy;
            self
        }

        /// Circuit breaker thresholds.
        pub fn breaker(mut self, config: $crate::BreakerConfig) -> Self {
            self.store.breaker = config;
            self
        }

        /// Hears each change of the store's health: the breaker opening (with the cause: the
        /// server and what it said, a timeout, a refused password or certificate), its cause
        /// changing, and its closing again. One call per change, never one per request; log it.
        pub fn on_store_event(mut self, report: impl Fn(&$crate::StoreEvent) + Send + Sync + 'static) -> Self {
            self.store.on_store_event = Some(std::sync::Arc::new(report));
            self
        }

        /// Key prefix (default `ratelimiter`).
        pub fn key_prefix(mut self, prefix: &str) -> Self {
            self.store.prefix = prefix.into();
            self
        }

        /// Longest user key accepted, in bytes (default 512).
        pub fn max_key_len(mut self, bytes: usize) -> Self {
            self.store.max_key_len = bytes;
            self
        }

        /// Most keys kept in process by each of its tables (the local store, the local budget,
        /// the leases; default 100,000; the denial cache has its own,
        /// `DenialCache::with_max_keys`): memory stays bounded whatever keys clients send, and a
        /// full table makes room in O(1) amortized by giving up a key not asked for lately.
        pub fn max_local_keys(mut self, keys: usize) -> Self {
            self.store.max_local_keys = keys;
            self
        }
    };
}
pub(crate) use store_setters;
