//! Fewer Redis round trips: three modes, each off by default, each with what it costs written
//! down and checked by the simulator against the exact oracle.
//!
//! | mode | what it saves | what it costs |
//! |---|---|---|
//! | [`DenialCache`] | the round trips of a key Redis just denied | nothing, for every algorithm (below) |
//! | [`Leases`] (token bucket, GCRA) | most round trips of a busy key | under-admission only, bounded (below) |
//! | [`Batching`] | one script call per batch instead of per check | nothing: only latency |
//!
//! **Denial cache.** After Redis denies a key for cost `c` with `retry_after_ms = R`, this
//! instance denies that key locally, for cost `c` or more, until `R` after it *sent* the call
//! (Redis decided no earlier), shortened by the clock tolerance. Until then Redis would deny it
//! too: every algorithm's Retry-After is exact for the state Redis decided on, and other
//! instances can only make that state worse (admit more) before then; time only refills, and
//! `R` counts the refill. So the cache changes no decision, as long as the instance's clock runs
//! within the tolerance of Redis's and Redis keeps its data (a Redis that loses a key forgives
//! it at once; the cache keeps the denial until `R`), and no one forgives the key meanwhile: a
//! reset, a refund or a lifted block reaches this instance's cache at once, another instance's
//! when its cached denial ends. What it saves: a flood on one denied key
//! costs Redis nothing until the key can admit again.
//!
//! **Leases.** An instance takes up to `k` units of a key in one script call, then spends them
//! locally. Leased units leave the shared budget, and each is placed where the algorithm itself
//! would have admitted a request at any moment of the lease's lifetime (see
//! `algo::lease`), so the instances together never admit more than the algorithm's own bound,
//! `B + L * d / T` in any interval `d`, whatever the instances, partitions, crashes and clocks
//! do. The price is under-admission: a unit is lost when it is leased and never spent (its
//! holder's demand stopped, it crashed, the lease expired, its give-back came too late) and,
//! when a key is idle, the refill of one lifetime (`L * lifetime / T` units of the burst, which a
//! lease starting now cannot use). `k` is half a lifetime of this instance's own recent demand
//! for the key, so a lease is usually spent well within its lifetime and a quiet instance holds
//! little; a lease starts when all of it fits (up to a horizon ahead), so leases stay whole
//! however busy the key. The sliding log and the window counters cannot lease exactly and
//! refuse the mode when the limiter is built.
//!
//! **Batching.** Checks of one instance that wait together (by default, those that arrive while
//! the previous batch is in flight) go to Redis as one script call, which runs the algorithm's
//! own script once per request, in order. Decisions are those of the same calls made one by
//! one; only latency and the number of calls change. With `per_slot`, a batch holds keys of one
//! Redis Cluster slot only, as a cluster requires.
//!
//! Every instance limiting a key must run the same modes: a lease's bound counts on every
//! other instance leasing too.

pub(crate) mod batch;
pub(crate) mod denial;
pub(crate) mod lease;
pub(crate) mod slot;
pub(crate) mod wire;

use std::time::Duration;

use crate::duration::whole_ms;
use crate::error::ConfigError;
use crate::quota::{Algorithm, Quota};

/// The denial cache (see the module docs). `DenialCache::default()` keeps up to 100,000 keys
/// and allows clocks 5% apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a mode applies only once a limiter builder is given it"]
pub struct DenialCache {
    max_keys: usize,
    clock_tolerance_ppm: u64,
}

impl Default for DenialCache {
    fn default() -> Self {
        DenialCache { max_keys: 100_000, clock_tolerance_ppm: 50_000 }
    }
}

impl DenialCache {
    /// Keeps at most `keys` denied keys (at least 1).
    pub fn with_max_keys(mut self, keys: usize) -> Self {
        self.max_keys = keys;
        self
    }

