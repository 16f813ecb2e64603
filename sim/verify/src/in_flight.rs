//! Verifying an in-flight limit's script: a concurrency subject file (`kind = "concurrency"`,
//! `sim_engine::subject::release`) run through the simulator's in-flight scenarios
//! (`sim_engine::in_flight`) beside the library's `ConcurrencyLimiter` with the same N and
//! lease, every acquire and release judged on true time. One verdict per half of the promise
//! (at most N at once; no slot lost past its lease) and one for errors, each broken one with
//! the holds that show it and the command that replays its run; the profile says, per run, how
//! the acquires were answered, from the same judgement as the verdicts.

use std::sync::Arc;

use results::{InFlightRun, Profile, RunResult, SubjectReport, Verdict, VerdictLine};
use sim_engine::checker::Check;
use sim_engine::families::in_flight_result;
use sim_engine::in_flight::check::{evidence, Acquire};
use sim_engine::in_flight::{self, Holder, InFlightOutcome, InFlightSpec, InFlightVariant};
use sim_engine::subject::SubjectFile;

/// What verifying one file came to: every run (the file's and the library's beside it) and
/// its report.
pub struct Verified {
    /// Every run, judged as the simulator judges its own.
    pub results: Vec<RunResult>,
    /// The file's verdicts and profile.
    pub report: SubjectReport,
}

/// Runs `variants` with each of `seeds` for `file` (a concurrency subject file), and the
/// library's limiter of the same N and lease beside it.
pub fn verify(file: &Arc<SubjectFile>, variants: &[InFlightVariant], seeds: &[u64]) -> Result<Verified, String> {
    let call = file.in_flight.as_ref().ok_or_else(|| format!("{} is not a concurrency subject file", file.name))?;
    let mut results = Vec::new();
    let mut runs: Vec<(InFlightSpec, InFlightOutcome)> = Vec::new();
    for &variant in variants {
        for &seed in seeds {
            let spec = InFlightSpec::new(variant, Holder::Script(file.clone()), seed);
            let library = InFlightSpec { limit: call.limit, ..InFlightSpec::new(variant, Holder::Library, seed) }
                .with_lease(call.lease_ms);
            for spec in [spec, library] {
                let out = in_flight::run(&spec).map_err(|e| format!("{}: {e:#}", spec.replay_command()))?;
                results.push(in_flight_result(&spec, &out));
                if matches!(spec.holder, Holder::Script(_)) {
                    runs.push((spec, out));
                }
            }
        }
    }
    let at_most = verdict(
        &runs,
        "at most N at once",
        |out| &out.judged.at_most,
        |spec, out| evidence(&out.holds, spec.lease_ms, Some(out.judged.peak.1), None),
    );
    let no_leak = verdict(
        &runs,
        "no slot past its lease",
        |out| &out.judged.no_leak,
        |spec, out| evidence(&out.holds, spec.lease_ms, None, out.judged.first_leak.as_ref()),
    );
    let errors: u64 = runs.iter().map(|(_, out)| out.script_errors).sum();
    let first_error = runs.iter().find(|(_, out)| out.script_errors > 0);
    let errors = VerdictLine {
        check: "runs without errors".into(),
        verdict: if errors > 0 { Verdict::Broken } else { Verdict::Held },
        detail: match errors {
            0 => format!("no error in {} runs", runs.len()),
            n => format!("the script answered {n} calls with an error"),
        },
        replay: first_error.map(|(spec, _)| spec.replay_command()).unwrap_or_default(),
        ..VerdictLine::default()
    };
    let profile = Profile {
        in_flight_runs: runs
            .iter()
            .map(|(spec, out)| {
                let count = |a: Acquire| out.holds.iter().filter(|h| h.acquire == a).count() as u64;
                InFlightRun {
                    scenario: spec.variant.name().to_owned(),
                    seed: spec.seed,
                    limit: spec.limit,
                    acquires: out.holds.len() as u64,
                    held: count(Acquire::Held),
                    refused: count(Acquire::Full),
                    unanswered: count(Acquire::Unknown),
                    most_at_once: u64::from(out.judged.peak.0),
                    allowed_at_once: spec.limit * (1 + out.data_losses),
                    unexplained_refusals: out.judged.unexplained,
                    script_errors: out.script_errors,
                }
            })
            .collect(),
        ..Profile::default()
    };
    let report = SubjectReport {
        name: file.name.clone(),
        file: file.path.display().to_string(),
        promise: "concurrency".into(),
        time: if file.client_time() { "client" } else { "server" }.into(),
        tolerance: String::new(),
        quota: format!("at most {} at once, leases of {} ms", call.limit, call.lease_ms),
        verdicts: vec![at_most, no_leak, errors],
        profile,
    };
    Ok(Verified { results, report })
}

/// One half of the promise over every run: broken by the first run that broke it, with its
/// evidence and replay; held with the count of runs.
fn verdict(
    runs: &[(InFlightSpec, InFlightOutcome)],
    name: &str,
    check: impl Fn(&InFlightOutcome) -> &Check,
    show: impl Fn(&InFlightSpec, &InFlightOutcome) -> String,
) -> VerdictLine {
    match runs.iter().find(|(_, out)| check(out).verdict == Verdict::Broken) {
        Some((spec, out)) => VerdictLine {
            check: name.into(),
            verdict: Verdict::Broken,
            detail: format!("{}: {}", spec.variant.name(), check(out).detail),
            evidence: show(spec, out),
            replay: spec.replay_command(),
            witness: None,
        },
        None => VerdictLine {
            check: name.into(),
            verdict: Verdict::Held,
            detail: format!("held in {} runs; {}", runs.len(), runs.first().map_or("", |(_, out)| &check(out).detail)),
            ..VerdictLine::default()
        },
    }
}
