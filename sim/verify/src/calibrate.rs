//! What a script shows about itself before it is judged: whether it admits at exact ties
//! (then a denial exactly at a tie elsewhere is a tie decided both ways, and forgiven), and
//! whether it hands out its refill in steps (then a broken bound names the step and the line
//! that would declare it). Neither widens a check by itself: a step the file does not declare
//! is a break.
//!
//! - **Ties.** A bucket drained at once and then asked exactly when each unit is due sits
//!   exactly at a tie every time: an exact bucket comes to hold exactly the units asked for at
//!   that very instant. Each request is judged where the script really decided it, to the
//!   microsecond the model ran it (requests at one millisecond of a schedule run a few
//!   microseconds apart), and a full bucket asked for all it holds is no tie. A script in
//!   integers decides every tie one way; one in floats may decide one tie each way (three units
//!   accrued over seven steps of 0.7) by rounding alone. Seen both ways, a tie decided either
//!   way is the arithmetic's, not the design's, and forgiven either way (a late denial, an
//!   early admission); a script that never admits at a tie has its edge one unit late, and one
//!   that never denies at one admits a unit early where it errs: findings.
//! - **Steps.** One key under a request every millisecond for three periods; whenever a
//!   request is admitted, a burst at the same instant takes everything else available then.
//!   A smooth bucket hands out what accrued in a millisecond at most; one that keeps time in
//!   whole seconds, or refills L at the start of each period, hands out a whole step at once,
//!   at the step's interval.

use std::sync::Arc;

use redis_ratelimit::Quota;
use sim_engine::subject::SubjectFile;

use super::checks::Unit;
use super::direct::Direct;
use super::schedule::KEY;

/// How a script decides requests that sit exactly at a tie: whether it was seen to admit one,
/// and to deny one. Seen both ways, a tie decided either way is its arithmetic's (a float
/// computation's rounding), and forgiven either way; one way only, it is its design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ties {
    /// It admitted a request at a tie.
    pub admits: bool,
    /// It denied a request at a tie.
    pub denies: bool,
}

impl Ties {
    /// Both ways: the arithmetic decides.
    pub fn both_ways(self) -> bool {
        self.admits && self.denies
    }
}

/// How the subject decides requests that sit exactly at a tie, over `quotas`, judged in the
/// unit of time it keeps (both, where that is not known: a tie then is one in each).
pub fn ties(file: &Arc<SubjectFile>, quotas: &[Quota], unit: Option<Unit>) -> Ties {
    let mut seen = Ties::default();
    if !file.promise.is_bucket() {
        return seen;
    }
    let frames: &[Unit] = match unit {
        Some(Unit::Ms) => &[Unit::Ms],
        Some(Unit::Us) => &[Unit::Us],
        None => &[Unit::Ms, Unit::Us],
    };
    // Arithmetic that rounds rounds differently at different magnitudes: the same probe from
    // several starting times, for requests of one unit and of several.
    const STARTS_MS: [u64; 5] = [0, 1_234, 56_789, 987_654, 10_000_003];
    for &q in quotas {
        let (l, w) = (q.limit(), q.period_ms());
        // Only where each unit comes due on a whole millisecond can a request sit on the tie.
        if l == 0 || w % l != 0 {
            continue;
        }
        let interval = w / l;
        for start in STARTS_MS {
            for cost in [1, q.burst().div_ceil(2).max(1)] {
                let probe = probe_ties(file, q, frames, start, interval, cost);
                seen.admits |= probe.admits;
                seen.denies |= probe.denies;
                if seen.both_ways() {
                    return seen;
                }
            }
        }
    }
    seen
}

/// An exact bucket in one unit of time, in integers: `level` is in units of 1/T of a token
/// (T in this unit), so it refills L per unit of time and holds B·T.
struct ExactBucket {
    cap: i128,
    rate: i128,
    level: i128,
    last: Option<u64>,
}

impl ExactBucket {
    fn new(q: Quota, unit: Unit) -> ExactBucket {
        let w = i128::from(q.period_ms() * unit.per_ms());
        ExactBucket {
            cap: i128::from(q.burst()) * w,
            rate: i128::from(q.limit()),
            level: i128::from(q.burst()) * w,
            last: None,
        }
    }

    fn at(&self, t: u64) -> i128 {
        match self.last {
            Some(last) if t > last => (self.level + self.rate * i128::from(t - last)).min(self.cap),
            _ => self.level,
        }
    }

    /// Whether a request for `need` (in units of 1/T) at `t` sits exactly on a tie: the bucket
    /// holds exactly what it asks for, and came to hold it only now (not a full bucket that
    /// held it all along).
    fn tie(&self, t: u64, need: i128) -> bool {
        self.last.is_some_and(|last| t > last) && self.at(t) == need && self.at(t - 1) < need
    }

    fn take(&mut self, t: u64, units: i128) {
        self.level = self.at(t) - units;
        self.last = Some(self.last.map_or(t, |last| last.max(t)));
    }
}

