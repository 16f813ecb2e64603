//! A promise checked on one schedule run at exact times (one key, the model's clock set to
//! each request's moment), held with exactly what the subject file declares.
//!
//! A script is judged by its promise, in integers and at the millisecond Redis ran it: no
//! slack a subject file did not declare. What may widen a check is only what the file says
//! (`resolution_ms`: how coarsely it keeps time; `counts = "requests"`: its windows count
//! denied units too) or what the script shows: a script that admits at exact ties (a bucket
//! asked exactly when a unit is due) and denies at another decides ties both ways, as one
//! computing in floats does by rounding alone, so that denial is forgiven, and only there;
//! one that never admits at a tie has an edge one unit late. The
//! checks:
//!
//! Redis's clock has microseconds; a schedule names milliseconds, and requests at one
//! millisecond run a few microseconds apart (`direct`). A script that keeps time in
//! milliseconds decided at the millisecond, one that keeps microseconds at the microsecond: the
//! bound and the lost capacity are judged in both, and broken only where both readings break
//! them (what a script cannot tell apart does not decide its verdict).
//!
//! - **bound**: too much admitted for the promise. With exact clocks, in true time (one extra
//!   capacity for each loss of Redis's data inside the interval). Where the instances' clocks
//!   disagree, on the readings the script was given: per life of its state (a life ends when
//!   the state is found gone: expired on Redis's clock, or lost), each admission at the reading
//!   it came with (how a window named by the caller's clock counts it) and at the latest
//!   reading seen so far (how a state whose time only moves forward counts it). A script exact
//!   on the times it was given keeps one of them; one that mixes clocks, lets a late caller's
//!   time refill a stretch twice, or lets any caller outside a window reset it keeps neither;
//! - **clock trust** (scripts fed their caller's clock): the same bound in true time while the
//!   instances' clocks disagree. Every such script exceeds it by what the skew lends; that is
//!   the design's price, reported as expected, not as a broken promise;
//! - **lost capacity**: a request denied that an exact limiter of the promise, fed the same
//!   admissions, admits (a floored refill, a window that never ends, an edge one unit late);
//! - **estimate** (sliding-window counter): a decision the weighted estimate contradicts under
//!   every rounding of the previous window's share;
//! - **retry-after** (where the reply has one): a client that waits as told is denied again;
//! - **errors**: the script raised an error.

use std::fmt;

use redis_ratelimit::Quota;
use sim_engine::checker::{self, Admission, Worst};
use sim_engine::promise::{Counts, Promise, Tolerance};
use sim_engine::subject::SubjectFile;

use super::direct::Direct;
use super::schedule::{Event, Ran, Schedule};

/// The checks, in the order verdicts list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckKind {
    /// The promised bound, on the clock each request was decided by.
    Bound,
    /// The promised bound in true time, across instances whose clocks disagree.
    ClockTrust,
    /// Nothing denied that the promise admits.
    LostCapacity,
    /// Decisions the sliding-window estimate allows.
    Estimate,
    /// Retry-After is honest.
    RetryAfter,
    /// The script runs without errors.
    Errors,
}

impl CheckKind {
    /// Every check.
    pub const ALL: [CheckKind; 6] = [
        CheckKind::Bound,
        CheckKind::ClockTrust,
        CheckKind::LostCapacity,
        CheckKind::Estimate,
        CheckKind::RetryAfter,
        CheckKind::Errors,
    ];

