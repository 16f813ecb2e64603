//! `cargo xtask verify` pinned: the library's own scripts wrapped as subject files keep every
//! promise; each one-bug mutant of them is caught by the check its bug breaks, with a replay
//! that reproduces it; ADR-002's script starves a trickle and breaks under clock skew; the
//! example subjects' verdicts are what the README says; wrong files are refused before
//! anything runs, naming the file, the field and the value.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use results::{SubjectReport, Verdict};
use sim::campaign::Campaign;
use sim::cli::RunArgs;
use sim_engine::subject::SubjectFile;
use sim_verify as verify;
use sim_verify::checks::CheckKind;
use sim_verify::schedule::Schedule;
use sim_verify::search;

use crate::support::on_two_threads;

/// Cases per check and quota: enough for every mutant here to be found (each is found within
/// the first few dozen), few enough for the test profile.
const CASES: u32 = 96;

fn path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn load(relative: &str) -> Arc<SubjectFile> {
    let file = SubjectFile::load(&path(relative)).and_then(verify::preflight).expect("a valid subject file");
    Arc::new(file)
}

/// The verdicts of the searches and the profile, without scenario runs.
fn searched(relative: &str) -> SubjectReport {
    searched_with(relative, 1)
}

/// [`searched`] with another seed.
fn searched_with(relative: &str, seed: u64) -> SubjectReport {
    verify::report(&load(relative), &Campaign::default(), CASES, seed, "model")
}

fn verdict<'a>(r: &'a SubjectReport, check: &str) -> &'a results::VerdictLine {
    r.verdicts.iter().find(|v| v.check == check).unwrap_or_else(|| panic!("no {check:?} verdict in {r:#?}"))
}

fn broken(r: &SubjectReport) -> Vec<&str> {
    r.verdicts.iter().filter(|v| v.verdict == Verdict::Broken).map(|v| v.check.as_str()).collect()
}

#[test]
fn the_library_scripts_as_subject_files_keep_every_promise_on_two_seeds() {
    let runs: Vec<(&str, u64)> = ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "gcra"]
        .into_iter()
        .flat_map(|n| [(n, 1), (n, 2)])
        .collect();
    on_two_threads(&runs, |&(name, seed)| {
        let r = searched_with(&format!("subjects/library/{name}.toml"), seed);
        assert!(broken(&r).is_empty(), "{name}: {:#?}", r.verdicts);
        assert!(r.verdicts.iter().filter(|v| v.verdict == Verdict::Held).count() >= 3, "{name}: {:#?}", r.verdicts);
        assert_eq!(r.profile.largest_burst, 20, "{name}");
        assert_eq!(r.profile.keys_without_ttl, 0, "{name}");
    });
}

/// Each mutant, the check its bug breaks, and whether only disagreeing clocks show it: one-bug
/// variants of the library's scripts (their edges moved one unit of the script's own time
/// each way, the time read in whole seconds, a late caller's time written back, and bugs
/// seen in the wild).
const MUTANTS: [(&str, &str, bool); 22] = [
    ("token_bucket_floored_refill", "no lost capacity", false),
    ("token_bucket_short_ttl", "bound", false),
    ("gcra_tolerance_plus_one", "bound", false),
    ("sliding_window_wrong_weight", "sliding-window estimate", false),
    ("fixed_window_client_window", "bound", true),
    ("token_bucket_time_written_back", "bound", true),
    ("fixed_window_edge_early", "bound", false),
    ("fixed_window_edge_late", "no lost capacity", false),
    ("fixed_window_whole_second", "no lost capacity", false),
    ("sliding_window_edge_early", "sliding-window estimate", false),
    ("sliding_window_edge_late", "sliding-window estimate", false),
    ("sliding_window_whole_second", "sliding-window estimate", false),
    ("sliding_log_edge_early", "bound", false),
    ("sliding_log_edge_late", "no lost capacity", false),
    ("sliding_log_whole_second", "bound", false),
    ("token_bucket_edge_early", "bound", false),
    ("token_bucket_edge_late", "no lost capacity", false),
    ("token_bucket_whole_second", "bound", false),
    ("gcra_edge_early", "bound", false),
    ("gcra_edge_late", "no lost capacity", false),
    ("gcra_whole_second", "bound", false),
    ("gcra_time_written_back", "bound", true),
];

