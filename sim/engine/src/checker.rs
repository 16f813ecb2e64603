//! Checkers: each algorithm held to its promise (the table in `docs/ARCHITECTURE.md`), each
//! failure policy to its own, measured on the trace in true simulated time.
//!
//! Each decision is judged where it was made: at the moment Redis ran it, on the clock it
//! decided by ([`Record::lo_ms`]..=[`Record::hi_ms`]; one instant when the harness knows it,
//! an interval when it only knows that it happened between two readings of Redis's clock or
//! between sending and the answer). As Jepsen's checkers treat operations, a bound counts as
//! broken only when no placement of each decision inside its interval explains the
//! admissions, so a reported break is a real one; with exact times nothing is widened: no
//! slack, no rounding, the promise in integers.

use std::collections::BTreeMap;

use redis_ratelimit::{FailurePolicy, Quota, Source};

pub use crate::bound::{beyond_clock_trust, worst, Admission, Worst};
use crate::faults::Fault;
use crate::promise::{Promise, Tolerance};
use crate::trace::Record;

/// What a check came to: the results file's own verdicts, so the tables and the report read
/// back exactly what the checker decided.
pub use results::Verdict;

/// A verdict and what it is based on.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Held or broken.
    pub verdict: Verdict,
    /// Human-readable evidence: the worst case found and the bound.
    pub detail: String,
}

/// Checks the store-decided admissions of `records` against `promise`, held with `tolerance`
/// (exact for the library's algorithms). After each loss of Redis's data one extra burst per
/// key is allowed.
pub fn check_bound(promise: Promise, q: &Quota, records: &[Record], data_losses: u64, tolerance: Tolerance) -> Check {
    check_bound_with(promise, q, records, data_losses * promise.capacity(q), tolerance)
}

/// What one failover may cost a key: the writes of the last `lag_ms` are lost, so a key may
/// admit again what it admitted then, at most one burst plus the refill of `lag_ms` (L·lag/T,
/// rounded up). Stated for every promise; for a bucket it is exactly what it can have handed
/// out in `lag_ms`.
pub fn failover_allowance(promise: Promise, q: &Quota, lag_ms: u64) -> u64 {
    promise.capacity(q) + (q.limit() * lag_ms).div_ceil(q.period_ms().max(1))
}