/// One probe: a drain at `start`, then requests of `cost` exactly when `cost` units are due,
/// each judged in every frame at the instant the script really decided it (the microsecond the
/// model ran it): a tie only where it is one in every frame.
fn probe_ties(file: &Arc<SubjectFile>, q: Quota, frames: &[Unit], start: u64, interval: u64, cost: u64) -> Ties {
    let mut seen = Ties::default();
    let mut direct = Direct::new(file.clone(), q);
    let mut exact: Vec<(Unit, ExactBucket)> = frames.iter().map(|&u| (u, ExactBucket::new(q, u))).collect();
    let when = |unit: Unit, at_us: u64| if unit == Unit::Us { at_us } else { at_us / 1_000 };
    let feed = |exact: &mut Vec<(Unit, ExactBucket)>, d: &super::direct::Decided| {
        if d.allowed {
            for (unit, bucket) in exact.iter_mut() {
                let per_unit = i128::from(q.period_ms() * unit.per_ms());
                bucket.take(when(*unit, d.at_us), i128::from(d.cost) * per_unit);
            }
        }
    };
    // Drain: a burst of twice the capacity.
    for _ in 0..2 * q.burst().max(1) {
        let d = direct.request(start, 0, KEY, 1);
        if d.error.is_some() {
            return seen;
        }
        feed(&mut exact, &d);
    }
    // Then one request each time `cost` more units have come due, three capacities' worth.
    for k in 1..=3 * q.burst().max(1) {
        let d = direct.request(start + k * cost * interval, 0, KEY, cost);
        if d.error.is_some() {
            return seen;
        }
        let at_a_tie = exact.iter().all(|(unit, bucket)| {
            let per_unit = i128::from(q.period_ms() * unit.per_ms());
            bucket.tie(when(*unit, d.at_us), i128::from(cost) * per_unit)
        });
        if at_a_tie {
            if d.allowed {
                seen.admits = true;
            } else {
                seen.denies = true;
            }
        }
        feed(&mut exact, &d);
    }
    seen
}

/// The unit a bucket keeps Redis's time in, where its decisions show it: a key drained half a
/// millisecond into a millisecond, then asked again exactly one interval later at the start
/// of that millisecond and again later in it. A bucket in milliseconds saw both as the moment
/// its unit came due and admits the first; one in microseconds has half a millisecond to go
/// and denies the first, admitting the second. None when neither shows (a script fed the
/// caller's clock, which sends milliseconds; a promise without a bucket).
pub fn time_unit(file: &Arc<SubjectFile>, quota: Quota) -> Option<Unit> {
    if !file.promise.is_bucket() || file.client_time() || file.tolerance.resolution_ms > 0 {
        return None;
    }
    let (l, w) = (quota.limit(), quota.period_ms());
    if l == 0 || w % l != 0 {
        return None;
    }
    let interval_us = w / l * 1_000;
    let probe = |at_us: u64| {
        let mut direct = Direct::new(file.clone(), quota);
        let drained = (0..2 * quota.burst().max(1)).all(|_| direct.request_at_us(1_000_500, 0, KEY, 1).error.is_none());
        drained.then(|| direct.request_at_us(1_000_000 + interval_us + at_us, 0, KEY, 1).allowed)
    };
    match (probe(0)?, probe(700)?) {
        (true, _) => Some(Unit::Ms),
        (false, true) => Some(Unit::Us),
        (false, false) => None,
    }
}

/// A refill handed out in steps: `units` at once, every `every_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Units admitted at one instant after the first denial.
    pub units: u64,
    /// Time between such instants.
    pub every_ms: u64,
}

/// The refill step of a bucket promise, or None for a smooth bucket (or another promise).
pub fn refill_step(file: &Arc<SubjectFile>, quota: Quota) -> Option<Step> {
    if !file.promise.is_bucket() {
        return None;
    }
    let mut direct = Direct::new(file.clone(), quota);
    let burst = quota.burst().max(quota.limit()) + 1;
    // A smooth bucket accrues at most this many whole tokens in a millisecond.
    let smooth = quota.limit().div_ceil(quota.period_ms().max(1));
    let mut steps: Vec<(u64, u64)> = Vec::new();
    let mut denied_once = false;
    for t in 0..3 * quota.period_ms() {
        let after_a_denial = denied_once;
        let first = direct.request(t, 0, KEY, 1);
        if first.error.is_some() {
            return None;
        }
        if !first.allowed {
            denied_once = true;
            continue;
        }
        let mut at_once = first.cost;
        for _ in 0..burst {
            let more = direct.request(t, 0, KEY, 1);
            if !more.allowed {
                denied_once = true;
                break;
            }
            at_once += more.cost;
        }
        if after_a_denial {
            steps.push((t, at_once));
        }
    }
    let units = steps.iter().map(|&(_, n)| n).max()?;
    if units <= smooth + 1 {
        return None;
    }
    // The interval between the instants that handed out a whole step.
    let big: Vec<u64> = steps.iter().filter(|&&(_, n)| n * 2 > units).map(|&(t, _)| t).collect();
    let every_ms = big.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(quota.period_ms());
    Some(Step { units, every_ms })
}

/// The declaration that would accept a design step, in the words of a verdict: for a bucket
/// that refills in steps, its interval; for a caller that sends whole seconds, 1000 ms.
pub fn suggested_resolution(file: &Arc<SubjectFile>, quota: Quota) -> Option<(u64, String)> {
    if file.tolerance.resolution_ms > 0 {
        return None;
    }
    if let Some(step) = refill_step(file, quota) {
        return Some((
            step.every_ms,
            format!(
                "it hands out its refill in steps ({} units at once, every {} ms); if that is its design, declare it \
                 with `resolution_ms = {}` under [promise]",
                step.units, step.every_ms, step.every_ms
            ),
        ));
    }
    let sent = if file.client_time() { file.client_time_resolution_ms() } else { 1 };
    (sent > 1).then(|| {
        (
            sent,
            format!(
                "its caller sends the time in steps of {sent} ms; if the script is meant to decide by them, declare it \
                 with `resolution_ms = {sent}` under [promise]"
            ),
        )
    })
}
