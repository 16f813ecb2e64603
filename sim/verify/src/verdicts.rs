//! One verdict per promise, from everything the verifier ran: the searches at exact times,
//! the profile and the simulator's scenarios and sweeps. A broken verdict carries its
//! evidence (the shortest schedule, or the scenario run's worst case) and the command that
//! replays it; a held one says what it rests on and how close the worst case came; a check
//! that could not be judged on the model says why.

use redis_ratelimit::Quota;
use results::{
    Profile, RatePoint, RunResult, SubjectReport, Verdict, VerdictLine, Witness, WitnessFault, WitnessRequest,
};

use super::checks::CheckKind;
use super::profile::Measured;
use super::schedule::Event;
use super::search::{Found, Outcome};
use sim_engine::promise::Promise;
use sim_engine::subject::SubjectFile;

/// What the searches found for one check: per quota searched, what each came to.
#[derive(Debug, Clone)]
pub struct Searched {
    /// The check.
    pub check: CheckKind,
    /// Cases run per quota.
    pub cases: u32,
    /// Quotas searched, with what each came to.
    pub found: Vec<(Quota, Outcome)>,
}

impl Searched {
    /// The first counterexample, if any.
    pub fn first(&self) -> Option<&Found> {
        self.found.iter().find_map(|(_, o)| o.found.as_ref())
    }

    /// The command the script called that the model does not implement, if any did.
    pub fn unknown_command(&self) -> Option<&str> {
        self.found.iter().find_map(|(_, o)| o.unknown_command.as_deref())
    }

    /// The largest excess over the bound forgiven as a tie the script's rounding decided, with
    /// its quota and schedule.
    pub fn forgiven(&self) -> Option<(f64, Quota, &crate::schedule::Schedule)> {
        self.found
            .iter()
            .filter_map(|(q, o)| o.forgiven.as_ref().map(|(over, s)| (*over, *q, s)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The largest share of the bound any schedule reached.
    pub fn worst_ratio(&self) -> Option<f64> {
        self.found.iter().filter_map(|(_, o)| o.worst_ratio).reduce(f64::max)
    }
}

/// Everything one subject's verdicts rest on.
pub struct Evidence<'a> {
    /// The subject file.
    pub file: &'a SubjectFile,
    /// The catalogue's quota for it.
    pub quota: Quota,
    /// The searches, one per applicable check.
    pub searched: &'a [Searched],
    /// Its runs in the scenario catalogue.
    pub runs: &'a [&'a RunResult],
    /// Its runs in the sweeps, with the clock skew of each skew-sweep run (None for the race).
    pub swept: &'a [(&'a RunResult, Option<i64>)],
    /// Its profile.
    pub measured: &'a Measured,
    /// The profile's shortfall as a lost-capacity counterexample, when the search found none.
    pub shortfall: Option<&'a Found>,
    /// How the script decides exact ties (what a tie was forgiven for).
    pub ties: crate::calibrate::Ties,
    /// Why a broken bound may be the script's design, with the line that would declare it.
    pub design_step: Option<&'a str>,
    /// `ratelimit-lab verify FILE` (`results::command`), for the search's replay commands.
    pub verify_command: String,
    /// The backend the scenarios ran on (`model` unless `--backend`).
    pub backend: &'a str,
}

fn quota_words(q: &Quota) -> String {
    format!("{} per {} ms, burst {}", q.limit(), q.period_ms(), q.burst())
}

fn quota_arg(q: &Quota) -> String {
    format!("{}/{}/{}", q.limit(), q.period_ms(), q.burst())
}

/// The report for one subject.
pub fn report(e: &Evidence<'_>) -> SubjectReport {
    let file = e.file;
    let promise = file.promise;
    let mut verdicts = Vec::new();
    for check in CheckKind::ALL {
        if !check.applies(file) {
            continue;
        }
        verdicts.push(verdict(e, check));
        if check == CheckKind::LostCapacity || (check == CheckKind::Estimate && promise == Promise::SlidingWindow) {
            verdicts.push(policy_verdict(e));
        }
    }
    if promise == Promise::None {
        verdicts.push(policy_verdict(e));
    }
    let mut tolerance = file.tolerance.describe();
    let counts = match file.counts {
        sim_engine::promise::Counts::Either => None,
        sim_engine::promise::Counts::Requests => Some("windows that count denied units too"),
        sim_engine::promise::Counts::Admitted => Some("windows that count only admitted units"),
    };
    if let Some(counts) = counts {
        tolerance = if tolerance.is_empty() { counts.to_owned() } else { format!("{tolerance}, {counts}") };
    }
    SubjectReport {
        name: file.name.clone(),
        file: file.path.display().to_string(),
        promise: promise.to_string(),
        time: if file.client_time() { "client" } else { "server" }.to_owned(),
        tolerance,
        quota: quota_words(&e.quota),
        verdicts,
        profile: profile(e),
    }
}

