//! The property search: generated schedules (bursts, steady trickles at and around the rate,
//! gaps that straddle window boundaries, idle spells past any TTL, Redis losing its data,
//! script flushes) run through the subject on the model at exact times, every applicable check
//! applied. A broken check shrinks (proptest) to the shortest schedule that still breaks it,
//! printed as a table and as the command that replays it.

use std::cell::RefCell;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use redis_ratelimit::Quota;

use super::checks::{self, CheckKind, Held, Violation};
use super::direct::Direct;
use super::schedule::{Event, Ran, Schedule};
use sim_engine::subject::SubjectFile;

/// A counterexample: the shrunk schedule, the broken check, and the run to print.
#[derive(Debug, Clone)]
pub struct Found {
    /// The quota it was driven with.
    pub quota: Quota,
    /// What broke.
    pub violation: Violation,
    /// The shrunk schedule as run.
    pub ran: Ran,
    /// Whether the instances' clocks disagreed in the search that found it.
    pub skewed: bool,
}

impl Found {
    /// The schedule as a table with the offending event marked.
    pub fn table(&self) -> String {
        self.ran.table(self.violation.at, self.violation.check.name())
    }
}

/// One piece of a generated schedule, placed after the previous one.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// `n` requests at one instant, after `gap_ms`, from an instance `skew_ms` off.
    Burst { gap_ms: u64, n: u32, cost: u64, skew_ms: i64 },
    /// `n` requests `every_ms` apart, from an instance `skew_ms` off.
    Trickle { every_ms: u64, n: u32, cost: u64, skew_ms: i64 },
    /// `n` requests `every_ms` apart from two instances in turn, their clocks `skews` off: how
    /// instances behind a load balancer share a key.
    Interleaved { every_ms: u64, n: u32, cost: u64, skews: (i64, i64) },
    /// Nothing for a while.
    Idle { ms: u64 },
    /// The next window boundary, give or take `skew_ms`.
    ToBoundary { skew_ms: i64 },
    /// Redis loses its data.
    LoseData,
    /// `SCRIPT FLUSH`.
    FlushScripts,
}

/// Clock offsets of the instances a skewed search calls from.
const SKEWS: [i64; 7] = [0, -1_500, -500, -60, 60, 500, 1_500];

fn piece(q: Quota, max_cost: u64, faults: bool, skewed: bool) -> impl Strategy<Value = Piece> {
    let (l, w, b) = (q.limit().max(1), q.period_ms(), q.burst().max(1));
    let interval = (w / l).max(1);
    let cost = 1..=max_cost.max(1);
    let most = (b.max(l) + 2) as u32;
    // Long enough to outlive a bucket's TTL (twice its fill time is common) at the rate.
    let longest_trickle = (4 * b.max(l) + 4) as u32;
    let weights = if faults { (3, 2) } else { (0, 0) };
    let skew = proptest::sample::select(if skewed { &SKEWS[..] } else { &SKEWS[..1] });
    let interleaved = if skewed { 30 } else { 0 };
    prop_oneof![
        30 => (0..interval * 2, 1..=most, cost.clone(), skew.clone())
            .prop_map(|(gap_ms, n, cost, skew_ms)| Piece::Burst { gap_ms, n, cost, skew_ms }),
        30 => (prop_oneof![Just(interval), (interval / 2)..=(interval * 2), 1..interval.max(2)], 2..=longest_trickle, cost.clone(), skew.clone())
            .prop_map(|(every_ms, n, cost, skew_ms)| Piece::Trickle { every_ms: every_ms.max(1), n, cost, skew_ms }),
        interleaved => (1..interval * 2, 2..=longest_trickle, cost.clone(), skew.clone(), skew.clone())
            .prop_map(|(every_ms, n, cost, a, b)| Piece::Interleaved { every_ms, n, cost, skews: (a, b) }),
        12 => prop_oneof![1..w, w..(4 * w), (5 * w)..(40 * w)].prop_map(|ms| Piece::Idle { ms }),
        10 => (-3i64..=3).prop_map(|skew_ms| Piece::ToBoundary { skew_ms }),
        weights.0 => Just(Piece::LoseData),
        weights.1 => Just(Piece::FlushScripts),
    ]
}

