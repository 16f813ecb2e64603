//! The search for a schedule that breaks a check, in two phases, on the model at exact times.
//!
//! 1. **Generated schedules** (proptest): bursts, steady trickles at and around the rate,
//!    gaps that straddle window boundaries, requests one millisecond either side of a
//!    boundary, instances taking turns with their clocks at the extremes of the skew, costs
//!    that alternate, idle spells past any TTL, Redis losing its data right after a write,
//!    script flushes. A schedule that breaks the check shrinks (proptest) to the shortest that
//!    still does.
//! 2. **An optimizing search** for the bound checks, as targeted property-based testing does:
//!    the schedules that came closest to breaking the bound (the largest share of what it
//!    allows) are mutated (a request moved by a millisecond, duplicated, given the other
//!    extreme of the skew, a burst added, the last cycle repeated) and kept when they come
//!    closer still. Some breaks take many rounds of the same trick (a late caller's time
//!    written back refills a second twice on every round) that random schedules rarely draw.
//!    A break found this way shrinks by removing events while it still breaks.
//!
//! Either way the worst case seen is kept, so a check that held says how close it came
//! ("worst 0.97x of the bound").

use std::cell::RefCell;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::Quota;
use sim_engine::subject::SubjectFile;

use super::checks::{self, CheckKind, Held, Violation};
use super::direct::Direct;
use super::schedule::{Event, Ran, Schedule};

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

/// What one search came to: the break it found, if any; for a bound, the worst share of
/// what the bound allows that any schedule reached; and whether the script called a command
/// the model does not have (then nothing it did can be judged).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The shrunk counterexample.
    pub found: Option<Found>,
    /// The most any schedule admitted over what the bound allows there (bound checks).
    pub worst_ratio: Option<f64>,
    /// A command the script called that the model lacks.
    pub unknown_command: Option<String>,
    /// The most any schedule admitted over a bound at a tie the script's rounding decided
    /// early, forgiven (`checks::closeness`), with the schedule that showed it.
    pub forgiven: Option<(f64, Schedule)>,
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
    /// `n` requests `every_ms` apart from `groups` instances whose clocks are spread evenly
    /// over `±spread_ms`, in rotation or in an order drawn from `order`: how many callers
    /// behind a load balancer share a key, each clock group trimming and naming by its own.
    Groups { every_ms: u64, n: u32, cost: u64, spread_ms: i64, groups: u8, rotate: bool, order: u64 },
    /// `n` requests at one instant from an instance on Redis's clock, then, `wait_ms` later
    /// (about when a key written then runs out its TTL), `m` requests `every_ms` apart from an
    /// instance `skew_ms` off: a caller behind arriving just after the key expired.
    AfterExpiry { n: u32, wait_ms: u64, m: u32, every_ms: u64, skew_ms: i64 },
    /// `n` requests alternating between cost `cost` and 1, `every_ms` apart.
    Costs { every_ms: u64, n: u32, cost: u64 },
    /// Nothing for a while.
    Idle { ms: u64 },
    /// The next window boundary (a multiple of the period, or of a second), give or take
    /// `skew_ms`.
    ToBoundary { seconds: bool, skew_ms: i64 },
    /// `n` requests just before, at and just after the next boundary, `off_ms` either side.
    AroundBoundary { n: u32, off_ms: u64, cost: u64 },
    /// Redis loses its data.
    LoseData,
    /// `SCRIPT FLUSH`.
    FlushScripts,
}

/// Clock offsets of the instances a skewed search calls from: small ones, and ones that are
/// fractions and multiples of the period, up to more than two periods apart, so that every
/// kind of window has callers inside and outside it.
fn skews(q: &Quota) -> Vec<i64> {
    let w = q.period_ms() as i64;
    let mut out = vec![0, -1, 1, -60, 60, -w / 2, w / 2, -w, w, -(3 * w) / 2, (3 * w) / 2, -(5 * w) / 2, (5 * w) / 2];
    out.dedup();
    out
}

