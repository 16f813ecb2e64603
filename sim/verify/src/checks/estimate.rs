//! The sliding-window counter's estimate, decision by decision.

use sim_engine::promise::Counts;

use super::{CheckKind, Held, Violation};
use crate::schedule::{Event, Ran};

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
pub(super) fn estimate(held: &Held, ran: &Ran) -> Option<Violation> {
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
