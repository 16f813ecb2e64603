//! Checkers: each algorithm held to its promise (the table in `docs/ARCHITECTURE.md`), each
//! failure policy to its own, measured on the trace in true simulated time.
//!
//! Each decision is judged at the time it was made ([`Record::at_ms`]). `slack_ms` widens
//! rate checks and shrinks window checks by an uncertainty in that time, keeping them sound:
//! a reported break is a real break.

use std::collections::BTreeMap;

use redis_ratelimit::{FailurePolicy, Quota, Source};

use crate::faults::Fault;
use crate::promise::{Promise, Tolerance};
use crate::trace::Record;

/// A bound's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The promise held.
    Held,
    /// The promise was broken.
    Broken,
    /// Nothing to check (no promise applies).
    None,
}

impl Verdict {
    /// `held`, `broken` or `none`: the words of the results file, which the tables and the
    /// report read back (`results::verdict`).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Held => results::verdict::HELD,
            Verdict::Broken => results::verdict::BROKEN,
            Verdict::None => results::verdict::NONE,
        }
    }
}

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
pub fn check_bound(
    promise: Promise,
    q: &Quota,
    records: &[Record],
    slack_ms: u64,
    data_losses: u64,
    tolerance: Tolerance,
) -> Check {
    check_bound_with(promise, q, records, slack_ms, data_losses * promise.capacity(q), tolerance)
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
pub fn extra_admissions(promise: Promise, q: &Quota, records: &[Record], slack_ms: u64, tolerance: Tolerance) -> u64 {
    let held = |units| check_bound_with(promise, q, records, slack_ms, units, tolerance).verdict != Verdict::Broken;
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
    slack_ms: u64,
    allowance: u64,
    tolerance: Tolerance,
) -> Check {
    if promise == Promise::None {
        return Check { verdict: Verdict::None, detail: "no promise to check".into() };
    }
    let mut by_key: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    // A lease's units left the shared budget when Redis leased them: spending one is a store
    // decision, made without a round trip, and held to the same bound.
    for r in records.iter().filter(|r| r.allowed && matches!(r.source, Source::Store | Source::Lease)) {
        by_key.entry(r.key).or_default().push((r.at_ms, r.cost));
    }
    let (l, w) = (q.limit(), q.period_ms());
    let mut worst: Option<String> = None;
    let mut note = |msg: String| {
        if worst.is_none() {
            worst = Some(msg);
        }
    };
    let mut peak = 0u64;
    for (key, admitted) in &mut by_key {
        // Records arrive in decision-time order; keep it explicit for the window scans.
        admitted.sort_by_key(|&(t, _)| t);
        match promise {
            Promise::FixedWindow { first_hit: false } => {
                let mut per_window: BTreeMap<u64, u64> = BTreeMap::new();
                for &(t, cost) in admitted.iter() {
                    if t % w + slack_ms < w && t % w >= slack_ms {
                        *per_window.entry(t / w).or_default() += cost;
                    }
                }
                for (window, &n) in &per_window {
                    peak = peak.max(n);
                    if n > l + allowance {
                        note(format!("key-{key}: {n} admitted in aligned window {window}, bound {}", l + allowance));
                    }
                }
            }
            Promise::FixedWindow { first_hit: true } => {
                // A window opens at the first admission after the previous one closed and
                // lasts one period; times are known to within `slack_ms`, so only what lies
                // surely inside counts.
                let span = w.saturating_sub(2 * slack_ms + tolerance.resolution_ms).max(1);
                let mut i = 0;
                while i < admitted.len() {
                    let start = admitted[i].0;
                    let n: u64 = admitted[i..].iter().take_while(|&&(t, _)| t < start + span).map(|&(_, c)| c).sum();
                    peak = peak.max(n);
                    if n > l + allowance {
                        note(format!(
                            "key-{key}: {n} admitted within {span} ms of a window's first request, bound {}",
                            l + allowance
                        ));
                    }
                    while i < admitted.len() && admitted[i].0 < start + w {
                        i += 1;
                    }
                }
            }
            Promise::SlidingLog | Promise::SlidingWindow => {
                let bound = if promise == Promise::SlidingLog { l } else { 2 * l } + allowance;
                let span = w.saturating_sub(slack_ms).max(1);
                let n = max_in_span(admitted, span);
                peak = peak.max(n);
                if n > bound {
                    note(format!("key-{key}: {n} admitted within {span} ms, bound {bound}"));
                }
            }
            Promise::TokenBucket | Promise::Gcra => {
                // sum(i..=j) <= B + r * (t_j - t_i + slack + 1) for every i <= j, in O(n):
                // with P the prefix sums, (P_j - r t_j) - (P_{i-1} - r t_i) <= B + r (slack + 1).
                let r = l as f64 / w as f64;
                let budget = q.burst() as f64
                    + r * (slack_ms + tolerance.resolution_ms + 1) as f64
                    + (allowance + tolerance.extra_units) as f64;
                let mut prefix = 0.0;
                let mut best_start = f64::INFINITY;
                let mut excess: f64 = f64::NEG_INFINITY;
                for &(t, cost) in admitted.iter() {
                    best_start = best_start.min(prefix - r * t as f64);
                    prefix += cost as f64;
                    excess = excess.max(prefix - r * t as f64 - best_start);
                }
                peak = peak.max(excess.max(0.0) as u64);
                if excess > budget + 1e-9 {
                    note(format!(
                        "key-{key}: {excess:.0} admitted beyond the refill over some interval, bound {budget:.1}"
                    ));
                }
            }
            Promise::None => {}
        }
    }
    match worst {
        Some(detail) => Check { verdict: Verdict::Broken, detail },
        None if by_key.is_empty() => Check { verdict: Verdict::None, detail: "nothing admitted by the store".into() },
        None => Check { verdict: Verdict::Held, detail: format!("{}; worst seen {peak}", promise.describe(q)) },
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
        FailurePolicy::LocalBudget { limit, period_ms } => {
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
    /// Units the exact limiter admitted beyond the cluster, net, leaving out what a failure
    /// policy denied.
    pub under_admitted: u64,
    /// Units leased and neither spent nor given back.
    pub unspent: u64,
    /// Times the exact limiter's state for the key was at rest when a request came.
    pub idle_starts: u64,
}

/// The leases' promise: per key, the cluster under-admits (net, against the exact oracle) at
/// most the units leased and never spent, plus `idle_start_cost` (one lifetime's refill) each
/// time the key starts from rest. Returns the check and the totals over keys.
pub fn check_leases(accounts: &BTreeMap<u32, LeaseAccount>, idle_start_cost: u64) -> (Check, LeaseAccount) {
    let mut total = LeaseAccount::default();
    let mut worst: Option<String> = None;
    for (key, a) in accounts {
        total.under_admitted += a.under_admitted;
        total.unspent += a.unspent;
        total.idle_starts += a.idle_starts;
        let bound = a.unspent + idle_start_cost * a.idle_starts;
        if a.under_admitted > bound && worst.is_none() {
            worst = Some(format!(
                "key-{key} under-admitted {} units, more than the {} leased and never spent plus {} x {idle_start_cost}                  for starts from rest",
                a.under_admitted, a.unspent, a.idle_starts
            ));
        }
    }
    let check = match worst {
        Some(detail) => Check { verdict: Verdict::Broken, detail },
        None if accounts.is_empty() => Check { verdict: Verdict::None, detail: "no key was leased".into() },
        None => Check {
            verdict: Verdict::Held,
            detail: format!(
                "under-admitted {} units; bound {} leased and never spent + {} x {idle_start_cost} for starts from rest",
                total.under_admitted, total.unspent, total.idle_starts
            ),
        },
    };
    (check, total)
}

/// No starvation: wherever no fault cuts the key's instances off and the oracle admits at
/// least two requests of a key within two periods, the system must admit at least one.
/// This is the check ADR-002's floored refill fails under a steady trickle.
pub fn check_liveness(records: &[Record], oracle: &[bool], q: &Quota, faults: &[Fault]) -> Check {
    let span = 2 * q.period_ms();
    // (key, window) -> (admitted, oracle admitted, touched by a fault)
    let mut windows: BTreeMap<(u32, u64), (u64, u64, bool)> = BTreeMap::new();
    for (r, &ok) in records.iter().zip(oracle) {
        let w = windows.entry((r.key, r.at_ms / span)).or_default();
        w.0 += r.allowed as u64;
        w.1 += ok as u64;
        let start = r.at_ms / span * span;
        w.2 |= faults
            .iter()
            .any(|f| f.kind.cuts_off(r.instance) && f.at_ms < start + span && f.until_ms.max(f.at_ms + 1) > start);
    }
    let starved: Vec<_> = windows.iter().filter(|(_, &(got, want, fault))| got == 0 && want >= 2 && !fault).collect();
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
        Record {
            t_ms,
            done_ms: t_ms,
            at_ms: t_ms,
            instance: 0,
            seq: 0,
            key: 0,
            cost: 1,
            allowed,
            source: Source::Store,
            retry_after_ms: 0,
            error: false,
            rules: Vec::new(),
        }
    }

    #[test]
    fn sliding_log_bound_catches_one_too_many() {
        let q = Quota::new(3, 1000);
        let ok: Vec<_> = [0, 10, 20, 1000].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::SlidingLog, &q, &ok, 0, 0, Tolerance::EXACT).verdict, Verdict::Held);
        let bad: Vec<_> = [0, 10, 20, 999].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::SlidingLog, &q, &bad, 0, 0, Tolerance::EXACT).verdict, Verdict::Broken);
        // One extra burst is allowed after a data loss.
        assert_eq!(check_bound(Promise::SlidingLog, &q, &bad, 0, 1, Tolerance::EXACT).verdict, Verdict::Held);
    }

    #[test]
    fn extra_admissions_is_the_least_allowance_that_holds() {
        let q = Quota::new(3, 1000);
        let ok: Vec<_> = [0, 10, 20, 1000].map(|t| rec(t, true)).to_vec();
        assert_eq!(extra_admissions(Promise::SlidingLog, &q, &ok, 0, Tolerance::EXACT), 0);
        let two_more: Vec<_> = [0, 10, 20, 30, 40, 999].map(|t| rec(t, true)).to_vec();
        assert_eq!(extra_admissions(Promise::SlidingLog, &q, &two_more, 0, Tolerance::EXACT), 3);
        // One burst plus the refill of the lag: 3 + 3 x 250 / 1000 rounded up.
        assert_eq!(failover_allowance(Promise::Gcra, &q.with_burst(3), 250), 4);
    }

    #[test]
    fn bucket_bound_allows_burst_plus_refill_and_no_more() {
        let q = Quota::new(10, 1000).with_burst(5); // 1 per 100 ms
        let ok: Vec<_> = [0, 0, 0, 0, 0, 100, 200, 300].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::TokenBucket, &q, &ok, 0, 0, Tolerance::EXACT).verdict, Verdict::Held);
        let bad: Vec<_> = [0, 0, 0, 0, 0, 10, 20].map(|t| rec(t, true)).to_vec();
        assert_eq!(check_bound(Promise::Gcra, &q, &bad, 0, 0, Tolerance::EXACT).verdict, Verdict::Broken);
    }

    #[test]
    fn fixed_window_allows_double_across_a_boundary_but_not_within() {
        let q = Quota::new(2, 1000);
        let boundary: Vec<_> = [998, 999, 1000, 1001].map(|t| rec(t, true)).to_vec();
        assert_eq!(
            check_bound(Promise::FixedWindow { first_hit: false }, &q, &boundary, 0, 0, Tolerance::EXACT).verdict,
            Verdict::Held
        );
        assert_eq!(peak_per_period(&boundary, &q), 4);
        let within: Vec<_> = [100, 200, 300].map(|t| rec(t, true)).to_vec();
        assert_eq!(
            check_bound(Promise::FixedWindow { first_hit: false }, &q, &within, 0, 0, Tolerance::EXACT).verdict,
            Verdict::Broken
        );
    }

    #[test]
    fn starvation_is_caught_and_faults_excuse_it() {
        let q = Quota::new(10, 1000);
        let records: Vec<_> = (0..40).map(|i| rec(i * 100, i < 3)).collect();
        let oracle = vec![true; 40];
        assert_eq!(check_liveness(&records, &oracle, &q, &[]).verdict, Verdict::Broken);
        let outage = Fault { kind: crate::faults::FaultKind::RedisPause, at_ms: 0, until_ms: 5_000 };
        assert_eq!(check_liveness(&records, &oracle, &q, &[outage]).verdict, Verdict::Held);
        let served: Vec<_> = (0..40).map(|i| rec(i * 100, i % 3 == 0)).collect();
        assert_eq!(check_liveness(&served, &oracle, &q, &[]).verdict, Verdict::Held);
    }
}
