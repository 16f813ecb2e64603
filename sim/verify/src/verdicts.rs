//! One verdict per promise, from everything the verifier ran: the searches at exact times and
//! the simulator's scenarios and sweeps. A broken verdict carries its evidence (the shortest
//! schedule, or the scenario run's worst case) and the command that replays it; a held one says
//! what it rests on.

use redis_ratelimit::Quota;
use results::{Profile, RatePoint, RunResult, SubjectReport, VerdictLine};

use super::checks::CheckKind;
use super::profile::Measured;
use super::search::Found;
use sim_engine::promise::Promise;
use sim_engine::subject::SubjectFile;

/// What the searches found for one check: per quota searched, the counterexample if any.
#[derive(Debug, Clone)]
pub struct Searched {
    /// The check.
    pub check: CheckKind,
    /// Cases run per quota.
    pub cases: u32,
    /// Quotas searched, with what each found.
    pub found: Vec<(Quota, Option<Found>)>,
}

/// Everything one subject's verdicts rest on.
pub struct Evidence<'a> {
    /// The (calibrated) subject file.
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
    /// `cargo xtask verify FILE`, for the search's replay commands.
    pub verify_command: String,
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
        if check == CheckKind::LostCapacity {
            verdicts.push(policy_verdict(e));
        }
    }
    if promise == Promise::None {
        verdicts.push(policy_verdict(e));
    }
    SubjectReport {
        name: file.name.clone(),
        file: file.path.display().to_string(),
        promise: promise.to_string(),
        time: if file.client_time() { "client" } else { "server" }.to_owned(),
        tolerance: file.tolerance.describe(),
        quota: quota_words(&e.quota),
        verdicts,
        profile: profile(e),
    }
}

fn searched_cases(e: &Evidence<'_>, check: CheckKind) -> (u32, usize) {
    e.searched.iter().filter(|s| s.check == check).map(|s| (s.cases, s.found.len())).next().unwrap_or((0, 0))
}

/// A scenario run whose instances' clocks disagreed while the subject took their time: its
/// bound is judged in true time, which is the clock trust's business, not the bound's.
fn skewed_client_run(r: &RunResult, skew: Option<i64>) -> bool {
    r.time_source == "client" && (r.scenario == "clock-skew" || skew.is_some_and(|s| s != 0))
}

/// What a found break is called: the clock trust's is the price of taking the caller's clock,
/// expected of the design; any other break is a broken promise.
fn word(check: CheckKind) -> &'static str {
    if check == CheckKind::ClockTrust {
        "expected"
    } else {
        "broken"
    }
}

fn verdict(e: &Evidence<'_>, check: CheckKind) -> VerdictLine {
    let found = e.searched.iter().filter(|s| s.check == check).flat_map(|s| &s.found).find_map(|(_, f)| f.as_ref());
    if let Some(f) = found {
        let why = match check {
            CheckKind::ClockTrust => {
                ": it decides by each caller's clock, so instances whose clocks disagree admit what the skew lends"
            }
            _ if f.skewed => " (only when instances' clocks disagree)",
            _ => "",
        };
        return VerdictLine {
            check: check.name().to_owned(),
            verdict: word(check).to_owned(),
            detail: format!("{}{why}", f.violation.message),
            evidence: format!(
                "quota {}, one key, {}:\n{}",
                quota_words(&f.quota),
                if f.skewed { "instances' clocks off as shown" } else { "exact clocks" },
                f.table()
            ),
            replay: format!("{} --quota {} --replay \"{}\"", e.verify_command, quota_arg(&f.quota), f.ran.schedule),
        };
    }
    // What the scenarios say about the same check.
    let broke = |r: &RunResult, skew: Option<i64>| match check {
        CheckKind::Bound => r.bound == "broken" && !skewed_client_run(r, skew),
        CheckKind::ClockTrust => r.bound == "broken" && skewed_client_run(r, skew),
        CheckKind::LostCapacity => r.liveness == "broken",
        CheckKind::Errors => r.errors > 0,
        CheckKind::Estimate | CheckKind::RetryAfter => false,
    };
    let runs = e.runs.iter().map(|r| (*r, None)).chain(e.swept.iter().copied());
    // A break under clock skew alone is still a break; one that needs no skew says more.
    let mut broken: Vec<&RunResult> = runs.filter(|&(r, skew)| broke(r, skew)).map(|(r, _)| r).collect();
    broken.sort_by_key(|r| (r.scenario == "clock-skew", r.scenario.clone()));
    let (cases, quotas) = searched_cases(e, check);
    let scenario_runs = e.runs.len() + e.swept.len();
    if let Some(r) = broken.first() {
        let detail = match check {
            CheckKind::Bound | CheckKind::ClockTrust => r.bound_detail.clone(),
            CheckKind::LostCapacity => r.liveness_detail.clone(),
            _ => format!("{} calls returned an error", r.errors),
        };
        let skew_only = check != CheckKind::ClockTrust && broken.iter().all(|r| r.scenario == "clock-skew");
        let why = if skew_only { " (only when instances' clocks disagree)" } else { "" };
        return VerdictLine {
            check: check.name().to_owned(),
            verdict: word(check).to_owned(),
            detail: format!("{}{why}: {detail}", r.scenario),
            evidence: format!(
                "{} in {} of {scenario_runs} scenario runs; the first: {} seed {}, {} instances",
                word(check),
                broken.len(),
                r.scenario,
                r.seed,
                r.instances
            ),
            replay: r.replay.clone(),
        };
    }
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
             quotas and {scenario_runs} scenario runs"
        ),
        _ => format!("held in {cases} schedules x {quotas} quotas at exact times and {scenario_runs} scenario runs"),
    };
    VerdictLine { check: check.name().to_owned(), verdict: "held".to_owned(), detail, ..VerdictLine::default() }
}

/// What the caller does when Redis cannot be asked, from the scenarios that cut it off.
fn policy_verdict(e: &Evidence<'_>) -> VerdictLine {
    let cut_off: Vec<&&RunResult> = e.runs.iter().filter(|r| r.policy_check != "none").collect();
    let policy = e.runs.first().map_or("fail-open", |r| r.policy.as_str());
    match cut_off.iter().find(|r| r.policy_check == "broken") {
        Some(r) => VerdictLine {
            check: "failure policy".to_owned(),
            verdict: "broken".to_owned(),
            detail: format!("{}: {}", r.scenario, r.policy_detail),
            evidence: String::new(),
            replay: r.replay.clone(),
        },
        None if cut_off.is_empty() => VerdictLine {
            check: "failure policy".to_owned(),
            verdict: "n/a".to_owned(),
            detail: "no scenario run cut it off from Redis".to_owned(),
            ..VerdictLine::default()
        },
        None => VerdictLine {
            check: "failure policy".to_owned(),
            verdict: "held".to_owned(),
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
        e.swept.iter().filter_map(|(r, skew)| skew.filter(|_| r.bound == "broken")).filter(|&s| s > 0).min();
    Profile {
        rate_curve: m.rate_curve.iter().map(|&(offered, delivered)| RatePoint { offered, delivered }).collect(),
        largest_burst: m.largest_burst,
        burst_bound: promise.capacity(&e.quota),
        longest_starvation_ms: m.longest_starvation_ms,
        exact_longest_gap_ms: m.exact_longest_gap_ms,
        keys_without_ttl: count,
        keys_without_ttl_sample: immortal,
        memory_per_key_bytes: m.memory_per_key_bytes,
        race_ratio,
        breaks_at_skew_ms,
    }
}
