//! Time comes in only through [`Clock`], so tests and the simulator control it.
//! This is the one module allowed to read the system clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A source of wall-clock time in milliseconds since the Unix epoch.
///
/// Client-time algorithms send this to Redis; server-time ones use Redis's `TIME` and only
/// use the clock for the local budget and the circuit breaker.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The operating system's wall clock, read cheaply enough for every decision.
///
/// Asking the operating system for the time costs tens of nanoseconds on x86, most of them the
/// ordered read of the CPU's time-stamp counter inside the kernel's vDSO, which waits for every
/// earlier instruction: measured, a fifth of an in-process decision with its key in cache. So
/// this clock asks the operating system at most every 100 ms and counts the time elapsed since
/// with the counter read directly (through `quanta`, the clock governor uses), which needs no
/// wait. Its readings stay what the wall clock reads (the shared time that client-time
/// algorithms send to Redis):
///
/// - between two readings of the wall clock, the counter's rate differs from the wall clock's
///   by parts per million at most (an NTP slew is 500 at most), microseconds over 100 ms;
/// - a step of the wall clock (NTP, an operator) shows within 100 ms, backwards too, as a
///   step of the operating system's own clock would (the algorithms cope with both);
/// - where the counter is not constant across cores and power states, `quanta` counts with the
///   operating system's monotonic clock instead, and only the saving is lost;
/// - a counter that reads before the last reading (reset under a restored virtual machine) is
///   not believed: the clock reads the wall clock again, every time while the counter reads
///   before the clock's start.
///
/// The first reading in a process calibrates the counter against the operating system's clock,
/// which takes about half a millisecond (at most 200).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        static COUNTED: OnceLock<Counted<fn() -> u64>> = OnceLock::new();
        #[allow(clippy::disallowed_methods)]
        COUNTED.get_or_init(|| Counted::new(quanta::Clock::new(), wall_ns, READ_WALL_EVERY_NS)).now_ms()
    }
}

/// How often [`SystemClock`] reads the wall clock again.
const READ_WALL_EVERY_NS: u64 = 100_000_000;

/// The operating system's wall clock in nanoseconds since the Unix epoch (before it reads as
/// the epoch).
#[allow(clippy::disallowed_methods)]
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A wall clock (`wall`, nanoseconds since the epoch) read every `every_ns` at most, and the
/// time elapsed since its last reading counted by `counter` (the time-stamp counter; a mock in
/// the tests).
struct Counted<W> {
    counter: quanta::Clock,
    /// The counter's raw value when this was made: elapsed time counts from here.
    start: u64,
    /// The wall clock's reading less the elapsed nanoseconds at that moment, as of its last
    /// reading: what the wall clock read at `start`, had it run at the counter's rate. Wrapping,
    /// so a reading at the epoch less a longer elapsed time still adds back to that reading.
    wall_at_start: AtomicU64,
    /// The elapsed nanoseconds at which to read the wall clock again, `every_ns` after its last
    /// reading (0: before the first). Written after `wall_at_start` and read before it, with
    /// release and acquire ordering, so whoever sees a reading's deadline sees its
    /// `wall_at_start` (or a later one).
    next_read: AtomicU64,
    every_ns: u64,
    wall: W,
}

impl<W: Fn() -> u64> Counted<W> {
    #[allow(clippy::disallowed_methods)]
    fn new(counter: quanta::Clock, wall: W, every_ns: u64) -> Self {
        let start = counter.raw();
        Counted { counter, start, wall_at_start: AtomicU64::new(0), next_read: AtomicU64::new(0), every_ns, wall }
    }

    /// Nanoseconds the counter has counted since this clock was made; None while it reads
    /// before that (a counter reset under the process: a virtual machine restored, a core whose
    /// counter lags), when what it counts cannot be believed.
    #[allow(clippy::disallowed_methods)]
    fn elapsed_ns(&self) -> Option<u64> {
        let raw = self.counter.raw();
        (raw >= self.start).then(|| self.counter.delta_as_nanos(self.start, raw))
    }

    fn now_ms(&self) -> u64 {
        let next = self.next_read.load(Ordering::Acquire);
        match self.elapsed_ns() {
            // Counted from the last reading of the wall clock, until the next is due...
            Some(elapsed) if elapsed < next && elapsed >= next.saturating_sub(self.every_ns) => {
                self.wall_at_start.load(Ordering::Relaxed).wrapping_add(elapsed) / 1_000_000
            }
            // ...and read again when it is, and when the counter reads before the last reading:
            // believed, it would hold the clock at that reading or earlier until it caught up.
            _ => self.read_wall() / 1_000_000,
        }
    }

