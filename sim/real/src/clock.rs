//! Real time for the real lane: each instance's clock is the wall clock plus its scenario
//! offset and drift, and every run starts at a wall-clock instant aligned to the quota's
//! period, so Redis's windows (`TIME`-based) line up with the run's own time axis exactly
//! as the simulation's epoch lines them up in the model lane.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_ratelimit::Clock;
use tokio::time::Instant;

/// Microseconds since the Unix epoch on the system's real-time clock (the clock Redis's
/// `TIME` reads).
#[allow(clippy::disallowed_methods)] // the real lane exists to run on real time, Redis's clock included
pub fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// The start of a run: a monotonic instant and the wall-clock millisecond it corresponds to,
/// at least `margin_ms` from now and a whole multiple of `align_ms` since the epoch.
pub fn aligned_start(align_ms: u64, margin_ms: u64) -> (Instant, u64) {
    let mono = Instant::now();
    let wall = wall_us();
    let align_ms = align_ms.max(1);
    let start_ms = (wall / 1000 + margin_ms).div_ceil(align_ms) * align_ms;
    let wait_us = (start_ms * 1000).saturating_sub(wall);
    (mono + Duration::from_micros(wait_us), start_ms)
}

/// An instance's clock: real wall time, `offset_ms` ahead (negative: behind), gaining
/// `drift_ppm` per million from `origin_ms` (the run's start) on.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    origin_ms: u64,
    offset_ms: i64,
    drift_ppm: i64,
}

impl WallClock {
    /// See the type docs.
    pub fn new(origin_ms: u64, offset_ms: i64, drift_ppm: i64) -> Self {
        WallClock { origin_ms, offset_ms, drift_ppm }
    }
}

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        let origin_us = self.origin_ms as i128 * 1000;
        let elapsed = wall_us() as i128 - origin_us;
        let drifted = elapsed + elapsed * self.drift_ppm as i128 / 1_000_000;
        ((origin_us + drifted) / 1000 + self.offset_ms as i128).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_wall_clock_is_offset_and_drifts_from_the_origin() {
        let now_ms = wall_us() / 1000;
        let plain = WallClock::new(now_ms, 0, 0).now_ms();
        assert!(plain.abs_diff(now_ms) < 1_000);
        let ahead = WallClock::new(now_ms, 1_500, 0).now_ms();
        assert!((1_400..1_600).contains(&(ahead - now_ms)));
        // An origin 100 s ago with +2% drift: 2 s gained.
        let drifting = WallClock::new(now_ms - 100_000, 0, 20_000).now_ms();
        assert!((1_900..2_100).contains(&(drifting - now_ms)), "{}", drifting - now_ms);
    }

    #[test]
    fn runs_start_on_a_whole_period_of_the_wall_clock() {
        let (_, start_ms) = aligned_start(1_000, 50);
        assert_eq!(start_ms % 1_000, 0);
        assert!(start_ms * 1000 >= wall_us());
    }
}
