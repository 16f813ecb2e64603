//! Quotas and algorithm choice: what a limiter enforces, validated once when it is built.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ConfigError;

/// Largest integer every algorithm's arithmetic may reach. Lua 5.1 (inside Redis) has only
/// doubles, which are exact up to 2^53; keeping every intermediate product below 2^50 leaves
/// room for the sums the scripts form, so the Rust twins and the Lua scripts compute the
/// very same integers.
pub(crate) const EXACT_MAX: u64 = 1 << 50;

/// The most members a sliding log keeps per key: one sorted-set member per admitted unit,
/// so memory grows with the limit.
pub const SLIDING_LOG_MAX_LIMIT: u64 = 1_000_000;

/// `limit` units per `period`, with up to `burst` at once.
///
/// The window algorithms (fixed window, sliding-window counter, sliding log) admit
/// `limit` per window of `period`; they ignore `burst`. The bucket algorithms (token
/// bucket, GCRA) hold up to `burst` units and refill at `limit / period`. Periods are whole
/// milliseconds (Redis keeps time in them): a period's fraction of a millisecond is dropped.
///
/// ```
/// use std::time::Duration;
/// use redis_ratelimit::Quota;
/// let q = Quota::per_minute(100).with_burst(20);
/// assert_eq!((q.limit(), q.period(), q.burst()), (100, Duration::from_secs(60), 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    limit: u64,
    period_ms: u64,
    burst: u64,
}

impl Quota {
    /// `limit` per `period`, burst equal to `limit`. Checked by [`Quota::validate`] when
    /// a limiter is built, so a zero here becomes a clear error there rather than a panic.
    pub const fn new(limit: u64, period: Duration) -> Self {
        Quota { limit, period_ms: crate::duration::whole_ms(period), burst: limit }
    }

    /// `limit` per second.
    pub const fn per_second(limit: u64) -> Self {
        Quota::new(limit, Duration::from_secs(1))
    }

    /// `limit` per minute.
    pub const fn per_minute(limit: u64) -> Self {
        Quota::new(limit, Duration::from_secs(60))
    }

    /// A refill rate in units per second, given as a float (for example from a config file).
    /// NaN, infinities, zero and negative rates are refused. The rate is kept to a
    /// thousandth of a unit per second: `limit = round(rate * 1000)` per 1,000,000 ms.
    pub fn from_rate(per_second: f64, burst: u64) -> Result<Self, ConfigError> {
        if !per_second.is_finite() || per_second <= 0.0 {
            return Err(ConfigError::new("rate", format!("must be a finite number above 0, got {per_second}")));
        }
        let milli = (per_second * 1000.0).round();
        if !(1.0..=1e12).contains(&milli) {
            return Err(ConfigError::new("rate", format!("{per_second}/s is outside 0.001/s ..= 1e9/s")));
        }
        Ok(Quota { limit: milli as u64, period_ms: 1_000_000, burst })
    }

    /// Sets the burst (bucket capacity) of the bucket algorithms.
    pub const fn with_burst(mut self, burst: u64) -> Self {
        self.burst = burst;
        self
    }

    /// Units admitted per period.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The period (window length) in milliseconds.
    pub const fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// [`Quota::period`] in milliseconds, the unit Redis and the algorithms keep time in.
    pub const fn period_ms(&self) -> u64 {
        self.period_ms
    }

