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

mod bound;
mod capacity;
mod estimate;

use std::fmt;
use std::time::Duration;

use redis_ratelimit::Quota;
use sim_engine::bound::Admission;
use sim_engine::promise::{Counts, Promise, Tolerance};
use sim_engine::subject::SubjectFile;

pub use bound::{bound, closeness, Frame};

use super::calibrate::Ties;
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
    /// How the script decides exact ties (`calibrate`): one that admits at some is forgiven a
    /// denial exactly at another, and one that denies at some an admission at most one unit of
    /// its time before one (deciding ties both ways is a float computation's rounding).
    pub ties: Ties,
    /// The unit it keeps Redis's time in, where its decisions show it (`calibrate`); where
    /// they do not, both readings are taken and a break must show in both.
    pub unit: Option<Unit>,
}

impl Held {
    /// How the subject of `file` is held with `quota`, given whether it admits at exact ties
    /// and the unit it keeps time in, if known.
    pub fn of(file: &SubjectFile, quota: Quota, ties: Ties, unit: Option<Unit>) -> Held {
        Held { promise: file.promise, quota, tolerance: file.tolerance, counts: file.counts, ties, unit }
    }

    /// The units to judge it in: its own, or both.
    pub(crate) fn units(&self) -> &'static [Unit] {
        match self.unit {
            Some(Unit::Ms) => &[Unit::Ms],
            Some(Unit::Us) => &[Unit::Us],
            None => &[Unit::Ms, Unit::Us],
        }
    }

    pub(crate) fn resolution_ms(&self) -> u64 {
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
            let (worst, frame) = bound(held, ran, kind)?;
            worst.broken.then(|| bound::violation(held, ran, kind, &worst, frame))
        }
        CheckKind::LostCapacity => capacity::lost_capacity(held, ran),
        CheckKind::Estimate => estimate::estimate(held, ran),
        CheckKind::RetryAfter => None,
    }
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
    pub(crate) fn per_ms(self) -> u64 {
        match self {
            Unit::Ms => 1,
            Unit::Us => 1_000,
        }
    }

    /// When event `i` of `ran`, at `t_ms`, was decided, in this unit.
    pub(crate) fn time(self, ran: &Ran, i: usize, t_ms: u64) -> u64 {
        match self {
            Unit::Ms => t_ms,
            Unit::Us => ran.decided[i].as_ref().map_or(t_ms * 1_000, |d| d.at_us),
        }
    }

    /// `held` with its quota and resolution in this unit.
    pub(crate) fn held(self, held: &Held) -> Held {
        let k = self.per_ms();
        let q = held.quota;
        Held {
            quota: Quota::new(q.limit(), Duration::from_millis(q.period_ms() * k)).with_burst(q.burst()),
            tolerance: Tolerance { resolution_ms: held.tolerance.resolution_ms * k },
            ..*held
        }
    }
}

/// The admissions of events `from..to` of `ran`, each at `time(event index, true time)`.
pub(crate) fn admissions(ran: &Ran, range: std::ops::Range<usize>, time: impl Fn(usize, u64) -> u64) -> Vec<Admission> {
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
pub(crate) fn segments(ran: &Ran) -> Vec<std::ops::Range<usize>> {
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
