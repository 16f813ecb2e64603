//! Deliberately broken copies of the correct algorithms, one injected bug each, so every
//! invariant is shown to catch something: an invariant no bad state machine fails is not checking
//! anything. Each copy follows `redis_ratelimit::harness::algo::<algorithm>` line for line except at the
//! line marked `BUG:`. They reuse the real state types, so they run through the same
//! checks unchanged.

use redis_ratelimit::harness::algo::fixed_window::WindowState;
use redis_ratelimit::harness::algo::gcra::GcraState;
use redis_ratelimit::harness::algo::sliding_log::LogState;
use redis_ratelimit::harness::algo::sliding_window::SlidingState;
use redis_ratelimit::harness::algo::token_bucket::BucketState;
use redis_ratelimit::harness::algo::{Outcome, State};

use crate::machine::MachineState;
use redis_ratelimit::{Algorithm, Quota};

use crate::machine::StateMachine;
use crate::subject::Subject;

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Runs a typed step on the one variant of [`State`] it owns (another variant counts as
/// absent, as `redis_ratelimit::harness::algo::step` treats it).
fn typed<S>(
    state: &mut Option<MachineState>,
    take: fn(State) -> Option<S>,
    put: fn(S) -> State,
    f: impl FnOnce(&mut Option<S>) -> Outcome,
) -> Outcome {
    let mut own = match state.take() {
        Some(MachineState::Twin(s)) => take(s),
        _ => None,
    };
    let outcome = f(&mut own);
    *state = own.map(|s| MachineState::Twin(put(s)));
    outcome
}

fn window(s: State) -> Option<WindowState> {
    if let State::Window(w) = s {
        Some(w)
    } else {
        None
    }
}
fn log(s: State) -> Option<LogState> {
    if let State::Log(l) = s {
        Some(l)
    } else {
        None
    }
}
fn bucket(s: State) -> Option<BucketState> {
    if let State::Bucket(b) = s {
        Some(b)
    } else {
        None
    }
}
fn gcra(s: State) -> Option<GcraState> {
    if let State::Gcra(g) = s {
        Some(g)
    } else {
        None
    }
}
fn sliding(s: State) -> Option<SlidingState> {
    if let State::Sliding(x) = s {
        Some(x)
    } else {
        None
    }
}

// ---------------------------------------------------------------- fixed window

/// Which bug a fixed-window copy carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FwBug {
    /// `<=` where `<` was meant in the pre-increment check: admits `limit + 1` per window.
    LimitPlusOne,
    /// The check written for cost 1 (`count < limit`) while the cost is added: a request of
    /// cost N is admitted with one unit of room.
    ChecksOneUnit,
    /// Retry-After one past the window's end.
    RetryLate,
}

struct FixedWindowMutant(FwBug);

impl StateMachine for FixedWindowMutant {
    fn step(&self, q: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        typed(state, window, State::Window, |state| {
            let (limit, w) = (q.limit(), q.period_ms());
            let window = now_ms / w;
            let to_end = w - now_ms % w;
            let count = match state {
                Some(s) if s.window == window => s.count,
                _ => 0,
            };
            let admit = match self.0 {
                // BUG: `count + cost - 1 <= limit`.
                FwBug::LimitPlusOne => count + cost <= limit + 1,
                // BUG: only one unit of room is checked.
                FwBug::ChecksOneUnit => count < limit,
                FwBug::RetryLate => count + cost <= limit,
            };
            if admit {
                let after = count + cost;
                if cost > 0 {
                    *state = Some(WindowState { window, count: after });
                }
                Outcome {
                    allowed: true,
                    remaining: limit.saturating_sub(after),
                    retry_after_ms: 0,
                    reset_after_ms: if after > 0 { to_end } else { 0 },
                }
            } else {
                // BUG (RetryLate): one past the next window's start.
                let retry = if self.0 == FwBug::RetryLate { to_end + 1 } else { to_end };
                Outcome {
                    allowed: false,
                    remaining: limit.saturating_sub(count),
                    retry_after_ms: retry,
                    reset_after_ms: to_end,
                }
            }
        })
    }
}