fn piece(q: Quota, max_cost: u64, faults: bool, skewed: bool) -> BoxedStrategy<Piece> {
    let (l, w, b) = (q.limit().max(1), q.period_ms(), q.burst().max(1));
    let interval = (w / l).max(1);
    let cost = 1..=max_cost.max(1);
    let most = (b.max(l) + 2) as u32;
    // Long enough to outlive a bucket's TTL (twice its fill time is common) at the rate.
    let longest_trickle = (4 * b.max(l) + 4) as u32;
    let weights = if faults { (3, 2) } else { (0, 0) };
    let all = skews(&q);
    let extremes = (*all.iter().min().unwrap_or(&0), *all.iter().max().unwrap_or(&0));
    let extremes = if skewed { extremes } else { (0, 0) };
    let skew = proptest::sample::select(if skewed { all.clone() } else { vec![0] });
    let interleaved = if skewed { 30 } else { 0 };
    let costs = if max_cost > 1 { 10 } else { 0 };
    let base = prop_oneof![
        30 => (0..interval * 2, 1..=most, cost.clone(), skew.clone())
            .prop_map(|(gap_ms, n, cost, skew_ms)| Piece::Burst { gap_ms, n, cost, skew_ms }),
        30 => (prop_oneof![Just(interval), (interval / 2)..=(interval * 2), 1..interval.max(2)], 2..=longest_trickle, cost.clone(), skew.clone())
            .prop_map(|(every_ms, n, cost, skew_ms)| Piece::Trickle { every_ms: every_ms.max(1), n, cost, skew_ms }),
        interleaved => (1..interval * 2, 2..=longest_trickle, cost.clone(), skew.clone(), skew.clone())
            .prop_map(|(every_ms, n, cost, a, b)| Piece::Interleaved { every_ms, n, cost, skews: (a, b) }),
        interleaved => (1..interval * 2, 2..=longest_trickle, cost.clone(), any::<bool>())
            .prop_map(move |(every_ms, n, cost, flip)| {
                let skews = if flip { (extremes.1, extremes.0) } else { extremes };
                Piece::Interleaved { every_ms, n, cost, skews }
            }),
        costs => (1..interval * 2, 2..=longest_trickle, cost.clone())
            .prop_map(|(every_ms, n, cost)| Piece::Costs { every_ms, n, cost }),
        12 => prop_oneof![1..w, w..(4 * w), (5 * w)..(40 * w)].prop_map(|ms| Piece::Idle { ms }),
        10 => (any::<bool>(), -3i64..=3).prop_map(|(seconds, skew_ms)| Piece::ToBoundary { seconds, skew_ms }),
        10 => (1..=most, 0u64..=2, cost.clone()).prop_map(|(n, off_ms, cost)| Piece::AroundBoundary { n, off_ms, cost }),
        weights.0 => Just(Piece::LoseData),
        weights.1 => Just(Piece::FlushScripts),
    ];
    if !skewed {
        return base.boxed();
    }
    // Several seconds at two to three times the rate, from five to seven clocks spread over a
    // skew from a few ms to more than two periods; and callers behind arriving just after a
    // key written by one on Redis's clock runs out its TTL (one or two periods, or a bucket's
    // fill time, and a millisecond more).
    let grouped_n = (3 * l * 4) as u32;
    let spreads = vec![60, w as i64 / 4, w as i64 / 2, w as i64, (3 * w as i64) / 2, (5 * w as i64) / 2];
    let behind: Vec<i64> = all.iter().copied().filter(|&s| s < 0).collect();
    let waits = vec![w, w + 1, 2 * w, 2 * w + 1, b * w / l, b * w / l + 1];
    let clocks = prop_oneof![
        2 => (
            (interval / 3).max(1)..=(interval / 2).max(1),
            (grouped_n / 2)..=grouped_n,
            cost.clone(),
            proptest::sample::select(spreads),
            5u8..=7,
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(|(every_ms, n, cost, spread_ms, groups, rotate, order)| Piece::Groups {
                every_ms,
                n,
                cost,
                spread_ms,
                groups,
                rotate,
                order
            }),
        1 => (1..=most, proptest::sample::select(waits), 1..=most, 1..interval.max(2), proptest::sample::select(behind))
            .prop_map(|(n, wait_ms, m, every_ms, skew_ms)| Piece::AfterExpiry { n, wait_ms, m, every_ms, skew_ms }),
    ];
    prop_oneof![4 => base, 1 => clocks].boxed()
}

/// Lays the pieces out in time.
fn lay_out(pieces: &[Piece], q: &Quota) -> Schedule {
    let w = q.period_ms().max(1);
    let mut t = 0u64;
    let mut events = Vec::new();
    let next_boundary = |t: u64, step: u64| (t / step + 1) * step;
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
            Piece::Groups { every_ms, n, cost, spread_ms, groups, rotate, order } => {
                let k = i64::from(groups.max(2));
                let mut draw = order | 1;
                for j in 0..n {
                    t += every_ms;
                    // A small linear congruential generator: the order is part of the piece.
                    draw = draw.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let g = if rotate { i64::from(j) % k } else { ((draw >> 33) % k as u64) as i64 };
                    let skew_ms = -spread_ms + 2 * spread_ms * g / (k - 1);
                    events.push(Event::Request { t_ms: t, cost, skew_ms });
                }
            }
            Piece::AfterExpiry { n, wait_ms, m, every_ms, skew_ms } => {
                events.extend((0..n).map(|_| Event::Request { t_ms: t, cost: 1, skew_ms: 0 }));
                t += wait_ms;
                for _ in 0..m {
                    events.push(Event::Request { t_ms: t, cost: 1, skew_ms });
                    t += every_ms;
                }
            }
            Piece::Costs { every_ms, n, cost } => {
                for k in 0..n {
                    t += every_ms;
                    events.push(Event::Request { t_ms: t, cost: if k % 2 == 0 { cost } else { 1 }, skew_ms: 0 });
                }
            }
            Piece::Idle { ms } => t += ms,
            Piece::ToBoundary { seconds, skew_ms } => {
                let step = if seconds { 1_000 } else { w };
                t = next_boundary(t, step).saturating_add_signed(skew_ms).max(t);
            }
            Piece::AroundBoundary { n, off_ms, cost } => {
                let edge = next_boundary(t + off_ms, w);
                for at in [edge - off_ms, edge, edge + off_ms] {
                    events.extend((0..n).map(|_| Event::Request { t_ms: at, cost, skew_ms: 0 }));
                }
                t = edge + off_ms;
            }
            Piece::LoseData => events.push(Event::LoseData { t_ms: t }),
            Piece::FlushScripts => events.push(Event::FlushScripts { t_ms: t }),
        }
    }
    Schedule(events)
}

