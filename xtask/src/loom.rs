//! `cargo xtask loom`: the loom models of the in-process concurrent pieces
//! (`limiter/tests/loom_*.rs`: the circuit breaker, the local store, its permits, the lock-free GCRA), built
//! with the library's feature `loom`, which swaps its synchronisation for loom's. The feature
//! is added to the workspace's own selection (`cargo test --workspace` with the features every
//! build of `cargo xtask test` enables), so every dependency resolves as in the test build and
//! is reused: only the library and the three models compile again. The models take seconds;
//! the build is what costs, so it is the workspace's own profile (lightly optimised), not
//! release. `LOOM_MAX_PREEMPTIONS` defaults to 3.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::tools::cargo;

/// `cargo test` of the loom models, `args` after the target selection (`--no-run`, or `--` and
/// the harness's options).
pub fn cargo_test(args: &[&str]) -> Command {
    let features = format!("{},redis-ratelimit/loom", crate::testbins::FEATURES);
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--features", &features, "--test", "loom_*"])
        .args(args)
        .env("LOOM_MAX_PREEMPTIONS", preemptions());
    cmd
}

/// The bound on preemptions loom explores: `LOOM_MAX_PREEMPTIONS`, 3 unless set.
fn preemptions() -> String {
    std::env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "3".to_owned())
}

pub fn run() -> Result<()> {
    let mut cmd = cargo_test(&["--", "--nocapture", "--test-threads", "1"]);
    println!("$ {cmd:?}");
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
        bail!("no loom model ran: are the tests still under limiter/tests/loom_*.rs, requiring the feature loom?");
    }
    println!(
        "\nloom: {} models held, {caught} racy mutants caught, {passed} tests passed (LOOM_MAX_PREEMPTIONS={})",
        models.len(),
        preemptions()
    );
    for m in &models {
        println!("  {m}");
    }
    Ok(())
}