#[test]
fn every_one_bug_mutant_is_caught_by_the_check_its_bug_breaks_on_two_seeds_and_its_replay_reproduces_it() {
    let runs: Vec<_> = MUTANTS.into_iter().flat_map(|(n, c, s)| [(n, c, s, 1), (n, c, s, 2)]).collect();
    on_two_threads(&runs, |&(name, check, skew_only, seed)| {
        let relative = format!("subjects/mutants/{name}.toml");
        let r = searched_with(&relative, seed);
        let v = verdict(&r, check);
        assert_eq!(v.verdict, Verdict::Broken, "{name}: {:#?}", r.verdicts);
        assert_eq!(v.detail.contains("clocks disagree"), skew_only, "{name}: {}", v.detail);
        assert!(v.evidence.contains("<- "), "{name}: the table marks the request: {}", v.evidence);
        // The replay command's schedule and quota break the same check again.
        let schedule = v.replay.split("--replay \"").nth(1).and_then(|s| s.strip_suffix('"')).expect("a replay");
        let quota = v.replay.split("--quota ").nth(1).and_then(|s| s.split(' ').next()).expect("a quota");
        let q: Vec<u64> = quota.split('/').map(|n| n.parse().expect("a number")).collect();
        let quota = redis_ratelimit::Quota::new(q[0], Duration::from_millis(q[1])).with_burst(q[2]);
        let file = load(&relative);
        let held = verify::held(&file, quota);
        let kind = CheckKind::ALL.into_iter().find(|k| k.name() == check).expect("a check");
        let replayed = search::judge(&file, &held, kind, &Schedule::parse(schedule).expect("parses"));
        assert!(replayed.is_some(), "{name}: the replay did not break {check} again: {}", v.replay);
        println!("verify: {name} caught by {check}");
    });
}

/// Each mutant is its library script with one bug: the header names the original, and apart
/// from it the two differ in one place only, marked `-- BUG:`. When a library script changes,
/// this says which mutant to make again.
#[test]
fn every_mutant_is_its_library_script_with_one_marked_change() {
    let dir = path("subjects/mutants");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the mutants directory") {
        let mutant = entry.expect("a directory entry").path();
        if mutant.extension().is_none_or(|e| e != "lua") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&mutant).expect("read the mutant");
        let (header, body) = text.split_once('\n').expect("a header line");
        let original = header
            .strip_prefix("-- MUTANT of ")
            .and_then(|h| h.split_once(':'))
            .map(|(file, _)| file)
            .unwrap_or_else(|| panic!("{}: the first line names no original: {header}", mutant.display()));
        let original = std::fs::read_to_string(path("..").join(original)).expect("the original script");
        let (a, b): (Vec<&str>, Vec<&str>) = (original.lines().collect(), body.lines().collect());
        let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
        let (removed, added) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
        assert!(
            removed.len() <= 2 && added.len() <= 3 && added.iter().any(|l| l.trim_start().starts_with("-- BUG:")),
            "{}: not one marked change from its original:\n- {}\n+ {}",
            mutant.display(),
            removed.join("\n- "),
            added.join("\n+ ")
        );
    }
    assert_eq!(seen, MUTANTS.len(), "one file per entry of MUTANTS");
}