    /// Its name in verdicts and in the results JSON.
    pub const fn name(self) -> &'static str {
        match self {
            CheckKind::Bound => "bound",
            CheckKind::ClockTrust => "clock trust",
            CheckKind::LostCapacity => "no lost capacity",
            CheckKind::Estimate => "sliding-window estimate",
            CheckKind::RetryAfter => "retry-after honest",
            CheckKind::Errors => "runs without errors",
        }
    }

    /// Whether it applies to the subject of `file`.
    pub fn applies(self, file: &SubjectFile) -> bool {
        match self {
            CheckKind::RetryAfter => file.reply.retry_after.is_some() && self.applies_to(file.promise),
            CheckKind::ClockTrust => file.client_time() && self.applies_to(file.promise),
            _ => self.applies_to(file.promise),
        }
    }

    /// Whether it applies to a subject promising `promise` (whatever its reply and its clock).
    fn applies_to(self, promise: Promise) -> bool {
        match self {
            CheckKind::Errors => true,
            _ if promise == Promise::None => false,
            CheckKind::Estimate => promise == Promise::SlidingWindow,
            // The sliding-window counter's capacity is its estimate's.
            CheckKind::LostCapacity => promise != Promise::SlidingWindow,
            _ => true,
        }
    }

    /// Whether a search for it calls from instances whose clocks disagree: the clock trust
    /// always, the bound after the exact clocks for a subject fed its caller's clock.
    pub fn skewed_search(self, file: &SubjectFile) -> bool {
        file.client_time() && matches!(self, CheckKind::Bound | CheckKind::ClockTrust)
    }

    /// Whether it is judged as a bound, whose worst case a search can climb towards.
    pub fn is_bound(self) -> bool {
        matches!(self, CheckKind::Bound | CheckKind::ClockTrust)
    }
}

impl fmt::Display for CheckKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A broken check: which, at which event of the schedule, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The check.
    pub check: CheckKind,
    /// The event that broke it.
    pub at: usize,
    /// Why, with the numbers.
    pub message: String,
}

/// What the checks need to know about the subject: its promise, the quota it is driven
/// with, and what its file declares or its replies show.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    /// Its promise.
    pub promise: Promise,
    /// The quota it is driven with.
    pub quota: Quota,
    /// How coarsely it keeps time, as declared.
    pub tolerance: Tolerance,
    /// What its windows count, as declared.
    pub counts: Counts,
    /// Whether the script admits at exact ties (`calibrate`): then a denial exactly at a tie
    /// means it decides ties both ways (a float computation's rounding) and is forgiven.
    pub admits_at_ties: bool,
    /// The unit it keeps Redis's time in, where its decisions show it (`calibrate`); where
    /// they do not, both readings are taken and a break must show in both.
    pub unit: Option<Unit>,
}

impl Held {
    /// How the subject of `file` is held with `quota`, given whether it admits at exact ties
    /// and the unit it keeps time in, if known.
    pub fn of(file: &SubjectFile, quota: Quota, admits_at_ties: bool, unit: Option<Unit>) -> Held {
        Held { promise: file.promise, quota, tolerance: file.tolerance, counts: file.counts, admits_at_ties, unit }
    }

    /// The units to judge it in: its own, or both.
    fn units(&self) -> &'static [Unit] {
        match self.unit {
            Some(Unit::Ms) => &[Unit::Ms],
            Some(Unit::Us) => &[Unit::Us],
            None => &[Unit::Ms, Unit::Us],
        }
    }

    fn resolution_ms(&self) -> u64 {
        self.tolerance.resolution_ms
    }
}

/// Every check but Retry-After (which replays the schedule) on `ran`; the first violation.
pub fn check(held: &Held, ran: &Ran) -> Option<Violation> {
    [CheckKind::Errors, CheckKind::Bound, CheckKind::LostCapacity, CheckKind::Estimate]
        .into_iter()
        .find_map(|kind| only(held, ran, kind))
}

/// One check but Retry-After on `ran`, if it applies to the promise.
pub fn only(held: &Held, ran: &Ran, kind: CheckKind) -> Option<Violation> {
    if !kind.applies_to(held.promise) {
        return None;
    }
    match kind {
        CheckKind::Errors => errors(ran),
        CheckKind::Bound | CheckKind::ClockTrust => {
            let (worst, _) = bound(held, ran, kind)?;
            worst.broken.then(|| violation(held, ran, kind, &worst))
        }
        CheckKind::LostCapacity => lost_capacity(held, ran),
        CheckKind::Estimate => estimate(held, ran),
        CheckKind::RetryAfter => None,
    }
}

/// The worst `ran` came to against a bound check (None when nothing was admitted), and
/// the frame it was judged in.
pub fn bound(held: &Held, ran: &Ran, kind: CheckKind) -> Option<(Worst, Frame)> {
    match (kind, ran.skewed()) {
        (CheckKind::Bound, true) => on_readings(held, ran),
        (CheckKind::ClockTrust, false) => None,
        _ => true_time(held, ran).map(|w| (w, Frame::TrueTime)),
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
}

fn errors(ran: &Ran) -> Option<Violation> {
    ran.decided.iter().enumerate().find_map(|(i, d)| {
        let d = d.as_ref()?;
        let e = d.error.as_ref().filter(|_| d.unknown_command.is_none())?;
        Some(Violation { check: CheckKind::Errors, at: i, message: format!("the script raised an error: {e}") })
    })
}

/// The unit a script keeps Redis's time in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds: requests within one millisecond are one moment to it.
    Ms,
    /// Microseconds.
    Us,
}