/// `schedule` with every caller's clock `shift_ms` further off.
fn shifted(schedule: Schedule, shift_ms: i64) -> Schedule {
    Schedule(
        schedule
            .0
            .into_iter()
            .map(|e| match e {
                Event::Request { t_ms, cost, skew_ms } => Event::Request { t_ms, cost, skew_ms: skew_ms + shift_ms },
                other => other,
            })
            .collect(),
    )
}

/// Runs `schedule` on a fresh model and applies `check`.
pub fn judge(file: &Arc<SubjectFile>, held: &Held, check: CheckKind, schedule: &Schedule) -> Option<(Violation, Ran)> {
    let ran = run(file, held, schedule);
    let violation = violation_of(file, held, check, &ran)?;
    Some((violation, ran))
}

fn run(file: &Arc<SubjectFile>, held: &Held, schedule: &Schedule) -> Ran {
    Ran::new(&mut Direct::new(file.clone(), held.quota), schedule)
}

fn violation_of(file: &Arc<SubjectFile>, held: &Held, check: CheckKind, ran: &Ran) -> Option<Violation> {
    if ran.unknown_command().is_some() {
        return None;
    }
    match check {
        CheckKind::RetryAfter => checks::retry_after(held, ran, &|| Direct::new(file.clone(), held.quota)),
        other => checks::only(held, ran, other),
    }
}

/// How close `ran` came to breaking a bound: what it admitted over what the bound allows.
fn closeness(held: &Held, check: CheckKind, ran: &Ran) -> Option<f64> {
    checks::closeness(held, ran, check).0
}