#[test]
fn adr002_starves_a_steady_trickle_and_exceeds_its_bound_when_clocks_disagree() {
    let file = load("subjects/adr002.toml");
    let run = RunArgs::parse_from(["--scenario", "steady-trickle", "--no-sweeps"]).expect("valid options");
    let specs = sim::campaign::specs(&run, &[sim_engine::subject::Subject::Script(file.clone())]).expect("specs");
    let campaign = sim::campaign::run(&run, &[], &specs, &sim_engine::turmoil_run::run).expect("runs");
    let r = verify::report(&file, &campaign, CASES, 1, "model");
    let starved = verdict(&r, "no lost capacity");
    assert_eq!(starved.verdict, Verdict::Broken, "{:#?}", r.verdicts);
    assert!(
        starved.replay.starts_with(&format!("{} ", results::command::command("verify")))
            && starved.replay.contains("--replay"),
        "{starved:?}"
    );
    // Its skew break is the price of the caller's clock: shown with its replay, not a broken
    // promise; judged by the clocks it was given, its bound holds.
    let skew = verdict(&r, "clock trust");
    assert_eq!(skew.verdict, Verdict::Expected, "{:#?}", r.verdicts);
    assert!(skew.detail.contains("each caller's clock") && skew.replay.contains('@'), "{skew:?}");
    assert_eq!(verdict(&r, "bound").verdict, Verdict::Held, "{:#?}", r.verdicts);
    assert!(
        r.profile.longest_starvation_ms > 10 * r.profile.exact_longest_gap_ms.expect("a promise"),
        "{:?}",
        r.profile
    );
    let trickle = campaign.results.iter().find(|x| x.scenario == "steady-trickle").expect("ran");
    assert_eq!(trickle.liveness, Verdict::Broken, "{}", trickle.liveness_detail);
}

#[test]
fn the_example_subjects_verdicts_are_pinned() {
    // Correct on the times it is given: only the clock trust, which every caller-timed script
    // pays, is shown.
    let bucket = searched("examples/subjects/caller_timed_bucket.toml");
    assert!(broken(&bucket).is_empty(), "{:#?}", bucket.verdicts);
    assert_eq!(verdict(&bucket, "clock trust").verdict, Verdict::Expected, "{:#?}", bucket.verdicts);
    for held in ["examples/subjects/server_gcra.toml", "examples/subjects/incr_expire_window.toml"] {
        let r = searched(held);
        assert!(broken(&r).is_empty(), "{held}: {:#?}", r.verdicts);
        assert!(r.verdicts.iter().all(|v| v.check != "clock trust"), "{held} reads Redis's clock: {:#?}", r.verdicts);
    }
}

/// The library's scripts fed the caller's clock (as `TimeSource::Client` calls them) are exact
/// on the times they are given: under skew they pay the clock trust, and any break the search
/// finds is one beyond it, on state Redis expired on its own clock. The bucket breaks nothing.
/// The window's key outlives its end by one period on its writer's clock, so only clocks
/// further apart than a period break it. The log's key expires when its newest entry leaves
/// the writer's window, so a caller behind may find it gone at any spread: a break the verifier
/// must still name as beyond the clock trust, never forgive.
#[test]
fn the_library_scripts_on_the_callers_clock_pay_the_clock_trust_and_break_only_beyond_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for name in ["fixed-window", "token-bucket", "sliding-log"] {
        let text = std::fs::read_to_string(path(&format!("subjects/library/{name}.toml"))).expect("read");
        let script = path("subjects/library").join(text.split('"').nth(3).expect("script = \"...\""));
        let client = text
            .replace("argv = [\"\",", "argv = [\"{now_ms}\",")
            .replace(text.split('"').nth(3).expect("the script"), &script.display().to_string());
        assert!(client.contains("{now_ms}"), "{name}: {client}");
        let toml = dir.path().join(format!("{name}.toml"));
        std::fs::write(&toml, client).expect("write");
        let file = Arc::new(verify::preflight(SubjectFile::load(&toml).expect("loads")).expect("runs"));
        assert!(file.client_time());
        let r = verify::report(&file, &Campaign::default(), 64, 1, "model");
        let bound = verdict(&r, "bound");
        if bound.verdict == Verdict::Broken {
            let spread = clocks_spread_ms(&bound.detail).expect("a break beyond the clock trust names the clocks");
            let period: u64 = bound
                .evidence
                .split(" per ")
                .nth(1)
                .and_then(|t| t.split(' ').next()?.parse().ok())
                .expect("the quota");
            assert!(bound.detail.contains("beyond the clock trust"), "{name}: {bound:#?}");
            assert_ne!(name, "token-bucket", "a bucket's state outlives its refill: {bound:#?}");
            assert!(
                name == "sliding-log" || spread > period,
                "{name}: broken by clocks {spread} ms apart, within a period of {period} ms: {bound:#?}"
            );
        }
        assert!(broken(&r).iter().all(|c| *c == "bound"), "{name}: {:#?}", r.verdicts);
        assert_eq!(verdict(&r, "clock trust").verdict, Verdict::Expected, "{name}: {:#?}", r.verdicts);
    }
}

