//! GCRA (generic cell rate algorithm), as redis-cell and governor run it: one value per
//! key, the theoretical arrival time (TAT) of the next request if requests came exactly at
//! the rate. A request of cost `n` moves the TAT by `n * T` (T = emission interval); it is
//! admitted if the new TAT is no further than `burst * T` ahead of now.
//!
//! Time is in microseconds so fast rates keep their precision; T is rounded up, which can
//! only make the limiter stricter. Retry-After is exact: the moment `TAT' - burst * T`
//! reaches now. A clock that steps back sees a TAT further ahead, so it admits less, never
//! more.

use super::{ceil_div, Outcome};
use crate::quota::Quota;

/// The theoretical arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraState {
    /// TAT in microseconds since the epoch.
    pub tat_us: u64,
}

/// See the module docs.
pub fn step(q: &Quota, state: &mut Option<GcraState>, now_ms: u64, cost: u64) -> Outcome {
    step_us(q, state, now_ms * 1000, cost)
}

/// [`step`] with time in microseconds (what Redis's `TIME` gives in server-time mode).
pub fn step_us(q: &Quota, state: &mut Option<GcraState>, now_us: u64, cost: u64) -> Outcome {
    let t = q.gcra_interval_us();
    let tau = q.burst() * t;
    let tat = state.map_or(now_us, |s| s.tat_us.max(now_us));
    let new_tat = tat + cost * t;
    if new_tat <= now_us + tau {
        if cost > 0 {
            *state = Some(GcraState { tat_us: new_tat });
        }
        Outcome {
            allowed: true,
            remaining: (now_us + tau - new_tat) / t,
            retry_after_ms: 0,
            reset_after_ms: ceil_div(new_tat - now_us, 1000),
        }
    } else {
        Outcome {
            allowed: false,
            remaining: (now_us + tau).saturating_sub(tat) / t,
            retry_after_ms: ceil_div(new_tat - tau - now_us, 1000),
            reset_after_ms: ceil_div(tat - now_us, 1000),
        }
    }
}

/// Moves the TAT back by `units` emission intervals, never before now (a TAT at or before
/// now is a full bucket: the key is deleted).
pub fn refund(q: &Quota, state: &mut Option<GcraState>, now_ms: u64, units: u64) -> bool {
    refund_us(q, state, now_ms * 1000, units)
}

/// [`refund`] with time in microseconds.
pub fn refund_us(q: &Quota, state: &mut Option<GcraState>, now_us: u64, units: u64) -> bool {
    let Some(GcraState { tat_us }) = *state else { return false };
    if tat_us <= now_us {
        return false;
    }
    let tat_us = tat_us.saturating_sub(units * q.gcra_interval_us()).max(now_us);
    *state = (tat_us > now_us).then_some(GcraState { tat_us });
    true
}

/// Moves the TAT on by `units` emission intervals whether they fit or not, never beyond one
/// burst past an empty bucket (see `algo::debit`): the units charged.
pub fn debit(q: &Quota, state: &mut Option<GcraState>, now_ms: u64, units: u64) -> u64 {
    debit_us(q, state, now_ms * 1000, units)
}

/// [`debit`] with time in microseconds.
pub fn debit_us(q: &Quota, state: &mut Option<GcraState>, now_us: u64, units: u64) -> u64 {
    let t = q.gcra_interval_us();
    let tat = state.map_or(now_us, |s| s.tat_us.max(now_us));
    let room = (now_us + 2 * q.burst() * t).saturating_sub(tat);
    let charged = units.min(room / t);
    if charged > 0 {
        *state = Some(GcraState { tat_us: tat + charged * t });
    }
    charged
}

/// Whether Redis has dropped the key when touched at `now_ms`: its TTL ends at the first
/// millisecond at or after the TAT.
pub fn expired(_q: &Quota, s: &GcraState, now_ms: u64) -> bool {
    now_ms > ceil_div(s.tat_us, 1000)
}

/// At rest once the TAT has passed.
#[cfg(feature = "harness")]
pub fn is_idle(_q: &Quota, s: &GcraState, now_ms: u64) -> bool {
    s.tat_us <= now_ms * 1000
}

#[cfg(test)]
mod tests {
    use super::super::worked::{walk, Line, ALLOW, DENY};
    use crate::quota::{Algorithm, Quota};

    /// 2 per second (one every 500 ms), burst 3: the TAT may run at most 1.5 s ahead of now.
    const LINES: &[Line] = &[
        // t_ms  cost  allowed  remaining  retry_ms  reset_ms
        (0, 1, ALLOW, 2, 0, 500),
        (0, 2, ALLOW, 0, 0, 1_500),
        (100, 1, DENY, 0, 400, 1_400),
        (500, 1, ALLOW, 0, 0, 1_500),    // exactly when Retry-After said
        (500, 0, ALLOW, 0, 0, 1_500),    // a peek consumes nothing
        (10_000, 3, ALLOW, 0, 0, 1_500), // the key expired long ago: the whole burst again
    ];

    #[test]
    fn worked_example() {
        walk(Algorithm::Gcra, Quota::new(2, std::time::Duration::from_secs(1)).with_burst(3), LINES);
    }
}
