//! Sliding-window counter (the HLD card's "Lua for sliding-window-counter precision",
//! Cloudflare's algorithm): the current window's count plus the previous window's count
//! weighted by how much of it still overlaps the sliding window ending now.
//!
//! The estimate is `prev * (W - e) / W + cur` where `e` is the time into the current
//! window. To stay exact in both Rust and Lua the comparison is scaled by `W`:
//! `prev * (W - e) + cur * W + cost * W <= limit * W`, all integers below 2^50.
//! It assumes the previous window's requests were spread evenly, so it can admit somewhat
//! more or fewer than `limit` in a true sliding window; the harness measures how often.

use super::Outcome;
use crate::quota::Quota;

/// The counters of the current and previous windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingState {
    /// Index of the window `cur` counts.
    pub window: u64,
    /// Units admitted in window `window`.
    pub cur: u64,
    /// Units admitted in window `window - 1`.
    pub prev: u64,
}

/// The current and previous windows' counts at window `window`: a state of an older window
/// counts nothing.
fn counts(state: &Option<SlidingState>, window: u64) -> (u64, u64) {
    match *state {
        Some(s) if s.window == window => (s.cur, s.prev),
        Some(s) if s.window + 1 == window => (0, s.cur),
        _ => (0, 0),
    }
}

/// See the module docs.
pub fn step(q: &Quota, state: &mut Option<SlidingState>, now_ms: u64, cost: u64) -> Outcome {
    let (limit, w) = (q.limit(), q.period_ms());
    let window = now_ms / w;
    let e = now_ms % w;
    let (cur, prev) = counts(state, window);
    let est = prev * (w - e) + cur * w;
    let budget = limit * w;
    if est + cost * w <= budget {
        let cur_after = cur + cost;
        if cost > 0 {
            *state = Some(SlidingState { window, cur: cur_after, prev });
        }
        Outcome {
            allowed: true,
            remaining: (budget - est - cost * w) / w,
            retry_after_ms: 0,
            reset_after_ms: reset_after(w, e, cur_after, prev),
        }
    } else {
        let retry = if limit >= cur + cost {
            // Fits in this window once the previous window's weight has shrunk enough:
            // prev * (W - e') <= (limit - cur - cost) * W. Denied now means prev > 0.
            let room = (limit - cur - cost) * w;
            let e_needed = w - room / prev;
            e_needed - e
        } else {
            // Must wait for the next window, where this window's count becomes the weighted
            // previous one: cur * (W - e'') <= (limit - cost) * W. Denied means cur > 0.
            let e_next = w - ((limit - cost) * w) / cur;
            (w - e) + e_next
        };
        Outcome {
            allowed: false,
            remaining: budget.saturating_sub(est) / w,
            retry_after_ms: retry,
            reset_after_ms: reset_after(w, e, cur, prev),
        }
    }
}

/// Charges `units` to the current window's count whether they fit or not, until the estimate
/// is twice the limit (see `algo::debit`): the units charged.
pub fn debit(q: &Quota, state: &mut Option<SlidingState>, now_ms: u64, units: u64) -> u64 {
    let (limit, w) = (q.limit(), q.period_ms());
    let window = now_ms / w;
    let e = now_ms % w;
    let (cur, prev) = counts(state, window);
    let room = (2 * limit * w).saturating_sub(prev * (w - e) + cur * w);
    let charged = units.min(room / w);
    if charged > 0 {
        *state = Some(SlidingState { window, cur: cur + charged, prev });
    }
    charged
}

/// Takes up to `units` off the current window's count, then what is left of them off the
/// previous window's (a counter is deleted at zero): the newest units go first.
pub fn refund(q: &Quota, state: &mut Option<SlidingState>, now_ms: u64, units: u64) -> bool {
    let window = now_ms / q.period_ms();
    let (cur, prev) = counts(state, window);
    if cur + prev == 0 {
        return false;
    }
    let from_cur = cur.min(units);
    let (cur, prev) = (cur - from_cur, prev - prev.min(units - from_cur));
    *state = (cur + prev > 0).then_some(SlidingState { window, cur, prev });
    true
}

fn reset_after(w: u64, e: u64, cur: u64, prev: u64) -> u64 {
    if cur > 0 {
        2 * w - e
    } else if prev > 0 {
        w - e
    } else {
        0
    }
}

/// The counters expire two windows after the one they count, when neither is read any
/// more: they are never read expired.
pub fn expired(_q: &Quota, _s: &SlidingState, _now_ms: u64) -> bool {
    false
}

/// At rest once neither counter can weigh any more: two windows after the one counted.
#[cfg(feature = "harness")]
pub fn is_idle(q: &Quota, s: &SlidingState, now_ms: u64) -> bool {
    now_ms / q.period_ms() > s.window + 1
}

#[cfg(test)]
mod tests {
    use super::super::worked::{walk, Line, ALLOW, DENY};
    use crate::quota::{Algorithm, Quota};

    /// 10 per second, the previous window weighted by its overlap with the last second.
    const LINES: &[Line] = &[
        // t_ms  cost  allowed  remaining  retry_ms  reset_ms
        (0, 4, ALLOW, 6, 0, 2_000),
        (500, 6, ALLOW, 0, 0, 1_500),
        // Full. Next window, the 10 weigh 10 x (1000 - e) / 1000: cost 1 fits at e = 100.
        (900, 1, DENY, 0, 200, 1_100),
        (1_100, 1, ALLOW, 0, 0, 1_900), // estimate 10 x 0.9 + 0 + 1 = 10
        (1_600, 3, ALLOW, 2, 0, 1_400), // estimate 10 x 0.4 + 1 = 5, plus 3
        // Estimate 10 x 0.4 + 4 = 8; cost 5 fits once the weight is 10 x 0.1, at e = 900.
        (1_600, 5, DENY, 2, 300, 1_400),
        (3_000, 0, ALLOW, 10, 0, 0), // two windows later nothing weighs any more
    ];

    #[test]
    fn worked_example() {
        walk(Algorithm::SlidingWindow, Quota::new(10, std::time::Duration::from_secs(1)), LINES);
    }
}