/// How far apart the clocks a verdict names were: "clocks were -2000 to +3000 ms off" is 5000.
fn clocks_spread_ms(detail: &str) -> Option<u64> {
    let (_, rest) = detail.split_once("clocks were ")?;
    let (low, rest) = rest.split_once(" to ")?;
    let high = rest.split(' ').next()?;
    let ms = |s: &str| s.trim_start_matches('+').parse::<i64>().ok();
    Some(ms(high)?.abs_diff(ms(low)?))
}

#[test]
/// A script that calls a command the model does not have cannot be judged on the model: it is
/// "not judged" (naming the command and the backend that can run it), never broken, since on
/// Redis it may run without any error.
fn a_script_that_needs_a_command_the_model_lacks_is_not_judged_and_names_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(
        dir.path().join("s.lua"),
        "if tonumber(ARGV[1]) > 3 then return redis.call('CL.THROTTLE', KEYS[1]) end\nreturn 1",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("s.toml"),
        "name = \"needs a module\"\nscript = \"s.lua\"\nkeys = [\"k:{key}\"]\nargv = [\"{request_id}\"]\n\
         [reply]\nallowed = { equals = 1 }\n[promise]\nkind = \"none\"\n",
    )
    .expect("write");
    let file = Arc::new(verify::preflight(SubjectFile::load(&dir.path().join("s.toml")).unwrap()).unwrap());
    let r = verify::report(&file, &Campaign::default(), 16, 1, "model");
    let errors = verdict(&r, "runs without errors");
    assert_eq!(errors.verdict, Verdict::NotJudged, "{:#?}", r.verdicts);
    assert!(errors.detail.contains("`cl.throttle`") && errors.detail.contains("--backend redis"), "{}", errors.detail);
    assert_eq!(results::subject::broken(&r), 0, "{:#?}", r.verdicts);
    assert_eq!(results::subject::not_judged(&r), 1, "{:#?}", r.verdicts);
}

