//! ADR-002's token bucket (`docs/ORIGINS.md`) as a state machine, operation for operation
//! (Lua numbers are doubles, so it computes in `f64` in the script's order and gets the same
//! bits): a known-bad subject every bucket invariant must catch.
//!
//! What is wrong with it, on purpose kept:
//! - `math.floor` of the refill, then `lastRefillTime = now` on *every* call: the fraction
//!   of a token earned since the last call is thrown away. A client calling more often than
//!   one token's refill time never gets a token back: starvation.
//! - The time is the calling instance's clock (ARGV). Instances with skewed clocks move
//!   `lastRefillTime` back and forth; a step back makes `timePassed` negative, and the
//!   floored negative refill *drains* the bucket; a step forward refills it early.
//! - Every call writes, denials and peeks included, and the TTL is a fixed hour.

use redis_ratelimit::harness::algo::Outcome;
use redis_ratelimit::Quota;

use crate::machine::{Adr002State, MachineState, StateMachine};

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// The script's TTL, `EXPIRE key 3600`.
pub const TTL_MS: u64 = 3_600_000;

/// Refill rate in tokens per second as the script receives it (`ARGV[3]`).
pub fn refill_rate_per_sec(q: &Quota) -> f64 {
    (q.limit() as f64 * 1000.0) / q.period_ms() as f64
}

/// What the script returns: `{allowed, tokens}` (tokens truncated to an integer by Redis).
pub fn script(q: &Quota, state: &mut Option<Adr002State>, now_ms: u64, cost: u64) -> (bool, i64) {
    let capacity = q.burst() as f64;
    let refill_rate = refill_rate_per_sec(q);
    let now = now_ms as f64;
    let tokens = state.map_or(capacity, |s| s.tokens);
    let last_refill_time = state.map_or(now, |s| s.last_refill_ms);
    let time_passed = now - last_refill_time;
    let tokens_to_add = ((time_passed * refill_rate) / 1000.0).floor();
    let mut tokens = capacity.min(tokens + tokens_to_add);
    let mut allowed = false;
    if tokens >= cost as f64 {
        tokens -= cost as f64;
        allowed = true;
    }
    *state = Some(Adr002State { tokens, last_refill_ms: now });
    (allowed, tokens as i64)
}

/// The decision the limiter builds from the script's reply. The record's script returns no
/// wait time; Retry-After is what its own arithmetic suggests (the tokens missing at the
/// configured rate), which its floored refill then fails to honour.
pub fn outcome_from_reply(q: &Quota, allowed: bool, tokens: i64, cost: u64) -> Outcome {
    let tokens = tokens.max(0) as u64;
    let missing = |n: u64| ceil_div(n * q.period_ms(), q.limit());
    Outcome {
        allowed,
        remaining: tokens,
        retry_after_ms: if allowed { 0 } else { missing(cost.saturating_sub(tokens)) },
        reset_after_ms: missing(q.burst().saturating_sub(tokens)),
    }
}

/// See the module docs.
fn step(q: &Quota, state: &mut Option<Adr002State>, now_ms: u64, cost: u64) -> Outcome {
    let (allowed, tokens) = script(q, state, now_ms, cost);
    outcome_from_reply(q, allowed, tokens, cost)
}

/// Whether Redis has dropped the key when touched at `now_ms`: an hour after the last call
/// (every call writes and sets `EXPIRE 3600`).
pub fn expired(_q: &Quota, s: &Adr002State, now_ms: u64) -> bool {
    (now_ms as f64) > s.last_refill_ms + TTL_MS as f64
}

/// At rest when the hour-long TTL has run out since the last write.
pub fn is_idle(_q: &Quota, s: &Adr002State, now_ms: u64) -> bool {
    (now_ms as f64) >= s.last_refill_ms + TTL_MS as f64
}

/// The subject as a [`StateMachine`].
#[derive(Debug, Clone, Copy)]
pub struct Adr002;

impl StateMachine for Adr002 {
    fn step(&self, q: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        // Redis drops the hash an hour after the last call; a state of another machine is
        // another key.
        let mut own = match state.take() {
            Some(MachineState::Adr002(s)) if !expired(q, &s, now_ms) => Some(s),
            _ => None,
        };
        let outcome = step(q, &mut own, now_ms, cost);
        *state = own.map(MachineState::Adr002);
        outcome
    }

    fn is_idle(&self, q: &Quota, state: &MachineState, now_ms: u64) -> bool {
        match state {
            MachineState::Adr002(s) => is_idle(q, s, now_ms),
            MachineState::Twin(_) => true,
        }
    }

    fn expired(&self, q: &Quota, state: &MachineState, now_ms: u64) -> bool {
        match state {
            MachineState::Adr002(s) => expired(q, s, now_ms),
            MachineState::Twin(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use redis_ratelimit::Quota;

    use super::*;

    /// The subject at 2 tokens per second, burst 3, called every 400 ms: each call earns 0.8
    /// of a token, which the floored refill throws away, so after the burst it never admits
    /// again (a correct bucket admits 4 of every 5 such calls).
    #[test]
    fn worked_example() {
        // t_ms, allowed, remaining, retry_after_ms, reset_after_ms (every request costs 1)
        let lines = [
            (0, true, 2, 0, 500),
            (400, true, 1, 0, 1_000),
            (800, true, 0, 0, 1_500),
            (1_200, false, 0, 500, 1_500),
            (1_600, false, 0, 500, 1_500),
            (2_000, false, 0, 500, 1_500),
        ];
        let q = Quota::new(2, std::time::Duration::from_secs(1)).with_burst(3);
        let mut state = None;
        for (t, allowed, remaining, retry_after_ms, reset_after_ms) in lines {
            let want = Outcome { allowed, remaining, retry_after_ms, reset_after_ms };
            assert_eq!(Adr002.step(&q, &mut state, t, 1), want, "t={t}");
        }
    }
}
