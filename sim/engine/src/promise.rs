//! What a limiter promises, as the checkers hold it: the library's algorithms each promise
//! their own bound; a subject promises what its file (or its author) says it means to be.

use std::fmt;

use redis_ratelimit::{Algorithm, Quota};

/// A promise a limiter can make. L is the limit per period T, B the burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Promise {
    /// At most B + L·d/T in any interval of length d; refill never lost.
    TokenBucket,
    /// As the token bucket, with GCRA's rounded-up emission interval.
    Gcra,
    /// At most L per window; up to 2L across a boundary. Windows are aligned to multiples of
    /// T, or (`first_hit`) start at the first request after the previous window ended.
    FixedWindow {
        /// Windows start at their first request, as many libraries do (INCR then EXPIRE).
        first_hit: bool,
    },
    /// The sliding-window counter: at most 2L in any T, and the decisions of the exact
    /// weighted estimate.
    SlidingWindow,
    /// At most L in any window of length T.
    SlidingLog,
    /// Nothing: the limiter is only profiled.
    None,
}

impl Promise {
    /// The promise of one of the library's algorithms.
    pub fn of(algorithm: Algorithm) -> Promise {
        match algorithm {
            Algorithm::FixedWindow => Promise::FixedWindow { first_hit: false },
            Algorithm::SlidingWindow => Promise::SlidingWindow,
            Algorithm::SlidingLog => Promise::SlidingLog,
            Algorithm::TokenBucket => Promise::TokenBucket,
            Algorithm::Gcra => Promise::Gcra,
            other => panic!("no promise is written down for {other}: add it here"),
        }
    }

    /// The library's algorithm whose twin decides exactly as this promise says, where one
    /// does (a first-hit window has its own exact reference in the oracle).
    pub fn twin(self) -> Option<Algorithm> {
        match self {
            Promise::TokenBucket => Some(Algorithm::TokenBucket),
            Promise::Gcra => Some(Algorithm::Gcra),
            Promise::FixedWindow { first_hit: false } => Some(Algorithm::FixedWindow),
            Promise::SlidingWindow => Some(Algorithm::SlidingWindow),
            Promise::SlidingLog => Some(Algorithm::SlidingLog),
            Promise::FixedWindow { first_hit: true } | Promise::None => None,
        }
    }

    /// Bucket promises hold up to B and refill continuously.
    pub fn is_bucket(self) -> bool {
        matches!(self, Promise::TokenBucket | Promise::Gcra)
    }

    /// The most one request may cost under this promise: the burst or the window's limit.
    pub fn capacity(self, q: &Quota) -> u64 {
        if self.is_bucket() {
            q.burst()
        } else {
            q.limit()
        }
    }

    /// The name a subject file uses (`kind`).
    pub fn kind(self) -> &'static str {
        match self {
            Promise::TokenBucket => "token-bucket",
            Promise::Gcra => "gcra",
            Promise::FixedWindow { .. } => "fixed-window",
            Promise::SlidingWindow => "sliding-window",
            Promise::SlidingLog => "sliding-log",
            Promise::None => "none",
        }
    }

    /// The promise in words, for a quota.
    pub fn describe(self, q: &Quota) -> String {
        let (l, w, b) = (q.limit(), q.period_ms(), q.burst());
        match self {
            Promise::FixedWindow { first_hit: false } => format!("<= {l} per aligned {w} ms window"),
            Promise::FixedWindow { first_hit: true } => format!("<= {l} per {w} ms window from its first request"),
            Promise::SlidingWindow => format!("<= {} in any {w} ms (weighted estimate of {l})", 2 * l),
            Promise::SlidingLog => format!("<= {l} in any {w} ms"),
            Promise::TokenBucket | Promise::Gcra => format!("<= {b} + {l}/{w} ms x d in any interval d"),
            Promise::None => "no promise".to_owned(),
        }
    }
}

/// How coarsely a limiter keeps time, as its subject file declares it (`resolution_ms`): a
/// script that reads whole seconds cannot tell two moments of one second apart, and one that
/// refills a bucket once a period hands out a whole period's refill at once. A promise is
/// held with exactly what is declared and nothing more; a step the file does not declare is a
/// break (the verifier measures it and names the line that would declare it). Zero for the
/// library's algorithms, which keep exact time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tolerance {
    /// The coarsest step of the time it decides by, in ms (1000 for whole seconds).
    pub resolution_ms: u64,
}

impl Tolerance {
    /// No tolerance: exact time.
    pub const EXACT: Tolerance = Tolerance { resolution_ms: 0 };

    /// In words, for verdicts; empty when exact.
    pub fn describe(&self) -> String {
        match self.resolution_ms {
            0 => String::new(),
            r => format!("its declared time resolution of {r} ms"),
        }
    }
}

/// What a window or a log counts towards its limit (`counts` in a subject file): the units it
/// admitted, or every unit requested, denied ones too (a counter that INCRs first and compares
/// after, as many libraries do by design: it admits less after a large denied request). Both
/// are common designs, so unless the file names one a denial is lost capacity only where both
/// readings had room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Counts {
    /// Either: judged by both readings, a denial lost only if both had room.
    #[default]
    Either,
    /// Only admitted units count towards the limit.
    Admitted,
    /// Every requested unit counts, admitted or not.
    Requests,
}

impl fmt::Display for Promise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Promise::FixedWindow { first_hit: true } => f.write_str("fixed-window (first-hit)"),
            other => f.write_str(other.kind()),
        }
    }
}