/// Fixed window admitting `limit + 1` per window (`<=` for `<`).
pub const FIXED_WINDOW_LIMIT_PLUS_ONE: Subject = Subject {
    name: "fixed-window-limit-plus-one",
    base: Algorithm::FixedWindow,
    promise: Algorithm::FixedWindow,
    machine: &FixedWindowMutant(FwBug::LimitPlusOne),
};
/// Fixed window checking room for one unit, whatever the cost.
pub const FIXED_WINDOW_CHECKS_ONE_UNIT: Subject = Subject {
    name: "fixed-window-checks-one-unit",
    base: Algorithm::FixedWindow,
    promise: Algorithm::FixedWindow,
    machine: &FixedWindowMutant(FwBug::ChecksOneUnit),
};
/// Fixed window answering Retry-After 1 ms late.
pub const FIXED_WINDOW_RETRY_LATE: Subject = Subject {
    name: "fixed-window-retry-late",
    base: Algorithm::FixedWindow,
    promise: Algorithm::FixedWindow,
    machine: &FixedWindowMutant(FwBug::RetryLate),
};

// ---------------------------------------------------------------- sliding log

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogBug {
    /// Entries leave at `now - W + 1`: the window is 1 ms short (`now - w + 1` for `now - w`).
    DropsEarly,
    /// Entries at exactly `now - W` stay: the window is 1 ms long (`<` for `<=`).
    KeepsBoundary,
    /// One member per request instead of one per unit (ZADD once for a cost-N request).
    CountsRequests,
}

struct SlidingLogMutant(LogBug);

fn log_expire(log: &mut LogState, cutoff: Option<u64>) {
    let Some(cutoff) = cutoff else { return };
    while let Some(entry) = log.entries.first_entry() {
        if *entry.key() > cutoff {
            break;
        }
        log.total -= entry.remove();
    }
}

fn log_kth_oldest(log: &LogState, k: u64) -> Option<u64> {
    let mut seen = 0;
    for (&score, &n) in log.entries.iter() {
        seen += n;
        if seen >= k {
            return Some(score);
        }
    }
    None
}

impl StateMachine for SlidingLogMutant {
    fn step(&self, q: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        typed(state, log, State::Log, |state| {
            let (limit, w) = (q.limit(), q.period_ms());
            let log = state.get_or_insert_with(LogState::default);
            let cutoff = match self.0 {
                // BUG: `now - w + 1`.
                LogBug::DropsEarly => (now_ms + 1).checked_sub(w),
                // BUG: `<` for `<=`: the entry at exactly now - W is kept.
                LogBug::KeepsBoundary => now_ms.checked_sub(w + 1),
                LogBug::CountsRequests => now_ms.checked_sub(w),
            };
            log_expire(log, cutoff);
            let count = log.total;
            let reset = |log: &LogState| log.entries.last_key_value().map_or(0, |(&n, _)| n + w - now_ms);
            let outcome = if count + cost <= limit {
                if cost > 0 {
                    // BUG (CountsRequests): one member for the whole request.
                    let members = if self.0 == LogBug::CountsRequests { 1 } else { cost };
                    *log.entries.entry(now_ms).or_insert(0) += members;
                    log.total += members;
                }
                Outcome {
                    allowed: true,
                    remaining: limit.saturating_sub(log.total),
                    retry_after_ms: 0,
                    reset_after_ms: reset(log),
                }
            } else {
                let k = count + cost - limit;
                let retry = log_kth_oldest(log, k).map_or(0, |s| (s + w).saturating_sub(now_ms));
                Outcome {
                    allowed: false,
                    remaining: limit.saturating_sub(count),
                    retry_after_ms: retry,
                    reset_after_ms: reset(log),
                }
            };
            if log.total == 0 {
                *state = None;
            }
            outcome
        })
    }
}

