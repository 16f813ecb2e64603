//! The promises' bounds on one key's admissions: the window (or interval) that admitted most
//! beyond what the promise allows there, and whether that breaks it. What the scenario
//! checker (`checker`) and the verifier both judge admissions with.
//!
//! Each admission may have been decided anywhere in an interval (`lo..=hi`): one instant when
//! the harness knows it, two readings of Redis's clock around a call, the stretch between
//! sending and the answer. A bound counts as broken only where every placement exceeds it, as
//! Jepsen's checkers treat operations; with exact times nothing is widened, and the bucket's
//! bound is compared in integers.

use std::collections::BTreeMap;

use redis_ratelimit::Quota;

use crate::promise::{Promise, Tolerance};

/// One admission as the bound checks see it: where it may have been decided, and its units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Earliest moment it may have been decided (ms).
    pub lo: u64,
    /// Latest moment (ms); equal to `lo` when known exactly.
    pub hi: u64,
    /// Units admitted.
    pub units: u64,
    /// The caller's name for it (a record's or a schedule event's index), for the witness.
    pub id: usize,
}

/// The worst a run's admissions came to against a promise: the window (or interval) that
/// admitted most beyond what the promise allows there, and whether that breaks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Worst {
    /// Units admitted there.
    pub admitted: u64,
    /// What the promise allows there (units).
    pub allowed: f64,
    /// Whether `admitted` is more than `allowed`, decided in integers (never by a float).
    pub broken: bool,
    /// The span in words.
    pub within: String,
    /// The ids of the first and the last admission of the witness.
    pub first: usize,
    pub last: usize,
    /// Units admitted over the promise that a verifier forgave as a tie its subject's float
    /// arithmetic decided early (at most one unit of the subject's time early), if any.
    pub forgiven: Option<f64>,
}

impl Worst {
    /// Admitted over allowed: above 1 when broken, 0.97 for a run that came within 3%.
    pub fn ratio(&self) -> f64 {
        self.admitted as f64 / self.allowed.max(f64::MIN_POSITIVE)
    }

    /// Keeps the worse of two (broken first, then the larger excess).
    fn max(self, other: Worst) -> Worst {
        let key = |w: &Worst| (w.broken, w.admitted as f64 - w.allowed);
        if key(&other).partial_cmp(&key(&self)) == Some(std::cmp::Ordering::Greater) {
            other
        } else {
            self
        }
    }
}

/// The worst of one key's admissions against the promise (None when nothing was admitted).
///
/// Every admission may lie anywhere in `lo..=hi`; a declared time resolution R widens that to
/// what the script's coarse clock read (`lo - R`; for aligned windows, the step of R the
/// moment falls in). The promise is broken only where every placement exceeds it: admissions
/// that surely lie inside one window (or interval) and are more than it allows there.
pub fn worst(
    promise: Promise,
    q: &Quota,
    admitted: &mut [Admission],
    allowance: u64,
    tolerance: Tolerance,
) -> Option<Worst> {
    let (l, w) = (q.limit(), q.period_ms().max(1));
    widen(promise, admitted, tolerance);
    admitted.sort_by_key(|a| (a.lo, a.hi, a.id));
    if admitted.is_empty() {
        return None;
    }
    match promise {
        Promise::FixedWindow { first_hit: false } => aligned_windows(admitted, w, l + allowance),
        Promise::FixedWindow { first_hit: true } => first_hit_windows(admitted, w, l + allowance),
        Promise::SlidingLog => sliding(admitted, w, l + allowance),
        Promise::SlidingWindow => sliding(admitted, w, 2 * l + allowance),
        Promise::TokenBucket | Promise::Gcra => Some(bucket(admitted, q, allowance)),
        Promise::None => None,
    }
}

