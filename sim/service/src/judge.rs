//! The checks of a service's runs, on intervals: each decision happened somewhere between the
//! instant its request left and the instant its answer arrived, and a promise is broken only
//! where no placement inside those intervals explains what was admitted
//! ([`sim_engine::bound::worst`], the script verifier's own bound check).
//!
//! - **bound**: the promise over every run's admissions by Redis (answers a failure policy gave,
//!   or that crossed a fault of their instance, are the failure policy's to judge). A restart
//!   of Redis without its data is granted one capacity more, as the script verifier grants it.
//! - **every request answered**: without faults, each answer is one the file's `[answer]`
//!   explains, within the patience.
//! - **no lost capacity**: under a trickle at 0.9x the rate, at most 5% of the requests (and at
//!   least one) denied.
//! - **failure policy**: while Redis cannot be asked, from one timeout after the fault began to
//!   its end, the affected instances answer as the file declares, within the timeout and a
//!   second, marked degraded where the file says how they mark it.
//! - **retry-after honest**: an obedient client that waits the Retry-After of the race's last
//!   denial is admitted.
//! - **beyond the clock trust**: for a service on its instances' own clocks, the skewed run:
//!   over its bound in true time is the price of those clocks (expected) while some reading of
//!   them explains what it admitted, and broken where none does. A service on Redis's clock is
//!   held to its bound on skewed clocks too.

use std::fmt::Write;

use results::{Verdict, Witness, WitnessFault, WitnessRequest};
use sim_engine::bound::{self, Admission, Worst};
use sim_engine::promise::Promise;

use crate::ask::{Answer, Said};
use crate::file::{Clock, Policy, ServiceFile};
use crate::scenario::{self, Load, Run};

/// A check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Bound,
    Answered,
    Capacity,
    FailurePolicy,
    RetryAfter,
    ClockTrust,
}

impl Check {
    /// Every check, in the order verdicts print.
    pub const ALL: [Check; 6] =
        [Check::Bound, Check::ClockTrust, Check::Answered, Check::Capacity, Check::FailurePolicy, Check::RetryAfter];

    /// Its name in verdicts.
    pub fn name(self) -> &'static str {
        match self {
            Check::Bound => "bound",
            Check::Answered => "every request answered",
            Check::Capacity => "no lost capacity",
            Check::FailurePolicy => "failure policy",
            Check::RetryAfter => "retry-after honest",
            Check::ClockTrust => "beyond the clock trust",
        }
    }
}

/// One check's finding over one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Held, broken or n/a.
    pub verdict: Verdict,
    /// What it rests on.
    pub detail: String,
    /// For a break: the answers that show it, as a table.
    pub evidence: String,
    /// For a break: the same answers on a timeline, for the report's chart.
    pub witness: Option<Witness>,
}

impl Finding {
    fn held(detail: String) -> Finding {
        Finding::said(Verdict::Held, detail)
    }

    fn said(verdict: Verdict, detail: String) -> Finding {
        Finding { verdict, detail, evidence: String::new(), witness: None }
    }

    fn broken(detail: String, (evidence, witness): (String, Option<Witness>)) -> Finding {
        Finding { verdict: Verdict::Broken, detail, evidence, witness }
    }
}

/// `check` over `run`; None where it does not apply to the run.
pub fn judge(file: &ServiceFile, run: &Run, check: Check) -> Option<Finding> {
    match check {
        Check::Bound => bound_check(file, run),
        Check::Answered => answered(run),
        Check::Capacity => capacity(run),
        Check::FailurePolicy => failure_policy(file, run),
        Check::RetryAfter => retry_after(file, run),
        Check::ClockTrust => clock_trust(file, run),
    }
}

/// Whether `a` crossed its instance's fault: the failure policy's to judge, not the bound's.
fn crossed_fault(run: &Run, a: &Answer) -> bool {
    run.fault.is_some_and(|f| f.fault.affects(a.instance) && a.sent_us <= f.to_us && a.answered_us >= f.from_us)
}

/// The admissions the bound judges, as intervals in ms from the run's start (a whole number of
/// periods since the epoch, so aligned windows stay aligned).
fn admissions(run: &Run) -> Vec<Admission> {
    let ms = |us: u64| us.saturating_sub(run.start_us);
    run.answers
        .iter()
        .enumerate()
        .filter(|(_, a)| a.admitted() && !a.degraded && !crossed_fault(run, a))
        .map(|(id, a)| Admission { lo: ms(a.sent_us) / 1000, hi: ms(a.answered_us).div_ceil(1000), units: 1, id })
        .collect()
}

