//! `cargo xtask loom`: the loom models of the in-process concurrent pieces
//! (`limiter/tests/loom_*.rs`: the circuit breaker and the local store), built with
//! `--cfg limiter_loom` into `target/loom`, so the cfg change does not invalidate the normal
//! build. The models take seconds; the build is what costs, so it is the workspace's own
//! profile (lightly optimised), not release. `LOOM_MAX_PREEMPTIONS` defaults to 3.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::tools::{cargo, root};

pub fn run() -> Result<()> {
    let rustflags = match std::env::var("RUSTFLAGS") {
        Ok(existing) if !existing.trim().is_empty() => format!("{existing} --cfg limiter_loom"),
        _ => "--cfg limiter_loom".to_owned(),
    };
    let preemptions = std::env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "3".to_owned());
    let target = root().join("target").join("loom");
    let mut cmd = cargo();
    cmd.args([
        "test",
        "-p",
        "redis-ratelimit",
        "--features",
        "harness",
        "--test",
        "loom_*",
        "--",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("RUSTFLAGS", &rustflags)
    .env("LOOM_MAX_PREEMPTIONS", &preemptions)
    .env("CARGO_TARGET_DIR", &target);
    println!(
        "$ RUSTFLAGS={rustflags:?} LOOM_MAX_PREEMPTIONS={preemptions} CARGO_TARGET_DIR={} {cmd:?}",
        target.display()
    );
    let mut child = cmd.stdout(Stdio::piped()).spawn().context("cannot start cargo test for the loom models")?;
    let mut models: Vec<String> = Vec::new();
    let mut passed = 0u64;
    let mut caught = 0u64;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line.context("reading cargo test's output")?;
            println!("{line}");
            // With --nocapture a model's line can follow its `test name ... ` prefix.
            if let Some(at) = line.find("loom: ") {
                let rest = &line[at + "loom: ".len()..];
                if rest.contains("interleavings explored") {
                    models.push(rest.to_owned());
                } else if rest.contains("over-admission found") {
                    caught += 1;
                }
            } else if let Some(rest) = line.strip_prefix("test result: ok. ") {
                passed += rest.split(' ').next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    let status = child.wait().context("waiting for the loom models")?;
    if !status.success() {
        bail!("loom models failed ({status}); loom prints the failing interleaving above");
    }
    if models.is_empty() {
        bail!("no loom model ran: are the tests still under limiter/tests/loom_*.rs and `#![cfg(limiter_loom)]`?");
    }
    println!(
        "\nloom: {} models held, {caught} racy mutants caught, {passed} tests passed (LOOM_MAX_PREEMPTIONS={preemptions})",
        models.len()
    );
    for m in &models {
        println!("  {m}");
    }
    Ok(())
}
