//! The service verifier on real services, in real time (a slow lane of `cargo xtask test`,
//! beside the other steps): the project's example gateway (HTTP) and its rate limit service
//! (Envoy's RLS over gRPC) hold every promise, their clocks skewed too; an atomic counter on
//! its instances' clocks pays the clock trust and nothing more; a GET-then-SET service breaks
//! its bound in the race, reproduced, with the command that re-drives it; a gateway whose rules fail open where
//! its file declares fail-closed is caught; and nothing a verification started outlives it,
//! not even when it is interrupted.

// Real services answer in real time.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use results::{Results, SubjectReport, Verdict};
use sim_service::scenario::{self, Scenario};
use sim_service::{fleet, Options, ServiceFile, Verified};

fn services() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/services")
}

/// The programs the subject files name through `{env:...}`.
fn env(name: &str) -> Option<String> {
    let path = match name {
        "RATELIMIT_GATEWAY" => redis_tests::gateway_binary(),
        "RATELIMIT_SERVER" => redis_tests::server_binary(),
        "RATELIMIT_PYTHON" | "RATELIMIT_NODE_MODULES" => return Some(installed(name)),
        _ => return std::env::var(name).ok(),
    };
    Some(path.display().to_string())
}

/// What `cargo xtask test` installs for the services on third-party libraries (under
/// `target/services`, see `xtask/src/tools.rs`), as it passes it, or where it leaves it.
fn installed(name: &str) -> String {
    if let Ok(path) = std::env::var(name) {
        return path;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = match name {
        "RATELIMIT_PYTHON" => target.join("services/pyenv/bin/python"),
        _ => target.join("services/flexible/node_modules"),
    };
    assert!(path.exists(), "{name} is not set and {} is missing: `cargo xtask test` installs it", path.display());
    path.display().to_string()
}

fn verify(file: &Path, scenarios: &[Scenario]) -> Verified {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let file = ServiceFile::load_with(file, &env).expect("the subject file is valid");
    let options = Options {
        scenarios: scenarios.to_vec(),
        progress: Box::new(|m: &str| println!("  {m}")),
        ..Options::default()
    };
    let verified = sim_service::verify_blocking(Arc::new(file), &options).expect("the verification runs");
    println!("{}", results::subject::render(&verified.report));
    nothing_left(&verified);
    verified
}

/// Every process the verification started has exited, and every port it used is closed.
fn nothing_left(v: &Verified) {
    assert!(!v.pids.is_empty() && !v.ports.is_empty(), "it reports what it started");
    for pid in &v.pids {
        assert!(!fleet::alive(*pid), "instance process {pid} outlived its verification");
    }
    for port in &v.ports {
        assert!(!fleet::listening(*port).unwrap_or(true), "port {port} still listens after the verification");
    }
}

fn verdict<'a>(r: &'a SubjectReport, check: &str) -> &'a results::VerdictLine {
    r.verdicts.iter().find(|v| v.check == check).unwrap_or_else(|| panic!("no {check:?} verdict in {:?}", r.verdicts))
}

fn every_check_held(r: &SubjectReport, checks: &[&str]) {
    let said: Vec<&str> = r.verdicts.iter().map(|v| v.check.as_str()).collect();
    assert_eq!(said, checks, "the checks that apply");
    for v in &r.verdicts {
        assert_eq!(v.verdict, Verdict::Held, "{}: {}\n{}", v.check, v.detail, v.evidence);
    }
    assert_eq!(r.profile.service_runs.len(), scenario::ALL.len(), "one run per scenario");
    assert!(r.profile.service_runs.iter().all(|run| run.unanswered == 0 || run.scenario.starts_with("redis")));
}

#[test]
fn the_example_gateway_holds_every_promise() {
    let v = verify(&services().join("gateway/service.toml"), &scenario::ALL);
    let r = &v.report;
    every_check_held(
        r,
        &["bound", "every request answered", "no lost capacity", "failure policy", "retry-after honest"],
    );
    // The race admitted the whole burst (and a refill more only if it lasted over 100 ms): the
    // bound held, and no capacity was lost to the race.
    assert!(r.profile.largest_burst >= 10, "{:?}", r.profile);
    // Fail-closed answers are 503s, marked degraded; none admitted while Redis was away.
    let down = r.profile.service_runs.iter().find(|s| s.scenario == "redis-down").expect("a redis-down run");
    assert!(down.degraded > 0, "{down:?}");
    assert!(verdict(r, "failure policy").detail.contains("0 admitted"), "{}", verdict(r, "failure policy").detail);
}

