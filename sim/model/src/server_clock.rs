//! Where the model's idea of "now" comes from: the Redis server's clock.
//!
//! Not to be confused with `redis_ratelimit::Clock`, the limiter's injected client clock, which counts
//! milliseconds: a [`ServerClock`] counts microseconds, as Redis's `TIME` reports them.
//!
//! TIME and key expiry read an injected [`ServerClock`] instead of the system clock. In a simulation
//! the host passes a clock built from simulated time (plus whatever skew the scenario wants), so
//! a run is reproducible from its seed; tests use a [`ManualServerClock`] they move by hand; only the
//! `redis-model` binary uses the [`SystemServerClock`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A source of wall-clock time for the model.
pub trait ServerClock: Send + Sync {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;
}

impl<C: ServerClock + ?Sized> ServerClock for Arc<C> {
    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }
}

/// The operating system's clock. The only place in the model that reads real time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemServerClock;

impl ServerClock for SystemServerClock {
    #[allow(clippy::disallowed_methods)] // The one sanctioned read of the system clock.
    fn now_micros(&self) -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
    }
}

/// A clock that only moves when told to: `set` it, `advance` it, or skew it backwards.
///
/// Cloning shares the same time (it is an `Arc` inside), so a test can keep a handle while the
/// model holds another.
#[derive(Debug, Clone, Default)]
pub struct ManualServerClock {
    micros: Arc<AtomicU64>,
}

impl ManualServerClock {
    /// A clock reading `micros` since the epoch.
    pub fn new(micros: u64) -> Self {
        ManualServerClock { micros: Arc::new(AtomicU64::new(micros)) }
    }

    /// A clock reading `ms` milliseconds since the epoch.
    pub fn from_millis(ms: u64) -> Self {
        Self::new(ms.saturating_mul(1000))
    }

    /// Jumps to `micros` since the epoch (backwards too: Redis must survive clock steps).
    pub fn set_micros(&self, micros: u64) {
        self.micros.store(micros, Ordering::SeqCst);
    }

    /// Moves forward by `micros`.
    pub fn advance_micros(&self, micros: u64) {
        self.micros.fetch_add(micros, Ordering::SeqCst);
    }

    /// Moves forward by `ms` milliseconds.
    pub fn advance_millis(&self, ms: u64) {
        self.advance_micros(ms.saturating_mul(1000));
    }
}

impl ServerClock for ManualServerClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(Ordering::SeqCst)
    }
}

/// A clock read through a closure, for hosts whose time lives elsewhere (for example
/// `turmoil::since_epoch()` plus a per-host offset).
pub struct FnServerClock<F>(pub F);

impl<F: Fn() -> u64 + Send + Sync> ServerClock for FnServerClock<F> {
    fn now_micros(&self) -> u64 {
        (self.0)()
    }
}