/// The worst interval of `run` against the promise.
pub fn worst(file: &ServiceFile, run: &Run) -> Option<Worst> {
    // Redis lost its data once: one capacity more, as for a script.
    let allowance = match run.fault {
        Some(f) if f.fault == scenario::Fault::RedisDown => scenario::capacity(file),
        _ => 0,
    };
    bound::worst(file.promise, &file.quota, &mut admissions(run), allowance, file.tolerance)
}

fn bound_check(file: &ServiceFile, run: &Run) -> Option<Finding> {
    // Skewed clocks of a service that keeps its own time are the clock trust's to judge.
    if !run.skew_ms.is_empty() && file.start.clock == Clock::Service {
        return None;
    }
    let w = worst(file, run)?;
    let detail = format!("{} admitted where {:.1} are allowed, {}", w.admitted, w.allowed, w.within);
    Some(if w.broken {
        let aligned =
            (file.promise == Promise::FixedWindow { first_hit: false }).then(|| file.quota.period_ms().max(1));
        let ids = witness(&admissions(run), &w, aligned);
        Finding::broken(detail, shown(run, &ids, Some(file)))
    } else {
        Finding::held(detail)
    })
}

/// A service on its instances' clocks, skewed: what it admitted beyond its bound in true time
/// is the price of trusting those clocks (expected) as long as some reading of them explains
/// it, and broken where none does, as the script verifier judges callers' clocks. Each
/// admission may have been counted at any reading from its own instance's clock (or the true
/// time) when it was sent to the furthest-ahead clock (or the true time) when it was answered.
fn clock_trust(file: &ServiceFile, run: &Run) -> Option<Finding> {
    if run.skew_ms.is_empty() || file.start.clock != Clock::Service {
        return None;
    }
    let true_time = worst(file, run)?;
    let period = file.quota.period_ms().max(1) as i64;
    let (behind, ahead) = (run.skew_ms.iter().copied().min()?.min(0), run.skew_ms.iter().copied().max()?.max(0));
    // Whole periods before the run, so no reading is negative and windows stay aligned.
    let zero = ((-behind).div_euclid(period) + 1) * period;
    let at = |us: u64, off: i64| (zero + (us.saturating_sub(run.start_us) / 1000) as i64 + off) as u64;
    let mut readings: Vec<Admission> = run
        .answers
        .iter()
        .enumerate()
        .filter(|(_, a)| a.admitted() && !a.degraded && !crossed_fault(run, a))
        .map(|(id, a)| Admission {
            lo: at(a.sent_us, run.skew_ms[a.instance].min(0)),
            hi: at(a.answered_us, ahead) + 1,
            units: 1,
            id,
        })
        .collect();
    let beyond = bound::beyond_clock_trust(file.promise, &file.quota, &mut readings, 0, file.tolerance, zero as u64)?;
    let clocks = format!("clocks off by {:?} ms", run.skew_ms);
    let in_true_time =
        format!("{} admitted where {:.1} are allowed in true time", true_time.admitted, true_time.allowed);
    Some(if beyond.broken {
        let ids = witness(&readings, &beyond, None);
        Finding::broken(
            format!(
                "{clocks}: {} admitted where {:.1} are allowed {}: no reading of the clocks explains it",
                beyond.admitted, beyond.allowed, beyond.within
            ),
            shown(run, &ids, Some(file)),
        )
    } else if true_time.broken {
        Finding::said(
            Verdict::Expected,
            format!("{clocks}: {in_true_time}, the price of deciding by the instances' clocks"),
        )
    } else {
        Finding::held(format!("{clocks}: {in_true_time}"))
    })
}

fn answered(run: &Run) -> Option<Finding> {
    if run.fault.is_some() {
        return None;
    }
    let failed: Vec<usize> =
        run.answers.iter().enumerate().filter(|(_, a)| matches!(a.said, Said::Error(_))).map(|(i, _)| i).collect();
    let n = run.answers.len();
    Some(if failed.is_empty() {
        Finding::held(format!("{n} of {n} answered"))
    } else {
        let Said::Error(first) = &run.answers[failed[0]].said else { unreachable!("filtered on errors") };
        Finding::broken(
            format!("{} of {n} requests got no answer the file explains; the first: {first}", failed.len()),
            shown(run, &failed, None),
        )
    })
}

