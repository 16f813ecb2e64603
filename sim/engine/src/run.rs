//! Runs many simulations across cores and turns each trace into a judged result.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use redis_ratelimit::{Source, TimeSource};

use crate::checker;
use crate::mode::{Mode, LEASE_LIFETIME_MS};
use crate::oracle;
use crate::promise::Tolerance;
use crate::scenario::{self, RunSpec};
use crate::subject::{RulesSubject, Subject};
use crate::trace;
use crate::turmoil_run;
use crate::workload::{Spread, Workload};
use results::{FaultWindow, RacePoint, RunResult, Series, SkewPoint, Sources};

/// What a campaign ran.
#[derive(Debug, Clone, Default)]
pub struct Campaign {
    /// One result per scenario run.
    pub results: Vec<RunResult>,
    /// The race sweep's points (empty without sweeps).
    pub race_sweep: Vec<RacePoint>,
    /// The skew sweep's points (empty without sweeps).
    pub skew_sweep: Vec<SkewPoint>,
    /// The sweeps' runs themselves, the skew of each skew-sweep run beside it (None for the
    /// race sweep).
    pub swept: Vec<(RunResult, Option<i64>)>,
    /// Runs whose replay gave another trace (`--check-determinism`), with both hashes.
    pub not_deterministic: Vec<(String, String, String)>,
}

/// Width of the time-series buckets in results.
pub const BUCKET_MS: u64 = 500;

/// Runs `specs` on `threads` threads; results come back in the order of `specs`, whatever
/// the threads did, so output never depends on scheduling. `progress` is called once per
/// finished run.
pub fn run_many(specs: &[RunSpec], threads: usize, progress: &(dyn Fn() + Sync)) -> anyhow::Result<Vec<RunResult>> {
    run_many_with(specs, threads, progress, &turmoil_run::run)
}

/// How one run is executed: in turmoil on the model ([`turmoil_run::run`]) or against real
/// servers. Every executor returns the same trace, judged the same way.
pub type Executor = dyn Fn(&RunSpec) -> anyhow::Result<turmoil_run::RunOutput> + Sync;

/// [`run_many`] with another executor.
pub fn run_many_with(
    specs: &[RunSpec],
    threads: usize,
    progress: &(dyn Fn() + Sync),
    execute: &Executor,
) -> anyhow::Result<Vec<RunResult>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<anyhow::Result<RunResult>>>> = specs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { break };
                // One run that panics (a bug in the harness or in turmoil) fails that run with
                // its message, not the whole sweep.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(spec)))
                    .unwrap_or_else(|panic| {
                        let why = panic
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| panic.downcast_ref::<&str>().copied())
                            .unwrap_or("a panic");
                        Err(anyhow::anyhow!("{}: the run panicked: {why}", replay_command(spec)))
                    })
                    .map(|out| judge(spec, out));
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                progress();
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(anyhow::anyhow!("run did not finish")))
        })
        .collect()
}

/// The command that replays exactly one run. A fault schedule that is not the one the
/// scenario draws for this seed (a generated or shrunk one) is spelled out with `--faults`.
pub fn replay_command(spec: &RunSpec) -> String {
    // A catalogue subject replays through `simulate`; a subject file through `verify`.
    let mut cmd = if Subject::named(spec.subject.name()).as_ref() == Some(&spec.subject) {
        format!(
            "{} --scenario {} --subject {} --seed {}",
            results::command::command("simulate"),
            spec.scenario,
            spec.subject,
            spec.seed
        )
    } else {
        let file = match &spec.subject {
            Subject::Script(f) => f.path.display().to_string(),
            other => other.name().to_owned(),
        };
        format!("{} {file} --scenario {} --seed {}", results::command::command("verify"), spec.scenario, spec.seed)
    };
    if spec.mode != Mode::Plain {
        cmd.push_str(&format!(" --mode {}", spec.mode.name()));
    }
    let scenario = scenario::find(spec.scenario);
    if spec.subject.has_failure_policy_choice() && scenario.as_ref().is_some_and(|s| s.policies.len() > 1) {
        cmd.push_str(&format!(" --policy {}", spec.policy.name()));
    }
    if scenario.as_ref().map(|s| s.instances) != Some(spec.instances) {
        cmd.push_str(&format!(" --instances {}", spec.instances));
    }
    cmd.push_str(&format!(" --duration {}", redis_ratelimit::duration::format_ms(spec.duration_ms)));
    if let Some(scenario) = &scenario {
        cmd.push_str(&scenario::Overrides::of(spec, scenario));
    }
    let drawn = scenario.map(|s| s.faults_for(spec.seed, spec.instances, spec.duration_ms));
    if drawn.as_deref() != Some(&spec.faults[..]) {
        cmd.push_str(&format!(" --faults {}", crate::faults::format_schedule(&spec.faults)));
    }
    cmd
}

