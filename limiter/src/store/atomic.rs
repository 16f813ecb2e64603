//! A lock-free GCRA limiter for one key in process, as governor runs it: the theoretical
//! arrival time lives in one `AtomicU64`, updated by a compare-and-swap loop. No lock, no
//! map: for a single hot limit (a whole service's budget) where [`super::LocalStore`]'s
//! mutex would be the bottleneck.
//!
//! Each attempt runs the very same pure [`crate::algo::gcra::step`] on the value it read
//! and publishes the new TAT only if nobody changed it meanwhile; otherwise it decides
//! again on the fresh value. So its decisions are the GCRA twin's, in the order the
//! successful swaps happened, and concurrent callers can never over-admit (checked by the
//! loom model in `limiter/tests/loom_atomic.rs`, where a load-then-store variant is caught
//! over-admitting).

use crate::algo::gcra::{self, GcraState};
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::quota::{Algorithm, Quota};
use crate::sync::{AtomicU64, Ordering};

/// See the module docs.
///
/// ```
/// use redis_ratelimit::store::AtomicLimiter;
/// use redis_ratelimit::Quota;
/// let limiter = AtomicLimiter::new(Quota::per_second(2))?;
/// assert!(limiter.check(0, 1)?.allowed);
/// assert!(limiter.check(0, 1)?.allowed);
/// let denied = limiter.check(0, 1)?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, std::time::Duration::from_millis(500));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AtomicLimiter {
    quota: Quota,
    /// The TAT in µs. 0 decides like "no state yet": GCRA takes `max(tat, now)`.
    tat_us: AtomicU64,
}

impl AtomicLimiter {
    /// A limiter enforcing `quota` with GCRA; refuses a quota GCRA cannot enforce exactly.
    pub fn new(quota: Quota) -> Result<Self, ConfigError> {
        quota.validate(Algorithm::Gcra)?;
        Ok(AtomicLimiter { quota, tat_us: AtomicU64::new(0) })
    }

    /// The quota enforced.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// Decides one request of `cost` units (0 = peek) at `now_ms`. Refuses a cost above the
    /// burst, which could never be admitted.
    pub fn check(&self, now_ms: u64, cost: u64) -> Result<Decision, Error> {
        let capacity = self.quota.burst();
        if cost > capacity {
            return Err(Error::CostExceedsCapacity { cost, capacity });
        }
        let mut current = self.tat_us.load(Ordering::Acquire);
        loop {
            // 0 stands for "no state". A TAT whose key Redis would have expired by now is
            // forgotten, as the twin and Redis forget it, so a clock that then steps back
            // decides the same here as everywhere else.
            let read = GcraState { tat_us: current };
            let mut state = (current != 0 && !gcra::expired(&self.quota, &read, now_ms)).then_some(read);
            let outcome = gcra::step(&self.quota, &mut state, now_ms, cost);
            let next = state.map_or(0, |s| s.tat_us);
            let decision = || Decision::from_store(outcome, capacity, now_ms);
            if !outcome.allowed || next == current {
                // Nothing to write: a denial or a peek decided on a value that was current
                // when read, which is as good as deciding at that instant.
                return Ok(decision());
            }
            match self.tat_us.compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(decision()),
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::algo::Outcome;

    #[test]
    fn decides_exactly_like_the_gcra_twin() {
        let q = Quota::new(3, std::time::Duration::from_secs(1)).with_burst(2);
        let limiter = AtomicLimiter::new(q).unwrap();
        let mut twin = None;
        for (t, cost) in [(0, 1), (0, 1), (0, 1), (100, 0), (334, 1), (400, 2), (1_000, 2), (5_000, 2), (4_000, 1)] {
            let want = crate::algo::step(Algorithm::Gcra, &q, &mut twin, t, cost);
            let got = Outcome::from(limiter.check(t, cost).unwrap());
            assert_eq!(got, want, "at t={t} cost={cost}");
        }
    }

    #[test]
    fn refuses_a_cost_above_the_burst_and_an_invalid_quota() {
        let limiter = AtomicLimiter::new(Quota::per_second(5).with_burst(2)).unwrap();
        assert!(matches!(limiter.check(0, 3), Err(Error::CostExceedsCapacity { cost: 3, capacity: 2 })));
        assert!(AtomicLimiter::new(Quota::new(0, std::time::Duration::from_secs(1))).is_err());
    }
}