fn capacity(run: &Run) -> Option<Finding> {
    let Load::Steady { times_rate } = run.scenario.load else { return None };
    if times_rate >= 1.0 || run.fault.is_some() {
        return None;
    }
    let n = run.answers.len();
    let refused: Vec<usize> = run.answers.iter().enumerate().filter(|(_, a)| !a.admitted()).map(|(i, _)| i).collect();
    let allowed = (n / 20).max(1);
    let detail = format!("{} of {n} refused at {times_rate}x the rate (at most {allowed} may be)", refused.len());
    Some(if refused.len() > allowed {
        Finding::broken(detail, shown(run, &refused, None))
    } else {
        Finding::held(detail)
    })
}

fn failure_policy(file: &ServiceFile, run: &Run) -> Option<Finding> {
    let window = run.fault?;
    let timeout_us = file.failure.map_or(1_000_000, |f| f.timeout.as_micros() as u64);
    // From one timeout (and a margin) after the fault began: by then every instance knows.
    let from = window.from_us + timeout_us + 250_000;
    let slow_us = timeout_us + 1_000_000;
    // Sent once the fault was known, and answered while it lasted (an answer after its end may
    // be Redis's own), or not within the timeout and a second (a wait the policy should end).
    let judged: Vec<usize> = run
        .answers
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            window.fault.affects(a.instance)
                && (from..window.to_us).contains(&a.sent_us)
                && (a.answered_us < window.to_us || a.answered_us - a.sent_us > slow_us)
        })
        .map(|(i, _)| i)
        .collect();
    let count = |f: &dyn Fn(&Answer) -> bool| judged.iter().filter(|&&i| f(&run.answers[i])).count();
    let (admitted, errors, marked) =
        (count(&|a| a.admitted()), count(&|a| matches!(a.said, Said::Error(_))), count(&|a| a.degraded));
    let seen = format!(
        "{}: {} requests, {admitted} admitted, {} denied, {errors} unanswered, {marked} marked degraded",
        window.fault.describe(),
        judged.len(),
        judged.len() - admitted - errors
    );
    let Some(failure) = file.failure else {
        return Some(Finding::said(Verdict::NotApplicable, format!("no [failure] declared; {seen}")));
    };
    if judged.is_empty() {
        return None;
    }
    let marks = file.answer.degraded_header.is_some() || !file.answer.degraded.is_empty();
    let mut wrong = Vec::new();
    let mut why = String::new();
    for &i in &judged {
        let a = &run.answers[i];
        let bad = if matches!(a.said, Said::Error(_)) {
            Some("got no answer")
        } else if a.answered_us - a.sent_us > slow_us {
            Some("waited longer than the declared timeout and a second")
        } else if marks && !a.degraded {
            Some("was not marked degraded")
        } else {
            match (failure.policy, a.admitted()) {
                (Policy::FailOpen, false) => Some("was denied under fail-open"),
                (Policy::FailClosed, true) => Some("was admitted under fail-closed"),
                _ => None,
            }
        };
        if let Some(b) = bad {
            if wrong.is_empty() {
                why = b.to_owned();
            }
            wrong.push(i);
        }
    }
    if let Policy::LocalBudget { limit, period_ms } = failure.policy {
        let span_ms = (window.to_us - from) / 1000;
        let most = limit * (span_ms.div_ceil(period_ms) + 1);
        let instances = run.answers.iter().map(|a| a.instance).max().unwrap_or(0) + 1;
        for instance in (0..instances).filter(|&i| window.fault.affects(i)) {
            let theirs: Vec<usize> = judged
                .iter()
                .copied()
                .filter(|&i| run.answers[i].instance == instance && run.answers[i].admitted())
                .collect();
            if theirs.len() as u64 > most && wrong.is_empty() {
                why = format!("instance {instance} admitted {} where its local budget allows {most}", theirs.len());
                wrong = theirs;
            }
        }
    }
    Some(if wrong.is_empty() {
        Finding::held(format!("declared {}; {seen}", failure.policy.name()))
    } else {
        Finding::broken(
            format!(
                "declared {}; {} of {} answers: the first {why}; {seen}",
                failure.policy.name(),
                wrong.len(),
                judged.len()
            ),
            shown(run, &wrong, None),
        )
    })
}

