//! Fixed window: one counter per key, of the aligned window of `period_ms` it counts in, as
//! the HLD card's INCR + EXPIRE script. At most `limit` per aligned window, but up to
//! `2 * limit` in a window-long interval straddling a boundary (the end of one window and the
//! start of the next).
//!
//! Unlike the notes' script, a denied request is not counted: the script reads the counter
//! first and writes only on admission, so a flood of denials writes nothing and the window's
//! count stays the number actually admitted.
//!
//! A key counts in the latest window it has seen: a reading behind it (a caller whose clock is
//! behind another's, or Redis's clock stepped back) counts there, not in its own window. Keyed
//! by the window each reading names instead, a caller whose clock is behind the one that opened
//! a window would find its key gone at the opener's end of the window and open it again, every
//! window: callers at two clocks would share twice the limit.

use super::Outcome;
use crate::quota::Quota;

/// The counter of the window a key counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    /// Window index: `now_ms / period_ms` of the reading that opened it.
    pub window: u64,
    /// Units admitted in that window.
    pub count: u64,
}

/// The window a key counts in at `now_ms`: the reading's own, or the latest its state has
/// seen when the reading is behind it; and the units already counted there.
fn counted_in(q: &Quota, state: &Option<WindowState>, now_ms: u64) -> (u64, u64) {
    let own = now_ms / q.period_ms();
    match *state {
        Some(s) if s.window > own => (s.window, s.count),
        Some(s) if s.window == own => (own, s.count),
        _ => (own, 0),
    }
}

/// See the module docs.
pub fn step(q: &Quota, state: &mut Option<WindowState>, now_ms: u64, cost: u64) -> Outcome {
    let limit = q.limit();
    let (window, count) = counted_in(q, state, now_ms);
    let to_end = (window + 1) * q.period_ms() - now_ms;
    if count + cost <= limit {
        let after = count + cost;
        if cost > 0 {
            *state = Some(WindowState { window, count: after });
        }
        Outcome {
            allowed: true,
            remaining: limit - after,
            retry_after_ms: 0,
            reset_after_ms: if after > 0 { to_end } else { 0 },
        }
    } else {
        // The next window starts empty and cost <= limit, so that is exactly when it fits.
        Outcome {
            allowed: false,
            remaining: limit.saturating_sub(count),
            retry_after_ms: to_end,
            reset_after_ms: to_end,
        }
    }
}

/// Takes up to `units` off the count of the window the key counts in now (the key is deleted
/// at zero); an earlier window no longer counts and is left alone.
pub fn refund(q: &Quota, state: &mut Option<WindowState>, now_ms: u64, units: u64) -> bool {
    match state {
        Some(s) if s.window >= now_ms / q.period_ms() && s.count > 0 => {
            s.count = s.count.saturating_sub(units);
            if s.count == 0 {
                *state = None;
            }
            true
        }
        _ => false,
    }
}

/// Charges `units` to the window the key counts in now whether they fit or not, up to twice
/// the limit (see `algo::debit`): the units charged.
pub fn debit(q: &Quota, state: &mut Option<WindowState>, now_ms: u64, units: u64) -> u64 {
    let (window, count) = counted_in(q, state, now_ms);
    let charged = units.min((2 * q.limit()).saturating_sub(count));
    if charged > 0 {
        *state = Some(WindowState { window, count: count + charged });
    }
    charged
}

/// The key expires at its window's end (on a clock that moves forward), and a reading past its
/// window counts in a window of its own whether the key is there or not: it is never read
/// expired.
pub fn expired(_q: &Quota, _s: &WindowState, _now_ms: u64) -> bool {
    false
}

/// At rest once its window has ended.
#[cfg(feature = "harness")]
pub fn is_idle(q: &Quota, s: &WindowState, now_ms: u64) -> bool {
    now_ms / q.period_ms() > s.window
}

#[cfg(test)]
mod tests {
    use super::super::worked::{walk, Line, ALLOW, DENY};
    use crate::quota::{Algorithm, Quota};

    /// 3 per aligned second. A denied request costs nothing; the next window starts empty,
    /// so 3 at t=400 and 3 at t=1000 fit: 6 within 600 ms across the boundary.
    const LINES: &[Line] = &[
        // t_ms  cost  allowed  remaining  retry_ms  reset_ms
        (0, 1, ALLOW, 2, 0, 1_000),
        (400, 2, ALLOW, 0, 0, 600),
        (999, 1, DENY, 0, 1, 1),        // full: the window ends in 1 ms
        (999, 0, ALLOW, 0, 0, 1),       // a peek is admitted and consumes nothing
        (1_000, 3, ALLOW, 0, 0, 1_000), // a new window, a new count
        (1_500, 1, DENY, 0, 500, 500),
        (2_000, 0, ALLOW, 3, 0, 0), // an empty window is at rest
    ];

    #[test]
    fn worked_example() {
        walk(Algorithm::FixedWindow, Quota::new(3, std::time::Duration::from_secs(1)), LINES);
    }
}