impl Unit {
    /// Per millisecond.
    fn per_ms(self) -> u64 {
        match self {
            Unit::Ms => 1,
            Unit::Us => 1_000,
        }
    }

    /// When event `i` of `ran`, at `t_ms`, was decided, in this unit.
    fn time(self, ran: &Ran, i: usize, t_ms: u64) -> u64 {
        match self {
            Unit::Ms => t_ms,
            Unit::Us => ran.decided[i].as_ref().map_or(t_ms * 1_000, |d| d.at_us),
        }
    }

    /// `held` with its quota and resolution in this unit.
    fn held(self, held: &Held) -> Held {
        let k = self.per_ms();
        let q = held.quota;
        Held {
            quota: Quota::new(q.limit(), q.period_ms() * k).with_burst(q.burst()),
            tolerance: Tolerance { resolution_ms: held.tolerance.resolution_ms * k },
            ..*held
        }
    }
}

/// The admissions of events `from..to` of `ran`, each at `time(event index, true time)`.
fn admissions(ran: &Ran, range: std::ops::Range<usize>, time: impl Fn(usize, u64) -> u64) -> Vec<Admission> {
    ran.admitted()
        .into_iter()
        .filter(|&(i, _, _)| range.contains(&i))
        .map(|(i, t, units)| {
            let t = time(i, t);
            Admission { lo: t, hi: t, units, id: i }
        })
        .collect()
}