    /// The window as the RateLimit fields name it (`w`), in whole seconds: a period that is not
    /// one (`250ms`, `1500ms`) is named by the whole seconds that hold it, rounded up, so a
    /// client that keeps to the limit per that many seconds is never refused for it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) const fn window_secs(&self) -> u64 {
        let secs = self.period_ms.div_ceil(1000);
        if secs == 0 {
            1
        } else {
            secs
        }
    }

    /// Bucket capacity of the bucket algorithms.
    pub const fn burst(&self) -> u64 {
        self.burst
    }

    /// The most one request may cost under `algorithm`: the window limit or the burst.
    pub fn capacity(&self, algorithm: Algorithm) -> u64 {
        if algorithm.is_bucket() {
            self.burst
        } else {
            self.limit
        }
    }

    /// GCRA's emission interval in microseconds, rounded up: rounding up can only make the
    /// limiter stricter, never let more through than the quota says.
    pub(crate) fn gcra_interval_us(&self) -> u64 {
        (self.period_ms * 1000).div_ceil(self.limit)
    }

    /// Refuses any quota the algorithms cannot enforce exactly, naming the field.
    pub fn validate(&self, algorithm: Algorithm) -> Result<(), ConfigError> {
        if self.limit == 0 {
            return Err(ConfigError::new("limit", "must be at least 1, got 0".into()));
        }
        if self.period_ms == 0 {
            return Err(ConfigError::new("period", "must be at least 1 ms, got 0".into()));
        }
        if algorithm.is_bucket() && self.burst == 0 {
            return Err(ConfigError::new("burst", "must be at least 1, got 0".into()));
        }
        let too_big = |field: &'static str, what: String| {
            Err(ConfigError::new(field, format!("{what} exceeds 2^50, the range computed exactly in Redis's Lua")))
        };
        match algorithm {
            Algorithm::FixedWindow => {
                if self.limit > EXACT_MAX || self.period_ms > EXACT_MAX {
                    return too_big("limit", format!("limit {} or period_ms {}", self.limit, self.period_ms));
                }
            }
            Algorithm::SlidingWindow => {
                if self.limit.checked_mul(self.period_ms).is_none_or(|p| p > EXACT_MAX / 4) {
                    return too_big("limit", format!("limit {} x period_ms {} (x4)", self.limit, self.period_ms));
                }
            }
            Algorithm::SlidingLog => {
                if self.limit > SLIDING_LOG_MAX_LIMIT {
                    return Err(ConfigError::new(
                        "limit",
                        format!(
                            "{} is above {SLIDING_LOG_MAX_LIMIT}: a sliding log stores one member per admitted unit",
                            self.limit
                        ),
                    ));
                }
                if self.period_ms > EXACT_MAX {
                    return too_big("period_ms", format!("period_ms {}", self.period_ms));
                }
            }
            Algorithm::TokenBucket => {
                if self.burst.checked_mul(self.period_ms).is_none_or(|p| p > EXACT_MAX) {
                    return too_big("burst", format!("burst {} x period_ms {}", self.burst, self.period_ms));
                }
            }
            Algorithm::Gcra => {
                if self.period_ms > EXACT_MAX / 1000 {
                    return too_big("period_ms", format!("period_ms {} in microseconds", self.period_ms));
                }
                if self.limit > self.period_ms * 1000 {
                    return Err(ConfigError::new(
                        "limit",
                        format!(
                            "{} per {} ms is more than one per microsecond, GCRA's time resolution",
                            self.limit, self.period_ms
                        ),
                    ));
                }
                if self.burst.checked_mul(self.gcra_interval_us()).is_none_or(|p| p > EXACT_MAX) {
                    return too_big("burst", format!("burst {} x emission interval", self.burst));
                }
            }
        }
        Ok(())
    }
}

/// The rate-limiting algorithm a limiter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// One counter per aligned window (`SET PX` for its first units, `INCRBY` after): at most
    /// `limit` per window, up to twice that across a window boundary.
    FixedWindow,
    /// Current and previous window counters, the previous weighted by its remaining overlap:
    /// smooth and cheap, approximately `limit` in any window.
    SlidingWindow,
    /// One sorted-set member per admitted unit: exactly `limit` in any window, memory O(limit).
    SlidingLog,
    /// Tokens and a timestamp in integer units: fractional refill is never lost, a clock
    /// stepping back neither refills nor drains.
    TokenBucket,
    /// Generic cell rate algorithm: one theoretical arrival time per key, like redis-cell.
    Gcra,
}

// Checked when the crate compiles: `Algorithm::ALL` is in declaration order.
const _: () = {
    let mut i = 0;
    while i < Algorithm::ALL.len() {
        assert!(Algorithm::ALL[i] as usize == i, "Algorithm::ALL lists the variants in declaration order");
        i += 1;
    }
};

impl Algorithm {
    /// Every algorithm, in declaration order (the compiler checks the order, below; tables
    /// indexed by `algorithm as usize` and sized `ALL.len()` rely on it).
    pub const ALL: [Algorithm; 5] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
    ];

    /// The name used in keys, the CLI and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed-window",
            Algorithm::SlidingWindow => "sliding-window",
            Algorithm::SlidingLog => "sliding-log",
            Algorithm::TokenBucket => "token-bucket",
            Algorithm::Gcra => "gcra",
        }
    }

    /// Bucket algorithms hold up to `burst` and refill continuously.
    pub const fn is_bucket(self) -> bool {
        match self {
            Algorithm::TokenBucket | Algorithm::Gcra => true,
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => false,
        }
    }

    /// Window-counter algorithms count per aligned window of one period, in keys named by the
    /// window's index (so another period is another run of windows).
    pub const fn is_windowed(self) -> bool {
        match self {
            Algorithm::FixedWindow | Algorithm::SlidingWindow => true,
            Algorithm::SlidingLog | Algorithm::TokenBucket | Algorithm::Gcra => false,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Algorithm::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
            ConfigError::new("algorithm", format!("unknown algorithm {s:?}; expected one of {}", names.join(", ")))
        })
    }
}
