//! A promise checked on one schedule run at exact times (one key, one instance, the model's
//! clock set to each request's moment), held with the subject's [`Tolerance`].
//!
//! A script is judged by its promise, not decision by decision against an integer oracle:
//! scripts that compute in floats decide exact ties one request early or late with equal
//! totals, so every check leaves a millisecond of room around each decision (and the
//! subject's time resolution where it keeps coarse time). What is left is what no rounding
//! explains:
//!
//! - **bound**: too much admitted over some interval for the promise (one extra burst allowed
//!   for each loss of Redis's data inside it); where the instances' clocks disagree, over the
//!   interval as those clocks read it. A script exact on the times it was given keeps this;
//!   one that mixes clocks or lets a late clock refill twice does not;
//! - **clock trust** (scripts fed their caller's clock): the same bound in true time while the
//!   instances' clocks disagree. Every such script exceeds it by what the skew lends; that is
//!   the design's price, reported as expected, not as a broken promise;
//! - **lost capacity**: a request denied that the promise admits, however its time is read
//!   (the starvation of a floored refill; a window that never ends);
//! - **estimate** (sliding-window counter): a decision the weighted estimate contradicts under
//!   every rounding of the previous window's share;
//! - **retry-after** (where the reply has one): a client that waits as told is denied again;
//! - **errors**: the script raised an error.

use std::fmt;

use redis_ratelimit::Quota;

use super::direct::Direct;
use super::schedule::{Event, Ran, Schedule};
use sim_engine::promise::{Promise, Tolerance};
use sim_engine::subject::SubjectFile;

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
            _ => true,
        }
    }

    /// Whether a search for it calls from instances whose clocks disagree: the clock trust
    /// always, the bound after the exact clocks for a subject fed its caller's clock.
    pub fn skewed_search(self, file: &SubjectFile) -> bool {
        file.client_time() && matches!(self, CheckKind::Bound | CheckKind::ClockTrust)
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

/// What the checks need to know about the subject.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    /// Its promise.
    pub promise: Promise,
    /// The quota it is driven with.
    pub quota: Quota,
    /// How coarsely it keeps time.
    pub tolerance: Tolerance,
}

impl Held {
    /// Room around each decision's time: a millisecond for ties, plus the time resolution.
    fn slack_ms(&self) -> u64 {
        1 + self.tolerance.resolution_ms
    }

    fn rate_per_ms(&self) -> f64 {
        self.quota.limit() as f64 / self.quota.period_ms() as f64
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
        CheckKind::Bound => bound_on_any_clock(held, ran),
        CheckKind::ClockTrust => bound(held, ran).map(|v| Violation { check: CheckKind::ClockTrust, ..v }),
        CheckKind::LostCapacity => lost_capacity(held, ran),
        CheckKind::Estimate => estimate(held, ran),
        CheckKind::RetryAfter => None,
    }
}

fn errors(ran: &Ran) -> Option<Violation> {
    ran.decided.iter().enumerate().find_map(|(i, d)| {
        let e = d.as_ref()?.error.as_ref()?;
        Some(Violation { check: CheckKind::Errors, at: i, message: format!("the script raised an error: {e}") })
    })
}

/// The bound. With exact clocks, the promise as it stands. Where the instances' clocks
/// disagree, a script fed its callers' clocks decided each request by a reading somewhere in
/// the spread of those clocks, so what it admitted in an interval of true time is held to what
/// the promise allows over that interval as the clocks read it ([`bound_under_skew`]).
/// Exceeding the promise in true time alone is the clock trust.
fn bound_on_any_clock(held: &Held, ran: &Ran) -> Option<Violation> {
    let true_time = bound(held, ran)?;
    match ran.clock_offsets() {
        Some(offsets) => bound_under_skew(held, ran, offsets),
        None => Some(true_time),
    }
}

