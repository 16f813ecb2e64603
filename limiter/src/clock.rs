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
    /// Read on every decision, so read as the operating system gives it: seconds and
    /// nanoseconds, two integers. std's `SystemTime` gives the same reading, but turning it into
    /// a `Duration` since the epoch (a checked subtraction of two timespecs) took most of a
    /// reading's instructions: a tenth of an in-process decision's.
    #[cfg(unix)]
    #[allow(clippy::disallowed_methods)]
    fn now_ms(&self) -> u64 {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        // Before the epoch reads as the epoch, as std's reading does below.
        match (u64::try_from(now.tv_sec), u64::try_from(now.tv_nsec)) {
            (Ok(secs), Ok(nanos)) => secs.saturating_mul(1_000) + nanos / 1_000_000,
            _ => 0,
        }
    }

    #[cfg(not(unix))]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The system clock reads std's wall clock: between two of std's readings taken around it,
    /// in milliseconds since the epoch (not a monotonic clock's count, nor another unit).
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn the_system_clock_reads_the_wall_clock_in_milliseconds() {
        let std_ms = || {
            let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after the epoch");
            d.as_secs() * 1_000 + u64::from(d.subsec_millis())
        };
        for _ in 0..1_000 {
            let before = std_ms();
            let read = SystemClock.now_ms();
            let after = std_ms();
            assert!(before <= read && read <= after, "{before} <= {read} <= {after}");
        }
    }
}
