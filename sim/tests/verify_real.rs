//! Slow (feature `slow-tests`; `cargo xtask test` runs it beside its other steps): correct
//! scripts are never flagged on real Redis either. The three example subjects, the library's
//! five scripts and every correct script of the corpus (`expected.toml`'s `correct = true`) run
//! with `--backend redis`: the scenarios that race instances on one
//! key behind latency and restart Redis, on real `redis-server` processes in real time, and the
//! search at exact times on the model. Every promise holds (the clock trust, the price of a
//! caller-timed design, is `expected`), and the verifier exits 0. And the whole loop as a user
//! runs it on a broken script on real Redis: the verdict, the report and a replay that
//! reproduces the break.

use std::path::Path;
use std::process::Command;

const SHIPPED: [&str; 8] = [
    "examples/subjects/caller_timed_bucket.toml",
    "examples/subjects/server_gcra.toml",
    "examples/subjects/incr_expire_window.toml",
    "subjects/library/fixed-window.toml",
    "subjects/library/sliding-window.toml",
    "subjects/library/sliding-log.toml",
    "subjects/library/token-bucket.toml",
    "subjects/library/gcra.toml",
];

/// The shipped subjects and the corpus's correct ones.
fn correct(root: &Path) -> Vec<std::path::PathBuf> {
    let expected: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("subjects/corpus/expected.toml")).expect("expected.toml"))
            .expect("expected.toml is TOML");
    let corpus = expected
        .iter()
        .filter(|(_, e)| e.get("correct").and_then(toml::Value::as_bool) == Some(true))
        .map(|(name, _)| root.join(format!("subjects/corpus/{name}.toml")));
    SHIPPED.iter().map(|f| root.join(f)).chain(corpus).collect()
}

#[test]
fn correct_scripts_hold_every_promise_on_real_redis() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = correct(root);
    assert!(files.len() >= 25, "{} correct subjects", files.len());
    let out = lab("verify")
        .args(&files)
        .args(["--backend", "redis", "--scenario", "get-set-race", "--scenario", "redis-restart"])
        .args(["--no-sweeps", "--duration", "3s", "--cases", "48", "--out"])
        .arg(dir.path())
        .output()
        .expect("verify runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let broken: Vec<&str> = stdout.lines().filter(|l| l.contains(" BROKEN ") || l.contains("not judged")).collect();
    assert!(broken.is_empty(), "flagged on real Redis:\n{}\n\n{stdout}", broken.join("\n"));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let json: results::Results =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).expect("results.json"))
            .expect("the results JSON reads back");
    assert_eq!(json.backend, "redis");
    assert_eq!(json.verify.len(), files.len());
    // The scenarios ran for every subject, on real Redis.
    for r in &json.verify {
        let runs = json.results.iter().filter(|x| x.subject == r.name).count();
        assert!(runs >= 2, "{}: {runs} scenario runs", r.name);
    }
    println!("verify --backend redis: {} correct scripts held every promise", files.len());
}

/// A script that decides with the Redis module's command (`redis.call('RATELIMIT.GCRA', ...)`)
/// is judged on real Redis when its servers load the module (`--module`), and holds the GCRA
/// promise there; without the module every request fails, and the verifier says so.
#[test]
fn a_script_calling_the_module_is_verified_on_servers_that_load_it() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let module = redis_tests::build_module("dev").expect("the Redis module builds");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = "-- The module's GCRA behind a script: KEYS and ARGV as lua/gcra.lua takes them.\n\
                  return redis.call('RATELIMIT.GCRA', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\n";
    std::fs::write(dir.path().join("module_gcra.lua"), script).expect("write the script");
    let subject = dir.path().join("module_gcra.toml");
    let profile = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("subjects/library/gcra.toml"))
        .expect("the library's GCRA subject")
        .replace("library gcra", "module gcra")
        .replace("../../../lua/gcra.lua", "module_gcra.lua");
    std::fs::write(&subject, profile).expect("write the subject");
    let verify = |module: Option<&Path>| {
        let mut cmd = lab("verify");
        cmd.arg(&subject).args(["--backend", "redis", "--scenario", "get-set-race", "--scenario", "redis-restart"]);
        cmd.args(["--no-sweeps", "--duration", "3s", "--cases", "24", "--out"]).arg(dir.path().join("out"));
        if let Some(module) = module {
            cmd.arg("--module").arg(module);
        }
        cmd.output().expect("verify runs")
    };
    let loaded = verify(Some(&module));
    let stdout = String::from_utf8_lossy(&loaded.stdout);
    assert!(!stdout.contains(" BROKEN ") && !stdout.contains("not judged"), "{stdout}");
    assert_eq!(loaded.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&loaded.stderr));
    let without = verify(None);
    let said = format!("{}{}", String::from_utf8_lossy(&without.stdout), String::from_utf8_lossy(&without.stderr));
    assert_ne!(without.status.code(), Some(0), "verified without the module:\n{said}");
    assert!(said.contains("calls returned an error"), "the errors are named: {said}");
    println!("verify --backend redis --module: a script calling RATELIMIT.GCRA held its promise");
}