/// The promise over the span the clocks read: for admissions at true times `ti..=tj` from
/// instances whose clocks are off by `lo..=hi` ms, the readings lie in `ti + lo ..= tj + hi`.
/// A bucket may refill for that whole span; windows are counted over it (an aligned window
/// by the ids the readings fall in, any other as the number of its lengths the span needs).
/// A window that slides spans less by as much: a faster caller drops what a slower one still
/// counts (so clocks a whole window apart leave no bound to check).
/// And each fresh start inside the span (a request that found its state gone and wrote it
/// again) may add a whole capacity: a key's TTL runs on Redis's clock from a time read off a
/// faster caller's clock, so a slower caller finds it gone before its own reading says the
/// state has run out.
///
/// A script exact on the times it was given keeps this whatever the skew. One that mixes
/// clocks so that it loses its state on every call (a window named by the caller's clock that
/// expires by Redis's, so a late caller's key dies at once) or lets a late clock refill the
/// same time twice admits more than any reading explains, and breaks it.
fn bound_under_skew(held: &Held, ran: &Ran, (lo, hi): (i64, i64)) -> Option<Violation> {
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms().max(1));
    let slack = held.slack_ms();
    let spread = (hi - lo) as u64 + slack;
    let sliding = w.saturating_sub(spread);
    if sliding == 0
        && !matches!(held.promise, Promise::TokenBucket | Promise::Gcra | Promise::FixedWindow { first_hit: false })
    {
        // Clocks a whole window apart: a sliding window promises nothing across them.
        return None;
    }
    let admitted = ran.admitted();
    let restarts = |from: u64, to: u64| {
        ran.schedule
            .requests()
            .filter(|&(i, t, _)| t > from && t <= to && ran.decided[i].as_ref().is_some_and(|d| d.restarted))
            .count() as u64
    };
    for (j, &(at, tj, _)) in admitted.iter().enumerate() {
        let mut units = 0;
        for &(_, ti, u) in admitted[..=j].iter().rev() {
            units += u;
            let read = (tj - ti) + spread;
            let bound = match held.promise {
                Promise::TokenBucket | Promise::Gcra => {
                    (q.burst() + held.tolerance.extra_units) as f64 + held.rate_per_ms() * read as f64
                }
                Promise::FixedWindow { first_hit: false } => {
                    let id = |t: u64, off: i64| (t as i64 + off).div_euclid(w as i64);
                    let slack = slack as i64;
                    (l * (id(tj, hi + slack) - id(ti, lo - slack) + 1) as u64) as f64
                }
                // A log or a window that slides loses what a faster clock already counts as
                // gone: against the slowest reading it spans `spread` less.
                Promise::FixedWindow { first_hit: true } | Promise::SlidingWindow => {
                    (2 * l * (read / sliding + 1)) as f64
                }
                Promise::SlidingLog => (l * (read / sliding + 1)) as f64,
                Promise::None => return None,
            };
            let fresh = ran.losses_between(ti.saturating_sub(1), tj) + restarts(ti, tj);
            let bound = bound + (fresh * held.promise.capacity(q)) as f64;
            if units as f64 > bound + 1e-9 {
                return Some(Violation {
                    check: CheckKind::Bound,
                    at,
                    message: format!(
                        "{units} admitted from {ti} ms to {tj} ms by instances whose clocks were {} off, more than \
                         any reading of those clocks explains: over the {read} ms they read, with {fresh} fresh \
                         start(s) in between, the promise allows at most {bound:.1}",
                        if lo == hi { format!("all {lo:+} ms") } else { format!("{lo:+} to {hi:+} ms") }
                    ),
                });
            }
        }
    }
    None
}