/// Keeps the larger of two forgiven excesses.
fn keep_forgiven(kept: &mut Option<(f64, Schedule)>, over: Option<f64>, schedule: &Schedule) {
    if let Some(over) = over.filter(|&o| kept.as_ref().is_none_or(|(seen, _)| o > *seen)) {
        *kept = Some((over, schedule.clone()));
    }
}

/// Searches `cases` generated schedules (seeded by `seed`) for one that breaks `check`, then,
/// for a bound, climbs from the closest ones; with `skewed`, requests come from instances
/// whose clocks disagree (client-time subjects only).
pub fn search(file: &Arc<SubjectFile>, held: &Held, check: CheckKind, cases: u32, seed: u64, skewed: bool) -> Outcome {
    let max_cost = if file.takes_cost() { held.promise.capacity(&held.quota).min(4) } else { 1 };
    // Losses of Redis's data are searched with exact clocks; where the clocks disagree a loss
    // has no one time to sit at.
    // Where the clocks disagree, sometimes every caller's is off from Redis's by the same
    // amount too: callers that agree with each other, and a key Redis expires on its own clock.
    let shifts = if skewed { skews(&held.quota) } else { vec![0] };
    let strategy = (
        prop::collection::vec(piece(held.quota, max_cost, !skewed, skewed), 1..12),
        prop_oneof![3 => Just(0i64), 1 => proptest::sample::select(shifts)],
    );
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
    let closest: RefCell<Vec<(f64, Schedule)>> = RefCell::new(Vec::new());
    let unknown: RefCell<Option<String>> = RefCell::new(None);
    let forgiven: RefCell<Option<(f64, Schedule)>> = RefCell::new(None);
    let result = runner.run(&strategy, |(pieces, shift)| {
        let schedule = shifted(lay_out(&pieces, &held.quota), shift);
        let ran = run(file, held, &schedule);
        if let Some(command) = ran.unknown_command() {
            unknown.borrow_mut().get_or_insert_with(|| command.to_owned());
            return Ok(());
        }
        if check.is_bound() {
            let (ratio, over) = checks::closeness(held, &ran, check);
            if let Some(ratio) = ratio {
                keep_closest(&mut closest.borrow_mut(), ratio, schedule.clone());
            }
            keep_forgiven(&mut forgiven.borrow_mut(), over, &schedule);
        }
        match violation_of(file, held, check, &ran) {
            Some(violation) => {
                let reason = violation.message.clone();
                *last.borrow_mut() = Some(Found { quota: held.quota, violation, ran, skewed });
                Err(TestCaseError::fail(reason))
            }
            None => Ok(()),
        }
    });
    let mut outcome =
        Outcome { unknown_command: unknown.into_inner(), forgiven: forgiven.into_inner(), ..Outcome::default() };
    let closest = closest.into_inner();
    outcome.worst_ratio = closest.first().map(|(r, _)| *r);
    outcome.found = match result {
        // The runner's last failing call is the shrunk case.
        Err(TestError::Fail(..)) => last.into_inner(),
        Ok(()) | Err(TestError::Abort(_)) => None,
    };
    if outcome.found.is_none() && outcome.unknown_command.is_none() && check.is_bound() {
        let climbing = Climb { file, held, check, skewed, max_cost, steps: STEPS_PER_CASE * cases as usize / KEPT };
        let climbed = climbing.from(closest, seed, &mut outcome.forgiven);
        outcome.worst_ratio = climbed.0.or(outcome.worst_ratio);
        outcome.found = climbed.1;
    }
    outcome.found = outcome.found.map(|found| ending_at_the_break(file, held, found));
    if let Some(found) = &outcome.found {
        if check.is_bound() {
            outcome.worst_ratio = closeness(held, check, &found.ran).or(outcome.worst_ratio);
        }
    }
    outcome
}