/// Sliding log whose window is 1 ms short.
pub const SLIDING_LOG_DROPS_EARLY: Subject = Subject {
    name: "sliding-log-drops-early",
    base: Algorithm::SlidingLog,
    promise: Algorithm::SlidingLog,
    machine: &SlidingLogMutant(LogBug::DropsEarly),
};
/// Sliding log whose window is 1 ms long.
pub const SLIDING_LOG_KEEPS_BOUNDARY: Subject = Subject {
    name: "sliding-log-keeps-boundary",
    base: Algorithm::SlidingLog,
    promise: Algorithm::SlidingLog,
    machine: &SlidingLogMutant(LogBug::KeepsBoundary),
};
/// Sliding log recording requests, not units.
pub const SLIDING_LOG_COUNTS_REQUESTS: Subject = Subject {
    name: "sliding-log-counts-requests",
    base: Algorithm::SlidingLog,
    promise: Algorithm::SlidingLog,
    machine: &SlidingLogMutant(LogBug::CountsRequests),
};

// ---------------------------------------------------------------- token bucket

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BucketBug {
    /// Refill counted in whole tokens, `floor(elapsed * rate)`, and the timestamp moved to
    /// now: the fraction earned is thrown away at every admission.
    FlooredRefill,
    /// The timestamp stored as `now` even when now is earlier than it: two clocks
    /// ping-pong the timestamp and every swing forward refills again.
    PingPong,
    /// Elapsed time as `|now - ts|`: a step back refills as if time had passed.
    AbsDiff,
    /// `remaining` rounded up: a bucket holding 0.5 tokens reports 1.
    RemainingCeil,
    /// A peek runs as a cost-1 request.
    PeekConsumes,
}

struct TokenBucketMutant(BucketBug);

impl StateMachine for TokenBucketMutant {
    fn step(&self, q: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        typed(state, bucket, State::Bucket, |state| {
            // BUG (PeekConsumes): a cost of 0 becomes 1.
            let cost = if self.0 == BucketBug::PeekConsumes { cost.max(1) } else { cost };
            let (limit, period) = (q.limit(), q.period_ms());
            let cap = q.burst() * period;
            let need = cost * period;
            let BucketState { mut units, mut ts_ms } = state.unwrap_or(BucketState { units: cap, ts_ms: now_ms });
            units = units.min(cap);
            match self.0 {
                BucketBug::FlooredRefill if now_ms > ts_ms => {
                    // BUG: whole tokens only.
                    let tokens = (u128::from(now_ms - ts_ms) * u128::from(limit)) / u128::from(period);
                    let gained = tokens.saturating_mul(u128::from(period)).min(u128::from(cap)) as u64;
                    units = (units + gained).min(cap);
                    ts_ms = now_ms;
                }
                BucketBug::AbsDiff if now_ms != ts_ms => {
                    // BUG: a step back counts as elapsed time.
                    let elapsed = now_ms.abs_diff(ts_ms);
                    let fill_ms = ceil_div(cap - units, limit);
                    units = if elapsed >= fill_ms { cap } else { units + elapsed * limit };
                    ts_ms = now_ms;
                }
                BucketBug::FlooredRefill | BucketBug::AbsDiff => {}
                _ if now_ms > ts_ms => {
                    let elapsed = now_ms - ts_ms;
                    let fill_ms = ceil_div(cap - units, limit);
                    units = if elapsed >= fill_ms { cap } else { units + elapsed * limit };
                    ts_ms = now_ms;
                }
                _ => {}
            }
            let ahead = ts_ms.saturating_sub(now_ms);
            let allowed = units >= need;
            let retry_after_ms = if allowed {
                units -= need;
                if cost > 0 {
                    // BUG (PingPong): `now_ms` even when the clock reads behind `ts_ms`.
                    let ts = if self.0 == BucketBug::PingPong { now_ms } else { ts_ms };
                    *state = Some(BucketState { units, ts_ms: ts });
                }
                0
            } else {
                ahead + ceil_div(need - units, limit)
            };
            // BUG (RemainingCeil): rounded up.
            let remaining = if self.0 == BucketBug::RemainingCeil { units.div_ceil(period) } else { units / period };
            Outcome { allowed, remaining, retry_after_ms, reset_after_ms: ahead + ceil_div(cap - units, limit) }
        })
    }
}