/// The fewest extra units per key the promise must be granted for `records` to keep it: 0
/// when it held as it is. Found by bisection over [`check_bound_with`], so it is exactly the
/// checker's own judgement.
pub fn extra_admissions(promise: Promise, q: &Quota, records: &[Record], tolerance: Tolerance) -> u64 {
    let held = |units| check_bound_with(promise, q, records, units, tolerance).verdict != Verdict::Broken;
    let (mut lo, mut hi) = (0u64, records.iter().filter(|r| r.allowed).map(|r| r.cost).sum::<u64>());
    if held(0) {
        return 0;
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if held(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// [`check_bound`] with `allowance` extra units per key (after data losses and failovers).
pub fn check_bound_with(
    promise: Promise,
    q: &Quota,
    records: &[Record],
    allowance: u64,
    tolerance: Tolerance,
) -> Check {
    if promise == Promise::None {
        return Check { verdict: Verdict::None, detail: "no promise to check".into() };
    }
    let worst_by_key = worst_by_key(promise, q, records, allowance, tolerance);
    let mut broken: Option<String> = None;
    let mut peak = 0u64;
    for (key, w) in &worst_by_key {
        peak = peak.max(w.admitted);
        if w.broken && broken.is_none() {
            broken = Some(format!("key-{key}: {} admitted {}, bound {:.1}", w.admitted, w.within, w.allowed));
        }
    }
    match broken {
        Some(detail) => Check { verdict: Verdict::Broken, detail },
        None if worst_by_key.is_empty() => {
            Check { verdict: Verdict::None, detail: "nothing admitted by the store".into() }
        }
        None => Check { verdict: Verdict::Held, detail: format!("{}; worst seen {peak}", promise.describe(q)) },
    }
}

/// The worst of each key's store-decided admissions against `promise` ([`worst`]).
fn worst_by_key(
    promise: Promise,
    q: &Quota,
    records: &[Record],
    allowance: u64,
    tolerance: Tolerance,
) -> BTreeMap<u32, crate::bound::Worst> {
    let mut by_key: BTreeMap<u32, Vec<Admission>> = BTreeMap::new();
    // A lease's units left the shared budget when Redis leased them: spending one is a store
    // decision, made without a round trip, and held to the same bound.
    for (id, r) in
        records.iter().enumerate().filter(|(_, r)| r.allowed && matches!(r.source, Source::Store | Source::Lease))
    {
        by_key.entry(r.key).or_default().push(Admission { lo: r.lo_ms, hi: r.hi_ms, units: r.cost, id });
    }
    by_key
        .into_iter()
        .filter_map(|(key, mut admitted)| Some((key, worst(promise, q, &mut admitted, allowance, tolerance)?)))
        .collect()
}

/// The largest share of what `promise` allows that any key's admissions came to in one span
/// (above 1 where [`check_bound_with`] finds it broken): what the report draws against 1.
pub fn worst_ratio(promise: Promise, q: &Quota, records: &[Record], allowance: u64, tolerance: Tolerance) -> f64 {
    worst_by_key(promise, q, records, allowance, tolerance).values().map(|w| w.ratio()).fold(0.0, f64::max)
}

/// The bound beyond the clock trust of a run whose instances sent their own clocks
/// ([`beyond_clock_trust`]): each store-decided admission placed anywhere from the reading its
/// instance sent (`reading_offset_ms` of it at the request's start: the instance's offset
/// plus its drift so far) to the latest reading a design can have had when Redis decided it
/// (any reading sent to the key so far, carried forward by Redis's clock to the call's
/// return). Broken only where no reading of the clocks explains the admissions.
pub fn check_beyond_clock_trust(
    promise: Promise,
    q: &Quota,
    records: &[Record],
    allowance: u64,
    tolerance: Tolerance,
    reading_offset_ms: impl Fn(&Record) -> i64,
) -> Check {
    if promise == Promise::None {
        return Check { verdict: Verdict::None, detail: "no promise to check".into() };
    }
    let origin = crate::simclock::readings_origin_ms(q.period_ms());
    let zero = crate::simclock::EPOCH_MS - origin;
    let mut by_key: BTreeMap<u32, Vec<(usize, &Record)>> = BTreeMap::new();
    for (id, r) in records.iter().enumerate() {
        by_key.entry(r.key).or_default().push((id, r));
    }
    let mut broken: Option<String> = None;
    let mut closest: Option<Worst> = None;
    for (key, mut sent) in by_key {
        // The readings sent to the key, by when they were sent: the largest offset so far.
        sent.sort_by_key(|(_, r)| r.t_ms);
        let mut ahead = i64::MIN;
        let mut ahead_by: Vec<(u64, i64)> = Vec::with_capacity(sent.len());
        for (_, r) in &sent {
            ahead = ahead.max(reading_offset_ms(r));
            ahead_by.push((r.t_ms, ahead));
        }
        let ahead_at = |t: u64| {
            let i = ahead_by.partition_point(|&(at, _)| at <= t);
            ahead_by[..i].last().map_or(0, |&(_, a)| a)
        };
        let mut admitted: Vec<Admission> = sent
            .iter()
            .filter(|(_, r)| r.allowed && matches!(r.source, Source::Store | Source::Lease))
            .map(|&(id, r)| {
                let own = reading_offset_ms(r);
                let at = |t: u64, offset: i64| (zero + t).saturating_add_signed(offset);
                let done = r.done_ms.max(r.hi_ms);
                Admission { lo: at(r.t_ms, own), hi: at(done, ahead_at(done).max(own)), units: r.cost, id }
            })
            .collect();
        let Some(w) = beyond_clock_trust(promise, q, &mut admitted, allowance, tolerance, zero) else { continue };
        if w.broken && broken.is_none() {
            broken = Some(format!(
                "key-{key}: {} admitted {}, where no reading of the instances' clocks allows more than {:.1}",
                w.admitted, w.within, w.allowed
            ));
        }
        closest = Some(match closest {
            Some(seen) if seen.ratio() >= w.ratio() => seen,
            _ => w,
        });
    }
    match (broken, closest) {
        (Some(detail), _) => Check { verdict: Verdict::Broken, detail },
        (None, None) => Check { verdict: Verdict::None, detail: "nothing admitted by the store".into() },
        (None, Some(w)) => Check {
            verdict: Verdict::Held,
            detail: format!(
                "every admission explained by some reading of the instances' clocks (closest: {} admitted {}, \
                 {:.1} allowed)",
                w.admitted, w.within, w.allowed
            ),
        },
    }
}

/// What one expiry of a key may lend a design exact on its callers' clocks, whose clocks are
/// `spread_ms` apart: a bucket's key runs out its TTL (the time to full, on the writer's
/// reading) on Redis's clock, and the next request finds it full. Its readings may be up to
/// `spread_ms` behind the writer's, so they re-traverse a stretch the expired state had already
/// spent: the burst again, plus the refill of `spread_ms` that the readings say was still to
/// come (a rotation over five clocks 2 s apart lends more than the burst alone). A window or a
/// log lends nothing: its state is gone only once every reading carried forward by Redis's
/// clock has left it behind.
pub fn expiry_allowance(promise: Promise, q: &Quota, spread_ms: u64) -> u64 {
    if promise.is_bucket() {
        q.burst() + (q.limit() * spread_ms).div_ceil(q.period_ms().max(1))
    } else {
        0
    }
}

/// Most cost admitted in any half-open interval `[t, t + span)`.
pub fn max_in_span(admitted: &[(u64, u64)], span: u64) -> u64 {
    let (mut lo, mut sum, mut best) = (0, 0, 0);
    for hi in 0..admitted.len() {
        sum += admitted[hi].1;
        while admitted[hi].0 >= admitted[lo].0 + span {
            sum -= admitted[lo].1;
            lo += 1;
        }
        best = best.max(sum);
    }
    best
}

/// The most admitted (from any source) for one key within one period: what a client of
/// the protected service actually saw. Fixed window shows up to twice its limit here.
pub fn peak_per_period(records: &[Record], q: &Quota) -> u64 {
    let mut by_key: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.allowed) {
        by_key.entry(r.key).or_default().push((r.at_ms, r.cost));
    }
    by_key.values().map(|v| max_in_span(v, q.period_ms())).max().unwrap_or(0)
}

/// What a failure policy did while Redis was unreachable, and whether it kept its promise:
/// fail-closed admits nothing, the local budget at most `budget` per key per budget period
/// per instance, fail-open is counted (it promises nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCheck {
    /// Held or broken (None when Redis was never unreachable).
    pub check: Check,
    /// Admissions made while cut off.
    pub admitted_while_cut_off: u64,
}

/// See [`PolicyCheck`].
pub fn check_policy(policy: FailurePolicy, records: &[Record], faults: &[Fault]) -> PolicyCheck {
    // A store decision in client time was made somewhere between the request's start and
    // its return; it happened while Redis was unreachable only if all of that did.
    let cut_off = |r: &Record| {
        let last = if r.source == Source::Store { r.done_ms.max(r.at_ms) } else { r.at_ms };
        faults.iter().any(|f| f.kind.cuts_off(r.instance) && r.at_ms >= f.at_ms && last < f.until_ms)
    };
    let during: Vec<&Record> = records.iter().filter(|r| cut_off(r)).collect();
    // Units of a lease Redis granted before the cut are the store's to spend, not the policy's:
    // the bound check holds them.
    let admitted: u64 = during.iter().filter(|r| r.allowed && r.source != Source::Lease).map(|r| r.cost).sum();
    if during.is_empty() {
        return PolicyCheck {
            check: Check { verdict: Verdict::None, detail: "Redis was never unreachable".into() },
            admitted_while_cut_off: 0,
        };
    }
    let store_admitted = during.iter().filter(|r| r.allowed && r.source == Source::Store).count();
    let mut verdict = if store_admitted > 0 { Verdict::Broken } else { Verdict::Held };
    let mut detail = if store_admitted > 0 {
        format!("{store_admitted} requests claim a store decision while Redis was unreachable")
    } else {
        String::new()
    };
    match policy {
        FailurePolicy::FailOpen => {
            if detail.is_empty() {
                detail = format!("fail-open admitted {admitted} unchecked while Redis was unreachable (unbounded)");
            }
        }
        FailurePolicy::FailClosed => {
            if admitted > 0 {
                verdict = Verdict::Broken;
                detail = format!("fail-closed admitted {admitted} while Redis was unreachable");
            } else if detail.is_empty() {
                detail =
                    format!("fail-closed admitted nothing in {} requests while Redis was unreachable", during.len());
            }
        }
        FailurePolicy::LocalBudget { limit, period } => {
            let period_ms = period.as_millis() as u64;
            let mut per: BTreeMap<(u32, u32, u64), u64> = BTreeMap::new();
            for r in during.iter().filter(|r| r.allowed && r.source == Source::LocalBudget) {
                // The budget's windows are the instance's own clock; the harness sees true
                // time, so count by window and allow one window's slack at edges.
                *per.entry((r.instance, r.key, r.at_ms / period_ms)).or_default() += r.cost;
            }
            let worst = per.values().copied().max().unwrap_or(0);
            if worst > 2 * limit {
                verdict = Verdict::Broken;
                detail =
                    format!("local budget admitted {worst} for one key on one instance in one period, budget {limit}");
            } else if detail.is_empty() {
                detail = format!(
                    "local budget admitted {admitted} while cut off, at most {worst} per key per instance per period"
                );
            }
        }
        other => panic!("no promise is checked for the {} failure policy: add it here", other.name()),
    }
    PolicyCheck { check: Check { verdict, detail }, admitted_while_cut_off: admitted }
}

/// Time from the last fault's heal to the first store-decided admission after it: how
/// long the limiter took to use Redis again (None without a heal or without a later
/// admission).
pub fn recovery_ms(records: &[Record], faults: &[Fault]) -> Option<u64> {
    let healed = faults.iter().filter(|f| f.until_ms > f.at_ms).map(|f| f.until_ms).max()?;
    records
        .iter()
        .find(|r| r.at_ms >= healed && r.allowed && matches!(r.source, Source::Store | Source::Lease))
        .map(|r| r.at_ms - healed)
}

/// The denial cache's promise: every denial it answered is one the algorithm's script would
/// have answered at that instant (`wrong_denials`, found by the harness's look at the model's
/// state, `probed` in all). A Redis that loses its data forgives every key at once, which no
/// cache can know: denials until one period after such a loss are not held to it.
pub fn check_denial_cache(probed: u64, wrong_denials: &[(u64, u32)], faults: &[Fault], q: &Quota) -> Check {
    let excused = |t: u64| {
        faults.iter().any(|f| f.kind.loses_data() && t >= f.at_ms && t < f.until_ms.max(f.at_ms) + q.period_ms())
    };
    let wrong: Vec<&(u64, u32)> = wrong_denials.iter().filter(|(t, _)| !excused(*t)).collect();
    match wrong.first() {
        Some((t, key)) => Check {
            verdict: Verdict::Broken,
            detail: format!(
                "{} of {probed} cached denials were requests Redis would have admitted, the first key-{key} at {t} ms",
                wrong.len()
            ),
        },
        None if probed == 0 => {
            Check { verdict: Verdict::None, detail: "no cached denial was checked against Redis's state".into() }
        }
        None => Check {
            verdict: Verdict::Held,
            detail: format!("{probed} cached denials, each one Redis would have made too"),
        },
    }
}

/// One key's account of what leases cost it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseAccount {
    /// Units the exact limiter admitted beyond the instances together, net, leaving out what a failure
    /// policy denied.
    pub under_admitted: u64,
    /// Units leased and neither spent nor given back.
    pub unspent: u64,
    /// Stretches in which the key came within one lease lifetime of rest (`oracle::near_rest`).
    pub near_rest: u64,
}