fn bound(held: &Held, ran: &Ran) -> Option<Violation> {
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms());
    let slack = held.slack_ms();
    let admitted = ran.admitted();
    let losses = |from: u64, to: u64| {
        ran.schedule.0.iter().filter(|e| matches!(e, Event::LoseData { t_ms } if (from..=to).contains(t_ms))).count()
            as u64
    };
    match held.promise {
        Promise::TokenBucket | Promise::Gcra => {
            let r = held.rate_per_ms();
            for (j, &(at, tj, _)) in admitted.iter().enumerate() {
                let mut units = 0;
                for &(_, ti, u) in admitted[..=j].iter().rev() {
                    units += u;
                    let allowance = losses(ti, tj) * q.burst();
                    let bound = (q.burst() + allowance + held.tolerance.extra_units) as f64
                        + r * (tj - ti + held.slack_ms()) as f64;
                    if units as f64 > bound + 1e-9 {
                        return Some(Violation {
                            check: CheckKind::Bound,
                            at,
                            message: format!(
                                "{units} admitted within {} ms (from {ti} ms to {tj} ms); a token bucket of burst {} \
                                 refilling {l} per {w} ms admits at most {bound:.1}",
                                tj - ti,
                                q.burst()
                            ),
                        });
                    }
                }
            }
            None
        }
        Promise::FixedWindow { first_hit: false } => {
            let mut window = (u64::MAX, 0);
            for &(at, t, u) in &admitted {
                let k = t / w;
                window = if window.0 == k { (k, window.1 + u) } else { (k, u) };
                let bound = l + l * losses(k * w, t);
                if window.1 > bound {
                    return Some(Violation {
                        check: CheckKind::Bound,
                        at,
                        message: format!(
                            "{} admitted in the aligned window [{}, {}) ms; the limit is {bound}",
                            window.1,
                            k * w,
                            (k + 1) * w
                        ),
                    });
                }
            }
            None
        }
        Promise::FixedWindow { first_hit: true } => {
            // A window opens at an admission and lasts one period (Redis's TTL), give or take the
            // resolution. Where windows begin is known for sure only when the previous one must
            // have ended: on a fresh key, after Redis lost its data, or after a quiet spell
            // longer than a window. From such a start, at most L fit in what surely is the same
            // window; anywhere, at most 2L fit in one window's length.
            let span = w.saturating_sub(slack).max(1);
            let mut last: Option<u64> = None;
            for (j, &(at, t, _)) in admitted.iter().enumerate() {
                let certain = match last {
                    None => true,
                    Some(prev) => t > prev + w + slack || ran.losses_between(prev, t) > 0,
                };
                last = Some(t);
                if certain {
                    let n: u64 = admitted[j..].iter().take_while(|&&(_, s, _)| s < t + span).map(|&(_, _, u)| u).sum();
                    let bound = l + l * losses(t, t + span);
                    if n > bound {
                        return Some(Violation {
                            check: CheckKind::Bound,
                            at,
                            message: format!(
                                "{n} admitted within {span} ms of a window's first request at {t} ms; the limit is {bound}"
                            ),
                        });
                    }
                }
            }
            sliding_most(&admitted, w, slack, 2 * l, &losses, l)
        }
        // A sliding log promises exact windows: coarse time is no excuse (whole seconds make it a
        // fixed window), only a tie at the window's edge is.
        Promise::SlidingLog => sliding_most(&admitted, w, 1, l, &losses, l),
        Promise::SlidingWindow => sliding_most(&admitted, w, slack, 2 * l, &losses, l),
        Promise::None => None,
    }
}

/// At most `most` (plus `per_loss` for each loss of Redis's data inside) admitted in any
/// window of length `w` (less the slack).
fn sliding_most(
    admitted: &[(usize, u64, u64)],
    w: u64,
    slack: u64,
    most: u64,
    losses: &dyn Fn(u64, u64) -> u64,
    per_loss: u64,
) -> Option<Violation> {
    let span = w.saturating_sub(slack).max(1);
    for (j, &(at, tj, _)) in admitted.iter().enumerate() {
        let units: u64 = admitted[..=j].iter().filter(|&&(_, t, _)| t + span > tj).map(|&(_, _, u)| u).sum();
        let from = (tj + 1).saturating_sub(span);
        let bound = most + per_loss * losses(from, tj);
        if units > bound {
            return Some(Violation {
                check: CheckKind::Bound,
                at,
                message: format!(
                    "{units} admitted in [{from}, {tj}] ms, within one window of {w} ms; the promise allows {bound}"
                ),
            });
        }
    }
    None
}

