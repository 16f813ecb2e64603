//! The algorithms as pure functions: `step(quota, &mut state, now_ms, cost) -> Outcome`.
//!
//! No I/O, no clock, no async: time is an argument. Each twin keeps exactly the state its
//! Lua script keeps in Redis and does the same integer arithmetic, so the in-process store
//! and Redis give identical decisions for the same requests at the same (client) times.
//! That equivalence is tested against real Redis for every algorithm.
//!
//! Every state is "at rest" (equivalent to no state at all) once enough time passes; the
//! Redis keys carry a TTL of exactly that long, and the in-process store drops idle states.

pub mod all_or_nothing;
pub mod block;
pub mod concurrency;
pub mod fixed_window;
pub mod gcra;
pub mod lease;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;

use crate::quota::{Algorithm, Quota};

/// What an algorithm decided, before anyone records who decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Admitted or not.
    pub allowed: bool,
    /// Units of cost 1 still admissible now.
    pub remaining: u64,
    /// When denied, ms until the same request alone is admitted; 0 when allowed.
    pub retry_after_ms: u64,
    /// Ms until the key's state is at rest.
    pub reset_after_ms: u64,
}

impl From<crate::Decision> for Outcome {
    /// The algorithm's part of a decision, for comparing a limiter with its twin.
    fn from(d: crate::Decision) -> Self {
        Outcome {
            allowed: d.allowed,
            remaining: d.remaining,
            retry_after_ms: crate::duration::whole_ms(d.retry_after),
            reset_after_ms: crate::duration::whole_ms(d.reset_after),
        }
    }
}

/// One key's state under any algorithm.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Fixed window.
    Window(fixed_window::WindowState),
    /// Sliding-window counter.
    Sliding(sliding_window::SlidingState),
    /// Sliding log.
    Log(sliding_log::LogState),
    /// Token bucket.
    Bucket(token_bucket::BucketState),
    /// GCRA.
    Gcra(gcra::GcraState),
}

/// Runs `$function` of `algorithm`'s module on the state of its own type in `state`, as
/// `$module::$function(quota, &mut own, now_ms, $extra)`, and puts the state back. A state of
/// another type (an algorithm change for a live key) is treated as absent, as the script would
/// see different keys; so is one whose keys Redis drops when they are next touched at
/// `now_ms`: the twin forgets the state at the same moment, so a clock that then steps back
/// sees what Redis sees.
macro_rules! on_own_state {
    ($function:ident, $algorithm:expr, $quota:expr, $state:expr, $now_ms:expr, $extra:expr) => {
        match $algorithm {
            Algorithm::FixedWindow => on_own_state!(@run $function, Window, fixed_window, $quota, $state, $now_ms, $extra),
            Algorithm::SlidingWindow => on_own_state!(@run $function, Sliding, sliding_window, $quota, $state, $now_ms, $extra),
            Algorithm::SlidingLog => on_own_state!(@run $function, Log, sliding_log, $quota, $state, $now_ms, $extra),
            Algorithm::TokenBucket => on_own_state!(@run $function, Bucket, token_bucket, $quota, $state, $now_ms, $extra),
            Algorithm::Gcra => on_own_state!(@run $function, Gcra, gcra, $quota, $state, $now_ms, $extra),
        }
    };
    (@run $function:ident, $variant:ident, $module:ident, $quota:expr, $state:expr, $now_ms:expr, $extra:expr) => {{
        let mut own = match $state.take() {
            Some(State::$variant(s)) if !$module::expired($quota, &s, $now_ms) => Some(s),
            _ => None,
        };
        let result = $module::$function($quota, &mut own, $now_ms, $extra);
        *$state = own.map(State::$variant);
        result
    }};
}

/// Runs `algorithm` on `state` (None = no state yet). `cost` must not exceed the quota's
/// capacity for the algorithm; the limiter checks that before calling.
#[inline(always)] // an in-process decision's path is one function: see `store::local`
pub fn step(algorithm: Algorithm, quota: &Quota, state: &mut Option<State>, now_ms: u64, cost: u64) -> Outcome {
    on_own_state!(step, algorithm, quota, state, now_ms, cost)
}

/// Gives `units` back to `state` at `now_ms` (a refund: a request that should not have
/// counted, a sign-in that succeeded), never beyond the quota: a window's count never below
/// zero, a bucket never above its burst, a TAT never before now. The units taken back are the
/// newest: a sliding log forgets its latest entries, a sliding-window counter takes from the
/// current window before the previous one. Returns whether anything was given back (a key at
/// its full quota has nothing to take). `units` must not exceed the quota's capacity, as a
/// cost must not.
pub fn refund(algorithm: Algorithm, quota: &Quota, state: &mut Option<State>, now_ms: u64, units: u64) -> bool {
    // Nothing to give back: the script returns before it reads a key, so a state Redis would
    // drop on reading it stays (a clock that then steps back still sees it).
    if units == 0 {
        return false;
    }
    // As in `step`: a state of another type, or one Redis has dropped, is no state.
    on_own_state!(refund, algorithm, quota, state, now_ms, units)
}

/// Charges `units` to `state` at `now_ms` whether they fit or not (a debit: the part of a
/// request's cost found after it was admitted, beyond what it reserved). What does not fit is
/// owed, and later requests wait it out as they wait for units spent: a window's count goes
/// past its limit, a bucket's time moves on by the time its refill takes to earn the debt, a
/// TAT moves past the burst. A key owes at most one capacity (its limit, or its burst for a
/// bucket), so its state stays as bounded as admissions keep it; units beyond that are not
/// charged. Returns the units charged.
pub fn debit(algorithm: Algorithm, quota: &Quota, state: &mut Option<State>, now_ms: u64, units: u64) -> u64 {
    // As a refund: nothing to charge reads no key.
    if units == 0 {
        return 0;
    }
    on_own_state!(debit, algorithm, quota, state, now_ms, units)
}

