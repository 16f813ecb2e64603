//! Time comes in only through [`Clock`], so tests and the simulator control it.
//! This is the one module allowed to read the system clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A source of wall-clock time in milliseconds since the Unix epoch.
///
/// Client-time algorithms send this to Redis; server-time ones use Redis's `TIME` and only
/// use the clock for the local budget and the circuit breaker.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The operating system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now_ms(&self) -> u64 {
        // Whole seconds and the milliseconds within: `as_millis` would divide a 128-bit count.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() * 1_000 + u64::from(d.subsec_millis()))
    }
}

/// A clock that moves only when told to: for tests and for stepping through examples.
///
/// ```
/// use redis_ratelimit::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance(250);
/// assert_eq!(clock.now_ms(), 1_250);
/// clock.set(900); // clocks can step backwards; the algorithms must cope
/// assert_eq!(clock.now_ms(), 900);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        ManualClock { now: Arc::new(AtomicU64::new(now_ms)) }
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to any reading, earlier ones included.
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

/// Whose clock the algorithm reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TimeSource {
    /// Redis's `TIME`, read inside the script: one clock for every instance, so skewed
    /// instance clocks cannot disagree about the state. The default.
    #[default]
    Server,
    /// The instance's [`Clock`], sent as a script argument. Skewed instances then read the
    /// shared state at different times; the harness shows what that costs.
    Client,
}

impl TimeSource {
    /// `server` or `client`, as traces and reports name it.
    pub const fn name(self) -> &'static str {
        match self {
            TimeSource::Server => "server",
            TimeSource::Client => "client",
        }
    }

    /// The clock reading a script is sent, `now_ms` on this instance's clock: the reading in
    /// client time, none in server time (the script reads Redis's `TIME`).
    pub(crate) fn sent(self, now_ms: u64) -> Option<u64> {
        (self == TimeSource::Client).then_some(now_ms)
    }
}