#[test]
fn the_rate_limit_service_holds_every_promise() {
    let v = verify(&services().join("rls/service.toml"), &scenario::ALL);
    // Its Retry-After is the draft-11 RateLimit field it adds to the response (`t`).
    every_check_held(
        &v.report,
        &["bound", "every request answered", "no lost capacity", "failure policy", "retry-after honest"],
    );
    assert!(v.report.profile.largest_burst >= 10, "{:?}", v.report.profile);
}

#[test]
fn an_atomic_counter_on_its_instances_clocks_pays_only_the_clock_trust() {
    // INCR per window numbered by each instance's clock: exact on true clocks; with the clocks
    // 500 ms apart it may admit over its bound in true time, but never more than some reading
    // of those clocks explains.
    let v = verify(&services().join("incr/service.toml"), &scenario::ALL);
    let r = &v.report;
    for v in &r.verdicts {
        let allowed: &[Verdict] =
            if v.check == "beyond the clock trust" { &[Verdict::Held, Verdict::Expected] } else { &[Verdict::Held] };
        assert!(allowed.contains(&v.verdict), "{}: {:?} {}\n{}", v.check, v.verdict, v.detail, v.evidence);
    }
    assert!(r.verdicts.iter().any(|v| v.check == "beyond the clock trust"), "the skewed run is judged");
    let skew = r.profile.service_runs.iter().find(|s| s.scenario == "skew").expect("a skewed run");
    assert!(skew.admitted > 0 && skew.unanswered == 0, "{skew:?}");
}

#[test]
fn a_gateway_failing_open_where_its_file_declares_fail_closed_is_caught() {
    // One bug: the rules fail open; the subject file still promises fail-closed.
    let dir = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(services().join("gateway/rules.toml")).unwrap();
    assert!(rules.contains("failure_policy = \"fail-closed\""));
    std::fs::write(dir.path().join("rules.toml"), rules.replace("\"fail-closed\"", "\"fail-open\"")).unwrap();
    std::fs::copy(services().join("gateway/service.toml"), dir.path().join("service.toml")).unwrap();
    let cut_off = scenario::named("cut-off").expect("a cut-off scenario");
    let v = verify(&dir.path().join("service.toml"), &[cut_off]);
    let policy = verdict(&v.report, "failure policy");
    assert_eq!(policy.verdict, Verdict::Broken, "{}", policy.detail);
    assert!(policy.detail.contains("admitted under fail-closed") || policy.detail.contains("not marked degraded"));
    assert!(policy.replay.ends_with("--service-scenario cut-off"), "{}", policy.replay);
    assert!(policy.detail.contains("re-drive"), "{}", policy.detail);
    // Whether the bound breaks too depends on timing: the gateway's breaker may stay open a
    // moment after the link heals, and fail-open admissions then say nothing of being
    // degraded and count against it. Either way the bound is judged.
    assert!(v.report.verdicts.iter().any(|v| v.check == "bound"));
}

/// `ratelimit-lab verify` with `args`, the subject programs in its environment.
fn lab(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit-lab"));
    cmd.args(["verify"]).args(args);
    for name in ["RATELIMIT_GATEWAY", "RATELIMIT_SERVER"] {
        cmd.env(name, env(name).expect("built"));
    }
    cmd
}

