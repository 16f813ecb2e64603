//! `cargo xtask verify SUBJECT.toml...`: any rate-limiter script, described by a subject file,
//! judged by its promise.
//!
//! For each subject the verifier
//! 1. measures how coarsely it keeps time and refills ([`calibrate`]), so a correct script
//!    that decides on whole seconds or refills in steps is held to what its design can keep;
//! 2. searches generated schedules on the in-process model at exact times for a schedule that
//!    breaks a check ([`search`], [`checks`]), shrunk to the shortest that still does;
//! 3. runs the scenario catalogue and the race and skew sweeps with it beside the library's
//!    algorithms (the simulator, on the model or on real Redis), which adds what one key at
//!    exact times cannot show: concurrent instances, skewed clocks, partitions, outages,
//!    restarts;
//! 4. measures its profile ([`profile`]);
//!
//! and prints one verdict per promise with its evidence and replay command ([`verdicts`]).

#![forbid(unsafe_code)]

pub mod calibrate;
pub mod checks;
pub mod direct;
pub mod profile;
pub mod schedule;
pub mod search;
pub mod verdicts;

use std::sync::Arc;

use redis_ratelimit::Quota;

use results::{RunResult, SubjectReport};

use redis_model::{ManualServerClock, ModelHandle, Reply};
use sim_engine::promise::Promise;
use sim_engine::run::Campaign;
use sim_engine::scenario;
use sim_engine::subject::reply::Scalar;
use sim_engine::subject::{FileError, SubjectFile};

/// The quotas the search drives a subject with: the one its file names, or three that differ
/// in what a bug could confuse (burst equal to, above and below the limit; a period of one and
/// of two seconds). Whole seconds and whole units per second, as many scripts' callers require.
pub fn search_quotas(file: &SubjectFile) -> Vec<Quota> {
    match file.quota {
        Some(q) => vec![q],
        None => vec![scenario::QUOTA, Quota::new(10, 1_000).with_burst(30), Quota::new(4, 2_000).with_burst(2)],
    }
}

/// The quota the catalogue runs the subject with (the scenarios' own, unless its file names
/// one): what the calibration measures it at.
pub fn catalogue_quota(file: &SubjectFile) -> Quota {
    file.quota.unwrap_or(scenario::QUOTA)
}

/// A subject file calibrated for the catalogue's quota: its tolerance raised to what its
/// refill measured.
pub fn calibrated(file: &SubjectFile) -> Arc<SubjectFile> {
    let file = Arc::new(file.clone());
    let tolerance = calibrate::tolerance(&file, file.promise, catalogue_quota(&file));
    let mut out = (*file).clone();
    out.tolerance = tolerance;
    Arc::new(out)
}

/// Every applicable check searched on every quota of [`search_quotas`]: exact clocks first;
/// for a subject fed its caller's clock, then instances whose clocks disagree, where the bound
/// is at stake (on each request's own clock, and in true time for the clock trust).
pub fn searches(file: &Arc<SubjectFile>, cases: u32, seed: u64) -> Vec<verdicts::Searched> {
    let quotas = search_quotas(file);
    let mut out = Vec::new();
    for check in checks::CheckKind::ALL {
        if !check.applies(file) {
            continue;
        }
        // Exact clocks cannot break the clock trust that the bound does not already show.
        let exact_too = check != checks::CheckKind::ClockTrust;
        let skew_too = check.skewed_search(file);
        let found = quotas
            .iter()
            .map(|&quota| {
                let held = checks::Held {
                    promise: file.promise,
                    quota,
                    tolerance: calibrate::tolerance(file, file.promise, quota),
                };
                let exact = exact_too.then(|| search::search(file, &held, check, cases, seed, false)).flatten();
                let found =
                    exact.or_else(|| skew_too.then(|| search::search(file, &held, check, cases, seed, true)).flatten());
                (quota, found)
            })
            .collect();
        out.push(verdicts::Searched { check, cases, found });
    }
    out
}

/// Everything `cargo xtask verify` says about one (calibrated) subject: the searches, its
/// profile, and what `campaign` ran with it, as one verdict per promise. A counterexample
/// the search found replays at exact times on the model whatever backend the scenarios ran
/// on, so its replay command names no backend; a scenario run's names its own.
pub fn report(file: &Arc<SubjectFile>, campaign: &Campaign, cases: u32, seed: u64) -> SubjectReport {
    let quota = catalogue_quota(file);
    let searched = searches(file, cases, seed);
    let measured = profile::measure(file, file.promise, quota);
    let runs: Vec<&RunResult> = campaign.results.iter().filter(|r| r.algorithm == file.name).collect();
    let swept: Vec<(&RunResult, Option<i64>)> =
        campaign.swept.iter().filter(|(r, _)| r.algorithm == file.name).map(|(r, s)| (r, *s)).collect();
    verdicts::report(&verdicts::Evidence {
        file,
        quota,
        searched: &searched,
        runs: &runs,
        swept: &swept,
        measured: &measured,
        verify_command: format!("cargo xtask verify {}", file.path.display()),
    })
}

/// The library's algorithm a subject's promise names, to show beside it.
pub fn beside(promise: Promise) -> Option<redis_ratelimit::Algorithm> {
    promise.twin()
}

/// Checks what only running the script can tell, before anything runs for real: the script
/// compiles (`SCRIPT LOAD` on the model), and its first reply has the shape the `[reply]`
/// rules read (a table where a rule names a position, a scalar where none does). A script that
/// raises an error at run time is not refused here: that is a finding, with its replay.
pub fn preflight(file: SubjectFile) -> Result<SubjectFile, FileError> {
    let err = |field: &str, message: String| FileError { file: file.path.clone(), field: field.to_owned(), message };
    let model = ModelHandle::new(ManualServerClock::from_millis(sim_engine::simclock::EPOCH_MS));
    if let Reply::Error(e) = model.call(&[b"SCRIPT", b"LOAD", file.source.as_bytes()]) {
        return Err(err("script", format!("does not compile: {}", String::from_utf8_lossy(&e))));
    }
    let first = direct::Direct::new(Arc::new(file.clone()), catalogue_quota(&file)).first_reply();
    if let Some(reply) = first {
        for (field, at) in file.reply.positions() {
            let picked = Scalar::pick(&reply, at);
            let shape = match (&reply, at) {
                (redis::Value::Array(items), Some(i)) if i > items.len() && field != "reply.allowed" => None,
                (_, Some(i)) if picked == Scalar::Array => {
                    Some(format!("at = {i}, but the script's reply is not a table: {}", shown(&reply)))
                }
                (redis::Value::Array(_), None) => Some(format!(
                    "has no `at`, but the script replies with a table: {}; name a position (1-based)",
                    shown(&reply)
                )),
                _ => None,
            };
            if let Some(message) = shape {
                return Err(err(field, message));
            }
        }
    }
    Ok(file)
}

fn shown(v: &redis::Value) -> String {
    let mut text = format!("{v:?}");
    if text.len() > 120 {
        let mut cut = 120;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}