fn retry_after(file: &ServiceFile, run: &Run) -> Option<Finding> {
    file.answer.retry_after_header.as_ref()?;
    if run.scenario.load != Load::Race {
        return None;
    }
    let Some(p) = &run.probe else {
        return Some(Finding::said(Verdict::NotApplicable, "no denial of the race carried a Retry-After".to_owned()));
    };
    let detail = format!("waited the last denial's Retry-After of {} s, then asked once more", p.waited_s);
    Some(if p.answer.admitted() {
        Finding::held(format!("{detail}: admitted"))
    } else {
        Finding::broken(format!("{detail}: {}", said(&p.answer)), (String::new(), None))
    })
}

fn said(a: &Answer) -> String {
    let word = match &a.said {
        Said::Admitted => "admitted".to_owned(),
        Said::Denied => "denied".to_owned(),
        Said::Error(e) => format!("no answer ({e})"),
    };
    if a.degraded {
        format!("{word}, degraded")
    } else {
        word
    }
}

/// The witness of `w`: every admission surely inside the span from its first to its last.
///
/// The checks walk admissions in order of their earliest moment and name the first and the
/// last of the stretch that broke; an aligned window counts only the admissions surely inside
/// it, so there the stretch keeps those.
fn witness(all: &[Admission], w: &Worst, aligned_ms: Option<u64>) -> Vec<usize> {
    let mut sorted: Vec<&Admission> = all.iter().collect();
    sorted.sort_by_key(|a| (a.lo, a.hi, a.id));
    let at = |id: usize| sorted.iter().position(|a| a.id == id);
    let (Some(first), Some(last)) = (at(w.first), at(w.last)) else { return Vec::new() };
    let window = |a: &Admission| aligned_ms.is_none_or(|t| a.lo / t == a.hi / t && a.lo / t == sorted[first].lo / t);
    sorted[first.min(last)..=last.max(first)].iter().filter(|a| window(a)).map(|a| a.id).collect()
}

/// The answers `ids` of `run` as the evidence shows them: a table, and a witness for the
/// report's timeline, drawn against the promise of `bound` when the break is the bound's.
fn shown(run: &Run, ids: &[usize], bound: Option<&ServiceFile>) -> (String, Option<Witness>) {
    let ms = |us: u64| us.saturating_sub(run.start_us) as f64 / 1000.0;
    let requests: Vec<WitnessRequest> = ids
        .iter()
        .map(|&i| {
            let a = &run.answers[i];
            WitnessRequest {
                instance: a.instance as u32,
                lo_ms: ms(a.sent_us),
                hi_ms: ms(a.answered_us),
                units: 1,
                admitted: a.admitted(),
            }
        })
        .collect();
    let admitted = requests.iter().filter(|r| r.admitted);
    let (from, to) =
        (admitted.clone().map(|r| r.lo_ms).fold(f64::MAX, f64::min), admitted.map(|r| r.hi_ms).fold(0.0, f64::max));
    let envelope = match bound {
        Some(f) if from <= to => bound::envelope(f.promise, &f.quota, from as u64, to.ceil() as u64),
        _ => Vec::new(),
    };
    let faults = run
        .fault
        .map(|f| WitnessFault { from_ms: ms(f.from_us), to_ms: ms(f.to_us), what: f.fault.describe() })
        .into_iter()
        .collect();
    let witness = Witness { requests, envelope, faults, offsets_ms: run.skew_ms.clone() };
    (table(run, ids), Some(witness))
}

/// The answers `ids` of `run` as a table, times in ms from the run's start.
pub fn table(run: &Run, ids: &[usize]) -> String {
    let mut out = String::from("request  instance  sent ms  answered ms  said\n");
    let ms = |us: u64| (us as i64 - run.start_us as i64) as f64 / 1000.0;
    const SHOWN: usize = 12;
    for &i in ids.iter().take(SHOWN) {
        let a = &run.answers[i];
        let _ = writeln!(
            out,
            "{i:>7}  {:>8}  {:>7.1}  {:>11.1}  {}",
            a.instance,
            ms(a.sent_us),
            ms(a.answered_us),
            said(a)
        );
    }
    if ids.len() > SHOWN {
        let _ = writeln!(out, "... and {} more", ids.len() - SHOWN);
    }
    if let Some(f) = run.fault {
        let _ = writeln!(out, "fault: {} from {:.1} to {:.1} ms", f.fault.describe(), ms(f.from_us), ms(f.to_us));
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests;