/// A scenario run whose instances' clocks disagreed while the subject took their time: its
/// bound is judged in true time, which is the clock trust's business, not the bound's.
fn skewed_client_run(r: &RunResult, skew: Option<i64>) -> bool {
    r.time_source == "client" && (r.scenario == "clock-skew" || skew.is_some_and(|s| s != 0))
}

/// What a found break is called: the clock trust's is the price of taking the caller's clock,
/// expected of the design; any other break is a broken promise.
fn found_verdict(check: CheckKind) -> Verdict {
    if check == CheckKind::ClockTrust {
        Verdict::Expected
    } else {
        Verdict::Broken
    }
}

fn found_line(e: &Evidence<'_>, check: CheckKind, f: &Found) -> VerdictLine {
    let why = match check {
        CheckKind::ClockTrust => {
            ": it decides by each caller's clock, so instances whose clocks disagree admit what the skew lends"
        }
        _ if f.skewed => " (only when instances' clocks disagree)",
        _ => "",
    };
    let step = match (check, e.design_step) {
        (CheckKind::Bound | CheckKind::LostCapacity, Some(step)) if !f.skewed => format!("; {step}"),
        _ => String::new(),
    };
    VerdictLine {
        check: check.name().to_owned(),
        verdict: found_verdict(check),
        detail: format!("{}{why}{step}", f.violation.message),
        evidence: format!(
            "quota {}, one key, {}:\n{}",
            quota_words(&f.quota),
            if f.skewed { "instances' clocks off as shown" } else { "exact clocks" },
            f.table()
        ),
        replay: format!("{} --quota {} --replay \"{}\"", e.verify_command, quota_arg(&f.quota), f.ran.schedule),
        witness: Some(witness(e.file.promise, check, f)),
    }
}

/// A found schedule on a timeline: each request at its exact time, the calling instances told
/// apart by their clocks' offsets, drawn against the promise where the break is a bound's.
fn witness(promise: Promise, check: CheckKind, f: &Found) -> Witness {
    let mut offsets: Vec<i64> = Vec::new();
    let mut requests = Vec::new();
    let mut faults = Vec::new();
    for (event, decided) in f.ran.schedule.0.iter().zip(&f.ran.decided) {
        match (*event, decided) {
            (Event::Request { t_ms, cost, skew_ms }, Some(d)) => {
                let instance = offsets.iter().position(|&o| o == skew_ms).unwrap_or_else(|| {
                    offsets.push(skew_ms);
                    offsets.len() - 1
                });
                let t = t_ms as f64;
                requests.push(WitnessRequest {
                    instance: instance as u32,
                    lo_ms: t,
                    hi_ms: t,
                    units: cost,
                    admitted: d.allowed,
                });
            }
            (Event::LoseData { t_ms }, _) => faults.push(WitnessFault {
                from_ms: t_ms as f64,
                to_ms: t_ms as f64,
                what: "Redis lost its data".into(),
            }),
            (Event::FlushScripts { t_ms }, _) => {
                faults.push(WitnessFault { from_ms: t_ms as f64, to_ms: t_ms as f64, what: "SCRIPT FLUSH".into() })
            }
            (Event::Request { .. }, None) => {}
        }
    }
    let admitted: Vec<f64> = requests.iter().filter(|r| r.admitted).map(|r| r.lo_ms).collect();
    let envelope = match (check.is_bound(), admitted.first(), admitted.last()) {
        (true, Some(&from), Some(&to)) => sim_engine::bound::envelope(promise, &f.quota, from as u64, to as u64),
        _ => Vec::new(),
    };
    if offsets.iter().all(|&o| o == 0) {
        offsets.clear();
    }
    Witness { requests, envelope, faults, offsets_ms: offsets }
}