/// What `promise` allows over the span of readings `[x, y]` (ms since a whole number of
/// periods) with `allowance` units more, scaled by T so a bucket's refill is whole: B + L·d/T
/// for a bucket, L per aligned window the span touches, L per window of length T it takes to
/// cover the span for a log (one more for first-hit windows, 2L each for a sliding-window
/// counter).
fn allowed_over_scaled(promise: Promise, q: &Quota, x: u64, y: u64, allowance: u64) -> u128 {
    let w = q.period_ms().max(1);
    let (windows_touched, d) = (u128::from(y / w - x / w + 1), u128::from(y - x));
    let (l, w, a) = (u128::from(q.limit()), u128::from(w), u128::from(allowance));
    match promise {
        Promise::TokenBucket | Promise::Gcra => (u128::from(q.burst()) + a) * w + l * d,
        Promise::FixedWindow { first_hit: false } => (l * windows_touched + a) * w,
        Promise::FixedWindow { first_hit: true } => (l * (d / w + 2) + a) * w,
        Promise::SlidingLog => (l * (d / w + 1) + a) * w,
        Promise::SlidingWindow => (2 * l * (d / w + 1) + a) * w,
        Promise::None => u128::MAX,
    }
}

/// What `promise` allows from `from` to every later moment up to `to` (ms since a whole
/// number of periods), as `[ms, units]` points a chart draws as a line: the envelope a witness
/// is drawn against. Empty for a promise without a bound.
pub fn envelope(promise: Promise, q: &Quota, from: u64, to: u64) -> Vec<[f64; 2]> {
    if promise == Promise::None || to < from {
        return Vec::new();
    }
    let w = q.period_ms().max(1);
    let at = |y: u64| allowed_over_scaled(promise, q, from, y, 0) as f64 / w as f64;
    // Every step's both sides, and enough points between for a bucket's slope.
    let mut xs: Vec<u64> = (0..=64).map(|i| from + (to - from) * i / 64).collect();
    // Aligned windows step at multiples of T; the others T after `from`.
    for first in [from - from % w + w, from + w] {
        let mut edge = first;
        while edge <= to && xs.len() < 10_000 {
            xs.extend([edge - 1, edge]);
            edge += w;
        }
    }
    xs.sort_unstable();
    xs.dedup();
    xs.into_iter().map(|x| [x as f64, at(x)]).collect()
}

/// The bound beyond clock trust: what no design exact on its callers' clocks can admit,
/// whichever reading of those clocks it counts each admission at.
///
/// A script fed its callers' clocks counts each admission at some reading: the one the
/// request came with, the latest one its state has seen, or Redis's own where a key's TTL
/// ends its state. Here each admission's `lo..=hi` is every reading a design may have counted
/// it at (the caller's own reading, the latest reading sent before its decision, and the
/// true time of the decision, whichever are least and greatest). Whatever the design, the
/// admissions whose readings all lie in a span of readings `[x, y]` are at most what the
/// promise allows over that span: B + L·(y − x)/T for a bucket; L for each aligned window
/// the span touches; for a log, L for each window of length T it takes to cover the span (a
/// first-hit window one more, since one may end inside the span's first instant and another
/// open there; a sliding-window counter 2L each). More is a break beyond the clock trust: no
/// reading of the clocks explains it, so no design is exact on them.
///
/// Every span from one admission's earliest reading to another's latest is tried (Hall's
/// condition over the spans), so a lagging caller's admission counts wherever its readings
/// fall, which no single frame of readings does. `allowance` extra units are granted once
/// (a loss of Redis's data), and a declared resolution widens each admission as [`worst`]
/// does. Readings are counted from a whole number of periods before the run (so none is
/// negative and aligned windows fall where the callers put them), and the witness names them
/// from `zero`, the reading of the run's start. None when nothing was admitted or the promise
/// has no bound.
pub fn beyond_clock_trust(
    promise: Promise,
    q: &Quota,
    admitted: &mut [Admission],
    allowance: u64,
    tolerance: Tolerance,
    zero: u64,
) -> Option<Worst> {
    if promise == Promise::None || admitted.is_empty() {
        return None;
    }
    widen(promise, admitted, tolerance);
    let w = q.period_ms().max(1);
    let allowed_scaled = |x: u64, y: u64| allowed_over_scaled(promise, q, x, y, allowance);
    let mut by_hi: Vec<&Admission> = admitted.iter().collect();
    by_hi.sort_by_key(|a| (a.hi, a.lo, a.id));
    let mut starts: Vec<(u64, usize)> = admitted.iter().map(|a| (a.lo, a.id)).collect();
    starts.sort_unstable();
    starts.dedup_by_key(|s| s.0);
    // (excess scaled, units, allowed scaled, x, y, first id, last id)
    let mut worst: Option<(i128, u64, u128, u64, u64, usize, usize)> = None;
    for &(x, first) in &starts {
        let mut units = 0u64;
        for a in by_hi.iter().filter(|a| a.lo >= x) {
            units += a.units;
            let allowed = allowed_scaled(x, a.hi);
            let excess = (u128::from(units) * u128::from(w)) as i128 - allowed as i128;
            if worst.is_none_or(|(e, ..)| excess > e) {
                worst = Some((excess, units, allowed, x, a.hi, first, a.id));
            }
        }
    }
    let (excess, units, allowed, x, y, first, last) = worst?;
    Some(Worst {
        admitted: units,
        allowed: allowed as f64 / w as f64,
        broken: excess > 0,
        within: format!(
            "with readings from {} ms to {} ms",
            i128::from(x) - i128::from(zero),
            i128::from(y) - i128::from(zero)
        ),
        first,
        last,
        forgiven: None,
    })
}