    /// How far (parts per million) this instance's clock may run slower than Redis's without
    /// the cache holding a denial past Redis's Retry-After: each cached denial is shortened by
    /// that share.
    pub fn with_clock_tolerance_ppm(mut self, ppm: u64) -> Self {
        self.clock_tolerance_ppm = ppm;
        self
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.max_keys == 0 {
            return Err(ConfigError::new("denial_cache.max_keys", "must be at least 1, got 0".into()));
        }
        if self.clock_tolerance_ppm >= 1_000_000 {
            return Err(ConfigError::new(
                "denial_cache.clock_tolerance_ppm",
                format!("must be below 1,000,000 (100%), got {}", self.clock_tolerance_ppm),
            ));
        }
        Ok(())
    }
}

/// Leases (see the module docs). `Leases::default()`: lifetime 100 ms, leases start at most
/// four lifetimes ahead, at most a quarter of what one request may cost per lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a mode applies only once a limiter builder is given it"]
pub struct Leases {
    lifetime_ms: u64,
    horizon_ms: Option<u64>,
    max_units: Option<u64>,
    clock_tolerance_ppm: u64,
}

impl Default for Leases {
    fn default() -> Self {
        Leases { lifetime_ms: 100, horizon_ms: None, max_units: None, clock_tolerance_ppm: 50_000 }
    }
}

impl Leases {
    /// How long a lease may be spent after it starts (whole milliseconds). Longer leases save more round trips
    /// of a slow key and cost `L * lifetime / T` units of burst when a key is idle.
    pub fn with_lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime_ms = whole_ms(lifetime);
        self
    }

    /// How far ahead a lease may start when the key's budget is reserved by others (
    /// default: four lifetimes, room for a few busy instances' leases in the queue). Further,
    /// the instance denies and asks again later.
    pub fn with_horizon(mut self, horizon: Duration) -> Self {
        self.horizon_ms = Some(whole_ms(horizon));
        self
    }

    /// The most units one lease takes (default: a quarter of the lease capacity).
    pub fn with_max_units(mut self, units: u64) -> Self {
        self.max_units = Some(units);
        self
    }

    /// How far (parts per million) this instance's clock may run slower than Redis's: a lease
    /// ends that share of its lifetime early on this instance's clock.
    pub fn with_clock_tolerance_ppm(mut self, ppm: u64) -> Self {
        self.clock_tolerance_ppm = ppm;
        self
    }

    /// The lifetime.
    pub fn lifetime(&self) -> Duration {
        Duration::from_millis(self.lifetime_ms)
    }

    /// The most one request may cost under these leases: the burst less the lifetime's refill.
    pub fn capacity(&self, algorithm: Algorithm, quota: &Quota) -> u64 {
        crate::algo::lease::capacity(algorithm, quota, self.lifetime_ms)
    }

    fn validate(&self, algorithm: Algorithm, quota: &Quota) -> Result<(), ConfigError> {
        if !crate::algo::lease::can_lease(algorithm) {
            return Err(ConfigError::new(
                "leases",
                format!(
                    "the {algorithm} algorithm cannot lease exactly: a leased unit is spent after Redis counted it, \
                     so {}; leases work with token-bucket and gcra",
                    match algorithm {
                        Algorithm::SlidingLog => "two windows' worth could land in one window of the log",
                        _ => "units counted in one window could be spent in the next",
                    }
                ),
            ));
        }
        if self.lifetime_ms == 0 {
            return Err(ConfigError::new("leases.lifetime", "must be at least 1 ms, got 0".into()));
        }
        if self.clock_tolerance_ppm >= 1_000_000 {
            return Err(ConfigError::new(
                "leases.clock_tolerance_ppm",
                format!("must be below 1,000,000 (100%), got {}", self.clock_tolerance_ppm),
            ));
        }
        if self.capacity(algorithm, quota) == 0 {
            return Err(ConfigError::new(
                "leases.lifetime",
                format!(
                    "{} ms refills the whole burst of {} at {} per {} ms: a lease could hold nothing; use a shorter \
                     lifetime or a larger burst",
                    self.lifetime_ms,
                    quota.burst(),
                    quota.limit(),
                    quota.period_ms()
                ),
            ));
        }
        if self.max_units == Some(0) {
            return Err(ConfigError::new("leases.max_units", "must be at least 1, got 0".into()));
        }
        Ok(())
    }
}