/// `--backend valkey`: the library's GCRA script, and a script deciding with the Redis module
/// loaded into Valkey (`--module`), hold their promises on `valkey-server` processes the
/// harness starts, and every run's replay names the backend. `cargo xtask test` runs this in
/// its Valkey lane (the Redis lane skips it).
#[test]
fn the_library_s_scripts_and_the_module_hold_their_promises_on_valkey() {
    sim_real::RealServer::Valkey.require_for_tests();
    let module = redis_tests::build_module("dev").expect("the Redis module builds");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = "return redis.call('RATELIMIT.GCRA', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\n";
    std::fs::write(dir.path().join("module_gcra.lua"), script).expect("write the script");
    let subject = dir.path().join("module_gcra.toml");
    let profile = std::fs::read_to_string(root.join("subjects/library/gcra.toml"))
        .expect("the library's GCRA subject")
        .replace("library gcra", "module gcra")
        .replace("../../../lua/gcra.lua", "module_gcra.lua");
    std::fs::write(&subject, profile).expect("write the subject");
    // Two subjects, to keep the Valkey lane short: the other scripts are held on Valkey by the
    // conformance suites and the catalogue.
    let files = vec![root.join("subjects/library/gcra.toml"), subject];
    let out = lab("verify")
        .args(&files)
        .args(["--backend", "valkey", "--module"])
        .arg(&module)
        .args(["--scenario", "get-set-race", "--scenario", "redis-restart"])
        .args(["--no-sweeps", "--duration", "3s", "--cases", "24", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .expect("verify runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let broken: Vec<&str> = stdout.lines().filter(|l| l.contains(" BROKEN ") || l.contains("not judged")).collect();
    assert!(broken.is_empty(), "flagged on Valkey:\n{}\n\n{stdout}", broken.join("\n"));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let json: results::Results =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/results.json")).expect("results.json"))
            .expect("the results JSON reads back");
    assert_eq!(json.backend, "valkey");
    assert_eq!(json.verify.len(), files.len());
    let replays_on_valkey = json.results.iter().filter(|r| r.replay.contains(" --backend valkey --module ")).count();
    assert!(
        replays_on_valkey >= 2 * files.len(),
        "{replays_on_valkey} runs replay on Valkey of {}",
        json.results.len()
    );
    println!("verify --backend valkey --module: {} scripts held every promise on Valkey", files.len());
}

/// The whole loop as a user runs it, with the scenarios on real `redis-server` processes the
/// harness starts: verdicts printed with a replay command that reproduces the break, exit
/// status 1, the results JSON and the report written.
#[test]
fn verify_on_real_redis_prints_the_verdict_writes_the_report_and_its_replay_reproduces_the_break() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = lab("verify")
        .arg(root().join("subjects/adr002.toml"))
        .args([
            "--backend",
            "redis",
            "--scenario",
            "steady-trickle",
            "--no-sweeps",
            "--duration",
            "3s",
            "--cases",
            "32",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("verify runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a broken promise exits 1:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("no lost capacity         BROKEN"), "{stdout}");
    assert!(stdout.contains("clock trust              expected"), "{stdout}");
    assert!(stdout.contains("verdict: 1 promise(s) broken"), "{stdout}");

    let json: results::Results =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).expect("results.json"))
            .expect("the results JSON reads back");
    assert_eq!(json.backend, "redis");
    assert_eq!(json.verify.len(), 1);
    assert_eq!(json.verify[0].name, "adr002");
    // The scenario ran on real Redis, and its replay says so.
    let run = json.results.iter().find(|r| r.subject == "adr002").expect("the subject's run");
    assert!(run.replay.ends_with("--scenario steady-trickle --seed 1 --duration 3s --backend redis"), "{}", run.replay);
    let html = std::fs::read_to_string(dir.path().join("index.html")).expect("the report");
    assert!(html.contains("<h2>Verified subjects</h2>") && dir.path().join("rate.png").is_file());

    // The search's replay runs at exact times, so it names no backend; run as printed, it
    // shows the same break and exits 1.
    let replay = stdout
        .lines()
        .skip_while(|l| !l.contains("no lost capacity         BROKEN"))
        .find_map(|l| l.trim().strip_prefix("replay: ratelimit-lab verify "))
        .expect("a replay");
    assert!(!replay.contains("--backend"), "{replay}");
    let (quota, schedule) = replay
        .split_once(" --quota ")
        .and_then(|(_, rest)| rest.split_once(" --replay "))
        .expect("--quota and --replay");
    let again = lab("verify")
        .arg(root().join("subjects/adr002.toml"))
        .args(["--quota", quota, "--replay", schedule.trim_matches('"')])
        .output()
        .expect("the replay runs");
    let text = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(1), "{text}");
    assert!(text.contains("no lost capacity         BROKEN") && text.contains("<- no lost capacity"), "{text}");
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The installed command line, `ratelimit-lab SUB`, as a user runs it (not through xtask).
fn lab(sub: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit-lab"));
    cmd.env_remove(results::command::INVOKED_AS_ENV).arg(sub);
    cmd
}
