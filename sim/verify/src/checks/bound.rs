//! The bound, in true time and on the readings a script fed its callers' clocks was given.

use sim_engine::checker::{self, Admission, Worst};
use sim_engine::promise::{Promise, Tolerance};

use super::{admissions, segments, CheckKind, Held, Unit, Violation};
use crate::schedule::{Event, Ran};

/// The worst `ran` came to against a bound check (None when nothing was admitted), and
/// the frame it was judged in.
pub fn bound(held: &Held, ran: &Ran, kind: CheckKind) -> Option<(Worst, Frame)> {
    match (kind, ran.skewed()) {
        (CheckKind::Bound, true) => on_readings(held, ran),
        (CheckKind::ClockTrust, false) => None,
        _ => true_time(held, ran).map(|w| (w, Frame::TrueTime)),
    }
}

/// How close `ran` came to breaking a bound check, as a share of what it allows: the frame the
/// check judges by, and for a schedule whose clocks disagree, the bound beyond the clock trust
/// too (the larger). What the search climbs by. With it, what a tie decided by rounding put
/// over the bound and was forgiven ([`Worst::forgiven`]), if anything.
pub fn closeness(held: &Held, ran: &Ran, kind: CheckKind) -> (Option<f64>, Option<f64>) {
    let judged = bound(held, ran, kind).map(|(w, _)| w);
    let forgiven = judged.as_ref().and_then(|w| w.forgiven);
    let beyond = (kind == CheckKind::Bound && ran.skewed())
        .then(|| beyond_clock_trust(held, ran, &|i| readings(held, ran, i)).map(|w| w.ratio()))
        .flatten();
    let ratio = match (judged.map(|w| w.ratio()), beyond) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    (ratio, forgiven)
}

/// The clock reading event `i` of `ran` came with (the epoch plus the true time plus the
/// offset), counted from `sim_engine::simclock::readings_origin_ms`; None for a fault.
fn readings(held: &Held, ran: &Ran, i: usize) -> Option<u64> {
    let origin = sim_engine::simclock::readings_origin_ms(held.quota.period_ms());
    match ran.schedule.0[i] {
        Event::Request { t_ms, skew_ms, .. } => {
            Some((sim_engine::simclock::EPOCH_MS + t_ms).saturating_add_signed(skew_ms) - origin)
        }
        _ => None,
    }
}

/// How admissions were placed in time for a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// At their true time (Redis's clock, the one clock of the schedule).
    TrueTime,
    /// At the clock reading each came with.
    Readings,
    /// At the latest clock reading the script's state had seen.
    LatestReading,
    /// Anywhere between the least and the greatest reading a design may have counted it at:
    /// a break here is beyond the clock trust, whatever the design.
    AnyReading,
}

/// The bound in true time, in the script's unit (in milliseconds and in microseconds where
/// that is not known: broken only if broken in both).
fn true_time(held: &Held, ran: &Ran) -> Option<Worst> {
    let mut first: Option<Worst> = None;
    for &unit in held.units() {
        let w = true_time_in(held, ran, unit)?;
        if !w.broken {
            return Some(w);
        }
        first.get_or_insert(w);
    }
    first
}

/// The bound in true time, in `unit`: each stretch between losses of Redis's data on its own,
/// and any run of consecutive stretches with one extra capacity for each loss in between (a
/// key forgotten by Redis starts afresh).
///
/// A script that decides exact ties both ways (seen to deny at one) is forgiven an admission at
/// most one unit of its own time early, as a float computation's rounding may place its edge:
/// the excess is kept on the witness ([`Worst::forgiven`]) and said in the verdict. A unit
/// early or more is never forgiven, nor is anything for a script that never denies at a tie.
fn true_time_in(held: &Held, ran: &Ran, unit: Unit) -> Option<Worst> {
    let held = &unit.held(held);
    let segments = segments(ran);
    let capacity = held.promise.capacity(&held.quota);
    let forgives = held.promise.is_bucket() && held.ties.denies;
    let mut worst: Option<Worst> = None;
    for i in 0..segments.len() {
        for j in i..segments.len() {
            let admitted = admissions(ran, segments[i].start..segments[j].end, |i, t| unit.time(ran, i, t));
            let allowance = (j - i) as u64 * capacity;
            let judge =
                |tolerance| checker::worst(held.promise, &held.quota, &mut admitted.clone(), allowance, tolerance);
            let Some(mut w) = judge(held.tolerance) else { continue };
            if w.broken && forgives {
                let a_unit_later = Tolerance { resolution_ms: held.tolerance.resolution_ms + 1 };
                if judge(a_unit_later).is_some_and(|late| !late.broken) {
                    w.forgiven = Some(w.admitted as f64 - w.allowed);
                    w.broken = false;
                }
            }
            worst = Some(worse(worst, w));
        }
    }
    worst
}