/// The verify binary on a subject file in `dir` with `toml` and `lua`: its status and stderr.
fn verify_binary(dir: &Path, toml: &str, lua: Option<&str>) -> (i32, String) {
    std::fs::write(dir.join("s.toml"), toml).expect("write");
    if let Some(lua) = lua {
        std::fs::write(dir.join("s.lua"), lua).expect("write");
    }
    let out = lab("verify")
        .arg(dir.join("s.toml"))
        .args(["--cases", "1", "--no-sweeps", "--scenario", "baseline", "--out"])
        .arg(dir.join("out"))
        .output()
        .expect("verify runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn wrong_subject_files_are_refused_before_anything_runs_naming_file_field_and_value() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let good = "name = \"x\"\nscript = \"s.lua\"\nkeys = [\"k:{key}\"]\nargv = [\"{cost}\"]\n\
                [reply]\nallowed = { at = 1, equals = 1 }\n[promise]\nkind = \"fixed-window\"\n";
    let script = Some("return {1, 2}");
    let cases: [(String, Option<&str>, &str, &str); 5] = [
        (good.replace("s.lua", "gone.lua"), None, "`script`", "gone.lua"),
        (good.replace("{cost}", "{nwo_ms}"), script, "`argv[0]`", "{nwo_ms}"),
        (good.to_owned(), Some("return {1, 2"), "`script`", "does not compile"),
        (good.replace("at = 1, ", ""), script, "`reply.allowed`", "has no `at`"),
        (good.replace("fixed-window", "leaky-bucket"), script, "`promise.kind`", "\"leaky-bucket\""),
    ];
    for (toml, lua, field, value) in cases {
        let (status, stderr) = verify_binary(dir.path(), &toml, lua);
        assert_eq!(status, 2, "{field}: {stderr}");
        assert!(stderr.contains("s.toml") && stderr.contains(field) && stderr.contains(value), "{field}: {stderr}");
        assert!(!dir.path().join("out").exists(), "{field}: something ran");
    }
}

/// A window that lives on Redis's clock (INCR, PEXPIRE on the first hit) and a GCRA on
/// Redis's `TIME` are judged where Redis decided, whatever the latency: through the whole
/// race sweep (1 to 32 instances on one key, 1 to 20 ms to Redis) neither breaks its bound
/// nor starves, although the callers see each decision up to 40 ms after Redis made it and
/// the runs end with requests in flight.
#[test]
fn server_clock_subjects_hold_through_the_race_sweep_whatever_the_latency() {
    for relative in ["examples/subjects/incr_expire_window.toml", "examples/subjects/server_gcra.toml"] {
        let subject = sim_engine::subject::Subject::Script(load(relative));
        let specs: Vec<_> =
            sim_engine::run::race_sweep_specs(&[subject], 1, 6_000).into_iter().map(|(s, _)| s).collect();
        assert_eq!(specs.len(), 11, "6 instance counts and 5 latencies");
        let results = sim_engine::run::run_many(&specs, 2, &|| {}).expect("the sweep runs");
        for r in &results {
            assert_ne!(r.bound, Verdict::Broken, "{relative}: {}\n  {}", r.bound_detail, r.replay);
            assert_ne!(r.liveness, Verdict::Broken, "{relative}: {}\n  {}", r.liveness_detail, r.replay);
            assert_eq!(r.errors, 0, "{relative}: {}", r.replay);
        }
    }
}

/// The installed command line, `ratelimit-lab SUB`, as a user runs it (not through xtask).
fn lab(sub: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit-lab"));
    cmd.env_remove(results::command::INVOKED_AS_ENV).arg(sub);
    cmd
}

/// What another tool or a CI system reads: `--format json` keeps standard output for the
/// results JSON alone (the words go to standard error), `--junit` writes one failing case per
/// broken promise with its replay, and the replay names the command as it was invoked.
#[test]
fn the_command_line_speaks_json_and_junit_and_names_itself_in_its_replays() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let junit = dir.path().join("ci/verify.xml");
    let out = lab("verify")
        .env(results::command::INVOKED_AS_ENV, "cargo xtask")
        .arg(path("subjects/adr002.toml"))
        .args(["--cases", "16", "--no-sweeps", "--scenario", "baseline", "--format", "json", "--junit"])
        .arg(&junit)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .expect("verify runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "ADR-002's bucket breaks a promise:\n{stderr}");
    let json: results::Results = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("standard output is the results JSON alone ({e}):\n{}", String::from_utf8_lossy(&out.stdout))
    });
    assert!(stderr.contains("BROKEN") && stderr.contains("verdict: "), "the words went to standard error:\n{stderr}");
    let report = json.verify.first().expect("one subject");
    let broken = report.verdicts.iter().find(|v| v.verdict == Verdict::Broken).expect("a broken promise");
    assert!(broken.replay.starts_with("cargo xtask verify "), "{}", broken.replay);
    assert!(json.command.starts_with("cargo xtask verify "), "{}", json.command);

    let xml = std::fs::read_to_string(&junit).expect("the JUnit file, its directory created");
    assert!(xml.contains(&format!("<testcase classname=\"adr002\" name=\"{}\">", broken.check)), "{xml}");
    assert!(xml.contains("<failure ") && xml.contains("replay: cargo xtask verify "), "{xml}");

    // Run as installed, the same replay names the installed command, and exits as verify does.
    let again = replay_adr002(&broken.replay, &[]);
    assert_eq!(again.status.code(), Some(1), "{}", String::from_utf8_lossy(&again.stdout));
    // With --format json, the replay is one JSON object on standard output: the same check
    // broken, on the schedule given, with the trace that shows it.
    let again = replay_adr002(&broken.replay, &["--format", "json"]);
    assert_eq!(again.status.code(), Some(1), "{}", String::from_utf8_lossy(&again.stderr));
    let replayed: results::ReplayReport = serde_json::from_slice(&again.stdout).unwrap_or_else(|e| {
        panic!("standard output is the replay's JSON alone ({e}):\n{}", String::from_utf8_lossy(&again.stdout))
    });
    let line = replayed.verdicts.iter().find(|v| v.check == broken.check).expect("the check that broke");
    assert_eq!(line.verdict, Verdict::Broken, "{replayed:#?}");
    assert!(broken.replay.contains(&format!("--replay \"{}\"", replayed.schedule)), "{replayed:#?}");
    assert!(
        replayed.trace.lines().count() > 1 && replayed.command.starts_with("ratelimit-lab verify "),
        "{replayed:#?}"
    );
    let help = lab("verify").arg("--help").output().expect("help");
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: ratelimit-lab verify"), "{help:?}");
}