/// The schedule's stretches between losses of Redis's data, as event ranges.
fn segments(ran: &Ran) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, e) in ran.schedule.0.iter().enumerate() {
        if matches!(e, Event::LoseData { .. }) {
            out.push(start..i);
            start = i + 1;
        }
    }
    out.push(start..ran.schedule.0.len());
    out
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
fn true_time_in(held: &Held, ran: &Ran, unit: Unit) -> Option<Worst> {
    let held = &unit.held(held);
    let segments = segments(ran);
    let capacity = held.promise.capacity(&held.quota);
    let mut worst: Option<Worst> = None;
    for i in 0..segments.len() {
        for j in i..segments.len() {
            let mut admitted = admissions(ran, segments[i].start..segments[j].end, |i, t| unit.time(ran, i, t));
            let allowance = (j - i) as u64 * capacity;
            if let Some(w) = checker::worst(held.promise, &held.quota, &mut admitted, allowance, held.tolerance) {
                worst = Some(worse(worst, w));
            }
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
    // Readings as the script got them (the epoch plus the true time plus the offset), counted
    // from a whole number of periods an hour before the epoch: never negative, and a window
    // named by a reading falls where the script put it.
    let w = held.quota.period_ms().max(1);
    let origin = (sim_engine::simclock::EPOCH_MS - 3_600_000) / w * w;
    let reading = |i: usize| match ran.schedule.0[i] {
        Event::Request { t_ms, skew_ms, .. } => {
            Some((sim_engine::simclock::EPOCH_MS + t_ms).saturating_add_signed(skew_ms) - origin)
        }
        _ => None,
    };
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
        _ => Frame::Readings,
    };
    if let Some(held_one) = tried.iter().filter(|(w, _)| !w.broken).min_by(|a, b| a.0.ratio().total_cmp(&b.0.ratio())) {
        return Some(held_one.clone());
    }
    tried.iter().find(|(_, f)| *f == natural).or(tried.first()).cloned()
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
            _ => return None,
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
                _ => format!("within {w} ms of readings"),
            };
            let here = Worst { admitted: n, allowed: bound as f64, broken: n > bound, within, first, last: i };
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

fn violation(held: &Held, ran: &Ran, kind: CheckKind, worst: &Worst) -> Violation {
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
    let message = match (kind, ran.clock_offsets()) {
        (CheckKind::Bound, Some((lo, hi))) => format!(
            "{} admitted {} as the clocks the script was given read them, by instances whose clocks were {} off: \
             more than any reading of those clocks explains ({what} allows at most {:.1})",
            worst.admitted,
            worst.within,
            if lo == hi { format!("all {lo:+} ms") } else { format!("{lo:+} to {hi:+} ms") },
            worst.allowed
        ),
        _ => {
            format!("{} admitted {}; {what} allows at most {:.1}{losses}", worst.admitted, worst.within, worst.allowed)
        }
    };
    Violation { check: kind, at: worst.last, message }
}

/// How a reference reads what the promise leaves open: whether a window counts denied units
/// too, and whether a first-hit window holds the millisecond its length ends on (Redis keeps
/// a key through its TTL's last millisecond; a script comparing `start + T` ends it there).
#[derive(Debug, Clone, Copy)]
struct Reading {
    unit: Unit,
    counts_requests: bool,
    end_inclusive: bool,
}

/// An exact limiter of the promise fed the subject's own admissions (and its requests, for
/// windows that count them), to tell whether a denial had room: in milliseconds and in
/// microseconds, counting admitted units and every requested one (unless the file says which),
/// with a first-hit window's end read either way; lost only where every reading says so.
fn lost_capacity(held: &Held, ran: &Ran) -> Option<Violation> {
    let counts: &[bool] = match held.counts {
        Counts::Either => &[false, true],
        Counts::Admitted => &[false],
        Counts::Requests => &[true],
    };
    let mut first = None;
    for &unit in held.units() {
        for &counts_requests in counts {
            for end_inclusive in [true, false] {
                let v = lost_capacity_in(held, ran, Reading { unit, counts_requests, end_inclusive })?;
                first.get_or_insert(v);
            }
        }
    }
    first
}

fn lost_capacity_in(held: &Held, ran: &Ran, reading: Reading) -> Option<Violation> {
    let Reading { unit, counts_requests, end_inclusive } = reading;
    let held = &unit.held(held);
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms().max(1));
    let r = held.resolution_ms();
    // The first-hit window opened at `opened` has ended at `t`.
    let ended = |opened: u64, t: u64| if end_inclusive { t > opened + w } else { t >= opened + w };
    // Since Redis last lost its data (the subject starts afresh then, so does the reference).
    let mut counted: Vec<(u64, u64)> = Vec::new();
    // The bucket in units of 1/T of a token: refills L per ms, holds B·T.
    let cap = i128::from(q.burst()) * i128::from(w);
    let mut bucket: (i128, Option<u64>) = (cap, None);
    // The first-hit window open now: when it opened.
    let mut window: Option<u64> = None;
    for (i, e) in ran.schedule.0.iter().enumerate() {
        let (t_ms, t, cost) = match *e {
            Event::Request { t_ms, cost, .. } => (t_ms, unit.time(ran, i, t_ms), cost),
            Event::LoseData { .. } => {
                counted.clear();
                bucket = (cap, None);
                window = None;
                continue;
            }
            Event::FlushScripts { .. } => continue,
        };
        let allowed = ran.allowed(i);
        let units = ran.units(i);
        // The reference bucket brought up to t.
        if let Some(last) = bucket.1 {
            bucket.0 = (bucket.0 + i128::from(l) * i128::from(t.saturating_sub(last))).min(cap);
        }
        bucket.1 = Some(bucket.1.map_or(t, |last| last.max(t)));
        let in_window = |from: u64| -> u64 { counted.iter().filter(|&&(s, _)| s >= from).map(|&(_, u)| u).sum() };
        let room = if allowed || ran.decided[i].as_ref().is_some_and(|d| d.error.is_some()) {
            None
        } else {
            match held.promise {
                Promise::TokenBucket | Promise::Gcra => {
                    // What the bucket held at the earliest moment a coarse clock may have read.
                    let level = bucket.0 - i128::from(l) * i128::from(r);
                    let need = i128::from(cost) * i128::from(w);
                    let tie = level == need;
                    (level > need || (tie && !held.admits_at_ties)).then(|| {
                        let tokens = level as f64 / w as f64;
                        if tie {
                            format!(
                                "an exact token bucket fed the same admissions holds exactly {tokens:.2} tokens, and \
                                 the script never admits at such a tie (an edge one unit late)"
                            )
                        } else {
                            format!("an exact token bucket fed the same admissions holds {tokens:.2} tokens")
                        }
                    })
                }
                Promise::FixedWindow { first_hit: false } => {
                    let step = |t: u64| if r > 0 { t - t % r } else { t };
                    let k = step(t) / w;
                    let n: u64 = counted.iter().filter(|&&(s, _)| step(s) / w == k).map(|&(_, u)| u).sum();
                    (n + cost <= l).then(|| {
                        format!(
                            "its aligned window [{}, {}) ms holds {n} {} units, of {l}",
                            k * w,
                            (k + 1) * w,
                            if counts_requests { "requested" } else { "admitted" }
                        )
                    })
                }
                Promise::FixedWindow { first_hit: true } => match window {
                    Some(opened) if !ended(opened + r, t) => {
                        let n = in_window(opened);
                        (n + cost <= l).then(|| {
                            format!(
                                "the window opened at {opened} ms holds {n} {} units, of {l}",
                                if counts_requests { "requested" } else { "admitted" }
                            )
                        })
                    }
                    Some(opened) => Some(format!(
                        "the window opened at {opened} ms ended at {} ms (Redis drops a key after its TTL's last \
                         millisecond), so a new window would open",
                        opened + w
                    )),
                    None => Some("no window was open, so a new window would open".to_owned()),
                },
                Promise::SlidingLog => {
                    let n = in_window((t + 1).saturating_sub(w + r));
                    (n + cost <= l).then(|| {
                        format!(
                            "the last {} ms hold {n} {} units, of {l}",
                            w + r,
                            if counts_requests { "requested" } else { "admitted" }
                        )
                    })
                }
                Promise::SlidingWindow | Promise::None => None,
            }
        };
        if let Some(why) = room {
            return Some(Violation {
                check: CheckKind::LostCapacity,
                at: i,
                message: format!("denied a request of cost {cost} at {t_ms} ms, yet {why}"),
            });
        }
        // What the reference takes in: the admitted units (or, declared, every request's).
        if allowed {
            bucket.0 -= i128::from(units) * i128::from(w);
        }
        let opens =
            held.promise == (Promise::FixedWindow { first_hit: true }) && window.is_none_or(|opened| ended(opened, t));
        if (allowed || counts_requests) && opens {
            window = Some(t);
            counted.clear();
        }
        if allowed || counts_requests {
            counted.push((t, if allowed { units } else { cost }));
        }
    }
    None
}