/// Whether `state` is at rest at `now_ms`: dropping it changes no decision at `now_ms` or
/// later. Its Redis key expires one millisecond after it first is (see each `expired`).
#[cfg(feature = "harness")]
pub fn is_idle(quota: &Quota, state: &State, now_ms: u64) -> bool {
    match state {
        State::Window(s) => fixed_window::is_idle(quota, s, now_ms),
        State::Sliding(s) => sliding_window::is_idle(quota, s, now_ms),
        State::Log(s) => sliding_log::is_idle(quota, s, now_ms),
        State::Bucket(s) => token_bucket::is_idle(quota, s, now_ms),
        State::Gcra(s) => gcra::is_idle(quota, s, now_ms),
    }
}

/// Whether Redis has dropped `state`'s keys when they are touched at `now_ms` (each key's
/// TTL ends when its state is at rest; Redis expires strictly after the deadline). The
/// twins forget such a state the same way, so a clock that steps back sees what Redis sees.
#[cfg(feature = "harness")]
pub fn expired(quota: &Quota, state: &State, now_ms: u64) -> bool {
    match state {
        State::Window(s) => fixed_window::expired(quota, s, now_ms),
        State::Sliding(s) => sliding_window::expired(quota, s, now_ms),
        State::Log(s) => sliding_log::expired(quota, s, now_ms),
        State::Bucket(s) => token_bucket::expired(quota, s, now_ms),
        State::Gcra(s) => gcra::expired(quota, s, now_ms),
    }
}

/// `ceil(a / b)` for `b > 0`.
pub(crate) const fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Worked examples: each algorithm's file walks one key through a short table of requests and
/// the decisions its twin must give, so `cargo test -p redis-ratelimit` checks the algorithms with no
/// Redis at all.
#[cfg(test)]
pub(crate) mod worked {
    use super::{step, Outcome, State};
    use crate::quota::{Algorithm, Quota};

    /// Admitted.
    pub(crate) const ALLOW: bool = true;
    /// Denied.
    pub(crate) const DENY: bool = false;

    /// One line: at `t_ms` a request of `cost` is (allowed, remaining, retry_after_ms,
    /// reset_after_ms).
    pub(crate) type Line = (u64, u64, bool, u64, u64, u64);

    /// Walks one key through `lines` in order, from no state.
    pub(crate) fn walk(algorithm: Algorithm, quota: Quota, lines: &[Line]) {
        let mut state: Option<State> = None;
        for (i, &(t_ms, cost, allowed, remaining, retry_after_ms, reset_after_ms)) in lines.iter().enumerate() {
            let want = Outcome { allowed, remaining, retry_after_ms, reset_after_ms };
            let got = step(algorithm, &quota, &mut state, t_ms, cost);
            assert_eq!(got, want, "{algorithm} {quota:?}, line {} (t={t_ms} ms, cost {cost})", i + 1);
        }
    }
}

#[cfg(test)]
mod debit_tests {
    use super::{debit, step, State};
    use crate::quota::{Algorithm, Quota};

    /// 4 a second, a burst of 4: every algorithm's capacity is 4.
    fn quota() -> Quota {
        Quota::new(4, std::time::Duration::from_secs(1)).with_burst(4)
    }

    #[test]
    fn a_debit_is_charged_whether_it_fits_or_not_up_to_one_capacity_owed() {
        for algorithm in Algorithm::ALL {
            let q = quota();
            let mut state: Option<State> = None;
            let now = 10_000;
            // What fits is charged as an admission would charge it.
            assert_eq!(debit(algorithm, &q, &mut state, now, 3), 3, "{algorithm}");
            let last = step(algorithm, &q, &mut state, now, 1);
            assert!(last.allowed && last.remaining == 0, "{algorithm}: {last:?}");
            // Past empty, a key owes at most one capacity: 6 asked, 4 charged, then none.
            assert_eq!(debit(algorithm, &q, &mut state, now, 6), 4, "{algorithm}");
            assert_eq!(debit(algorithm, &q, &mut state, now, 1), 0, "{algorithm}: nothing beyond");
            assert_eq!(debit(algorithm, &q, &mut state, now, 0), 0, "{algorithm}");
            // The debt is waited out: refused until its Retry-After, admitted then.
            let refused = step(algorithm, &q, &mut state, now, 1);
            assert!(!refused.allowed && refused.remaining == 0, "{algorithm}: {refused:?}");
            let later = now + refused.retry_after_ms;
            let before = step(algorithm, &q, &mut state.clone(), later - 1, 1);
            assert!(!before.allowed, "{algorithm}: admitted a millisecond before its Retry-After");
            assert!(step(algorithm, &q, &mut state, later, 1).allowed, "{algorithm} at {later}");
        }
    }

    #[test]
    fn a_bucket_in_debt_earns_again_only_once_its_debt_is_paid() {
        for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
            let q = quota();
            let mut state: Option<State> = None;
            // All 4 spent and 4 owed: at 4 a second, the first token comes back after 1.25 s.
            assert_eq!(debit(algorithm, &q, &mut state, 0, 8), 8, "{algorithm}");
            let refused = step(algorithm, &q, &mut state, 0, 1);
            assert_eq!(refused.retry_after_ms, 1_250, "{algorithm}");
            // A refund pays the debt back first.
            assert!(super::refund(algorithm, &q, &mut state, 0, 4), "{algorithm}");
            assert_eq!(step(algorithm, &q, &mut state.clone(), 0, 1).retry_after_ms, 250, "{algorithm}");
        }
    }
}