/// The leases' promise: per key, the instances together under-admit (net, against the exact oracle) at
/// most the units leased and never spent, plus `near_rest_cost` (one lifetime's refill) for
/// each stretch in which the key came within a lifetime of rest. Returns the check and the totals over keys.
pub fn check_leases(accounts: &BTreeMap<u32, LeaseAccount>, near_rest_cost: u64) -> (Check, LeaseAccount) {
    let mut total = LeaseAccount::default();
    let mut worst: Option<String> = None;
    for (key, a) in accounts {
        total.under_admitted += a.under_admitted;
        total.unspent += a.unspent;
        total.near_rest += a.near_rest;
        let bound = a.unspent + near_rest_cost * a.near_rest;
        if a.under_admitted > bound && worst.is_none() {
            worst = Some(format!(
                "key-{key} under-admitted {} units, more than the {} leased and never spent plus {} x {near_rest_cost} for stretches near rest",
                a.under_admitted, a.unspent, a.near_rest
            ));
        }
    }
    let check = match worst {
        Some(detail) => Check { verdict: Verdict::Broken, detail },
        None if accounts.is_empty() => Check { verdict: Verdict::None, detail: "no key was leased".into() },
        None => Check {
            verdict: Verdict::Held,
            detail: format!(
                "under-admitted {} units; bound {} leased and never spent + {} x {near_rest_cost} for stretches near rest",
                total.under_admitted, total.unspent, total.near_rest
            ),
        },
    };
    (check, total)
}