/// The sliding-window counter's own rule: every decision one the weighted estimate (the
/// previous window's count weighted by what is left of it, plus this window's) gives, under
/// one reading of what the script leaves open, the same for the whole schedule:
///
/// - where its windows begin: at multiples of the period (a window named by the time), or at
///   the key's first request (counters that roll over when their TTL says; Redis keeps a key
///   through its TTL's last millisecond, so such a window may also hold the millisecond it
///   ends in);
/// - how it rounds the previous window's share: not at all (compared scaled, exactly), down
///   or up;
/// - what it counts: admitted units, or every requested one (unless the file says which).
///
/// The schedule breaks the promise only if it breaks it under every reading: a script exact
/// under one is exact, and a window edge moved by a millisecond is no reading at all.
fn estimate(held: &Held, ran: &Ran) -> Option<Violation> {
    let counts: &[bool] = match held.counts {
        Counts::Either => &[false, true],
        Counts::Admitted => &[false],
        Counts::Requests => &[true],
    };
    let mut first = None;
    for (anchored, late_ms) in [(false, 0), (true, 0), (true, 1)] {
        for rounding in [Rounding::Exact, Rounding::Down, Rounding::Up] {
            for &counts_requests in counts {
                let reading = EstimateReading { anchored, late_ms, rounding, counts_requests };
                let v = estimate_under(held, ran, reading)?;
                first.get_or_insert(v);
            }
        }
    }
    first
}

/// How a script may round the previous window's weighted share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    Exact,
    Down,
    Up,
}

/// One reading of a sliding-window counter (see [`estimate`]).
#[derive(Debug, Clone, Copy)]
struct EstimateReading {
    anchored: bool,
    late_ms: u64,
    rounding: Rounding,
    counts_requests: bool,
}