fn worse(seen: Option<Worst>, other: Worst) -> Worst {
    match seen {
        None => other,
        Some(seen) => {
            let key = |w: &Worst| (w.broken, w.admitted as f64 - w.allowed);
            if key(&other) > key(&seen) {
                other
            } else {
                seen
            }
        }
    }
}

/// The bound on the clock readings the script was given, per life of its state (see the
/// module docs). A script exact on the times it was given is exact under one reading of
/// them, and which one is its design: a bucket whose time only moves forward counts each
/// admission at the latest reading it has seen, one that takes every reading as it comes at
/// that reading; a window named by the time counts a request in the window its reading
/// names (or the latest reading's); a log drops what the latest reading puts out of reach
/// and counts what is left (or only what its own reading's window holds); a window that opens
/// at its first request ends when a reading passes its end (or when its key expires, on
/// Redis's clock, in true time). Broken only if broken under every reading; the one the
/// promise's state most often keeps is reported.
fn on_readings(held: &Held, ran: &Ran) -> Option<(Worst, Frame)> {
    let lives = lives(ran);
    let reading = |i: usize| readings(held, ran, i);
    // Whatever the design: a break no reading of the clocks explains is a break.
    if let Some(w) = beyond_clock_trust(held, ran, &reading).filter(|w| w.broken) {
        return Some((w, Frame::AnyReading));
    }
    let mut tried: Vec<(Worst, Frame)> = Vec::new();
    if let Some(w) = true_time(held, ran) {
        tried.push((w, Frame::TrueTime));
    }
    for frame in [Frame::LatestReading, Frame::Readings] {
        let mut worst: Option<Worst> = None;
        for life in &lives {
            let found = if held.promise.is_bucket() {
                bucket_on_readings(held, ran, life.clone(), &reading, frame)
            } else {
                window_on_readings(held, ran, life.clone(), &reading, frame)
            };
            if let Some(found) = found {
                worst = Some(self::worse(worst, found));
            }
        }
        if let Some(w) = worst {
            tried.push((w, frame));
        }
    }
    // The reading that explains what was admitted, if one does; else the natural one's break.
    let natural = match held.promise {
        Promise::TokenBucket | Promise::Gcra | Promise::FixedWindow { first_hit: true } | Promise::SlidingLog => {
            Frame::LatestReading
        }
        Promise::FixedWindow { first_hit: false } | Promise::SlidingWindow | Promise::None => Frame::Readings,
    };
    if let Some(held_one) = tried.iter().filter(|(w, _)| !w.broken).min_by(|a, b| a.0.ratio().total_cmp(&b.0.ratio())) {
        return Some(held_one.clone());
    }
    tried.iter().find(|(_, f)| *f == natural).or(tried.first()).cloned()
}

/// The bound beyond the clock trust ([`checker::beyond_clock_trust`]), over each stretch
/// between losses of Redis's data and any run of them with one extra capacity per loss. Each
/// admission is placed anywhere from its caller's own reading to the latest reading a design
/// can have had by then: any reading sent so far, carried forward by Redis's clock to the
/// moment of the decision (a stored time plus what Redis's clock has run since, or a TTL set
/// on one clock and run out on the other), that is the true time plus the largest offset
/// seen. No life of the state ends at an expiry: a window or a log exact on its readings
/// needs none (its TTL runs out where the reading carried forward has left it behind), and a
/// bucket's expiry lends at most the refill of the clocks' spread, granted per expiry.
fn beyond_clock_trust(held: &Held, ran: &Ran, reading: &dyn Fn(usize) -> Option<u64>) -> Option<Worst> {
    let mut ahead = i64::MIN;
    let mut span = std::collections::BTreeMap::new();
    for (i, e) in ran.schedule.0.iter().enumerate() {
        let Event::Request { skew_ms, .. } = *e else { continue };
        let Some(r) = reading(i) else { continue };
        ahead = ahead.max(skew_ms);
        span.insert(i, (r, r.saturating_add_signed(ahead - skew_ms)));
    }
    let segments = segments(ran);
    let capacity = held.promise.capacity(&held.quota);
    let q = &held.quota;
    let (lo, hi) = ran.clock_offsets().unwrap_or((0, 0));
    let per_expiry = checker::expiry_allowance(held.promise, q, (hi - lo).unsigned_abs());
    let mut worst: Option<Worst> = None;
    for i in 0..segments.len() {
        for j in i..segments.len() {
            let range = segments[i].start..segments[j].end;
            let expiries = range.clone().filter(|&k| ran.decided[k].as_ref().is_some_and(|d| d.restarted)).count();
            let mut admitted: Vec<Admission> = ran
                .admitted()
                .into_iter()
                .filter(|(k, ..)| range.contains(k))
                .map(|(k, _, units)| Admission { lo: span[&k].0, hi: span[&k].1, units, id: k })
                .collect();
            let allowance = (j - i) as u64 * capacity + expiries as u64 * per_expiry;
            let zero =
                sim_engine::simclock::EPOCH_MS - sim_engine::simclock::readings_origin_ms(held.quota.period_ms());
            let found =
                checker::beyond_clock_trust(held.promise, &held.quota, &mut admitted, allowance, held.tolerance, zero);
            if let Some(found) = found {
                worst = Some(self::worse(worst, found));
            }
        }
    }
    worst
}