/// Judges one run: oracle agreement, the promised bound, the policy's promise, recovery.
pub fn judge(spec: &RunSpec, out: turmoil_run::RunOutput) -> RunResult {
    let q = spec.quota;
    let records = &out.records;
    let promise = spec.subject.promise();
    // Several rules per request: their own oracle and checks (`crate::multi_rule`).
    let multi = match &spec.subject {
        Subject::Rules(_) => Some(RulesSubject::rules(q)),
        _ => None,
    };
    let (oracle_verdicts, acc) = match &multi {
        Some(rules) => crate::multi_rule::oracle::judge(rules, records),
        None => oracle::judge(promise, &q, records),
    };
    let data_losses = spec.faults.iter().filter(|f| f.kind.loses_data()).count() as u64;
    // Each decision is judged where it was made: the records carry the moment, or the
    // interval it lies in (`trace::Record`), and the checkers place it anywhere inside.
    let tolerance = match &spec.subject {
        Subject::Script(f) => f.tolerance,
        _ => Tolerance::EXACT,
    };
    // Each failover may cost each key one burst plus the refill of its replication lag.
    let failover_units: u64 = spec
        .faults
        .iter()
        .filter_map(|f| f.kind.failover_lag_ms())
        .map(|lag_ms| checker::failover_allowance(promise, &q, lag_ms))
        .sum();
    let (bound, rules) = match &multi {
        Some(multi) => {
            let (check, result) = crate::multi_rule::check::check(multi, records, data_losses);
            (check, Some(result))
        }
        None => {
            let allowance = data_losses * promise.capacity(&q) + failover_units;
            let mut bound = checker::check_bound_with(promise, &q, records, allowance, tolerance);
            if failover_units > 0 && promise != crate::promise::Promise::None {
                let extra = checker::extra_admissions(promise, &q, records, tolerance);
                bound.detail = format!(
                    "{extra} extra admissions over the promise after the failover, bound {failover_units} (one burst + \
                     rate x replication lag per failover); {}",
                    bound.detail
                );
            }
            (bound, None)
        }
    };
    let mut policy = checker::check_policy(spec.policy, records, &spec.faults);
    // With one script per decision, scripts Redis ran beyond the decisions it returned are
    // calls the limiter gave up on and Redis ran later (a sent command cannot be withdrawn).
    let one_script_per_decision = spec.mode == Mode::Plain
        && matches!(spec.subject, Subject::Library(_) | Subject::Script(_) | Subject::Rules(RulesSubject::OneCall));
    let late_executions = one_script_per_decision.then(|| {
        let answered = records.iter().filter(|r| r.source == Source::Store || r.error).count() as u64;
        out.redis.scripts_run.saturating_sub(answered)
    });
    if let Some(late) = late_executions.filter(|&n| n > 0) {
        policy.check.detail.push_str(&format!(
            "; {late} calls given up on ran on Redis later (counted there too, though the failure policy answered)"
        ));
    }
    let liveness = checker::check_liveness(records, &oracle_verdicts, &q, &spec.faults, spec.duration_ms);
    let client_time_under_skew = spec.effective_time_source() == TimeSource::Client && spec.skewed();
    // In true time the instances' clocks lend a subject fed them what their disagreement is
    // worth: that break is the price of the design, expected. One that no reading of the clocks
    // explains is a broken promise, whoever's it is.
    let beyond = match &multi {
        None if client_time_under_skew => {
            let offset = |instance: u32, t_ms: u64| {
                let (offset_ms, drift_ppm) = spec.skew_of(instance);
                offset_ms + (t_ms as i128 * drift_ppm as i128 / 1_000_000) as i64
            };
            // A bucket's key whose TTL ran out on Redis's clock starts full where the readings
            // may say the refill of the clocks' spread was still to come (see
            // `checker::expiry_allowance`): granted for every key Redis expired in the run.
            let offsets = (0..spec.instances).flat_map(|i| [offset(i, 0), offset(i, spec.duration_ms)]);
            let spread = offsets.clone().max().unwrap_or(0) - offsets.min().unwrap_or(0);
            let expiries = checker::expiry_allowance(promise, &q, spread.unsigned_abs()) * out.redis.expired_keys;
            let allowance = data_losses * promise.capacity(&q) + failover_units + expiries;
            checker::check_beyond_clock_trust(promise, &q, records, allowance, tolerance, |r| {
                offset(r.instance, r.t_ms)
            })
        }
        _ => checker::Check { verdict: checker::Verdict::None, detail: String::new() },
    };
    let expected_finding =
        !spec.subject.is_library() || (client_time_under_skew && beyond.verdict != checker::Verdict::Broken);

    let (mode_check, lease) = judge_mode(spec, &out, records, &oracle_verdicts);

    let requests = records.len() as u64;
    let admitted = records.iter().filter(|r| r.allowed).count() as u64;
    let pct = |n: u64| if requests == 0 { 0.0 } else { 100.0 * n as f64 / requests as f64 };
    let mut sources = Sources::default();
    for r in records.iter().filter(|r| !r.error) {
        match r.source {
            Source::Store => sources.store += 1,
            Source::FailOpen => sources.fail_open += 1,
            Source::FailClosed => sources.fail_closed += 1,
            Source::LocalBudget => sources.local_budget += 1,
            Source::Lease => sources.lease += 1,
            Source::DenialCache => sources.denial_cache += 1,
            other => panic!("the results schema has no count for decisions of source {other:?}"),
        }
    }
    let buckets = (spec.duration_ms / BUCKET_MS + 1) as usize;
    let mut series = Series {
        bucket_ms: BUCKET_MS,
        admitted: vec![0; buckets],
        oracle_admitted: vec![0; buckets],
        limit_per_bucket: 0.0,
    };
    let mut keys = std::collections::BTreeSet::new();
    for (r, &ok) in records.iter().zip(&oracle_verdicts) {
        let b = ((r.at_ms / BUCKET_MS) as usize).min(buckets - 1);
        series.admitted[b] += r.allowed as u64;
        series.oracle_admitted[b] += ok as u64;
        keys.insert(r.key);
    }
    series.limit_per_bucket = q.limit() as f64 * BUCKET_MS as f64 / q.period_ms() as f64 * keys.len().max(1) as f64;
    if let Some(rules) = &multi {
        series.limit_per_bucket = crate::multi_rule::limit_per_bucket(rules, &keys, BUCKET_MS);
    }

    RunResult {
        scenario: spec.scenario.to_owned(),
        description: scenario::find(spec.scenario).map(|s| s.description.to_owned()).unwrap_or_default(),
        subject: spec.subject.name().to_owned(),
        library: spec.subject.is_library(),
        policy: spec.policy.name().to_owned(),
        time_source: spec.effective_time_source().name().to_owned(),
        seed: spec.seed,
        instances: spec.instances,
        limit: q.limit(),
        period_ms: q.period_ms(),
        burst: q.burst(),
        requests,
        admitted,
        oracle_admitted: acc.oracle_admitted,
        wrong_allow: acc.wrong_allow,
        wrong_limit: acc.wrong_limit,
        wrong_allow_pct: pct(acc.wrong_allow),
        wrong_limit_pct: pct(acc.wrong_limit),
        bound: bound.verdict,
        // A break no reading of the clocks explains says so first: it is the one that counts.
        bound_detail: match beyond.verdict {
            checker::Verdict::Broken => {
                format!("{} (beyond the clock trust); in true time {}", beyond.detail, bound.detail)
            }
            _ => bound.detail,
        },
        expected_finding,
        beyond_clock_trust: beyond.verdict,
        beyond_clock_trust_detail: beyond.detail,
        policy_check: policy.check.verdict,
        policy_detail: policy.check.detail,
        liveness: liveness.verdict,
        liveness_detail: liveness.detail,
        peak_per_period: checker::peak_per_period(records, &q),
        recover_ms: checker::recovery_ms(records, &spec.faults),
        sources,
        errors: records.iter().filter(|r| r.error).count() as u64,
        replay: replay_command(spec),
        trace_hash: out.trace_hash,
        series: Some(series),
        round_trips: out.redis.round_trips,
        redis: Some(out.redis),
        mode: spec.mode.results_name().to_owned(),
        mode_check: mode_check.verdict,
        mode_detail: mode_check.detail,
        under_admitted: lease.under_admitted,
        lease_unspent: lease.unspent,
        late_executions,
        faults: spec
            .faults
            .iter()
            .map(|f| FaultWindow { kind: f.kind.name().to_owned(), at_ms: f.at_ms, until_ms: f.until_ms })
            .collect(),
        rules,
        held: None,
        charges: None,
    }
}

