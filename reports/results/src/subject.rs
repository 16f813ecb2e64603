//! What a verified subject came to, in words: the lines `cargo xtask verify` prints and the
//! rows the report's "Verified subjects" section shows. One wording, two renderings.

use std::fmt::Write;

use crate::schema::SubjectReport;
use crate::schema::Verdict;

/// The profile as labelled rows: what it delivers, how far it bursts and starves, how it
/// stands under the race and clock skew, what it leaves in Redis.
pub fn profile_rows(r: &SubjectReport) -> Vec<(&'static str, String)> {
    let p = &r.profile;
    if !p.service_runs.is_empty() {
        return service_rows(p);
    }
    if !p.in_flight_runs.is_empty() {
        return in_flight_rows(p);
    }
    let mut rows = Vec::new();
    let curve: Vec<String> = p.rate_curve.iter().map(|pt| format!("{}x -> {:.2}x", pt.offered, pt.delivered)).collect();
    rows.push(("delivered / offered", curve.join(", ")));
    if !p.exact_curve.is_empty() {
        let exact: Vec<String> = p.exact_curve.iter().map(|pt| format!("{:.2}x", pt.delivered)).collect();
        rows.push(("an exact limiter", format!("delivers {} from the same requests", exact.join(", "))));
    }
    rows.push(("largest burst at once", format!("{} (the promise allows {})", p.largest_burst, p.burst_bound)));
    let exact = p.exact_longest_gap_ms.map_or(String::new(), |ms| format!("; an exact limiter: {ms} ms"));
    rows.push(("longest starvation", format!("{} ms at 1.5x the rate{exact}", p.longest_starvation_ms)));
    if let Some(x) = p.race_ratio {
        rows.push(("under the race", format!("{x:.2}x what an exact limiter admits, 32 instances on one key")));
    }
    let skew = match (p.breaks_at_skew_ms, r.time.as_str(), p.race_ratio.is_some()) {
        (Some(ms), ..) => format!("exceeds its bound in true time from {ms} ms of skew between instances"),
        (None, "server", _) => "reads Redis's clock: instances' clocks do not enter".to_owned(),
        (None, _, true) => "held its bound at every skew swept (up to 4000 ms)".to_owned(),
        (None, _, false) => "not swept (--no-sweeps or --scenario)".to_owned(),
    };
    rows.push(("clock skew", skew));
    let ttl = if p.keys_without_ttl == 0 {
        "none".to_owned()
    } else {
        format!("{} (e.g. {})", p.keys_without_ttl, p.keys_without_ttl_sample.join(", "))
    };
    rows.push(("keys without a TTL", ttl));
    rows.push(("memory per key", format!("{:.0} bytes on the model", p.memory_per_key_bytes)));
    rows
}

/// A service's profile: measured in real time on its own instances, not on the model.
fn service_rows(p: &crate::schema::Profile) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let curve: Vec<String> = p.rate_curve.iter().map(|pt| format!("{}x -> {:.2}x", pt.offered, pt.delivered)).collect();
    rows.push(("delivered / offered", curve.join(", ")));
    rows.push(("largest burst at once", format!("{} (the promise allows {})", p.largest_burst, p.burst_bound)));
    rows.push(("longest starvation", format!("{} ms at 1.5x the rate", p.longest_starvation_ms)));
    if let Some(x) = p.race_ratio {
        rows.push(("under the race", format!("{x:.2}x what the promise allows, every instance on one key")));
    }
    let ttl = if p.keys_without_ttl == 0 {
        "none".to_owned()
    } else {
        format!("{} (e.g. {})", p.keys_without_ttl, p.keys_without_ttl_sample.join(", "))
    };
    rows.push(("keys without a TTL", ttl));
    for run in &p.service_runs {
        rows.push((
            "scenario",
            format!(
                "{:<13} {} requests: {} admitted, {} denied, {} degraded, {} unanswered; worst {} where {:.1} allowed; \
                 slowest {:.0} ms",
                run.scenario,
                run.requests,
                run.admitted,
                run.denied,
                run.degraded,
                run.unanswered,
                run.worst_admitted,
                run.worst_allowed,
                run.slowest_ms
            ),
        ));
    }
    rows
}