/// Token bucket with whole-token refill.
pub const TOKEN_BUCKET_FLOORED_REFILL: Subject = Subject {
    name: "token-bucket-floored-refill",
    base: Algorithm::TokenBucket,
    promise: Algorithm::TokenBucket,
    machine: &TokenBucketMutant(BucketBug::FlooredRefill),
};
/// Token bucket storing `ts = now` even when the clock is behind.
pub const TOKEN_BUCKET_PING_PONG: Subject = Subject {
    name: "token-bucket-ping-pong",
    base: Algorithm::TokenBucket,
    promise: Algorithm::TokenBucket,
    machine: &TokenBucketMutant(BucketBug::PingPong),
};
/// Token bucket refilling on a step back.
pub const TOKEN_BUCKET_ABS_DIFF: Subject = Subject {
    name: "token-bucket-abs-diff",
    base: Algorithm::TokenBucket,
    promise: Algorithm::TokenBucket,
    machine: &TokenBucketMutant(BucketBug::AbsDiff),
};
/// Token bucket rounding `remaining` up.
pub const TOKEN_BUCKET_REMAINING_CEIL: Subject = Subject {
    name: "token-bucket-remaining-ceil",
    base: Algorithm::TokenBucket,
    promise: Algorithm::TokenBucket,
    machine: &TokenBucketMutant(BucketBug::RemainingCeil),
};
/// Token bucket whose peek consumes a token.
pub const TOKEN_BUCKET_PEEK_CONSUMES: Subject = Subject {
    name: "token-bucket-peek-consumes",
    base: Algorithm::TokenBucket,
    promise: Algorithm::TokenBucket,
    machine: &TokenBucketMutant(BucketBug::PeekConsumes),
};

// ---------------------------------------------------------------- GCRA

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GcraBug {
    /// Retry-After floored to the ms instead of rounded up: up to 1 ms early.
    RetryFloored,
    /// Emission interval floored to the µs: slightly faster than the quota.
    IntervalFloored,
    /// Reset-After of an admission computed from the TAT before it.
    ResetBeforeConsuming,
}

struct GcraMutant(GcraBug);

impl StateMachine for GcraMutant {
    fn step(&self, q: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        typed(state, gcra, State::Gcra, |state| {
            let now_us = now_ms * 1000;
            let t = match self.0 {
                // BUG: floor.
                GcraBug::IntervalFloored => ((q.period_ms() * 1000) / q.limit()).max(1),
                _ => ceil_div(q.period_ms() * 1000, q.limit()),
            };
            let tau = q.burst() * t;
            let tat = state.map_or(now_us, |s| s.tat_us.max(now_us));
            let new_tat = tat + cost * t;
            if new_tat <= now_us + tau {
                if cost > 0 {
                    *state = Some(GcraState { tat_us: new_tat });
                }
                // BUG (ResetBeforeConsuming): the TAT before this request.
                let basis = if self.0 == GcraBug::ResetBeforeConsuming { tat } else { new_tat };
                Outcome {
                    allowed: true,
                    remaining: (now_us + tau - new_tat) / t,
                    retry_after_ms: 0,
                    reset_after_ms: ceil_div(basis - now_us, 1000),
                }
            } else {
                let wait_us = new_tat - tau - now_us;
                // BUG (RetryFloored): floor.
                let retry = if self.0 == GcraBug::RetryFloored { wait_us / 1000 } else { ceil_div(wait_us, 1000) };
                Outcome {
                    allowed: false,
                    remaining: (now_us + tau).saturating_sub(tat) / t,
                    retry_after_ms: retry,
                    reset_after_ms: ceil_div(tat - now_us, 1000),
                }
            }
        })
    }
}

