//! `cargo xtask verify SUBJECT.toml...`: any rate-limiter script, described by a subject file,
//! judged by its promise.
//!
//! For each subject the verifier
//! 1. looks at what the script shows of itself ([`calibrate`]): whether it decides exact ties
//!    both ways (a float computation's rounding, the one thing forgiven without a
//!    declaration) and whether it hands out its refill in steps (named, with the line that
//!    would declare it, when the bound breaks);
//! 2. searches generated schedules on the in-process model at exact times for a schedule that
//!    breaks a check, then climbs from the closest ones ([`search`], [`checks`]), shrunk to
//!    the shortest that still does;
//! 3. runs the scenario catalogue and the race and skew sweeps with it beside the library's
//!    algorithms (the simulator, on the model or on real Redis), which adds what one key at
//!    exact times cannot show: concurrent instances, skewed clocks, partitions, outages,
//!    restarts;
//! 4. measures its profile ([`profile`]), which must agree with the verdicts: a script that
//!    delivers less than an exact limiter from the same requests loses capacity;
//!
//! and prints one verdict per promise with its evidence and replay command ([`verdicts`]).

#![forbid(unsafe_code)]

pub mod calibrate;
pub mod checks;
pub mod direct;
pub mod in_flight;
pub mod profile;
pub mod schedule;
pub mod search;
pub mod verdicts;

use std::sync::Arc;
use std::time::Duration;

use redis_ratelimit::Quota;

use results::{RunResult, SubjectReport};

use redis_model::{ManualServerClock, ModelHandle, Reply};
use sim_engine::promise::Promise;
use sim_engine::run::Campaign;
use sim_engine::scenario;
use sim_engine::subject::reply::Scalar;
use sim_engine::subject::{FileError, SubjectFile};

use checks::{CheckKind, Held};
use schedule::{Ran, Schedule};

/// The quotas the search drives a subject with: the one its file names, or three that differ
/// in what a bug could confuse (burst equal to, above and below the limit; a period of one and
/// of two seconds). Whole seconds and whole units per second, as many scripts' callers require
/// (a script that keeps its windows in whole seconds is right for them; a file whose script is
/// meant for other periods names one in `[quota]`), and each unit due on a whole millisecond,
/// so a request can sit exactly on its edge.
pub fn search_quotas(file: &SubjectFile) -> Vec<Quota> {
    match file.quota {
        Some(q) => vec![q],
        None => vec![
            scenario::QUOTA,
            Quota::new(10, Duration::from_secs(1)).with_burst(30),
            Quota::new(4, Duration::from_secs(2)).with_burst(2),
        ],
    }
}

/// The quota the catalogue runs the subject with (the scenarios' own, unless its file names
/// one): what the profile measures it at.
pub fn catalogue_quota(file: &SubjectFile) -> Quota {
    file.quota.unwrap_or(scenario::QUOTA)
}

/// How the subject is held with `quota`: what its file declares, and how it decides exact ties
/// over the search's quotas (the same for every check, so a replay holds it exactly as the
/// search did).
pub fn held(file: &Arc<SubjectFile>, quota: Quota) -> Held {
    let mut quotas = search_quotas(file);
    if !quotas.contains(&catalogue_quota(file)) {
        quotas.push(catalogue_quota(file));
    }
    let unit = calibrate::time_unit(file, catalogue_quota(file));
    Held::of(file, quota, calibrate::ties(file, &quotas, unit), unit)
}

/// Every applicable check searched on every quota of [`search_quotas`]: exact clocks first;
/// for a subject fed its caller's clock, then instances whose clocks disagree, where the bound
/// is at stake (on each request's own clock, and in true time for the clock trust).
pub fn searches(file: &Arc<SubjectFile>, cases: u32, seed: u64) -> Vec<verdicts::Searched> {
    let quotas = search_quotas(file);
    let helds: Vec<Held> = quotas.iter().map(|&q| held(file, q)).collect();
    let mut out = Vec::new();
    for check in CheckKind::ALL {
        if !check.applies(file) {
            continue;
        }
        // Exact clocks cannot break the clock trust that the bound does not already show.
        let exact_too = check != CheckKind::ClockTrust;
        let skew_too = check.skewed_search(file);
        let found = helds
            .iter()
            .map(|held| {
                let mut outcome = search::Outcome::default();
                if exact_too {
                    outcome = search::search(file, held, check, cases, seed, false);
                }
                if outcome.found.is_none() && outcome.unknown_command.is_none() && skew_too {
                    let skewed = search::search(file, held, check, cases, seed, true);
                    let worst = match (outcome.worst_ratio, skewed.worst_ratio) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    outcome = search::Outcome { worst_ratio: worst, ..skewed };
                }
                (held.quota, outcome)
            })
            .collect();
        out.push(verdicts::Searched { check, cases, found });
    }
    out
}