/// Lays the pieces out in time.
fn lay_out(pieces: &[Piece], q: &Quota) -> Schedule {
    let w = q.period_ms();
    let mut t = 0u64;
    let mut events = Vec::new();
    for p in pieces {
        match *p {
            Piece::Burst { gap_ms, n, cost, skew_ms } => {
                t += gap_ms;
                events.extend((0..n).map(|_| Event::Request { t_ms: t, cost, skew_ms }));
            }
            Piece::Trickle { every_ms, n, cost, skew_ms } => {
                for _ in 0..n {
                    t += every_ms;
                    events.push(Event::Request { t_ms: t, cost, skew_ms });
                }
            }
            Piece::Interleaved { every_ms, n, cost, skews: (a, b) } => {
                for k in 0..n {
                    t += every_ms;
                    events.push(Event::Request { t_ms: t, cost, skew_ms: if k % 2 == 0 { a } else { b } });
                }
            }
            Piece::Idle { ms } => t += ms,
            Piece::ToBoundary { skew_ms } => t = ((t / w + 1) * w).saturating_add_signed(skew_ms).max(t),
            Piece::LoseData => events.push(Event::LoseData { t_ms: t }),
            Piece::FlushScripts => events.push(Event::FlushScripts { t_ms: t }),
        }
    }
    Schedule(events)
}

/// Runs `schedule` on a fresh model and applies `check`.
pub fn judge(file: &Arc<SubjectFile>, held: &Held, check: CheckKind, schedule: &Schedule) -> Option<(Violation, Ran)> {
    let fresh = || Direct::new(file.clone(), held.quota);
    let ran = Ran::new(&mut fresh(), schedule);
    let violation = match check {
        CheckKind::RetryAfter => checks::retry_after(held, &ran, &fresh),
        other => checks::only(held, &ran, other),
    }?;
    Some((violation, ran))
}

/// Searches `cases` generated schedules (seeded by `seed`) for one that breaks `check`; with
/// `skewed`, requests come from instances whose clocks disagree (client-time subjects only).
pub fn search(
    file: &Arc<SubjectFile>,
    held: &Held,
    check: CheckKind,
    cases: u32,
    seed: u64,
    skewed: bool,
) -> Option<Found> {
    let max_cost = if file.takes_cost() { held.promise.capacity(&held.quota).min(4) } else { 1 };
    // Losses of Redis's data are searched with exact clocks; where the clocks disagree a loss
    // has no one time to sit at.
    let strategy = prop::collection::vec(piece(held.quota, max_cost, !skewed, skewed), 1..12);
    let config = Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        max_shrink_iters: 4_000,
        max_shrink_time: 20_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let last: RefCell<Option<Found>> = RefCell::new(None);
    let result = runner.run(&strategy, |pieces| {
        let schedule = lay_out(&pieces, &held.quota);
        match judge(file, held, check, &schedule) {
            Some((violation, ran)) => {
                let reason = violation.message.clone();
                *last.borrow_mut() = Some(Found { quota: held.quota, violation, ran, skewed });
                Err(TestCaseError::fail(reason))
            }
            None => Ok(()),
        }
    });
    match result {
        Ok(()) => None,
        // The runner's last failing call is the shrunk case.
        Err(TestError::Fail(..)) => last.into_inner(),
        Err(TestError::Abort(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_lay_out_in_time_order_with_boundaries_hit() {
        let q = Quota::new(20, 1_000);
        let s = lay_out(
            &[
                Piece::Burst { gap_ms: 5, n: 2, cost: 1, skew_ms: 0 },
                Piece::ToBoundary { skew_ms: -1 },
                Piece::Trickle { every_ms: 50, n: 2, cost: 2, skew_ms: 500 },
                Piece::Interleaved { every_ms: 1, n: 3, cost: 1, skews: (60, -60) },
                Piece::LoseData,
                Piece::Idle { ms: 3_000 },
                Piece::Burst { gap_ms: 0, n: 1, cost: 1, skew_ms: 0 },
            ],
            &q,
        );
        assert_eq!(
            s.to_string(),
            "5:1 5:1 1049:2@+500 1099:2@+500 1100:1@+60 1101:1@-60 1102:1@+60 lose-data@1102 4102:1"
        );
    }
}
