//! A block on a key, the twin of `lua/guard.lua`: until the instant the block ends, every
//! request on the key is refused, whatever its quota says, and consumes nothing; then the key
//! decides by its state again, which the block left as it was (a support team stopping an
//! abusive client for an hour, a sign-in form locking an account after repeated failures).
//!
//! A blocked request's answer is the one a client can act on: nothing remaining, Retry-After
//! when the block has ended *and* the request alone fits its quota (the later of the two), and
//! a reset when the key is unblocked and at rest. Only limiters built blockable read blocks:
//! the check is one more read per decision, which a limiter that never blocks should not pay.

use super::{step, Outcome, State};
use crate::quota::{Algorithm, Quota};

/// Decides one request of `cost` on a key whose block ends at `ends_ms` (None: no block), at
/// `now_ms`: [`step`] when the key is not blocked (no block, or `now_ms` at or past its end),
/// else the refusal the module docs describe, leaving `state` as a peek leaves it (a state at
/// rest forgotten, as Redis drops an expired key when it is read).
#[inline(always)] // an in-process decision's path is one function: see `store::local`
pub fn guarded(
    algorithm: Algorithm,
    quota: &Quota,
    state: &mut Option<State>,
    ends_ms: Option<u64>,
    now_ms: u64,
    cost: u64,
) -> Outcome {
    let Some(ends) = ends_ms.filter(|&ends| now_ms < ends) else {
        return step(algorithm, quota, state, now_ms, cost);
    };
    let tried = step(algorithm, quota, &mut state.clone(), now_ms, cost);
    let peek = step(algorithm, quota, state, now_ms, 0);
    let left = ends - now_ms;
    let reset = if tried.allowed && cost > 0 { peek.reset_after_ms } else { tried.reset_after_ms };
    Outcome {
        allowed: false,
        remaining: 0,
        retry_after_ms: left.max(if tried.allowed { 0 } else { tried.retry_after_ms }),
        reset_after_ms: left.max(reset),
    }
}

/// The instant a block of `duration_ms` set at `now_ms` ends (`lua/block.lua`); None for a
/// duration of 0, which lifts the key's block.
pub fn ends(now_ms: u64, duration_ms: u64) -> Option<u64> {
    (duration_ms > 0).then(|| now_ms + duration_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::worked::{ALLOW, DENY};

    /// One key, two per second, blocked from t=1000 for 2.5 s: refused whatever its quota says,
    /// with Retry-After at the block's end, and then deciding by the state the block left.
    #[test]
    fn a_blocked_key_is_refused_until_the_block_ends_then_decides_by_its_state() {
        for algorithm in Algorithm::ALL {
            let q = Quota::per_second(2);
            let mut state = None;
            // Before the block: the quota decides.
            assert!(guarded(algorithm, &q, &mut state, None, 900, 1).allowed, "{algorithm}");
            let ends = ends(1_000, 2_500);
            assert_eq!(ends, Some(3_500));
            let mut at = |t: u64, cost: u64| guarded(algorithm, &q, &mut state, ends, t, cost);
            // Blocked: nothing remaining, retry at the block's end.
            let refused = at(1_000, 1);
            assert_eq!((refused.allowed, refused.remaining, refused.retry_after_ms), (DENY, 0, 2_500), "{algorithm}");
            assert!(refused.reset_after_ms >= 2_500, "{algorithm}: {refused:?}");
            let peek = at(3_499, 0);
            assert_eq!((peek.allowed, peek.retry_after_ms), (DENY, 1), "{algorithm}: a peek is refused too");
            // At the block's end the state the block left decides: one unit was spent at 900,
            // none while blocked.
            let after = at(3_500, 1);
            assert_eq!(after.allowed, ALLOW, "{algorithm}: {after:?}");
        }
    }

    #[test]
    fn a_blocked_request_that_its_quota_refuses_too_waits_for_the_later_of_the_two() {
        // One a minute, spent at 0; blocked for 10 s: the quota's wait (60 s) is the later one.
        let q = Quota::per_minute(1);
        for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingLog, Algorithm::Gcra, Algorithm::TokenBucket] {
            let mut state = None;
            assert!(guarded(algorithm, &q, &mut state, None, 0, 1).allowed);
            let alone = step(algorithm, &q, &mut state.clone(), 5_000, 1);
            let blocked = guarded(algorithm, &q, &mut state, Some(10_000), 5_000, 1);
            assert_eq!(blocked.retry_after_ms, alone.retry_after_ms.max(5_000), "{algorithm}");
            assert_eq!(blocked.retry_after_ms, 55_000, "{algorithm}");
            assert_eq!(blocked.reset_after_ms, alone.reset_after_ms.max(5_000), "{algorithm}");
        }
    }

    #[test]
    fn a_block_consumes_nothing_and_leaves_the_state_as_a_peek_does() {
        let q = Quota::per_second(3);
        for algorithm in Algorithm::ALL {
            let mut state = None;
            step(algorithm, &q, &mut state, 0, 2);
            let before = state.clone();
            guarded(algorithm, &q, &mut state, Some(500), 100, 1);
            assert_eq!(state, before, "{algorithm}: a refused request writes nothing");
            // Long after the state came to rest, a blocked request leaves what a peek leaves
            // (a state Redis has expired is forgotten, as a read of the key drops it there).
            let mut peeked = state.clone();
            step(algorithm, &q, &mut peeked, 50_000, 0);
            guarded(algorithm, &q, &mut state, Some(100_000), 50_000, 1);
            assert_eq!(state, peeked, "{algorithm}");
        }
    }

    #[test]
    fn a_block_that_has_ended_or_was_lifted_changes_nothing() {
        let q = Quota::per_second(1);
        for algorithm in Algorithm::ALL {
            let (mut a, mut b) = (None, None);
            for (t, cost) in [(0, 1), (10, 1), (900, 1), (1_000, 1), (2_500, 0)] {
                let plain = step(algorithm, &q, &mut a, t, cost);
                assert_eq!(guarded(algorithm, &q, &mut b, Some(t), t, cost), plain, "{algorithm} at {t}");
                assert_eq!(a, b, "{algorithm} at {t}");
            }
        }
        assert_eq!(ends(5, 0), None, "a duration of 0 lifts the block");
    }
}
