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

/// [`decide`] with time in microseconds (what Redis's `TIME` gives in server-time mode).
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

/// Whether Redis has dropped the key when touched at `now_ms`: its TTL ends at the first
/// millisecond at or after the TAT.
pub fn expired(_q: &Quota, s: &GcraState, now_ms: u64) -> bool {
    now_ms > ceil_div(s.tat_us, 1000)
}

/// At rest once the TAT has passed.
pub fn is_idle(_q: &Quota, s: &GcraState, now_ms: u64) -> bool {
    s.tat_us <= now_ms * 1000
}