/// Runs a printed replay of ADR-002's subject (its `--quota` and `--replay`) as the installed
/// command.
fn replay_adr002(replay: &str, extra: &[&str]) -> std::process::Output {
    let (quota, schedule) = replay
        .split_once(" --quota ")
        .and_then(|(_, rest)| rest.split_once(" --replay "))
        .expect("--quota and --replay");
    lab("verify")
        .arg(path("subjects/adr002.toml"))
        .args(["--quota", quota, "--replay", schedule.trim_matches('"')])
        .args(extra)
        .output()
        .expect("the replay runs")
}

/// A schedule on which a textbook GCRA keeping its time as float seconds admits a hair (a
/// hundred-thousandth of a token) over its bound: rounding accumulated over many admissions
/// places its edge a fraction of a microsecond early.
fn float_edge_schedule() -> Schedule {
    let mut events = vec!["flush-scripts@0".to_owned()];
    events.extend((1..=42).map(|k| format!("{}:2", 68 * k)));
    events.extend((0..13).map(|_| "3002:1".to_owned()));
    events.extend((0..=90).map(|j| format!("{}:4", 4146 + 149 * j)));
    events.extend((0..=72).map(|k| format!("{}:{}", 17_669 + 21 * k, if k % 2 == 0 { 3 } else { 1 })));
    Schedule::parse(&events.join(" ")).expect("a schedule")
}

/// Float rounding at a tie is the script's arithmetic, not a broken bound, and is said with
/// digits that show its size; the same admissions from a script that never denies at a tie
/// (its design, not rounding) break the bound.
#[test]
fn a_float_gcra_rounding_over_its_bound_is_forgiven_and_sized_but_only_where_it_rounds_both_ways() {
    let file = load("subjects/corpus/gcra_float_textbook.toml");
    let quota = redis_ratelimit::Quota::new(10, std::time::Duration::from_secs(1)).with_burst(30);
    let held = verify::held(&file, quota);
    assert!(held.ties.both_ways(), "the float script decides ties both ways: {:?}", held.ties);
    let schedule = float_edge_schedule();
    assert!(search::judge(&file, &held, CheckKind::Bound, &schedule).is_none(), "forgiven as rounding");

    let strict = verify::checks::Held { ties: verify::calibrate::Ties { admits: true, denies: false }, ..held };
    let (violation, _) =
        search::judge(&file, &strict, CheckKind::Bound, &schedule).expect("a script that never denies at a tie breaks");
    assert!(violation.message.contains("admitted"), "{}", violation.message);

    let out = lab("verify")
        .arg(path("subjects/corpus/gcra_float_textbook.toml"))
        .args(["--quota", "10/1000/30", "--replay", &schedule.to_string()])
        .output()
        .expect("the replay runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let bound = text.lines().find(|l| l.trim_start().starts_with("bound")).expect("a bound line");
    assert!(bound.contains("held") && bound.contains("0.00001 over the bound, forgiven"), "{text}");
}