/// A declared resolution R widens each admission to what the script's coarse clock read (see
/// [`worst`]).
fn widen(promise: Promise, admitted: &mut [Admission], tolerance: Tolerance) {
    let r_ms = tolerance.resolution_ms;
    for a in admitted.iter_mut().filter(|_| r_ms > 0) {
        if promise == (Promise::FixedWindow { first_hit: false }) {
            // An aligned window is named by the coarse clock itself: whole steps of R.
            a.lo -= a.lo % r_ms;
            a.hi -= a.hi % r_ms;
        } else {
            a.lo = a.lo.saturating_sub(r_ms);
        }
    }
}

fn window_worst(admitted: u64, bound: u64, within: String, first: usize, last: usize) -> Worst {
    Worst { admitted, allowed: bound as f64, broken: admitted > bound, within, first, last, forgiven: None }
}

/// Units surely in one aligned window `[kT, (k+1)T)`: those whose whole interval lies in it.
fn aligned_windows(admitted: &[Admission], w: u64, bound: u64) -> Option<Worst> {
    let mut per_window: BTreeMap<u64, (u64, usize, usize)> = BTreeMap::new();
    for a in admitted.iter().filter(|a| a.lo / w == a.hi / w) {
        let e = per_window.entry(a.lo / w).or_insert((0, a.id, a.id));
        e.0 += a.units;
        e.2 = a.id;
    }
    per_window
        .into_iter()
        .map(|(k, (n, first, last))| {
            window_worst(n, bound, format!("in aligned window {k} ([{}, {}) ms)", k * w, (k + 1) * w), first, last)
        })
        .reduce(Worst::max)
}

/// At most `bound` in any half-open window `[a, a + w)`: admissions `i..=j` (in order of
/// their earliest moment) surely fit in one when the latest moment of any of them is less
/// than `w` after the earliest of the first. Two pointers over a sliding maximum of the latest
/// moments (a deque of indices whose `hi` decreases), so an admission that may have been
/// decided over a whole period or more (a slow answer) counts in no window rather than
/// stretching every window after it: with exact times, exactly the promise.
fn sliding(admitted: &[Admission], w: u64, bound: u64) -> Option<Worst> {
    let mut latest: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let (mut i, mut sum) = (0usize, 0u64);
    let mut worst: Option<Worst> = None;
    for j in 0..admitted.len() {
        sum += admitted[j].units;
        while latest.back().is_some_and(|&k| admitted[k].hi <= admitted[j].hi) {
            latest.pop_back();
        }
        latest.push_back(j);
        while let Some(&k) = latest.front() {
            if admitted[k].hi < admitted[i].lo + w {
                break;
            }
            sum -= admitted[i].units;
            i += 1;
            if latest.front() == Some(&(i - 1)) {
                latest.pop_front();
            }
        }
        let Some(&k) = latest.front() else { continue };
        let hi = admitted[k].hi;
        let within = format!("within {} ms (from {} ms to {} ms)", hi - admitted[i].lo, admitted[i].lo, hi);
        let here = window_worst(sum, bound, within, admitted[i].id, admitted[j].id);
        worst = Some(match worst {
            Some(w) => w.max(here),
            None => here,
        });
    }
    worst
}