/// A bucket's bound over one life, each admission at its reading or at the latest reading
/// seen so far.
fn bucket_on_readings(
    held: &Held,
    ran: &Ran,
    life: std::ops::Range<usize>,
    reading: &dyn Fn(usize) -> Option<u64>,
    frame: Frame,
) -> Option<Worst> {
    let mut latest = 0u64;
    let mut times = std::collections::BTreeMap::new();
    for i in life.clone() {
        if let Some(r) = reading(i) {
            latest = latest.max(r);
            times.insert(i, if frame == Frame::Readings { r } else { latest });
        }
    }
    let mut admitted = admissions(ran, life, |i, _| times[&i]);
    checker::worst(held.promise, &held.quota, &mut admitted, 0, held.tolerance)
}

/// A window's or a log's own rule over one life, decision by decision, on the readings: every
/// admission must fit what the window (or the log) held then.
///
/// - Aligned windows: the window a request's reading names (`Readings`), or the latest
///   reading's (`LatestReading`), holds at most L.
/// - A log: what the latest reading has not put out of reach (members older than it by a
///   period are gone for good) holds at most L with the new units (`LatestReading`); or what
///   the request's own reading's window holds (`Readings`).
/// - A first-hit window: a window opens at a request whose reading is past the open one's end
///   (`LatestReading`: a reading that lags stays in the window; `Readings`: either way, the
///   end read as exclusive).
/// - A sliding-window counter: held to twice L in a period of readings, as its bound says.
fn window_on_readings(
    held: &Held,
    ran: &Ran,
    life: std::ops::Range<usize>,
    reading: &dyn Fn(usize) -> Option<u64>,
    frame: Frame,
) -> Option<Worst> {
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms().max(1));
    let r_ms = held.resolution_ms();
    // (event, its reading, the latest reading then, units)
    let mut admitted: Vec<(usize, u64, u64, u64)> = Vec::new();
    let mut latest = 0u64;
    let mut window: Option<u64> = None;
    let mut worst: Option<Worst> = None;
    for i in life {
        let Some(r) = reading(i) else { continue };
        latest = latest.max(r);
        let counted: Vec<&(usize, u64, u64, u64)> = match (held.promise, frame) {
            (Promise::FixedWindow { first_hit: false }, Frame::Readings) => {
                admitted.iter().filter(|a| a.1 / w == r / w).collect()
            }
            (Promise::FixedWindow { first_hit: false }, _) => {
                admitted.iter().filter(|a| a.2 / w == latest / w).collect()
            }
            (Promise::SlidingLog, Frame::Readings) => {
                admitted.iter().filter(|a| a.1 + w + r_ms > r && a.1 <= r).collect()
            }
            (Promise::SlidingLog, _) => admitted.iter().filter(|a| a.1 + w + r_ms > latest).collect(),
            (Promise::FixedWindow { first_hit: true }, _) => {
                let ends = |start: u64| match frame {
                    Frame::Readings => r >= start + w + r_ms,
                    _ => r > start + w + r_ms,
                };
                if window.is_none_or(ends) && ran.allowed(i) {
                    window = Some(r);
                    admitted.clear();
                }
                admitted.iter().collect()
            }
            (Promise::SlidingWindow, _) => {
                let at = if frame == Frame::Readings { r } else { latest };
                admitted.iter().filter(|a| a.1 + w + r_ms > at && a.1 <= at + r_ms).collect()
            }
            // Buckets are judged by their own bound over the readings, and no promise by none.
            (Promise::TokenBucket | Promise::Gcra | Promise::None, _) => return None,
        };
        let units: u64 = counted.iter().map(|a| a.3).sum();
        let first = counted.first().map_or(i, |a| a.0);
        let bound = if held.promise == Promise::SlidingWindow { 2 * l } else { l };
        if ran.allowed(i) {
            let n = units + ran.units(i);
            let within = match held.promise {
                Promise::FixedWindow { first_hit: true } => "in one window of the readings".to_owned(),
                Promise::FixedWindow { first_hit: false } => {
                    format!("in the window of readings [{}, {}) ms", r / w * w, r / w * w + w)
                }
                Promise::SlidingLog | Promise::SlidingWindow | Promise::TokenBucket | Promise::Gcra | Promise::None => {
                    format!("within {w} ms of readings")
                }
            };
            let here =
                Worst { admitted: n, allowed: bound as f64, broken: n > bound, within, first, last: i, forgiven: None };
            worst = Some(self::worse(worst, here));
            admitted.push((i, r, latest, ran.units(i)));
        }
    }
    worst
}