/// The round-trip mode's own promise (`crate::mode`), and what leases cost.
fn judge_mode(
    spec: &RunSpec,
    out: &turmoil_run::RunOutput,
    records: &[trace::Record],
    oracle_verdicts: &[bool],
) -> (checker::Check, checker::LeaseAccount) {
    let none = |why: &str| checker::Check { verdict: checker::Verdict::None, detail: why.to_owned() };
    match spec.mode {
        Mode::Plain => (none("no round-trip mode"), checker::LeaseAccount::default()),
        Mode::Batch => (none("batching promises the algorithm's decisions, checked by its bound"), Default::default()),
        Mode::DenialCache => (
            checker::check_denial_cache(out.modes.probed, &out.modes.wrong_denials, &spec.faults, &spec.quota),
            Default::default(),
        ),
        Mode::Lease => {
            let (Subject::Library(algorithm) | Subject::Module(algorithm)) = spec.subject else {
                return (none("leases are the library's"), Default::default());
            };
            let promise = spec.subject.promise();
            let stretches = oracle::near_rest(promise, &spec.quota, records, LEASE_LIFETIME_MS);
            let mut accounts: std::collections::BTreeMap<u32, checker::LeaseAccount> = Default::default();
            let mut net: std::collections::BTreeMap<u32, i64> = Default::default();
            for (r, &ok) in records.iter().zip(oracle_verdicts) {
                let n = net.entry(r.key).or_default();
                let cost = r.cost as i64;
                let policy_denied = !r.allowed && matches!(r.source, Source::FailClosed | Source::LocalBudget);
                if ok && !policy_denied {
                    *n += cost;
                }
                if r.allowed {
                    *n -= cost;
                }
            }
            for (key, n) in net {
                let unspent = out.modes.ledger.get(&format!("key-{key}")).map_or(0, |e| e.unspent());
                let near_rest = stretches.get(&key).copied().unwrap_or(0);
                accounts.insert(key, checker::LeaseAccount { under_admitted: n.max(0) as u64, unspent, near_rest });
            }
            checker::check_leases(&accounts, spec.mode.near_rest_cost(algorithm, &spec.quota))
        }
    }
}

