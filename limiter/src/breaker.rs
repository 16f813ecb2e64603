//! A circuit breaker in front of Redis, so an outage costs one timeout per `open`
//! instead of one per request.
//!
//! Closed: calls go through; `failure_threshold` consecutive failures open it.
//! Open: calls are not attempted until `open` has passed.
//! Half-open: exactly one call (the probe) goes through; its success closes the breaker,
//! its failure opens it again. A probe that never reports (its future was dropped) is
//! replaced after another `open`, so the breaker cannot stick half-open.
//!
//! Time is passed in: the breaker reads no clock, which keeps it deterministic in the
//! simulator and checkable by loom.

use std::time::Duration;

use crate::error::ConfigError;
use crate::sync::{lock, Mutex};

/// Breaker thresholds.
///
/// ```
/// use std::time::Duration;
/// let config = redis_ratelimit::BreakerConfig::new(3, Duration::from_millis(250));
/// assert_eq!((config.failure_threshold, config.open), (3, Duration::from_millis(250)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker.
    pub failure_threshold: u32,
    /// How long it stays open before one probe is let through (whole milliseconds).
    pub open: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig { failure_threshold: 5, open: Duration::from_secs(1) }
    }
}

impl BreakerConfig {
    /// Opens after `failure_threshold` consecutive failures, for `open`. Checked when the
    /// limiter is built, so a zero here becomes a clear error there.
    pub const fn new(failure_threshold: u32, open: Duration) -> Self {
        BreakerConfig { failure_threshold, open }
    }

    /// How long it stays open, in ms.
    pub(crate) const fn open_ms(&self) -> u64 {
        crate::duration::whole_ms(self.open)
    }

    /// Refuses a zero threshold or a zero open time.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.failure_threshold == 0 {
            return Err(ConfigError::new("breaker.failure_threshold", "must be at least 1, got 0".into()));
        }
        if self.open_ms() == 0 {
            return Err(ConfigError::new("breaker.open", "must be at least 1 ms, got 0".into()));
        }
        Ok(())
    }
}

/// The breaker's state at one moment ([`crate::Limiter::breaker_state`]), for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go through; `failures` consecutive failures so far.
    Closed {
        /// Consecutive failures.
        failures: u32,
    },
    /// No calls until `until_ms`.
    Open {
        /// When a probe may go.
        until_ms: u64,
    },
    /// One probe is out since `since_ms`.
    HalfOpen {
        /// When the probe was let through.
        since_ms: u64,
    },
}

impl BreakerState {
    /// The kind of state, as the metrics label it: `closed`, `half-open` or `open`.
    pub const fn name(&self) -> &'static str {
        match self {
            BreakerState::Closed { .. } => "closed",
            BreakerState::HalfOpen { .. } => "half-open",
            BreakerState::Open { .. } => "open",
        }
    }

    /// The kind of state as the breaker gauge shows it: 0 closed, 1 half-open, 2 open.
    pub(crate) const fn level(&self) -> u8 {
        match self {
            BreakerState::Closed { .. } => 0,
            BreakerState::HalfOpen { .. } => 1,
            BreakerState::Open { .. } => 2,
        }
    }
}

/// What the breaker lets a caller do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Call Redis normally.
    Call,
    /// Call Redis as the one half-open probe.
    Probe,
    /// Do not call; the breaker opens again in `retry_after_ms` at the earliest.
    Reject {
        /// Until the next probe may go.
        retry_after_ms: u64,
    },
}

/// See the module docs.
#[derive(Debug)]
pub struct CircuitBreaker {
    config: BreakerConfig,
    state: Mutex<BreakerState>,
    /// Whose breaker it is, as the metrics label it (a limiter's state name, `rules`).
    label: String,
}

impl CircuitBreaker {
    /// A closed breaker. The config must be valid ([`BreakerConfig::validate`]).
    #[cfg(any(test, feature = "harness"))]
    pub fn new(config: BreakerConfig) -> Self {
        Self::labelled(config, "")
    }

    /// A closed breaker whose changes of state the metrics count under `label`.
    pub(crate) fn labelled(config: BreakerConfig, label: &str) -> Self {
        CircuitBreaker { config, state: Mutex::new(BreakerState::Closed { failures: 0 }), label: label.to_owned() }
    }

    /// The current state.
    pub fn state(&self) -> BreakerState {
        *lock(&self.state)
    }

    /// How long until Redis will be tried again: the rest of the open period, or a whole
    /// `open` while closed (a hint for Retry-After, not a promise).
    pub fn next_attempt_in_ms(&self, now_ms: u64) -> u64 {
        match *lock(&self.state) {
            BreakerState::Open { until_ms } if until_ms > now_ms => until_ms - now_ms,
            _ => self.config.open_ms(),
        }
    }