fn estimate_under(held: &Held, ran: &Ran, reading: EstimateReading) -> Option<Violation> {
    let EstimateReading { anchored, late_ms, rounding, counts_requests } = reading;
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms().max(1));
    let slack = held.resolution_ms();
    let mut counted: Vec<(u64, u64)> = Vec::new();
    // Where windows begin: 0, or the first request of the key's current life.
    let mut origin = 0u64;
    let mut last_request: Option<u64> = None;
    for (i, e) in ran.schedule.0.iter().enumerate() {
        let (t, cost) = match *e {
            Event::Request { t_ms, cost, .. } => (t_ms, cost),
            Event::LoseData { .. } => {
                counted.clear();
                last_request = None;
                continue;
            }
            Event::FlushScripts { .. } => continue,
        };
        if anchored && last_request.is_none_or(|prev| (t - origin) / w >= (prev - origin) / w + 2) {
            // A fresh key, or one whose counters both expired (no request in the window before
            // this one): its windows start now.
            origin = t;
            counted.clear();
        }
        last_request = Some(t);
        let window = |at: u64| (at - origin).saturating_sub(late_ms) / w;
        let k = window(t);
        let sum = |of: u64| -> u64 { counted.iter().filter(|&&(s, _)| window(s) == of).map(|&(_, u)| u).sum() };
        let (prev, cur) = (if k > 0 { sum(k - 1) } else { 0 }, sum(k));
        let into = (t - origin).saturating_sub(late_ms) % w;
        // The estimate with this request, scaled by the period (exact in integers): the
        // previous count times what is left of its window (less a declared coarse clock's
        // step, which may have read the time that much earlier), rounded as the reading says.
        let left = (w - into.min(w)).saturating_sub(slack);
        let share_scaled = prev * left;
        let share_scaled = match rounding {
            Rounding::Exact => share_scaled,
            Rounding::Down => share_scaled / w * w,
            Rounding::Up => share_scaled.div_ceil(w) * w,
        };
        let estimate_scaled = share_scaled + (cur + cost) * w;
        let fits = estimate_scaled <= l * w;
        let allowed = ran.allowed(i);
        let decided = ran.decided[i].as_ref().is_some_and(|d| d.error.is_none());
        let why = if allowed && !fits {
            Some(format!(
                "admitted although the weighted estimate (previous window {prev}, this window {cur}, {into} ms into \
                 it) is {:.2} with it, above the limit {l}",
                estimate_scaled as f64 / w as f64
            ))
        } else if !allowed && decided && fits {
            Some(format!(
                "denied although the weighted estimate (previous window {prev}, this window {cur}, {into} ms into \
                 it) is {:.2} with it, within the limit {l}",
                estimate_scaled as f64 / w as f64
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Some(Violation {
                check: CheckKind::Estimate,
                at: i,
                message: format!("at {t} ms, cost {cost}: {why}"),
            });
        }
        if allowed {
            counted.push((t, ran.units(i)));
        } else if counts_requests {
            counted.push((t, cost));
        }
    }
    None
}

/// Retry-After: after each of the first denials of a single unit that carry one, a client
/// that waits exactly that long from the moment it was told must be admitted (a declared
/// coarse clock may make it wait one step more). (For larger costs many scripts report when
/// the next unit frees, which is a different promise.) Replays the schedule up to the denial
/// on a fresh model each time.
pub fn retry_after(held: &Held, ran: &Ran, fresh: &dyn Fn() -> Direct) -> Option<Violation> {
    let denials = ran.schedule.requests().filter_map(|(i, t, cost)| {
        let d = ran.decided[i].as_ref()?;
        (cost == 1 && !d.allowed && d.error.is_none()).then_some((i, t, d.at_us, cost, d.retry_after_ms?))
    });
    for (i, t, told_us, cost, wait) in denials.take(3) {
        let mut direct = fresh();
        let prefix = Schedule(ran.schedule.0[..=i].to_vec());
        let _ = Ran::new(&mut direct, &prefix);
        let at_us = told_us + (wait + held.resolution_ms()) * 1_000;
        let at = at_us / 1_000;
        let again = direct.request_at_us(at_us, 0, super::schedule::KEY, cost);
        if !again.allowed {
            return Some(Violation {
                check: CheckKind::RetryAfter,
                at: i,
                message: format!(
                    "told to retry after {wait} ms, yet the same request alone at {at} ms ({} ms later) was denied again",
                    at - t
                ),
            });
        }
    }
    None
}