/// Whether a result fails the run: the results crate's rule, shared with the tables and the
/// report.
pub use results::is_failure;

/// The GET+SET race sweep: each algorithm's admissions on one hot key as instances grow,
/// and as Redis latency grows at 8 instances.
pub fn race_sweep_specs(subjects: &[Subject], seed: u64, duration_ms: u64) -> Vec<(RunSpec, f64)> {
    let Some(race) = scenario::find("get-set-race") else { return Vec::new() };
    let mut specs = Vec::new();
    // The sweeps chart single limits; the multi-rule subjects have their own scenario.
    for subject in subjects.iter().filter(|s| !s.is_rules()) {
        let one = std::slice::from_ref(subject);
        for instances in [1, 2, 4, 8, 16, 32] {
            let mut s = race.runs(one, &[seed], Some(instances), duration_ms).remove(0);
            s.latency_ms = (2, 4);
            // The points are plotted against the round trip: twice the mean one-way latency.
            // Each instance brings its own traffic, at the limit: more instances, more
            // overlapping read-modify-writes on the one key.
            s.workload = Workload::Poisson {
                rate_x: instances as f64,
                keys: 1,
                hot_share: 1.0,
                max_cost: 1,
                spread: Spread::Random,
            };
            specs.push((s, 6.0));
        }
        for latency in [1u64, 2, 5, 10, 20] {
            let mut s = race.runs(one, &[seed], Some(8), duration_ms).remove(0);
            s.latency_ms = (latency, latency);
            specs.push((s, 2.0 * latency as f64));
        }
    }
    specs
}