/// At most B + L·d/T in any interval of length d, in integers (units × T against B × T +
/// L × d): for admissions `i..=j` in order of their earliest moment, d runs from the first's
/// earliest moment to the latest moment of any of them (a running maximum, so one pass finds
/// the worst: with P the prefix sums and H the running maximum, (P_j·T − L·H_j) −
/// min_i (P_{i−1}·T − L·lo_i) > (B + allowance)·T).
fn bucket(admitted: &[Admission], q: &Quota, allowance: u64) -> Worst {
    let (l, w) = (i128::from(q.limit()), i128::from(q.period_ms().max(1)));
    let budget = i128::from(q.burst() + allowance) * w;
    let (mut prefix, mut hi_max) = (0i128, 0u64);
    let mut best: Option<(i128, usize)> = None;
    let mut worst: Option<(i128, usize, usize)> = None;
    for (j, a) in admitted.iter().enumerate() {
        let start = prefix * w - l * i128::from(a.lo);
        if best.is_none_or(|(b, _)| start < b) {
            best = Some((start, j));
        }
        prefix += i128::from(a.units);
        hi_max = hi_max.max(a.hi);
        let (from, i) = best.expect("set above");
        let over = prefix * w - l * i128::from(hi_max) - from;
        if worst.is_none_or(|(o, ..)| over > o) {
            worst = Some((over, i, j));
        }
    }
    let (over, i, j) = worst.expect("at least one admission");
    let units: u64 = admitted[i..=j].iter().map(|a| a.units).sum();
    let span_end = admitted[..=j].iter().map(|a| a.hi).max().unwrap_or(0);
    let d = span_end - admitted[i].lo;
    Worst {
        admitted: units,
        allowed: (q.burst() + allowance) as f64 + q.limit() as f64 * d as f64 / q.period_ms().max(1) as f64,
        broken: over > budget,
        within: format!("within {d} ms (from {} ms to {span_end} ms)", admitted[i].lo),
        first: admitted[i].id,
        last: admitted[j].id,
        forgiven: None,
    }
}