/// Batching (see the module docs). `Batching::default()`: no waiting beyond what is in flight,
/// at most 128 checks per call, one batch for all keys (a standalone Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a mode applies only once a limiter builder is given it"]
pub struct Batching {
    window_ms: u64,
    max_batch: usize,
    per_slot: bool,
}

impl Default for Batching {
    fn default() -> Self {
        Batching { window_ms: 0, max_batch: 128, per_slot: false }
    }
}

impl Batching {
    /// How long the first check of a batch waits for others. Zero, the default, waits for
    /// nothing: a batch is whatever arrived while the previous one was in flight.
    pub fn with_window(mut self, window: Duration) -> Self {
        self.window_ms = whole_ms(window);
        self
    }

    /// The most checks in one call (at least 1).
    pub fn with_max_batch(mut self, checks: usize) -> Self {
        self.max_batch = checks;
        self
    }

    /// Whether a batch holds only keys of one Redis Cluster slot (needed on a cluster).
    pub fn with_per_slot(mut self, per_slot: bool) -> Self {
        self.per_slot = per_slot;
        self
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.max_batch == 0 {
            return Err(ConfigError::new("batching.max_batch", "must be at least 1, got 0".into()));
        }
        Ok(())
    }
}

/// The modes a limiter was built with, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ModeConfig {
    pub(crate) denial_cache: Option<DenialCache>,
    pub(crate) leases: Option<Leases>,
    pub(crate) batching: Option<Batching>,
}

impl ModeConfig {
    /// Refuses what cannot work, naming the mode and the reason.
    pub(crate) fn validate(
        &self,
        algorithm: Algorithm,
        quota: &Quota,
        on_redis: bool,
        blockable: bool,
    ) -> Result<(), ConfigError> {
        let any = self.denial_cache.is_some() || self.leases.is_some() || self.batching.is_some();
        if any && !on_redis {
            return Err(ConfigError::new(
                "modes",
                "the denial cache, leases and batching save Redis round trips: they need a Redis store (.redis(..))"
                    .into(),
            ));
        }
        if self.leases.is_some() && self.batching.is_some() {
            return Err(ConfigError::new(
                "batching",
                "cannot be combined with leases: a leased key is decided locally, with nothing left to batch".into(),
            ));
        }
        if self.leases.is_some() && blockable {
            return Err(ConfigError::new(
                "leases",
                "cannot be combined with blocks (.blockable()): a leased unit is spent without asking Redis, so \
                 a block could not reach the instances holding leases"
                    .into(),
            ));
        }
        if let Some(d) = &self.denial_cache {
            d.validate()?;
        }
        if let Some(l) = &self.leases {
            l.validate(algorithm, quota)?;
        }
        if let Some(b) = &self.batching {
            b.validate()?;
        }
        Ok(())
    }
}

/// The modes at run time: their state and their machinery.
pub(crate) struct Runtime {
    pub(crate) denials: Option<denial::Denials>,
    pub(crate) leases: Option<lease::LeaseBook>,
    pub(crate) batcher: Option<std::sync::Arc<batch::Batcher>>,
}

impl Runtime {
    pub(crate) fn new(
        config: ModeConfig,
        algorithm: Algorithm,
        quota: &Quota,
        max_keys: usize,
        blockable: bool,
    ) -> Runtime {
        Runtime {
            denials: config.denial_cache.map(denial::Denials::new),
            leases: config.leases.map(|l| lease::LeaseBook::new(l, algorithm, quota, max_keys)),
            batcher: config.batching.map(|b| std::sync::Arc::new(batch::Batcher::new(b, blockable))),
        }
    }
}
