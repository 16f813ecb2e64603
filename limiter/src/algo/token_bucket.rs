//! Token bucket, done right.
//!
//! Tokens are kept in integer *units*: one token is `period_ms` units and the bucket gains
//! `limit` units per millisecond, so a refill of a fraction of a token per millisecond is
//! carried exactly instead of being floored away (the defect of ADR-002's script, which
//! starves a client whose requests come faster than one token's refill time).
//!
//! The timestamp only moves forward: when the clock reads earlier than the stored time (a
//! client clock stepping back, or instances with skewed clocks), no time has passed: the
//! bucket neither refills nor drains.
//!
//! Bound: in any interval of length `d`, at most `burst + limit * d / period_ms` units.

use super::{ceil_div, Outcome};
use crate::quota::Quota;

/// Units in the bucket and the time they were counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketState {
    /// Tokens times `period_ms`.
    pub units: u64,
    /// When `units` was last brought up to date (ms).
    pub ts_ms: u64,
}

/// `units` held at `ts_ms`, brought to `now_ms` as a request brings them: at most the burst
/// `cap` (a bucket written under a larger burst holds at most this one), refilled by `limit`
/// a millisecond since `ts_ms`, unless the clock reads earlier (then nothing moves).
fn refilled(cap: u64, limit: u64, units: u64, ts_ms: u64, now_ms: u64) -> (u64, u64) {
    let units = units.min(cap);
    if now_ms <= ts_ms {
        return (units, ts_ms);
    }
    // Compare against the time to fill before multiplying, so `elapsed * limit` can never
    // leave the exactly representable range however long the key sat idle.
    let elapsed = now_ms - ts_ms;
    let fill_ms = ceil_div(cap - units, limit);
    (if elapsed >= fill_ms { cap } else { units + elapsed * limit }, now_ms)
}

/// See the module docs.
pub fn step(q: &Quota, state: &mut Option<BucketState>, now_ms: u64, cost: u64) -> Outcome {
    let (limit, period) = (q.limit(), q.period_ms());
    let cap = q.burst() * period;
    let need = cost * period;
    let BucketState { mut units, mut ts_ms } = state.unwrap_or(BucketState { units: cap, ts_ms: now_ms });
    (units, ts_ms) = refilled(cap, limit, units, ts_ms, now_ms);
    // Non-zero only when the clock reads earlier than the stored time: refill resumes from
    // the stored time, so waits are counted from there.
    let ahead = ts_ms - now_ms;
    let allowed = units >= need;
    let retry_after_ms = if allowed {
        units -= need;
        if cost > 0 {
            *state = Some(BucketState { units, ts_ms });
        }
        0
    } else {
        ahead + ceil_div(need - units, limit)
    };
    Outcome { allowed, remaining: units / period, retry_after_ms, reset_after_ms: ahead + ceil_div(cap - units, limit) }
}

/// Puts `units` tokens back, up to the burst, after refilling to `now_ms` as a request
/// would. A bucket whose time is ahead of now (a debt left by `debit`, or a clock behind
/// another's) is paid back first: its time moves back, by a millisecond per `limit` units,
/// never before now; tokens held at that time would be spent before the debt was paid. A
/// bucket that is full (or has no state, which is full) has nothing to take; one that the
/// refund fills, with no time stored ahead of now, is deleted, which is full too.
pub fn refund(q: &Quota, state: &mut Option<BucketState>, now_ms: u64, units: u64) -> bool {
    let (limit, period) = (q.limit(), q.period_ms());
    let cap = q.burst() * period;
    let Some(BucketState { units: mut held, mut ts_ms }) = *state else { return false };
    (held, ts_ms) = refilled(cap, limit, held, ts_ms, now_ms);
    if held == cap {
        return false;
    }
    let mut back = units * period;
    let paid_ms = (ts_ms - now_ms).min(back / limit);
    ts_ms -= paid_ms;
    back -= paid_ms * limit;
    held = cap.min(held + back);
    let ttl_ms = (ts_ms - now_ms) + ceil_div(cap - held, limit);
    *state = (ttl_ms > 0).then_some(BucketState { units: held, ts_ms });
    true
}

/// Takes `units` tokens whether the bucket holds them or not, after refilling to `now_ms` as a
/// request would. What it does not hold is owed: the bucket's time moves on by the time the
/// refill takes to earn it, so nothing refills before then, as after a clock stepped back.
/// A bucket owes at most one burst (see `algo::debit`): the units charged.
pub fn debit(q: &Quota, state: &mut Option<BucketState>, now_ms: u64, units: u64) -> u64 {
    let (limit, period) = (q.limit(), q.period_ms());
    let cap = q.burst() * period;
    let BucketState { units: mut held, mut ts_ms } = state.unwrap_or(BucketState { units: cap, ts_ms: now_ms });
    (held, ts_ms) = refilled(cap, limit, held, ts_ms, now_ms);
    let owed = (ts_ms - now_ms).saturating_mul(limit);
    let charged = units.min((held + cap).saturating_sub(owed) / period);
    if charged == 0 {
        return 0;
    }
    let take = charged * period;
    if take <= held {
        held -= take;
    } else {
        let short = take - held;
        let wait_ms = ceil_div(short, limit);
        ts_ms += wait_ms;
        // What the refill earns past the debt within its last millisecond; a bucket that
        // earns more than its burst in a millisecond keeps a burst.
        held = (wait_ms * limit - short).min(cap);
    }
    *state = Some(BucketState { units: held, ts_ms });
    charged
}

/// Whether Redis has dropped the key when touched at `now_ms`: its TTL ends when the bucket
/// is full (`ts + fill`), and Redis expires a key strictly after its deadline.
pub fn expired(q: &Quota, s: &BucketState, now_ms: u64) -> bool {
    let cap = q.burst() * q.period_ms();
    now_ms > s.ts_ms + ceil_div(cap - s.units.min(cap), q.limit())
}

/// At rest once full.
#[cfg(feature = "harness")]
pub fn is_idle(q: &Quota, s: &BucketState, now_ms: u64) -> bool {
    let cap = q.burst() * q.period_ms();
    now_ms >= s.ts_ms && now_ms - s.ts_ms >= ceil_div(cap - s.units.min(cap), q.limit())
}

#[cfg(test)]
mod tests {
    use super::super::worked::{walk, Line, ALLOW, DENY};
    use crate::quota::{Algorithm, Quota};

    /// 2 tokens per second, 3 at most. Refill is counted in exact units, so 100 ms earns 0.2
    /// of a token and keeps it.
    const LINES: &[Line] = &[
        // t_ms  cost  allowed  remaining  retry_ms  reset_ms
        (0, 3, ALLOW, 0, 0, 1_500),     // the whole burst; full again in 1.5 s
        (100, 1, DENY, 0, 400, 1_400),  // 0.2 token earned, 0.8 missing at 2/s
        (500, 1, ALLOW, 0, 0, 1_500),   // exactly when Retry-After said
        (750, 0, ALLOW, 0, 0, 1_250),   // a peek: half a token, consumes nothing
        (400, 1, DENY, 0, 600, 1_600),  // the clock stepped back 350 ms: no refill, no drain
        (5_000, 2, ALLOW, 1, 0, 1_000), // long idle: full again
    ];

    #[test]
    fn worked_example() {
        walk(Algorithm::TokenBucket, Quota::new(2, std::time::Duration::from_secs(1)).with_burst(3), LINES);
    }
}