/// A reference fed the subject's own requests, to tell whether a denial had room. Counters
/// that count denied requests too (`INCRBY` first, compare after) are correct designs that
/// admit less after a large denied request, so where a window or a log decides, the room is
/// measured counting every unit requested: a denial is lost capacity only if even that leaves
/// room.
fn lost_capacity(held: &Held, ran: &Ran) -> Option<Violation> {
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms());
    let slack = held.slack_ms();
    // Since Redis last lost its data (the subject starts afresh then, so does the reference):
    // every request's (time, units) and the admitted ones.
    let mut requested: Vec<(u64, u64)> = Vec::new();
    let mut admitted: Vec<(u64, u64)> = Vec::new();
    let mut bucket = (q.burst() as f64, 0u64);
    let r = held.rate_per_ms();
    for (i, e) in ran.schedule.0.iter().enumerate() {
        let (t, cost) = match *e {
            Event::Request { t_ms, cost, .. } => (t_ms, cost),
            Event::LoseData { t_ms } => {
                requested.clear();
                admitted.clear();
                bucket = (q.burst() as f64, t_ms);
                continue;
            }
            Event::FlushScripts { .. } => continue,
        };
        // The reference bucket brought up to t.
        let level = (bucket.0 + r * t.saturating_sub(bucket.1) as f64).min(q.burst() as f64);
        bucket = (level, bucket.1.max(t));
        let in_last_window =
            |list: &[(u64, u64)]| -> u64 { list.iter().filter(|&&(s, _)| s + w + slack > t).map(|&(_, u)| u).sum() };
        let room = if ran.allowed(i) {
            None
        } else {
            match held.promise {
                Promise::TokenBucket | Promise::Gcra => {
                    // The level `slack` ago, less what a coarse refill may still owe.
                    let then = level - r * slack as f64 - held.tolerance.extra_units as f64;
                    (then >= cost as f64 + 1e-9)
                        .then(|| format!("an exact token bucket fed the same admissions holds {level:.2} tokens"))
                }
                Promise::FixedWindow { first_hit: false } => {
                    let k = t / w;
                    let everything: u64 = requested.iter().filter(|&&(s, _)| s / w == k).map(|&(_, u)| u).sum();
                    (t % w > slack && everything + cost <= l).then(|| {
                        format!(
                            "its aligned window [{}, {}) ms has seen {everything} units requested in all, of {l}",
                            k * w,
                            (k + 1) * w
                        )
                    })
                }
                Promise::FixedWindow { first_hit: true } => {
                    // Any window holding t began at an admission within one window's length.
                    if in_last_window(&admitted) == 0 {
                        Some(format!("nothing was admitted in the last {} ms, so a new window would open", w + slack))
                    } else {
                        let everything = in_last_window(&requested);
                        (everything + cost <= l).then(|| {
                            format!("the last {} ms saw {everything} units requested in all, of {l}", w + slack)
                        })
                    }
                }
                Promise::SlidingLog => {
                    let everything = in_last_window(&requested);
                    (everything + cost <= l)
                        .then(|| format!("the last {} ms saw {everything} units requested in all, of {l}", w + slack))
                }
                Promise::SlidingWindow | Promise::None => None,
            }
        };
        if let Some(why) = room {
            return Some(Violation {
                check: CheckKind::LostCapacity,
                at: i,
                message: format!("denied a request of cost {cost} at {t} ms, yet {why}"),
            });
        }
        requested.push((t, cost));
        if ran.allowed(i) {
            let units = ran.units(i);
            bucket.0 -= units as f64;
            admitted.push((t, units));
        }
    }
    None
}

/// The sliding-window counter's own rule, read every way rounding allows: an admission must
/// fit the smallest reading of the estimate over what was surely counted (the admissions); a
/// denial must not fit even the largest, over everything that might have been counted (every
/// unit requested, as counters that count denials do).
///
/// Where its windows begin is the script's choice: at multiples of the period (a window named
/// by the time), or at the key's first request (counters that roll over when their TTL says);
/// and a request at the very millisecond of a boundary may fall on either side of it (a TTL of
/// exactly one window reads as "not yet expired"). The schedule breaks the promise only if it
/// breaks it on every reading.
fn estimate(held: &Held, ran: &Ran) -> Option<Violation> {
    let first = estimate_from(held, ran, false, 0)?;
    for (anchored, late_ms) in [(false, 1), (true, 0), (true, 1)] {
        estimate_from(held, ran, anchored, late_ms)?;
    }
    Some(first)
}

