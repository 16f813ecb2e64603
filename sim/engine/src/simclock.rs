//! Per-instance clocks in simulated time. turmoil has no per-host skew, so each instance's
//! limiter gets a clock reading simulated time plus an offset and a drift.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use redis_ratelimit::Clock;

/// The simulation's wall-clock origin: 2026-01-01T00:00:00Z in ms. Fixed, so the same seed
/// gives the same times, and realistic in magnitude, so Lua's doubles meet real values.
pub const EPOCH_MS: u64 = 1_767_225_600_000;

/// Where the checkers count callers' clock readings from: a whole number of periods an hour
/// before [`EPOCH_MS`], so no reading of a skewed clock is negative and a window a caller names
/// by its reading falls where the caller put it.
pub fn readings_origin_ms(period_ms: u64) -> u64 {
    let w = period_ms.max(1);
    (EPOCH_MS - 3_600_000) / w * w
}

/// Simulated milliseconds since the start of the run. Inside a host it reads turmoil's
/// clock; outside (the fault loop, the model's own bookkeeping) it reads the last value the
/// step loop published.
#[derive(Debug, Clone, Default)]
pub struct SimTime {
    last_us: Arc<AtomicU64>,
}

impl SimTime {
    /// Microseconds of simulated time.
    pub fn elapsed_us(&self) -> u64 {
        match turmoil::sim_elapsed() {
            Some(d) => {
                let us = d.as_micros() as u64;
                self.last_us.fetch_max(us, Ordering::Relaxed);
                us
            }
            None => self.last_us.load(Ordering::Relaxed),
        }
    }

    /// Milliseconds of simulated time.
    pub fn elapsed_ms(&self) -> u64 {
        self.elapsed_us() / 1000
    }

    /// Publishes the step loop's time for readers outside any host.
    pub fn publish(&self, elapsed_us: u64) {
        self.last_us.fetch_max(elapsed_us, Ordering::Relaxed);
    }
}

/// An instance's clock: `EPOCH + elapsed * (1 + drift_ppm / 1e6) + offset_ms`.
#[derive(Debug, Clone)]
pub struct SkewedClock {
    time: SimTime,
    offset_ms: i64,
    drift_ppm: i64,
}

impl SkewedClock {
    /// A clock `offset_ms` ahead (negative: behind) that gains `drift_ppm` per million.
    pub fn new(time: SimTime, offset_ms: i64, drift_ppm: i64) -> Self {
        SkewedClock { time, offset_ms, drift_ppm }
    }
}

impl Clock for SkewedClock {
    fn now_ms(&self) -> u64 {
        let elapsed = self.time.elapsed_us() as i128;
        let drifted = elapsed + elapsed * self.drift_ppm as i128 / 1_000_000;
        let ms = EPOCH_MS as i128 + drifted / 1000 + self.offset_ms as i128;
        ms.max(0) as u64
    }
}