/// Turns race-sweep runs into points.
pub fn race_points(specs: &[(RunSpec, f64)], results: &[RunResult]) -> Vec<RacePoint> {
    specs
        .iter()
        .zip(results)
        .map(|((spec, latency), r)| RacePoint {
            subject: r.subject.clone(),
            instances: u64::from(spec.instances),
            latency_ms: *latency,
            limit: r.oracle_admitted,
            admitted: r.admitted,
            requests: r.requests,
            seed: r.seed,
        })
        .collect()
}

/// The clock-skew sweep: admissions against the oracle as the skew between instances
/// grows, in client and in server time.
pub fn skew_sweep_specs(subjects: &[Subject], seed: u64, duration_ms: u64) -> Vec<(RunSpec, i64)> {
    let Some(skew) = scenario::find("clock-skew") else { return Vec::new() };
    let mut specs = Vec::new();
    // Subjects that read no clock of their own (a counter in Redis) cannot be skewed.
    for subject in subjects.iter().filter(|s| !s.is_rules() && (s.has_time_source_choice() || s.forces_client_time())) {
        let one = std::slice::from_ref(subject);
        for time_source in [TimeSource::Client, TimeSource::Server] {
            if !subject.has_time_source_choice() && time_source == TimeSource::Server {
                continue;
            }
            for skew_ms in [0i64, 250, 500, 1_000, 2_000, 4_000] {
                let mut s = skew.runs(one, &[seed], None, duration_ms).remove(0);
                s.time_source = time_source;
                s.skew = vec![(skew_ms, 0), (-skew_ms, 0), (skew_ms / 2, 0), (0, 0)];
                specs.push((s, skew_ms));
            }
        }
    }
    specs
}

/// Turns skew-sweep runs into points; the bound is what the oracle admitted.
pub fn skew_points(specs: &[(RunSpec, i64)], results: &[RunResult]) -> Vec<SkewPoint> {
    specs
        .iter()
        .zip(results)
        .map(|((_, skew_ms), r)| SkewPoint {
            subject: r.subject.clone(),
            time_source: r.time_source.clone(),
            skew_ms: *skew_ms,
            admitted: r.admitted,
            bound: r.oracle_admitted,
            seed: r.seed,
        })
        .collect()
}