/// A window opens at an admission that finds no window open and lasts one period: until its
/// key expires, which Redis does after the millisecond X + T (INCR, then PEXPIRE T on the
/// first hit: the window holds `[X, X + T]`), or until a request reads `start + T` (a script
/// that keeps the start and compares: `[X, X + T)`). Both are exact, so an admission at X + T
/// may be in either window. At most `bound` admissions per window.
///
/// Where an admission may be in the old window or open a new one (at X + T, or, when a moment
/// is known only to an interval, near a window's end), both readings are followed (up to a
/// few dozen at once; past that the key is not judged), and the promise is broken only if it
/// is broken in every reading.
fn first_hit_windows(admitted: &[Admission], w: u64, bound: u64) -> Option<Worst> {
    #[derive(Clone)]
    struct Reading {
        /// The window's opener: its earliest and latest moment, and its id.
        opened: (u64, u64, usize),
        /// Units in it, and the last admission's id.
        units: u64,
        last: usize,
        /// The worst window this reading saw.
        worst: Option<Worst>,
    }
    impl Reading {
        fn window(&self, w: u64, bound: u64) -> Worst {
            let (olo, _, first) = self.opened;
            let within = format!("in the window opened at {olo} ms (it lasts through {} ms)", olo + w);
            window_worst(self.units, bound, within, first, self.last)
        }
        fn close(&mut self, w: u64, bound: u64) {
            let here = self.window(w, bound);
            self.worst = Some(match self.worst.take() {
                Some(seen) => seen.max(here),
                None => here,
            });
        }
    }
    const MAX_READINGS: usize = 64;
    let first = admitted.first()?;
    let mut readings = vec![Reading { opened: (first.lo, first.hi, first.id), units: 0, last: first.id, worst: None }];
    for a in admitted {
        let mut next = Vec::with_capacity(readings.len());
        for mut r in readings {
            let (olo, ohi, _) = r.opened;
            let surely_after = a.lo > ohi + w;
            let surely_inside = a.hi < olo + w;
            if !surely_inside {
                // It may open a window of its own.
                let mut opened = r.clone();
                opened.close(w, bound);
                opened.opened = (a.lo, a.hi, a.id);
                opened.units = a.units;
                opened.last = a.id;
                next.push(opened);
            }
            if !surely_after {
                r.units += a.units;
                r.last = a.id;
                next.push(r);
            }
        }
        if next.len() > MAX_READINGS {
            return None;
        }
        readings = next;
    }
    // Broken only if broken in every reading; the least bad reading is what is surely true.
    readings
        .into_iter()
        .map(|mut r| {
            r.close(w, bound);
            r.worst.expect("closed above")
        })
        .reduce(|a, b| {
            let key = |w: &Worst| (w.broken, w.admitted as f64 - w.allowed);
            if key(&b).partial_cmp(&key(&a)) == Some(std::cmp::Ordering::Less) {
                b
            } else {
                a
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(id: usize, lo: u64, hi: u64) -> Admission {
        Admission { lo, hi, units: 1, id }
    }

    #[test]
    fn a_log_is_judged_on_admissions_that_surely_share_a_window_and_a_slow_one_counts_in_none() {
        let q = Quota::new(10, Duration::from_millis(1000));
        // One answer took two periods: it could have been decided anywhere, and used to run the
        // window's start past its end (an overflow).
        let mut slow = vec![at(0, 0, 2_000)];
        let w = worst(Promise::SlidingLog, &q, &mut slow, 0, Tolerance::EXACT);
        assert!(w.as_ref().is_none_or(|w| !w.broken), "{w:?}");
        // Eleven quick ones inside 20 ms are a break, whatever slow answers lie around them.
        let mut around: Vec<Admission> = (0..11).map(|i| at(i + 1, 100 + i as u64, 105 + i as u64)).collect();
        around.extend([at(20, 50, 3_000), at(21, 90, 2_500), at(22, 400, 5_000)]);
        let w = worst(Promise::SlidingLog, &q, &mut around, 0, Tolerance::EXACT).expect("admissions");
        assert!(w.broken && w.admitted == 11, "{w:?}");
        // Ten are not, nor is the sliding-window counter's 2L.
        let mut ten: Vec<Admission> = (0..10).map(|i| at(i, 100 + i as u64, 105 + i as u64)).collect();
        ten.push(at(10, 0, 1_500));
        assert!(!worst(Promise::SlidingLog, &q, &mut ten.clone(), 0, Tolerance::EXACT).unwrap().broken);
        assert!(!worst(Promise::SlidingWindow, &q, &mut ten, 0, Tolerance::EXACT).unwrap().broken);
    }

    #[test]
    fn the_envelope_is_what_the_bound_allows_from_its_start() {
        let q = Quota::new(10, Duration::from_millis(1000)).with_burst(5);
        let bucket = envelope(Promise::TokenBucket, &q, 0, 1_000);
        assert_eq!(bucket.first(), Some(&[0.0, 5.0]));
        assert_eq!(bucket.last(), Some(&[1_000.0, 15.0]));
        // Aligned windows step by L at each multiple of T.
        let windows = envelope(Promise::FixedWindow { first_hit: false }, &q, 500, 2_100);
        let at = |x: f64| windows.iter().find(|p| p[0] == x).map(|p| p[1]);
        assert_eq!((at(999.0), at(1_000.0), at(2_000.0)), (Some(10.0), Some(20.0), Some(30.0)));
        assert!(envelope(Promise::None, &q, 0, 10).is_empty());
    }
}
