//! The bound with debts: a reconciliation charges an excess whether it fits or not, and a key
//! owes at most one capacity, so requests and debits together keep within the promise of twice
//! the capacity (see [`crate::invariants`] for each promise's bound).

use redis_ratelimit::harness::algo::{self, State};
use redis_ratelimit::{Algorithm, Quota};

use crate::invariants::bound_breach;
use crate::reference::Point;

/// One step of a key's life with costs known after the work: after `dt` ms, a request of
/// `units` (checked against the limit), or (`debit`) an excess of `units` charged whether it
/// fits or not.
#[derive(Debug, Clone, Copy)]
pub struct DebtStep {
    /// Milliseconds since the previous step (time never steps back here).
    pub dt: u64,
    /// The request's cost, or the excess charged.
    pub units: u64,
    /// A debit, not a request.
    pub debit: bool,
}

/// The bound with debts: a key owes at most one capacity, so the units charged to it,
/// requests admitted and excesses debited together, keep within the promise of a quota of
/// twice its capacity (twice the limit, or twice the burst at the same rate). Runs the twin of
/// `algorithm` over `steps` from `t0`; the breach, as `(step, why)`, if there is one.
pub fn debt_breach(algorithm: Algorithm, q: &Quota, t0: u64, steps: &[DebtStep]) -> Option<(usize, String)> {
    debt_breach_of(algo::debit, algorithm, q, t0, steps)
}

/// A debit: charges `units` to a key's state at `now_ms`, answering the units charged.
pub type Debit = fn(Algorithm, &Quota, &mut Option<State>, u64, u64) -> u64;

/// [`debt_breach`] with another debit in place of the twin's: a one-bug copy must breach.
pub fn debt_breach_of(
    debit: Debit,
    algorithm: Algorithm,
    q: &Quota,
    t0: u64,
    steps: &[DebtStep],
) -> Option<(usize, String)> {
    let mut state = None;
    let mut now = t0;
    let mut points: Vec<Point> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        now += s.dt;
        let charged = if s.debit {
            debit(algorithm, q, &mut state, now, s.units)
        } else {
            let cost = s.units.min(q.capacity(algorithm));
            if algo::step(algorithm, q, &mut state, now, cost).allowed {
                cost
            } else {
                0
            }
        };
        if charged > 0 {
            points.push((i, now, charged));
        }
    }
    let twice = if algorithm.is_bucket() {
        q.with_burst(2 * q.burst())
    } else {
        Quota::new(2 * q.limit(), std::time::Duration::from_millis(q.period_ms()))
    };
    bound_breach(algorithm, &twice, &points, t0)
}

/// The debit of gateways that charge a response's cost "toward the next request" with no cap:
/// all of it, however deep the key goes. The twin's own arithmetic under a quota a thousand
/// times larger, whose state reads the same for the windows, the log and GCRA (not for a
/// token bucket, whose units are counted against its burst).
pub fn uncapped_debit(algorithm: Algorithm, q: &Quota, state: &mut Option<State>, now_ms: u64, units: u64) -> u64 {
    let roomy = Quota::new(1_000 * q.limit(), std::time::Duration::from_millis(q.period_ms()));
    let roomy = if algorithm == Algorithm::Gcra { q.with_burst(1_000 * q.burst()) } else { roomy };
    algo::debit(algorithm, &roomy, state, now_ms, units)
}