/// The lives of the script's state: stretches of the schedule that end where Redis lost its
/// data or where a request found its state gone and wrote it afresh (expired on Redis's
/// clock, which a script fed its callers' clocks cannot see coming).
fn lives(ran: &Ran) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, e) in ran.schedule.0.iter().enumerate() {
        let fresh = ran.decided[i].as_ref().is_some_and(|d| d.restarted);
        if matches!(e, Event::LoseData { .. }) || fresh {
            if i > start {
                out.push(start..i);
            }
            start = if fresh { i } else { i + 1 };
        }
    }
    out.push(start..ran.schedule.0.len());
    out
}

pub(super) fn violation(held: &Held, ran: &Ran, kind: CheckKind, worst: &Worst, frame: Frame) -> Violation {
    let q = &held.quota;
    let mut worst = worst.clone();
    if held.unit == Some(Unit::Us) && held.promise.is_bucket() {
        // Judged to the microsecond, told in the schedule's milliseconds.
        let at = |i: usize| ran.decided[i].as_ref().map_or(0, |d| d.at_us);
        let (from, to) = (at(worst.first), at(worst.last));
        worst.within = format!(
            "within {} µs (from {}.{:03} ms to {}.{:03} ms)",
            to - from,
            from / 1000,
            from % 1000,
            to / 1000,
            to % 1000
        );
    }
    let losses =
        ran.losses_between(ran.schedule.0[worst.first].t_ms().saturating_sub(1), ran.schedule.0[worst.last].t_ms());
    let what = match held.promise {
        Promise::TokenBucket | Promise::Gcra => {
            format!("a token bucket of burst {} refilling {} per {} ms", q.burst(), q.limit(), q.period_ms())
        }
        other => other.describe(q),
    };
    let losses = match losses {
        0 => String::new(),
        n => format!(", with {n} loss(es) of Redis's data in between (one extra capacity each)"),
    };
    let clocks = |lo: i64, hi: i64| if lo == hi { format!("all {lo:+} ms") } else { format!("{lo:+} to {hi:+} ms") };
    let message = match (kind, ran.clock_offsets()) {
        (CheckKind::Bound, Some((lo, hi))) if frame == Frame::AnyReading => format!(
            "{} admitted {} by instances whose clocks were {} off: beyond the clock trust, whatever the design, since \
             {what} allows at most {} over that span of readings, at whichever reading of it each was counted",
            worst.admitted,
            worst.within,
            clocks(lo, hi),
            figure(worst.allowed, worst.admitted)
        ),
        (CheckKind::Bound, Some((lo, hi))) => format!(
            "{} admitted {} as the clocks the script was given read them, by instances whose clocks were {} off: \
             more than any reading of those clocks explains ({what} allows at most {})",
            worst.admitted,
            worst.within,
            clocks(lo, hi),
            figure(worst.allowed, worst.admitted)
        ),
        _ => format!(
            "{} admitted {}; {what} allows at most {}{losses}",
            worst.admitted,
            worst.within,
            figure(worst.allowed, worst.admitted)
        ),
    };
    Violation { check: kind, at: worst.last, message }
}

/// A bound as a verdict prints it: with as many decimals as it takes to show that it is below
/// what was admitted (163.99999, not 164.0), and one where that shows anyway.
pub(crate) fn figure(allowed: f64, admitted: u64) -> String {
    (1..=9)
        .map(|decimals| format!("{allowed:.decimals$}"))
        .find(|shown| shown.parse::<f64>().is_ok_and(|v| v < admitted as f64))
        .unwrap_or_else(|| format!("{allowed:.1}"))
}