    /// Asks to call Redis at `now_ms`.
    pub fn attempt(&self, now_ms: u64) -> Attempt {
        let mut state = lock(&self.state);
        match *state {
            BreakerState::Closed { .. } => Attempt::Call,
            BreakerState::Open { until_ms } if now_ms < until_ms => {
                Attempt::Reject { retry_after_ms: until_ms - now_ms }
            }
            BreakerState::HalfOpen { since_ms } if now_ms < since_ms.saturating_add(self.config.open_ms()) => {
                Attempt::Reject { retry_after_ms: since_ms + self.config.open_ms() - now_ms }
            }
            BreakerState::Open { .. } | BreakerState::HalfOpen { .. } => {
                enter(&self.label, &mut state, BreakerState::HalfOpen { since_ms: now_ms });
                Attempt::Probe
            }
        }
    }

    /// Reports that a permitted call reached Redis. Returns the state entered when the breaker
    /// changed from one kind of state to another (here: closed again).
    pub fn on_success(&self, attempt: Attempt) -> Option<BreakerState> {
        let mut state = lock(&self.state);
        match (*state, attempt) {
            (BreakerState::Closed { .. }, _) | (BreakerState::HalfOpen { .. }, Attempt::Probe) => {
                enter(&self.label, &mut state, BreakerState::Closed { failures: 0 })
            }
            // A call let through before the breaker opened proves little about now.
            _ => None,
        }
    }

    /// Reports that a permitted call failed at `now_ms`. Returns the state entered when the
    /// breaker changed from one kind of state to another (here: open).
    pub fn on_failure(&self, attempt: Attempt, now_ms: u64) -> Option<BreakerState> {
        let mut state = lock(&self.state);
        let open = BreakerState::Open { until_ms: now_ms.saturating_add(self.config.open_ms()) };
        match (*state, attempt) {
            (BreakerState::Closed { failures }, _) => {
                let failures = failures + 1;
                let next =
                    if failures >= self.config.failure_threshold { open } else { BreakerState::Closed { failures } };
                enter(&self.label, &mut state, next)
            }
            (BreakerState::HalfOpen { .. }, Attempt::Probe) => enter(&self.label, &mut state, open),
            _ => None,
        }
    }
}

/// Sets the state, counting a change of state (closed, open, half-open) for the metrics; the
/// state entered when it is one.
fn enter(label: &str, state: &mut BreakerState, next: BreakerState) -> Option<BreakerState> {
    let changed = std::mem::discriminant(state) != std::mem::discriminant(&next);
    if changed {
        crate::metrics::breaker_entered(label, next.name(), next.level());
    }
    *state = next;
    changed.then_some(next)
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn breaker() -> CircuitBreaker {
        CircuitBreaker::new(BreakerConfig { failure_threshold: 2, open: Duration::from_millis(100) })
    }

    #[test]
    fn opens_after_threshold_consecutive_failures_only() {
        let b = breaker();
        b.on_failure(Attempt::Call, 0);
        b.on_success(Attempt::Call); // a success resets the count
        b.on_failure(Attempt::Call, 1);
        assert_eq!(b.state(), BreakerState::Closed { failures: 1 });
        b.on_failure(Attempt::Call, 2);
        assert_eq!(b.state(), BreakerState::Open { until_ms: 102 });
        assert_eq!(b.attempt(50), Attempt::Reject { retry_after_ms: 52 });
    }

    #[test]
    fn half_open_lets_exactly_one_probe_and_its_result_decides() {
        let b = breaker();
        b.on_failure(Attempt::Call, 0);
        b.on_failure(Attempt::Call, 0);
        assert_eq!(b.attempt(100), Attempt::Probe);
        assert!(matches!(b.attempt(101), Attempt::Reject { .. }));
        b.on_failure(Attempt::Probe, 110);
        assert_eq!(b.state(), BreakerState::Open { until_ms: 210 });
        assert_eq!(b.attempt(210), Attempt::Probe);
        b.on_success(Attempt::Probe);
        assert_eq!(b.state(), BreakerState::Closed { failures: 0 });
        assert_eq!(b.attempt(211), Attempt::Call);
    }

    #[test]
    fn a_lost_probe_is_replaced_after_open_ms() {
        let b = breaker();
        b.on_failure(Attempt::Call, 0);
        b.on_failure(Attempt::Call, 0);
        assert_eq!(b.attempt(100), Attempt::Probe); // this probe never reports back
        assert!(matches!(b.attempt(199), Attempt::Reject { .. }));
        assert_eq!(b.attempt(200), Attempt::Probe);
    }

    #[test]
    fn zero_thresholds_are_refused_by_name() {
        let e = BreakerConfig { failure_threshold: 0, open: Duration::from_millis(1) }.validate().unwrap_err();
        assert!(e.to_string().contains("breaker.failure_threshold"), "{e}");
        let e = BreakerConfig { failure_threshold: 1, open: Duration::ZERO }.validate().unwrap_err();
        assert!(e.to_string().contains("breaker.open"), "{e}");
    }
}