/// An in-flight limit's profile: per scenario and seed, how its acquires were answered.
fn in_flight_rows(p: &crate::schema::Profile) -> Vec<(&'static str, String)> {
    p.in_flight_runs
        .iter()
        .map(|run| {
            (
                "scenario",
                format!(
                    "{} seed {}: {} acquires: {} held, {} refused ({} with fewer than {} slots possibly held), {} \
                     unanswered; at most {} at once where {} allowed; {} script errors",
                    run.scenario,
                    run.seed,
                    run.acquires,
                    run.held,
                    run.refused,
                    run.unexplained_refusals,
                    run.limit,
                    run.unanswered,
                    run.most_at_once,
                    run.allowed_at_once,
                    run.script_errors
                ),
            )
        })
        .collect()
}

/// How many of its checks broke ("expected", the price of a design such as trusting the
/// caller's clock, is shown but is no broken promise).
pub fn broken(r: &SubjectReport) -> usize {
    r.verdicts.iter().filter(|v| v.verdict == Verdict::Broken).count()
}

/// How many of its checks could not be judged on the model.
pub fn not_judged(r: &SubjectReport) -> usize {
    r.verdicts.iter().filter(|v| v.verdict == Verdict::NotJudged).count()
}

/// The one-line conclusion.
pub fn conclusion(r: &SubjectReport) -> String {
    match (broken(r), not_judged(r)) {
        (0, 0) => "every promise held".to_owned(),
        (0, n) => format!("{n} check(s) could not be judged on the Redis model; nothing broke"),
        (b, 0) => format!("{b} promise(s) broken"),
        (b, n) => format!("{b} promise(s) broken; {n} check(s) could not be judged on the Redis model"),
    }
}

/// What it promises and how it keeps time, in one line.
pub fn headline(r: &SubjectReport) -> String {
    let tolerance = if r.tolerance.is_empty() { String::new() } else { format!("; judged with {}", r.tolerance) };
    format!("promises {}, {} time{tolerance}; quota {}", r.promise, r.time, r.quota)
}

/// The report as the terminal shows it.
pub fn render(r: &SubjectReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n== {} ({}) ==", r.name, r.file);
    let _ = writeln!(out, "{}", headline(r));
    for v in &r.verdicts {
        let word = if v.verdict == Verdict::Broken { "BROKEN" } else { v.verdict.word() };
        let _ = writeln!(out, "  {:<24} {:<8} {}", v.check, word, v.detail);
        for line in v.evidence.lines() {
            let _ = writeln!(out, "  {:<24}          {line}", "");
        }
        if !v.replay.is_empty() {
            let _ = writeln!(out, "  {:<24}          replay: {}", "", v.replay);
        }
    }
    let _ = writeln!(out, "profile:");
    for (label, value) in profile_rows(r) {
        let _ = writeln!(out, "  {label:<24} {value}");
    }
    let _ = writeln!(out, "verdict: {}", conclusion(r));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Profile, VerdictLine};

    fn subject(verdict: Verdict) -> SubjectReport {
        SubjectReport {
            name: "mine".into(),
            file: "mine.toml".into(),
            promise: "token-bucket".into(),
            time: "client".into(),
            quota: "10 per 1000 ms, burst 10".into(),
            verdicts: vec![VerdictLine {
                check: "bound".into(),
                verdict,
                detail: "admitted 11".into(),
                evidence: "t  admitted\n0  11".into(),
                replay: "cargo xtask verify mine.toml --replay \"0:11\"".into(),
                witness: None,
            }],
            profile: Profile {
                keys_without_ttl: 1,
                keys_without_ttl_sample: vec!["rl:x".into()],
                ..Profile::default()
            },
            ..SubjectReport::default()
        }
    }

    #[test]
    fn a_broken_check_prints_shouting_with_its_evidence_and_replay() {
        let text = render(&subject(Verdict::Broken));
        assert!(text.contains("bound                    BROKEN   admitted 11"), "{text}");
        assert!(text.contains("          0  11\n"), "{text}");
        assert!(text.contains("replay: cargo xtask verify mine.toml"), "{text}");
        assert!(text.contains("keys without a TTL       1 (e.g. rl:x)"), "{text}");
        assert!(text.ends_with("verdict: 1 promise(s) broken\n"), "{text}");
        assert!(text.contains("not swept"), "client time without a sweep says so: {text}");
    }

    #[test]
    fn a_held_subject_concludes_so() {
        let r = subject(Verdict::Held);
        assert_eq!(conclusion(&r), "every promise held");
        assert!(render(&r).contains("bound                    held     admitted 11"));
    }
}
