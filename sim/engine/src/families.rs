//! The scenario families `simulate` runs beside the catalogue: limits that are not a rate per
//! period ([`in_flight`], [`post_hoc`]), each with its own subjects, workload and checks, judged
//! into the same [`RunResult`] as every catalogue run so the tables, the findings, the results
//! file and the report take them as they are. They run on the model only: their faults are the
//! simulator's.

use redis_ratelimit::FailurePolicy;
use results::{Charges, RunResult, Series, SlotsHeld, Sources};

use crate::checker::{Check, Verdict};
use crate::in_flight::{self, check::Acquire, Holder, InFlightSpec, InFlightVariant};
use crate::post_hoc::{self, Charger, PostHocSpec};

/// One run of a family.
#[derive(Debug, Clone)]
pub enum FamilySpec {
    /// An in-flight limit's.
    InFlight(InFlightSpec),
    /// Costs known after the work.
    PostHoc(PostHocSpec),
}

/// The families' scenarios, each with what it does.
pub fn scenarios() -> Vec<(&'static str, &'static str)> {
    InFlightVariant::ALL
        .iter()
        .map(|v| (v.name(), describe_in_flight(*v)))
        .chain([(post_hoc::SCENARIO, POST_HOC)])
        .collect()
}

/// The families' own subjects (the post-hoc scenario also runs the library's algorithms, by
/// their names), each with what it is.
pub fn subjects() -> Vec<(&'static str, &'static str)> {
    vec![
        (Holder::Library.name(), "the library's ConcurrencyLimiter: one script per call, a token per holder, leases"),
        (Holder::IncrDecr.name(), "an in-flight counter: INCR to acquire, DECR to release, no lease, no token"),
        (Charger::ChargeAfter.name(), "admits under the limit, charges the real cost after the response, uncapped"),
    ]
}

const POST_HOC: &str = "requests admitted at an estimate and charged their real cost after, one in four far over it";

fn describe_in_flight(v: InFlightVariant) -> &'static str {
    match v {
        InFlightVariant::Crashes => "in-flight limit of 4: holders die holding slots, Redis restarts empty",
        InFlightVariant::LostReplies => "in-flight limit of 4: replies from Redis lost for 150 ms, releases retried",
        InFlightVariant::DoubleRelease => "in-flight limit of 4: one request in 8 released twice",
    }
}

/// The runs `scenarios` and `subjects` select (every one of the families where a list is
/// empty), for each of `seeds`.
pub fn specs(scenarios: &[String], subjects: &[String], seeds: &[u64]) -> Vec<FamilySpec> {
    let wanted = |list: &[String], name: &str| list.is_empty() || list.iter().any(|n| n == name);
    let mut out = Vec::new();
    for &seed in seeds {
        for variant in InFlightVariant::ALL.into_iter().filter(|v| wanted(scenarios, v.name())) {
            for holder in Holder::BUILT_IN.into_iter().filter(|h| wanted(subjects, h.name())) {
                out.push(FamilySpec::InFlight(InFlightSpec::new(variant, holder, seed)));
            }
        }
        if wanted(scenarios, post_hoc::SCENARIO) {
            for charger in Charger::all().into_iter().filter(|c| wanted(subjects, c.name())) {
                out.push(FamilySpec::PostHoc(PostHocSpec::new(charger, seed)));
            }
        }
    }
    out
}

/// Runs `specs` on `threads` threads; results in the order of `specs`.
pub fn run_all(specs: &[FamilySpec], threads: usize) -> anyhow::Result<Vec<RunResult>> {
    let chunk = specs.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            specs.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(run).collect::<Vec<_>>())).collect();
        let mut out = Vec::with_capacity(specs.len());
        for handle in handles {
            let part = handle.join().map_err(|_| anyhow::anyhow!("a family run panicked"))?;
            for result in part {
                out.push(result?);
            }
        }
        Ok(out)
    })
}

/// Runs one and judges it.
pub fn run(spec: &FamilySpec) -> anyhow::Result<RunResult> {
    match spec {
        FamilySpec::InFlight(spec) => Ok(in_flight_result(spec, &in_flight::run(spec)?)),
        FamilySpec::PostHoc(spec) => Ok(post_hoc_result(spec, &post_hoc::run(spec)?)),
    }
}