/// A counterexample without the events after the one that broke the check: they decide
/// nothing about it.
fn ending_at_the_break(file: &Arc<SubjectFile>, held: &Held, found: Found) -> Found {
    let cut = Schedule(found.ran.schedule.0[..=found.violation.at].to_vec());
    if cut.0.len() == found.ran.schedule.0.len() {
        return found;
    }
    match judge(file, held, found.violation.check, &cut) {
        Some((violation, ran)) => Found { violation, ran, ..found },
        None => found,
    }
}

/// The schedules kept to climb from.
const KEPT: usize = 4;
/// Mutations tried in all, per generated schedule of the first phase: the climb costs about
/// as much as the search that found where to start.
const STEPS_PER_CASE: usize = 2;

fn keep_closest(kept: &mut Vec<(f64, Schedule)>, ratio: f64, schedule: Schedule) {
    if kept.len() < KEPT || ratio > kept[kept.len() - 1].0 {
        kept.push((ratio, schedule));
        kept.sort_by(|a, b| b.0.total_cmp(&a.0));
        kept.truncate(KEPT);
    }
}

/// The optimizing phase of one search.
struct Climb<'a> {
    file: &'a Arc<SubjectFile>,
    held: &'a Held,
    check: CheckKind,
    skewed: bool,
    max_cost: u64,
    /// Mutations tried from each kept schedule.
    steps: usize,
}

impl Climb<'_> {
    /// Hill-climbs from each kept schedule towards a larger share of the bound; a schedule
    /// that breaks it is shrunk and returned. Also returns the largest share reached, and keeps
    /// in `forgiven` the largest excess forgiven as a tie on the way.
    fn from(
        &self,
        kept: Vec<(f64, Schedule)>,
        seed: u64,
        forgiven: &mut Option<(f64, Schedule)>,
    ) -> (Option<f64>, Option<Found>) {
        let (file, held, check) = (self.file, self.held, self.check);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xc11b_5eed);
        let skew_set = if self.skewed { skews(&held.quota) } else { vec![0] };
        let mut best_ratio: Option<f64> = None;
        for (ratio, start) in kept {
            let (mut here, mut ratio) = (start, ratio);
            for _ in 0..self.steps {
                let candidate = mutate(&here, &held.quota, &skew_set, self.max_cost, &mut rng);
                if candidate.0.is_empty() || candidate.0.len() > 400 {
                    continue;
                }
                let ran = run(file, held, &candidate);
                if ran.unknown_command().is_some() {
                    continue;
                }
                let (r, over) = checks::closeness(held, &ran, check);
                keep_forgiven(forgiven, over, &candidate);
                let Some(r) = r else { continue };
                if violation_of(file, held, check, &ran).is_some() {
                    let shrunk = shrink(file, held, check, candidate);
                    let ran = run(file, held, &shrunk);
                    let violation = violation_of(file, held, check, &ran).expect("a shrunk break still breaks");
                    return (Some(r), Some(Found { quota: held.quota, violation, ran, skewed: self.skewed }));
                }
                if r >= ratio {
                    (here, ratio) = (candidate, r);
                }
            }
            best_ratio = Some(best_ratio.map_or(ratio, |b: f64| b.max(ratio)));
        }
        (best_ratio, None)
    }
}