fn verdict(e: &Evidence<'_>, check: CheckKind) -> VerdictLine {
    let searched = e.searched.iter().find(|s| s.check == check);
    let found = searched.and_then(Searched::first);
    let found = found.or(if check == CheckKind::LostCapacity { e.shortfall } else { None });
    if let Some(f) = found {
        return found_line(e, check, f);
    }
    // What the scenarios say about the same check.
    let broke = |r: &RunResult, skew: Option<i64>| match check {
        CheckKind::Bound => {
            (r.bound == Verdict::Broken && !skewed_client_run(r, skew)) || r.beyond_clock_trust == Verdict::Broken
        }
        CheckKind::ClockTrust => r.bound == Verdict::Broken && skewed_client_run(r, skew),
        CheckKind::LostCapacity => r.liveness == Verdict::Broken,
        CheckKind::Errors => r.errors > 0,
        CheckKind::Estimate | CheckKind::RetryAfter => false,
    };
    let runs = e.runs.iter().map(|r| (*r, None)).chain(e.swept.iter().copied());
    // A break under clock skew alone is still a break; one that needs no skew says more.
    let mut broken: Vec<&RunResult> = runs.filter(|&(r, skew)| broke(r, skew)).map(|(r, _)| r).collect();
    broken.sort_by_key(|r| (r.scenario == "clock-skew", r.scenario.clone()));
    let unknown = e.searched.iter().find_map(Searched::unknown_command);
    let scenario_runs = e.runs.len() + e.swept.len();
    if let Some(r) = broken.first().filter(|_| unknown.is_none() || e.backend != "model") {
        let detail = match check {
            CheckKind::Bound if r.beyond_clock_trust == Verdict::Broken => {
                format!("beyond the clock trust, whatever the design: {}", r.beyond_clock_trust_detail)
            }
            CheckKind::Bound | CheckKind::ClockTrust => r.bound_detail.clone(),
            CheckKind::LostCapacity => r.liveness_detail.clone(),
            _ => format!("{} calls returned an error", r.errors),
        };
        let skew_only = check != CheckKind::ClockTrust && broken.iter().all(|r| r.scenario == "clock-skew");
        let why = if skew_only { " (only when instances' clocks disagree)" } else { "" };
        return VerdictLine {
            check: check.name().to_owned(),
            verdict: found_verdict(check),
            detail: format!("{}{why}: {detail}", r.scenario),
            evidence: format!(
                "{} in {} of {scenario_runs} scenario runs; the first: {} seed {}, {} instances",
                found_verdict(check),
                broken.len(),
                r.scenario,
                r.seed,
                r.instances
            ),
            replay: r.replay.clone(),
            witness: None,
        };
    }
    if let Some(command) = unknown {
        return VerdictLine {
            check: check.name().to_owned(),
            verdict: Verdict::NotJudged,
            detail: format!(
                "the script calls `{command}`, which the Redis model does not implement, so it cannot be run at exact \
                 times; run it on real Redis with --backend redis{}",
                if e.backend == "model" { "" } else { " (its scenarios did, and showed no break of this check)" }
            ),
            ..VerdictLine::default()
        };
    }
    let (cases, quotas) = searched.map_or((0, 0), |s| (s.cases, s.found.len()));
    let worst =
        searched.and_then(Searched::worst_ratio).map_or(String::new(), |r| format!(" (worst {r:.2}x of the bound)"));
    let declared = if e.file.tolerance.resolution_ms > 0 && check.is_bound() {
        format!(", with {}", e.file.tolerance.describe())
    } else {
        String::new()
    };
    let forgiven = match searched.and_then(Searched::forgiven) {
        Some((over, q, schedule)) => format!(
            "; an admission at most one unit of the script's time before a tie was forgiven, {} over the bound at \
             worst (the script also denies at exact ties: it decides them both ways, as arithmetic that rounds \
             does; replay: {} --quota {} --replay \"{schedule}\")",
            excess(over),
            e.verify_command,
            quota_arg(&q)
        ),
        None => String::new(),
    };
    let detail = match check {
        CheckKind::Estimate => {
            format!("every decision in {cases} schedules x {quotas} quotas is one the weighted estimate allows")
        }
        CheckKind::RetryAfter => {
            format!("a client that waits as told is admitted, in {cases} schedules x {quotas} quotas")
        }
        CheckKind::Errors => {
            format!("no error in {cases} schedules x {quotas} quotas and {scenario_runs} scenario runs")
        }
        CheckKind::ClockTrust => format!(
            "the bound held in true time across instances whose clocks disagree, in {cases} schedules x {quotas} \
             quotas{worst} and {scenario_runs} scenario runs"
        ),
        CheckKind::LostCapacity if e.ties.admits => format!(
            "held in {cases} schedules x {quotas} quotas at exact times and {scenario_runs} scenario runs; a denial \
             exactly at a tie is forgiven, as the script also admits at exact ties (it decides them both ways, as \
             arithmetic that rounds does)"
        ),
        _ => format!(
            "held in {cases} schedules x {quotas} quotas at exact times{worst}{declared} and {scenario_runs} scenario \
             runs{forgiven}"
        ),
    };
    VerdictLine { check: check.name().to_owned(), verdict: Verdict::Held, detail, ..VerdictLine::default() }
}

