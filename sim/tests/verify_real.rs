//! Slow (feature `slow-tests`; `cargo xtask test` runs it in its step of slow tests): correct
//! scripts are never flagged on real Redis either. The three example subjects, the library's
//! five scripts and correct scripts of the corpus of every kind (a first-hit window, logs in a
//! sorted set and in a list, GCRA in microseconds and in float seconds, buckets on Redis's and
//! on the caller's clock) run with `--backend redis`: the scenarios that race instances on one
//! key behind latency and restart Redis, on real `redis-server` processes in real time, and the
//! search at exact times on the model. Every promise holds (the clock trust, the price of a
//! caller-timed design, is `expected`), and the verifier exits 0.

use std::path::Path;
use std::process::Command;

const CORRECT: [&str; 16] = [
    "examples/subjects/caller_timed_bucket.toml",
    "examples/subjects/server_gcra.toml",
    "examples/subjects/incr_expire_window.toml",
    "subjects/library/fixed-window.toml",
    "subjects/library/sliding-window.toml",
    "subjects/library/sliding-log.toml",
    "subjects/library/token-bucket.toml",
    "subjects/library/gcra.toml",
    "subjects/corpus/first_hit_incr_pexpire_ms.toml",
    "subjects/corpus/sliding_log_zset_us.toml",
    "subjects/corpus/list_log_lindex.toml",
    "subjects/corpus/gcra_cell_us.toml",
    "subjects/corpus/gcra_float_seconds.toml",
    "subjects/corpus/server_bucket_hash_us.toml",
    "subjects/corpus/caller_bucket_hash_ms.toml",
    "subjects/corpus/sliding_window_counter.toml",
];

#[test]
fn correct_scripts_hold_every_promise_on_real_redis() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_verify"))
        .args(CORRECT.map(|f| root.join(f)))
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
    assert_eq!(json.verify.len(), CORRECT.len());
    // The scenarios ran for every subject, on real Redis.
    for r in &json.verify {
        let runs = json.results.iter().filter(|x| x.algorithm == r.name).count();
        assert!(runs >= 2, "{}: {runs} scenario runs", r.name);
    }
    println!("verify --backend redis: {} correct scripts held every promise", CORRECT.len());
}
