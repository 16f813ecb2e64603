//! Lost capacity: a denial an exact limiter of the promise, fed the same admissions, had room
//! for.

use sim_engine::promise::{Counts, Promise};

use super::{CheckKind, Held, Unit, Violation};
use crate::schedule::{Event, Ran};

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
pub(super) fn lost_capacity(held: &Held, ran: &Ran) -> Option<Violation> {
    lost_at_a_denial(held, ran).or_else(|| lost_on_a_trickle(held, ran))
}

/// A steady trickle (requests of one unit from one clock, evenly spaced to the millisecond,
/// no fault) long enough to measure a rate on, as the profile measures it: over the periods
/// after a warm-up, the subject must deliver at least what an exact limiter of the promise
/// delivers from the same requests, less one unit in twenty (`profile::SHORTFALL`). Where it
/// delivers less it loses capacity, whichever denials a tie forgave one by one; the first
/// request after the warm-up the exact limiter admitted and the subject denied is the one
/// named. Windows that count denied units, and the sliding-window counter, deliver what their
/// design gives: not held to it.
fn lost_on_a_trickle(held: &Held, ran: &Ran) -> Option<Violation> {
    use crate::profile::{Exact, MEASURED_PERIODS, SHORTFALL, WARM_PERIODS};
    if held.counts == Counts::Requests || held.promise == Promise::SlidingWindow {
        return None;
    }
    let events = &ran.schedule.0;
    let steady = events.iter().all(|e| matches!(e, Event::Request { cost: 1, skew_ms: 0, .. }));
    let times: Vec<u64> = events.iter().map(Event::t_ms).collect();
    let gaps = times.windows(2).map(|p| p[1] - p[0]);
    let (least, most) = gaps.fold((u64::MAX, 0), |(lo, hi), g| (lo.min(g), hi.max(g)));
    let w = held.quota.period_ms().max(1);
    let (first, last) = (*times.first()?, *times.last()?);
    if !steady
        || times.len() < 2
        || least == 0
        || most > least + 1
        || last - first < (WARM_PERIODS + MEASURED_PERIODS) * w - most
    {
        return None;
    }
    let mut exact = Exact::new(held.promise, held.quota)?;
    let warm_end = first + WARM_PERIODS * w;
    let (mut delivered, mut exact_delivered, mut first_lost) = (0u64, 0u64, None);
    for (i, &t) in times.iter().enumerate() {
        let exact_ok = exact.admits(t);
        if t < warm_end {
            continue;
        }
        let ok = ran.allowed(i);
        delivered += ok as u64;
        exact_delivered += exact_ok as u64;
        if exact_ok && !ok && first_lost.is_none() {
            first_lost = Some(i);
        }
    }
    let at = first_lost.filter(|_| (delivered as f64) < exact_delivered as f64 * (1.0 - SHORTFALL))?;
    Some(Violation {
        check: CheckKind::LostCapacity,
        at,
        message: format!(
            "denied a request of cost 1 at {} ms of a steady trickle, one of {} an exact limiter admits from the same \
             requests after {WARM_PERIODS} periods of warm-up, where the script admitted {delivered}: it delivers {:.2}x \
             of what the promise delivers",
            times[at],
            exact_delivered,
            delivered as f64 / exact_delivered.max(1) as f64
        ),
    })
}

/// A denial an exact limiter fed the same admissions had room for.
fn lost_at_a_denial(held: &Held, ran: &Ran) -> Option<Violation> {
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
                    // A denial where it holds exactly what is asked is forgiven where the
                    // script admits at ties elsewhere: its arithmetic rounded (a float a hair
                    // below a whole token). A design that loses a share this way still loses
                    // it on a steady trickle.
                    let tie = level == need;
                    (level > need || (tie && !held.ties.admits)).then(|| {
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