/// One reading: windows from 0 or from the key's first request, each boundary `late_ms`
/// after where the period puts it.
fn estimate_from(held: &Held, ran: &Ran, anchored: bool, late_ms: u64) -> Option<Violation> {
    let q = &held.quota;
    let (l, w) = (q.limit(), q.period_ms());
    let slack = held.slack_ms();
    let mut requested: Vec<(u64, u64)> = Vec::new();
    let mut admitted: Vec<(u64, u64)> = Vec::new();
    // Where windows begin: 0, or the first request of the key's current life.
    let mut origin = 0u64;
    let mut last_request: Option<u64> = None;
    for (i, e) in ran.schedule.0.iter().enumerate() {
        let (t, cost) = match *e {
            Event::Request { t_ms, cost, .. } => (t_ms, cost),
            Event::LoseData { .. } => {
                requested.clear();
                admitted.clear();
                last_request = None;
                continue;
            }
            Event::FlushScripts { .. } => continue,
        };
        if anchored && last_request.is_none_or(|prev| (t - origin) / w >= (prev - origin) / w + 2) {
            // A fresh key, or one whose counters both expired (no request in the window before
            // this one): its windows start now.
            origin = t;
            requested.clear();
            admitted.clear();
        }
        last_request = Some(t);
        let window = |at: u64| (at - origin).saturating_sub(late_ms) / w;
        let k = window(t);
        let sum = |list: &[(u64, u64)], of: u64| -> u64 {
            list.iter().filter(|&&(s, _)| window(s) == of).map(|&(_, u)| u).sum()
        };
        let previous = |list: &[(u64, u64)]| if k > 0 { sum(list, k - 1) } else { 0 };
        let e_ms = (t - origin).saturating_sub(late_ms) % w;
        // The previous window's share, as large and as small as the time's slack and any
        // rounding of it can make it.
        let share = |prev: u64, into: u64| prev as f64 * (w - into.min(w)) as f64 / w as f64;
        let least = share(previous(&admitted), e_ms + slack).floor() as u64 + sum(&admitted, k) + cost;
        let most = share(previous(&requested), e_ms.saturating_sub(slack)).ceil() as u64 + sum(&requested, k) + cost;
        let allowed = ran.allowed(i);
        let why = if allowed && least > l {
            Some(format!(
                "admitted although even the smallest reading of the estimate (previous window {}, this window {}), \
                 {least}, is above the limit {l}",
                previous(&admitted),
                sum(&admitted, k)
            ))
        } else if !allowed && most <= l {
            Some(format!(
                "denied although even the largest reading of the estimate (previous window {}, this window {}, \
                 counting every unit requested), {most}, is within the limit {l}",
                previous(&requested),
                sum(&requested, k)
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
        requested.push((t, cost));
        if allowed {
            admitted.push((t, ran.units(i)));
        }
    }
    None
}

/// Retry-After: after each of the first denials of a single unit that carry one, a client
/// that waits exactly that long (plus the slack) must be admitted. (For larger costs many
/// scripts report when the next unit frees, which is a different promise.) Replays the
/// schedule up to the denial on a fresh model each time.
pub fn retry_after(held: &Held, ran: &Ran, fresh: &dyn Fn() -> Direct) -> Option<Violation> {
    let denials = ran.schedule.requests().filter_map(|(i, t, cost)| {
        let d = ran.decided[i].as_ref()?;
        (cost == 1 && !d.allowed && d.error.is_none()).then_some((i, t, cost, d.retry_after_ms?))
    });
    for (i, t, cost, wait) in denials.take(3) {
        let mut direct = fresh();
        let prefix = Schedule(ran.schedule.0[..=i].to_vec());
        let _ = Ran::new(&mut direct, &prefix);
        let at = t + wait + held.slack_ms();
        let again = direct.request(at, 0, super::schedule::KEY, cost);
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