/// An excess of a fraction of a unit, with the digits that show it (0.00001, not 0.0).
pub fn excess(over: f64) -> String {
    (1..=9)
        .map(|decimals| format!("{over:.decimals$}"))
        .find(|shown| shown.parse::<f64>().is_ok_and(|v| v > 0.0))
        .unwrap_or_else(|| format!("{over:e}"))
}

/// What the caller does when Redis cannot be asked, from the scenarios that cut it off.
fn policy_verdict(e: &Evidence<'_>) -> VerdictLine {
    let cut_off: Vec<&&RunResult> = e.runs.iter().filter(|r| r.policy_check != Verdict::None).collect();
    let policy = e.runs.first().map_or("fail-open", |r| r.policy.as_str());
    match cut_off.iter().find(|r| r.policy_check == Verdict::Broken) {
        Some(r) => VerdictLine {
            check: "failure policy".to_owned(),
            verdict: Verdict::Broken,
            detail: format!("{}: {}", r.scenario, r.policy_detail),
            evidence: String::new(),
            replay: r.replay.clone(),
            witness: None,
        },
        None if cut_off.is_empty() => VerdictLine {
            check: "failure policy".to_owned(),
            verdict: Verdict::NotApplicable,
            detail: "no scenario run cut it off from Redis".to_owned(),
            ..VerdictLine::default()
        },
        None => VerdictLine {
            check: "failure policy".to_owned(),
            verdict: Verdict::Held,
            detail: format!(
                "{policy} ({}) while Redis was unreachable, in {} runs; e.g. {}",
                if policy == "fail-open" { "on_error = allow" } else { "on_error = deny" },
                cut_off.len(),
                cut_off[0].policy_detail
            ),
            ..VerdictLine::default()
        },
    }
}

fn profile(e: &Evidence<'_>) -> Profile {
    let m = e.measured;
    let promise = e.file.promise;
    let mut immortal: Vec<String> = m.keys_without_ttl.clone();
    for r in e.runs.iter().copied().chain(e.swept.iter().map(|(r, _)| *r)) {
        if let Some(redis) = &r.redis {
            immortal.extend(redis.keys_without_ttl_sample.iter().cloned());
        }
    }
    immortal.sort();
    immortal.dedup();
    let count = immortal.len() as u64;
    immortal.truncate(10);
    let race_ratio = e
        .swept
        .iter()
        .filter(|(r, skew)| skew.is_none() && r.instances == 32)
        .map(|(r, _)| r.admitted as f64 / r.oracle_admitted.max(1) as f64)
        .next();
    let breaks_at_skew_ms =
        e.swept.iter().filter_map(|(r, skew)| skew.filter(|_| r.bound == Verdict::Broken)).filter(|&s| s > 0).min();
    let points = |curve: &[(f64, f64)]| -> Vec<RatePoint> {
        curve.iter().map(|&(offered, delivered)| RatePoint { offered, delivered }).collect()
    };
    Profile {
        rate_curve: points(&m.rate_curve),
        exact_curve: points(&m.exact_curve),
        largest_burst: m.largest_burst,
        burst_bound: promise.capacity(&e.quota),
        longest_starvation_ms: m.longest_starvation_ms,
        exact_longest_gap_ms: m.exact_longest_gap_ms,
        keys_without_ttl: count,
        keys_without_ttl_sample: immortal,
        memory_per_key_bytes: m.memory_per_key_bytes,
        race_ratio,
        breaks_at_skew_ms,
        service_runs: Vec::new(),
        in_flight_runs: Vec::new(),
    }
}