    /// Reads the wall clock, and counts from this reading on (while the counter reads before
    /// this clock was made, every reading is the wall clock's). Threads that read it at once
    /// each store a reading taken a moment apart, any of them right.
    #[cold]
    #[inline(never)]
    fn read_wall(&self) -> u64 {
        let wall = (self.wall)();
        if let Some(elapsed) = self.elapsed_ns() {
            self.wall_at_start.store(wall.wrapping_sub(elapsed), Ordering::Relaxed);
            self.next_read.store(elapsed.saturating_add(self.every_ns).max(1), Ordering::Release);
        }
        wall
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

    /// The system clock reads std's wall clock: within a millisecond of two of std's readings
    /// taken around it (between readings of the wall clock, the counter's rate may differ from
    /// the wall clock's by microseconds, which can move a reading across a millisecond's edge),
    /// in milliseconds since the epoch (not a monotonic clock's count, nor another unit).
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn the_system_clock_reads_the_wall_clock_in_milliseconds() {
        let std_ms = || {
            let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after the epoch");
            d.as_secs() * 1_000 + u64::from(d.subsec_millis())
        };
        for round in 0..1_000 {
            let before = std_ms();
            let read = SystemClock.now_ms();
            let after = std_ms();
            assert!(before - 1 <= read && read <= after + 1, "round {round}: {before} <= {read} <= {after}");
            if round % 100 == 0 {
                // Across readings of the wall clock too.
                std::thread::sleep(std::time::Duration::from_millis(30));
            }
        }
    }

    /// A counted clock on a wall clock and a counter the test sets, reading the wall clock
    /// again every `every_ms`.
    fn counted(every_ms: u64) -> (Counted<impl Fn() -> u64>, Arc<AtomicU64>, Arc<quanta::Mock>) {
        let wall_ms = Arc::new(AtomicU64::new(START_MS));
        let read = Arc::clone(&wall_ms);
        let (counter, mock) = quanta::Clock::mock();
        // Away from zero, so the counter can step back before where the clock started.
        mock.increment(HOUR_MS * MS);
        (Counted::new(counter, move || read.load(Ordering::SeqCst) * MS, every_ms * MS), wall_ms, mock)
    }

    const MS: u64 = 1_000_000;
    const HOUR_MS: u64 = 3_600_000;
    /// Where the test's wall clock starts: a day after the epoch.
    const START_MS: u64 = 24 * HOUR_MS;

    #[test]
    fn between_readings_of_the_wall_clock_the_counter_counts_the_time() {
        let (clock, wall_ms, counter) = counted(100);
        assert_eq!(clock.now_ms(), START_MS, "the first reading is the wall clock's");
        // A step of the wall clock is not read before its time...
        wall_ms.fetch_add(HOUR_MS, Ordering::SeqCst);
        counter.increment(99 * MS);
        assert_eq!(clock.now_ms(), START_MS + 99, "99 ms counted");
        // ...and is at it, and counted from.
        counter.increment(MS);
        assert_eq!(clock.now_ms(), START_MS + HOUR_MS, "read again 100 ms after the last reading");
        counter.increment(40 * MS);
        assert_eq!(clock.now_ms(), START_MS + HOUR_MS + 40);
    }

    #[test]
    fn a_step_of_the_wall_clock_backwards_shows_at_its_next_reading() {
        let (clock, wall_ms, counter) = counted(100);
        assert_eq!(clock.now_ms(), START_MS);
        wall_ms.store(START_MS - HOUR_MS, Ordering::SeqCst);
        counter.increment(100 * MS);
        assert_eq!(clock.now_ms(), START_MS - HOUR_MS);
        counter.increment(5 * MS);
        assert_eq!(clock.now_ms(), START_MS - HOUR_MS + 5);
    }

    #[test]
    fn a_counter_that_steps_back_is_not_believed_and_the_wall_clock_is_read_instead() {
        let (clock, wall_ms, counter) = counted(100);
        assert_eq!(clock.now_ms(), START_MS);
        counter.increment(150 * MS);
        wall_ms.fetch_add(150, Ordering::SeqCst);
        assert_eq!(clock.now_ms(), START_MS + 150, "read again, 150 ms on");
        // The counter steps back past where this clock started: every reading is the wall
        // clock's, none stuck at the last.
        counter.decrement(HOUR_MS * MS);
        for step in 1..=3 {
            wall_ms.fetch_add(5, Ordering::SeqCst);
            assert_eq!(clock.now_ms(), START_MS + 150 + 5 * step, "step {step}");
        }
        // It comes back past where the clock started, but before its last reading: read again.
        counter.increment(HOUR_MS * MS - 120 * MS);
        wall_ms.fetch_add(10, Ordering::SeqCst);
        assert_eq!(clock.now_ms(), START_MS + 175);
        // And counted from there.
        counter.increment(20 * MS);
        assert_eq!(clock.now_ms(), START_MS + 195);
    }
}