/// GCRA with Retry-After floored.
pub const GCRA_RETRY_FLOORED: Subject = Subject {
    name: "gcra-retry-floored",
    base: Algorithm::Gcra,
    promise: Algorithm::Gcra,
    machine: &GcraMutant(GcraBug::RetryFloored),
};
/// GCRA with its emission interval floored.
pub const GCRA_INTERVAL_FLOORED: Subject = Subject {
    name: "gcra-interval-floored",
    base: Algorithm::Gcra,
    promise: Algorithm::Gcra,
    machine: &GcraMutant(GcraBug::IntervalFloored),
};
/// GCRA reporting Reset-After from the old TAT.
pub const GCRA_RESET_BEFORE_CONSUMING: Subject = Subject {
    name: "gcra-reset-before-consuming",
    base: Algorithm::Gcra,
    promise: Algorithm::Gcra,
    machine: &GcraMutant(GcraBug::ResetBeforeConsuming),
};

// ---------------------------------------------------------------- sliding-window counter

struct SlidingWindowFlooredWeight;

impl StateMachine for SlidingWindowFlooredWeight {
    fn step(&self, q: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        typed(state, sliding, State::Sliding, |state| {
            let (limit, w) = (q.limit(), q.period_ms());
            let window = now_ms / w;
            let e = now_ms % w;
            let (cur, prev) = match *state {
                Some(s) if s.window == window => (s.cur, s.prev),
                Some(s) if s.window + 1 == window => (0, s.cur),
                _ => (0, 0),
            };
            let est = prev * (w - e) + cur * w;
            let budget = limit * w;
            let reset = |cur: u64| {
                if cur > 0 {
                    2 * w - e
                } else if prev > 0 {
                    w - e
                } else {
                    0
                }
            };
            // BUG: the weighted previous count floored before comparing, in whole units.
            if prev * (w - e) / w + cur + cost <= limit {
                let cur_after = cur + cost;
                if cost > 0 {
                    *state = Some(SlidingState { window, cur: cur_after, prev });
                }
                Outcome {
                    allowed: true,
                    remaining: budget.saturating_sub(est + cost * w) / w,
                    retry_after_ms: 0,
                    reset_after_ms: reset(cur_after),
                }
            } else {
                let retry = if limit >= cur + cost {
                    let room = (limit - cur - cost) * w;
                    (w - room / prev.max(1)).saturating_sub(e)
                } else {
                    let e_next = w - ((limit - cost) * w) / cur.max(1);
                    (w - e) + e_next
                };
                Outcome {
                    allowed: false,
                    remaining: budget.saturating_sub(est) / w,
                    retry_after_ms: retry,
                    reset_after_ms: reset(cur),
                }
            }
        })
    }
}

/// Sliding-window counter flooring the weighted previous count.
pub const SLIDING_WINDOW_FLOORED_WEIGHT: Subject = Subject {
    name: "sliding-window-floored-weight",
    base: Algorithm::SlidingWindow,
    promise: Algorithm::SlidingWindow,
    machine: &SlidingWindowFlooredWeight,
};

/// Every mutant.
pub const ALL: [Subject; 15] = [
    FIXED_WINDOW_LIMIT_PLUS_ONE,
    FIXED_WINDOW_CHECKS_ONE_UNIT,
    FIXED_WINDOW_RETRY_LATE,
    SLIDING_LOG_DROPS_EARLY,
    SLIDING_LOG_KEEPS_BOUNDARY,
    SLIDING_LOG_COUNTS_REQUESTS,
    TOKEN_BUCKET_FLOORED_REFILL,
    TOKEN_BUCKET_PING_PONG,
    TOKEN_BUCKET_ABS_DIFF,
    TOKEN_BUCKET_REMAINING_CEIL,
    TOKEN_BUCKET_PEEK_CONSUMES,
    GCRA_RETRY_FLOORED,
    GCRA_INTERVAL_FLOORED,
    GCRA_RESET_BEFORE_CONSUMING,
    SLIDING_WINDOW_FLOORED_WEIGHT,
];