/// The profile's shortfall (the subject delivered less than an exact limiter from the same
/// requests) as a lost-capacity counterexample: the denial in that schedule an exact limiter
/// fed the same admissions would have admitted, on the shortest stretch before it that still
/// shows it.
fn shortfall_evidence(file: &Arc<SubjectFile>, measured: &profile::Measured) -> Option<search::Found> {
    let (_, schedule) = measured.shortfall.as_ref()?;
    let quota = catalogue_quota(file);
    let held = held(file, quota);
    let ran = Ran::new(&mut direct::Direct::new(file.clone(), quota), schedule);
    let violation = checks::only(&held, &ran, CheckKind::LostCapacity)?;
    // Only what led up to the denial matters; the last few periods before it usually show it.
    let events = &schedule.0[..=violation.at];
    let t = events[violation.at].t_ms();
    let stretch = (1..=8)
        .map(|periods| {
            let from = t.saturating_sub(periods * quota.period_ms());
            let origin = events.iter().map(schedule::Event::t_ms).find(|&s| s >= from).unwrap_or(0);
            // Moved to start at 0 on the same millisecond of the period, so windows named by
            // the time fall where they fell.
            let back = origin - origin % quota.period_ms().max(1);
            Schedule(events.iter().filter(|e| e.t_ms() >= from).map(|e| e.moved(-(back as i64))).collect())
        })
        .find(|s| search::judge(file, &held, CheckKind::LostCapacity, s).is_some());
    // A shortfall only the whole trickle shows (each denial a tie forgave) is shown by it whole.
    let shown = match stretch {
        Some(stretch) => search::shrink(file, &held, CheckKind::LostCapacity, stretch),
        None => schedule.clone(),
    };
    let (violation, ran) = search::judge(file, &held, CheckKind::LostCapacity, &shown)?;
    Some(search::Found { quota, violation, ran, skewed: false })
}

/// Everything `cargo xtask verify` says about one subject: the searches, its profile, and
/// what `campaign` ran with it, as one verdict per promise. A counterexample the search found
/// replays at exact times on the model whatever backend the scenarios ran on, so its replay
/// command names no backend; a scenario run's names its own.
pub fn report(file: &Arc<SubjectFile>, campaign: &Campaign, cases: u32, seed: u64, backend: &str) -> SubjectReport {
    let quota = catalogue_quota(file);
    let searched = searches(file, cases, seed);
    let measured = profile::measure(file, file.promise, quota);
    let lost_found = searched.iter().any(|s| s.check == CheckKind::LostCapacity && s.first().is_some());
    let shortfall = if lost_found { None } else { shortfall_evidence(file, &measured) };
    let design_step = calibrate::suggested_resolution(file, quota).map(|(_, words)| words);
    let runs: Vec<&RunResult> = campaign.results.iter().filter(|r| r.subject == file.name).collect();
    let swept: Vec<(&RunResult, Option<i64>)> =
        campaign.swept.iter().filter(|(r, _)| r.subject == file.name).map(|(r, s)| (r, *s)).collect();
    verdicts::report(&verdicts::Evidence {
        file,
        quota,
        searched: &searched,
        runs: &runs,
        swept: &swept,
        measured: &measured,
        shortfall: shortfall.as_ref(),
        ties: held(file, quota).ties,
        design_step: design_step.as_deref(),
        verify_command: format!("{} {}", results::command::command("verify"), file.path.display()),
        backend,
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
    if let Some(call) = &file.in_flight {
        if let Reply::Error(e) = model.call(&[b"SCRIPT", b"LOAD", call.release_source.as_bytes()]) {
            return Err(err("release.script", format!("does not compile: {}", String::from_utf8_lossy(&e))));
        }
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