/// One random change to a schedule, keeping it in time order (and costs within `max_cost`:
/// a file that passes no cost is driven with requests of one unit).
fn mutate(s: &Schedule, q: &Quota, skew_set: &[i64], max_cost: u64, rng: &mut SmallRng) -> Schedule {
    let mut events = s.0.clone();
    let requests: Vec<usize> = (0..events.len()).filter(|&i| matches!(events[i], Event::Request { .. })).collect();
    if requests.is_empty() {
        return Schedule(events);
    }
    let pick = requests[rng.random_range(0..requests.len())];
    let Event::Request { t_ms, cost, skew_ms } = events[pick] else { return Schedule(events) };
    match rng.random_range(0..7) {
        // A request a millisecond (or an interval) earlier or later.
        0 => {
            let interval = (q.period_ms() / q.limit().max(1)).max(1);
            let by = if rng.random_bool(0.5) { 1 } else { interval };
            let t = if rng.random_bool(0.5) { t_ms + by } else { t_ms.saturating_sub(by) };
            events[pick] = Event::Request { t_ms: t, cost, skew_ms };
        }
        // The same request twice.
        1 => events.insert(pick, events[pick]),
        // From an instance whose clock is at another extreme, or in another request's clock
        // group.
        2 => {
            let other = requests[rng.random_range(0..requests.len())];
            let skew = match events[other] {
                Event::Request { skew_ms, .. } if rng.random_bool(0.5) => skew_ms,
                _ => skew_set[rng.random_range(0..skew_set.len())],
            };
            events[pick] = Event::Request { t_ms, cost, skew_ms: skew };
        }
        // A burst where this request is.
        3 => {
            for _ in 0..rng.random_range(1..=q.burst().max(q.limit()).min(8)) {
                events.insert(pick, events[pick]);
            }
        }
        // One request fewer.
        4 => {
            events.remove(pick);
        }
        // The last few events again, as one more round of the same trick.
        5 => {
            let n = rng.random_range(1..=events.len().min(6));
            let tail: Vec<Event> = events[events.len() - n..].to_vec();
            let span = tail.last().map_or(0, Event::t_ms) - tail.first().map_or(0, Event::t_ms);
            let shift = span.max(1) + rng.random_range(0..=2);
            events.extend(tail.into_iter().map(|e| e.moved(shift as i64)));
        }
        // Another cost.
        _ => {
            let c = if cost > 1 { 1 } else { max_cost };
            events[pick] = Event::Request { t_ms, cost: c, skew_ms };
        }
    }
    events.sort_by_key(Event::t_ms);
    Schedule(events)
}

/// Removes events while the schedule still breaks `check`: halves, then quarters, down to
/// single events (delta debugging), so what is left shows the break and little else.
pub fn shrink(file: &Arc<SubjectFile>, held: &Held, check: CheckKind, schedule: Schedule) -> Schedule {
    let breaks = |s: &Schedule| !s.0.is_empty() && judge(file, held, check, s).is_some();
    let mut events = schedule.0;
    let mut chunk = events.len().div_ceil(2).max(1);
    loop {
        let mut removed = false;
        let mut at = 0;
        while at < events.len() {
            let mut fewer = events.clone();
            fewer.drain(at..(at + chunk).min(fewer.len()));
            if breaks(&Schedule(fewer.clone())) {
                events = fewer;
                removed = true;
            } else {
                at += chunk;
            }
        }
        if chunk == 1 && !removed {
            break;
        }
        if !removed {
            chunk = chunk.div_ceil(2);
        }
    }
    Schedule(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_lay_out_in_time_order_with_boundaries_hit() {
        let q = Quota::new(20, std::time::Duration::from_secs(1));
        let s = lay_out(
            &[
                Piece::Burst { gap_ms: 5, n: 2, cost: 1, skew_ms: 0 },
                Piece::ToBoundary { seconds: false, skew_ms: -1 },
                Piece::Trickle { every_ms: 50, n: 2, cost: 2, skew_ms: 500 },
                Piece::Interleaved { every_ms: 1, n: 3, cost: 1, skews: (60, -60) },
                Piece::LoseData,
                Piece::Idle { ms: 3_000 },
                Piece::Burst { gap_ms: 0, n: 1, cost: 1, skew_ms: 0 },
                Piece::AroundBoundary { n: 1, off_ms: 1, cost: 3 },
                Piece::Costs { every_ms: 10, n: 2, cost: 4 },
            ],
            &q,
        );
        assert_eq!(
            s.to_string(),
            "5:1 5:1 1049:2@+500 1099:2@+500 1100:1@+60 1101:1@-60 1102:1@+60 lose-data@1102 4102:1 4999:3 5000:3 \
             5001:3 5011:4 5021:1"
        );
    }

    #[test]
    fn skews_reach_past_two_periods_either_way() {
        let s = skews(&Quota::new(4, std::time::Duration::from_secs(2)));
        assert!(s.contains(&-5_000) && s.contains(&5_000) && s.contains(&0) && s.contains(&1), "{s:?}");
    }
}