#[test]
fn a_get_then_set_service_breaks_its_bound_in_the_race_and_the_command_re_drives_it() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let out = tempfile::tempdir().unwrap();
    let junit = out.path().join("junit.xml");
    // From another directory, with the file named relative to it, as a user runs it.
    let run = lab(&[
        "getset/service.toml",
        "--service-scenario",
        "race",
        "--out",
        out.path().to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ])
    .current_dir(services())
    .output()
    .expect("ratelimit-lab runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(1), "a broken promise exits 1");
    let results: Results =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap()).unwrap();
    let report = &results.verify[0];
    let bound = verdict(report, "bound");
    assert_eq!(bound.verdict, Verdict::Broken, "{}", bound.detail);
    assert!(bound.detail.starts_with("race: "), "{}", bound.detail);
    // Two instances reading the same count admit more than the window's 10.
    assert!(report.profile.largest_burst > 10, "{:?}", report.profile);
    let reproduced: usize = bound
        .detail
        .split("reproduced by ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the verdict says how many re-drives reproduced it");
    assert!(reproduced >= 1, "the race is no accident: {}", bound.detail);
    assert!(bound.replay.contains("getset/service.toml --service-scenario race"), "{}", bound.replay);
    assert!(!bound.evidence.is_empty() && stdout.contains("BROKEN"));
    // The witness on a timeline: the report drew it, the JSON keeps its requests.
    let witness = bound.witness.as_ref().expect("a broken bound has a witness");
    let shown = witness.requests.iter().filter(|r| r.admitted).count();
    let said: usize = bound.detail["race: ".len()..].split(' ').next().and_then(|n| n.parse().ok()).expect("a count");
    assert!(shown == said && said > 10 && !witness.envelope.is_empty(), "{shown} shown, {}", bound.detail);
    assert!(std::fs::read_dir(out.path())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("witness-")));
    // CI systems read the same verdicts as JUnit: the broken check is a failing test case.
    let xml = std::fs::read_to_string(&junit).expect("the JUnit file");
    assert!(xml.contains("<failure") && xml.contains("bound"), "{xml}");
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if parent == Some(pid) {
            found.push(child);
        }
    }
    found
}

#[test]
fn an_interrupted_verification_stops_everything_it_started() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let out = tempfile::tempdir().unwrap();
    let file = services().join("gateway/service.toml");
    let mut child = lab(&[file.to_str().unwrap(), "--out", out.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ratelimit-lab starts");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut started = Vec::new();
    for line in lines {
        let line = line.unwrap();
        // By the first scenario, Redis and both instances run.
        if line.contains("scenario race") {
            started = children(child.id());
            break;
        }
    }
    assert!(started.len() >= 3, "redis-server and two gateways are its children: {started:?}");
    let signalled = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(signalled.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "ratelimit-lab did not stop within 30 s of SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "an interrupted verification is an error: {stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    for pid in started {
        assert!(!fleet::alive(pid), "process {pid} outlived the interrupted verification");
    }
}

#[test]
fn a_service_on_pythons_limits_library_holds_every_promise() {
    // limits' FixedWindowRateLimiter on its Redis storage: INCRBY, and EXPIRE where the count is
    // new, in one Lua script: first-hit windows on Redis's clock, atomic, so no race splits it
    // and skewed instance clocks do not enter. Its socket timeout is 250 ms with redis-py's
    // retries off, and every RedisError fails open, marked.
    let v = verify(&services().join("pylimits/service.toml"), &scenario::ALL);
    let r = &v.report;
    every_check_held(
        r,
        &["bound", "every request answered", "no lost capacity", "failure policy", "retry-after honest"],
    );
    assert_eq!(r.profile.largest_burst, 10, "{:?}", r.profile);
    // Redis away: admitted and marked, never refused.
    let policy = verdict(r, "failure policy");
    assert!(policy.detail.contains("0 denied") && !policy.detail.contains(" 0 marked"), "{}", policy.detail);
}

#[test]
fn a_service_on_nodes_rate_limiter_flexible_holds_every_promise() {
    // rate-limiter-flexible's RateLimiterRedis: SET NX EX, INCRBY, PTTL in one Lua script:
    // first-hit windows on Redis's clock, atomic. ioredis without its offline queue and with a
    // 250 ms command timeout fails at once without a connection and in 250 ms without an
    // answer; every such error is a 503, fail-closed.
    let v = verify(&services().join("flexible/service.toml"), &scenario::ALL);
    let r = &v.report;
    every_check_held(
        r,
        &["bound", "every request answered", "no lost capacity", "failure policy", "retry-after honest"],
    );
    assert_eq!(r.profile.largest_burst, 10, "{:?}", r.profile);
    // Redis away: refused with 503s, none admitted.
    let paused = r.profile.service_runs.iter().find(|s| s.scenario == "redis-paused").expect("a redis-paused run");
    assert!(paused.degraded > 0, "{paused:?}");
    assert!(verdict(r, "failure policy").detail.contains("0 admitted"), "{}", verdict(r, "failure policy").detail);
}