/// An in-flight run judged into the results every run shares.
pub fn in_flight_result(spec: &InFlightSpec, out: &in_flight::InFlightOutcome) -> RunResult {
    let j = &out.judged;
    let count = |a: Acquire| out.holds.iter().filter(|h| h.acquire == a).count() as u64;
    // Both halves of the promise are the bound: a leaked slot breaks it as surely as N + 1.
    let bound = if j.at_most.verdict == Verdict::Broken { &j.at_most } else { &j.no_leak };
    RunResult {
        scenario: spec.variant.name().to_owned(),
        description: describe_in_flight(spec.variant).to_owned(),
        subject: spec.holder.name().to_owned(),
        library: spec.holder == Holder::Library,
        policy: FailurePolicy::FailClosed.name().to_owned(),
        time_source: "server".to_owned(),
        seed: spec.seed,
        instances: spec.instances,
        limit: spec.limit,
        requests: out.holds.len() as u64,
        admitted: count(Acquire::Held),
        bound: bound.verdict,
        bound_detail: format!(
            "at most {} at once: {}; no slot past its lease: {}",
            spec.limit, j.at_most.detail, j.no_leak.detail
        ),
        expected_finding: spec.holder != Holder::Library,
        peak_per_period: u64::from(j.peak.0),
        sources: Sources {
            store: count(Acquire::Held) + count(Acquire::Full),
            fail_closed: count(Acquire::Unknown),
            ..Sources::default()
        },
        replay: spec.replay_command(),
        trace_hash: out.trace_hash.clone(),
        round_trips: out.redis_calls,
        faults: out.faults.clone(),
        held: Some(SlotsHeld {
            bucket_ms: in_flight::BUCKET_MS,
            per_bucket: j.series.clone(),
            limit: spec.limit,
            lease_ms: spec.lease_ms,
        }),
        ..RunResult::default()
    }
}

fn post_hoc_result(spec: &PostHocSpec, out: &post_hoc::PostHocOutcome) -> RunResult {
    let q = spec.quota;
    let bucket_ms = crate::run::BUCKET_MS;
    let buckets = (spec.duration_ms + 1_000).div_ceil(bucket_ms) as usize;
    let mut charged = vec![0u64; buckets];
    for r in &out.records {
        charged[((r.at_ms / bucket_ms) as usize).min(buckets - 1)] += r.cost;
    }
    let Check { verdict, detail } = &out.bound;
    RunResult {
        scenario: post_hoc::SCENARIO.to_owned(),
        description: POST_HOC.to_owned(),
        subject: spec.charger.name().to_owned(),
        library: matches!(spec.charger, Charger::Library(_)),
        policy: FailurePolicy::FailClosed.name().to_owned(),
        time_source: "server".to_owned(),
        seed: spec.seed,
        instances: spec.instances,
        limit: q.limit(),
        period_ms: q.period_ms(),
        burst: q.burst(),
        requests: out.requests,
        admitted: out.admitted,
        peak_per_period: crate::checker::peak_per_period(&out.records, &q),
        bound: *verdict,
        bound_detail: format!(
            "every unit charged, at admission and after, within the promise for twice the capacity: {detail}; {} of {} \
             units used were forgiven by the cap on debt (reported)",
            out.uncharged, out.used
        ),
        expected_finding: !matches!(spec.charger, Charger::Library(_)),
        sources: Sources { store: out.requests, ..Sources::default() },
        replay: spec.replay_command(),
        trace_hash: out.trace_hash.clone(),
        round_trips: out.redis_calls,
        series: Some(Series {
            bucket_ms,
            admitted: charged,
            oracle_admitted: Vec::new(),
            limit_per_bucket: q.limit() as f64 * bucket_ms as f64 / q.period_ms() as f64,
        }),
        charges: Some(Charges { used: out.used, uncharged: out.uncharged, worst_ratio: out.worst_ratio }),
        ..RunResult::default()
    }
}
