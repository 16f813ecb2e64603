//! The installed command line on this project's own subject files, as its CI would run it.
//! `RATELIMIT_LAB` names the binary (`cargo xtask test` puts its own build where `cargo
//! install` would, and sets it); otherwise `ratelimit-lab` is looked up on the PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lab(dir: &Path, args: &[&str]) -> Output {
    let program = std::env::var_os("RATELIMIT_LAB").unwrap_or_else(|| "ratelimit-lab".into());
    Command::new(&program)
        .current_dir(dir)
        .args(args)
        .env_remove("RATELIMIT_LAB_INVOKED_AS")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program:?} ({e}): install it with cargo install --path sim"))
}

fn subjects() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ratelimit")
}

const QUICK: &[&str] = &["--cases", "24", "--no-sweeps", "--scenario", "baseline", "--scenario", "get-set-race"];

#[test]
fn our_script_keeps_its_promise_and_the_junit_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["verify", "login_window.toml", "--junit", "out/junit.xml", "--out", "out"];
    args.extend_from_slice(QUICK);
    // Run from the subjects' own directory, with relative paths, as a CI job would.
    std::fs::copy(subjects().join("login_window.toml"), dir.path().join("login_window.toml")).unwrap();
    std::fs::copy(subjects().join("login_window.lua"), dir.path().join("login_window.lua")).unwrap();
    let out = lab(dir.path(), &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("verdict: every promise held"), "{stdout}");
    let xml = std::fs::read_to_string(dir.path().join("out/junit.xml")).expect("the JUnit file");
    assert!(xml.contains("classname=\"login window\" name=\"bound\"") && xml.contains("failures=\"0\""), "{xml}");
    assert!(dir.path().join("out/index.html").is_file(), "the report");
}

#[test]
fn a_one_character_slip_is_caught_with_a_replay_that_reproduces_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = std::fs::read_to_string(subjects().join("login_window.lua")).unwrap();
    // `>` for `>=` shifted by one: the limit-th + 1 request fits.
    let slipped = script.replace("if count + cost > limit then", "if count + cost > limit + 1 then");
    assert_ne!(slipped, script);
    std::fs::write(dir.path().join("login_window.lua"), slipped).unwrap();
    std::fs::copy(subjects().join("login_window.toml"), dir.path().join("login_window.toml")).unwrap();
    let mut args = vec!["verify", "login_window.toml", "--format", "json", "--out", "out"];
    args.extend_from_slice(QUICK);
    let out = lab(dir.path(), &args);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("standard output is the results JSON");
    let broken = json["verify"][0]["verdicts"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["verdict"] == "broken"))
        .unwrap_or_else(|| panic!("a broken verdict in {json}"));
    let replay = broken["replay"].as_str().expect("its replay");
    let rest = replay.strip_prefix("ratelimit-lab verify login_window.toml ").expect("the installed command's replay");
    let (quota, schedule) =
        rest.strip_prefix("--quota ").and_then(|r| r.split_once(" --replay ")).expect("--quota and --replay");
    let again =
        lab(dir.path(), &["verify", "login_window.toml", "--quota", quota, "--replay", schedule.trim_matches('"')]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(1), "{text}");
    assert!(text.contains("BROKEN"), "{text}");
}
