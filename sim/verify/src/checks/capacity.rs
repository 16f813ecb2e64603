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