/// No starvation: wherever the oracle admits at least two requests of a key within two
/// periods, the system must admit at least one. This is the check ADR-002's floored refill
/// fails under a steady trickle.
///
/// Only windows that judge the limiter's capacity count: ones that lie wholly inside the run
/// (`duration_ms`: a window that begins where the load ends holds only the few requests still
/// in flight, which says nothing), that no fault cuts the key's instances off in, and in which
/// Redis decided every request of the key (where a failure policy answered, it is the policy
/// that is judged, not the limiter's capacity).
pub fn check_liveness(records: &[Record], oracle: &[bool], q: &Quota, faults: &[Fault], duration_ms: u64) -> Check {
    let span = 2 * q.period_ms();
    // (key, window) -> (admitted, oracle admitted, not a window that judges capacity)
    let mut windows: BTreeMap<(u32, u64), (u64, u64, bool)> = BTreeMap::new();
    for (r, &ok) in records.iter().zip(oracle) {
        let w = windows.entry((r.key, r.at_ms / span)).or_default();
        w.0 += r.allowed as u64;
        w.1 += ok as u64;
        let start = r.at_ms / span * span;
        w.2 |= start + span > duration_ms
            || !matches!(r.source, Source::Store | Source::Lease | Source::DenialCache)
            || r.error
            || faults
                .iter()
                .any(|f| f.kind.cuts_off(r.instance) && f.at_ms < start + span && f.until_ms.max(f.at_ms + 1) > start);
    }
    let starved: Vec<_> =
        windows.iter().filter(|(_, &(got, want, excused))| got == 0 && want >= 2 && !excused).collect();
    match starved.first() {
        Some(((key, w), (_, want, _))) => Check {
            verdict: Verdict::Broken,
            detail: format!(
                "key-{key} starved: nothing admitted in [{} ms, {} ms) where the oracle admitted {want} ({} such windows)",
                w * span,
                (w + 1) * span,
                starved.len()
            ),
        },
        None if windows.is_empty() => Check { verdict: Verdict::None, detail: "no requests".into() },
        None => Check { verdict: Verdict::Held, detail: "every key the oracle served was served".into() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t_ms: u64, allowed: bool) -> Record {
        Record::exact(t_ms, 0, 1, allowed)
    }

    /// An admission known only to lie in `lo..=hi`.
    fn between(lo: u64, hi: u64) -> Record {
        Record { lo_ms: lo, hi_ms: hi, at_ms: lo + (hi - lo) / 2, ..Record::exact(lo, 0, 1, true) }
    }

    #[test]
    fn sliding_log_bound_catches_one_too_many() {
        let q = Quota::new(3, std::time::Duration::from_secs(1));
        let ok: Vec<_> = [0, 10, 20, 1000].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::SlidingLog, &q, &ok, 0, Tolerance::EXACT).verdict, Verdict::Held);
        let bad: Vec<_> = [0, 10, 20, 999].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::SlidingLog, &q, &bad, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        // One extra burst is allowed after a data loss.
        assert_eq!(check_bound(Promise::SlidingLog, &q, &bad, 1, Tolerance::EXACT).verdict, Verdict::Held);
    }

    #[test]
    fn extra_admissions_is_the_least_allowance_that_holds() {
        let q = Quota::new(3, std::time::Duration::from_secs(1));
        let ok: Vec<_> = [0, 10, 20, 1000].map(|t| rec(t, true)).to_vec();
        assert_eq!(extra_admissions(Promise::SlidingLog, &q, &ok, Tolerance::EXACT), 0);
        let two_more: Vec<_> = [0, 10, 20, 30, 40, 999].map(|t| rec(t, true)).to_vec();
        assert_eq!(extra_admissions(Promise::SlidingLog, &q, &two_more, Tolerance::EXACT), 3);
        // One burst plus the refill of the lag: 3 + 3 x 250 / 1000 rounded up.
        assert_eq!(failover_allowance(Promise::Gcra, &q.with_burst(3), 250), 4);
    }

    #[test]
    fn bucket_bound_allows_burst_plus_refill_and_no_more() {
        let q = Quota::new(10, std::time::Duration::from_secs(1)).with_burst(5); // 1 per 100 ms
        let ok: Vec<_> = [0, 0, 0, 0, 0, 100, 200, 300].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::TokenBucket, &q, &ok, 0, Tolerance::EXACT).verdict, Verdict::Held);
        let bad: Vec<_> = [0, 0, 0, 0, 0, 10, 20].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::Gcra, &q, &bad, 0, Tolerance::EXACT).verdict, Verdict::Broken);
    }

    #[test]
    fn fixed_window_allows_double_across_a_boundary_but_not_within() {
        let q = Quota::new(2, std::time::Duration::from_secs(1));
        let boundary: Vec<_> = [998, 999, 1000, 1001].map(|t| rec(t, true)).to_vec();
        assert_eq!(
            check_bound(Promise::FixedWindow { first_hit: false }, &q, &boundary, 0, Tolerance::EXACT).verdict,
            Verdict::Held
        );
        assert_eq!(peak_per_period(&boundary, &q), 4);
        let within: Vec<_> = [100, 200, 300].map(|t| rec(t, true)).to_vec();
        assert_eq!(
            check_bound(Promise::FixedWindow { first_hit: false }, &q, &within, 0, Tolerance::EXACT).verdict,
            Verdict::Broken
        );
    }

    #[test]
    fn starvation_is_caught_and_faults_excuse_it() {
        let q = Quota::new(10, std::time::Duration::from_secs(1));
        let records: Vec<_> = (0..40).map(|i| rec(i * 100, i < 3)).collect();
        let oracle = vec![true; 40];
        assert_eq!(check_liveness(&records, &oracle, &q, &[], 4_000).verdict, Verdict::Broken);
        let outage = Fault { kind: crate::faults::FaultKind::RedisPause, at_ms: 0, until_ms: 5_000 };
        assert_eq!(check_liveness(&records, &oracle, &q, &[outage], 4_000).verdict, Verdict::Held);
        let served: Vec<_> = (0..40).map(|i| rec(i * 100, i % 3 == 0)).collect();
        assert_eq!(check_liveness(&served, &oracle, &q, &[], 4_000).verdict, Verdict::Held);
    }

    /// Exact times, exact promise: no millisecond of slack hides an edge moved by one.
    #[test]
    fn exact_bounds_have_no_slack() {
        let q = Quota::new(2, std::time::Duration::from_secs(1));
        let (aligned, first_hit) =
            (Promise::FixedWindow { first_hit: false }, Promise::FixedWindow { first_hit: true });
        // Two in [0, 1000), then one at 999: three in one aligned window.
        let edge: Vec<_> = [0, 500, 999].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(aligned, &q, &edge, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        // A first-hit window opened at 0 holds 999 surely, 1000 in one reading (Redis keeps
        // the key through its deadline's millisecond; a stored start compared with `start +
        // T` ends the window there), and not 1001: a third at 999 is one too many.
        let inside: Vec<_> = [0, 500, 999].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(first_hit, &q, &inside, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        let at_the_end: Vec<_> = [0, 500, 1000, 1001].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(first_hit, &q, &at_the_end, 0, Tolerance::EXACT).verdict, Verdict::Held);
        let both_readings_full: Vec<_> = [0, 500, 1000, 1001, 1500].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(first_hit, &q, &both_readings_full, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        // A bucket of burst 2 refilling 2 per second: a third unit needs 500 ms, not 499.
        let bucket: Vec<_> = [0, 0, 499].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::TokenBucket, &q, &bucket, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        let refilled: Vec<_> = [0, 0, 500].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::TokenBucket, &q, &refilled, 0, Tolerance::EXACT).verdict, Verdict::Held);
    }

    /// Decisions known only to an interval break a bound only where every placement does.
    #[test]
    fn intervals_break_a_bound_only_when_no_placement_explains_it() {
        let q = Quota::new(2, std::time::Duration::from_secs(1));
        let first_hit = Promise::FixedWindow { first_hit: true };
        // The third may have been decided at 1001, opening a window of its own: not a break.
        let maybe_new: Vec<_> = vec![rec(0, true), rec(500, true), between(990, 1001)];
        assert_eq!(check_bound(first_hit, &q, &maybe_new, 0, Tolerance::EXACT).verdict, Verdict::Held);
        // However they are placed, three lie within 1000 ms of the first.
        let surely: Vec<_> = vec![rec(0, true), between(400, 600), between(900, 999)];
        assert_eq!(check_bound(first_hit, &q, &surely, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        // A sliding log: three within [0, 1000) only if the last was decided before 1000.
        let log = Promise::SlidingLog;
        assert_eq!(
            check_bound(log, &q, &[rec(0, true), rec(10, true), between(998, 1000)], 0, Tolerance::EXACT).verdict,
            Verdict::Held
        );
        assert_eq!(
            check_bound(log, &q, &[rec(0, true), rec(10, true), between(997, 999)], 0, Tolerance::EXACT).verdict,
            Verdict::Broken
        );
        // A bucket of burst 2 refilling 2 per second: the third needs 500 ms after the first.
        let bucket = Promise::TokenBucket;
        let late: Vec<_> = vec![rec(0, true), rec(0, true), between(490, 500)];
        assert_eq!(check_bound(bucket, &q, &late, 0, Tolerance::EXACT).verdict, Verdict::Held);
        let early: Vec<_> = vec![rec(0, true), rec(0, true), between(480, 499)];
        assert_eq!(check_bound(bucket, &q, &early, 0, Tolerance::EXACT).verdict, Verdict::Broken);
    }

    /// A window that ends after the run, or in which a failure policy answered, judges
    /// nothing about the limiter's capacity.
    #[test]
    fn liveness_judges_only_windows_inside_the_run_that_redis_decided() {
        let q = Quota::new(10, std::time::Duration::from_secs(1));
        let oracle = vec![true; 10];
        // Requests still in flight when a 5 s run ended fall in [4 s, 6 s): not judged.
        let starved_at_the_end: Vec<_> = (0..10).map(|i| rec(4_100 + i * 10, false)).collect();
        assert_eq!(check_liveness(&starved_at_the_end, &oracle, &q, &[], 5_000).verdict, Verdict::Held);
        assert_eq!(check_liveness(&starved_at_the_end, &oracle, &q, &[], 6_000).verdict, Verdict::Broken);
        let by_policy: Vec<_> =
            (0..10).map(|i| Record { source: Source::FailClosed, ..rec(2_100 + i * 10, false) }).collect();
        assert_eq!(check_liveness(&by_policy, &oracle, &q, &[], 6_000).verdict, Verdict::Held);
    }
}
