//! `cargo xtask verify` on concurrency subject files: a semaphore with leases and tokens keeps
//! its promise, the INCR/DECR counter breaks both halves of it, and a one-bug semaphore that
//! never sweeps ended leases loses dead holders' slots; each broken verdict replays from the
//! command it prints, and what cannot be verified this way is refused with a reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use results::{Results, SubjectReport, Verdict};
use sim_engine::in_flight::InFlightVariant;
use sim_engine::subject::SubjectFile;
use sim_verify as verify;

fn path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/subjects/in_flight").join(relative)
}

fn verified(file: &str) -> (SubjectReport, Vec<results::RunResult>) {
    let file = SubjectFile::load(&path(file)).and_then(verify::preflight).expect("a valid subject file");
    let v = verify::in_flight::verify(&Arc::new(file), &InFlightVariant::ALL, &[1, 2]).expect("verifies");
    (v.report, v.results)
}

fn verdicts(r: &SubjectReport) -> Vec<(&str, Verdict)> {
    r.verdicts.iter().map(|v| (v.check.as_str(), v.verdict)).collect()
}

#[test]
fn each_semaphore_is_judged_by_the_half_of_the_promise_its_design_breaks() {
    let held = Verdict::Held;
    let (lease, runs) = verified("lease_semaphore.toml");
    assert_eq!(
        verdicts(&lease),
        [("at most N at once", held), ("no slot past its lease", held), ("runs without errors", held)],
        "{lease:#?}"
    );
    // The library's limiter of the same N and lease ran beside it, in every run, and held.
    let library: Vec<_> = runs.iter().filter(|r| r.library).collect();
    assert_eq!(library.len(), 6);
    assert!(library.iter().all(|r| r.bound == Verdict::Held), "{library:#?}");
    let (counter, _) = verified("counter_semaphore.toml");
    let broken = Verdict::Broken;
    assert_eq!(
        verdicts(&counter),
        [("at most N at once", broken), ("no slot past its lease", broken), ("runs without errors", held)]
    );
    let at_most = &counter.verdicts[0];
    assert!(at_most.detail.starts_with("in-flight-double-release: "), "{}", at_most.detail);
    assert!(at_most.evidence.lines().count() > 5, "the holders working at once are shown:\n{}", at_most.evidence);
    let (unswept, _) = verified("unswept_semaphore.toml");
    assert_eq!(
        verdicts(&unswept),
        [("at most N at once", held), ("no slot past its lease", broken), ("runs without errors", held)]
    );
    let leak = &unswept.verdicts[1];
    assert!(leak.detail.contains("slots leaked past their 400 ms lease"), "{}", leak.detail);
    assert!(leak.evidence.contains("died at"), "the dead holder is shown:\n{}", leak.evidence);
    // The profile says what the verdicts say.
    let unexplained: u64 = unswept.profile.in_flight_runs.iter().map(|r| r.unexplained_refusals).sum();
    assert!(unexplained > 0 && lease.profile.in_flight_runs.iter().all(|r| r.unexplained_refusals == 0));
    assert!(counter.profile.in_flight_runs.iter().any(|r| r.most_at_once > r.allowed_at_once));
}

/// The installed command line, `ratelimit-lab verify`, as a user runs it.
fn verify_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit-lab"));
    cmd.env_remove(results::command::INVOKED_AS_ENV).arg("verify");
    cmd
}

#[test]
fn a_broken_verdict_replays_from_its_printed_command_and_what_cannot_run_is_refused() {
    let (counter, _) = verified("counter_semaphore.toml");
    let at_most = &counter.verdicts[0];
    let args = at_most.replay.strip_prefix("ratelimit-lab verify ").expect("a verify command");
    let dir = tempfile::tempdir().expect("a directory");
    let out = verify_command()
        .args(args.split_whitespace())
        .args(["--format", "json", "--out"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed: Results = serde_json::from_slice(&out.stdout).expect("the results JSON on stdout");
    let again = &replayed.verify[0].verdicts[0];
    assert_eq!((again.verdict, &again.detail, &again.replay), (Verdict::Broken, &at_most.detail, &at_most.replay));

    let refused = |extra: &[&str], expected: &str| {
        let out = verify_command().arg(path("lease_semaphore.toml")).args(extra).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    };
    let rate = Path::new(env!("CARGO_MANIFEST_DIR")).join("subjects/adr002.toml");
    refused(&[rate.to_str().expect("a path")], "verified by separate commands");
    refused(&["--scenario", "baseline"], "runs the in-flight scenarios");
    refused(&["--backend", "redis"], "runs on the model");
    refused(&["--replay", "0:1"], "replays with --scenario and --seed");
    // And a rate limit's file is not run through the in-flight scenarios.
    let out = verify_command().arg(&rate).args(["--scenario", "in-flight-crashes"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a rate limit's scenario"));
}
