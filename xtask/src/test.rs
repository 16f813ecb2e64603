//! `cargo xtask test`: the one test command, the one CI runs.

use anyhow::{bail, Result};

use crate::tools::{self, cargo, ensure_installed};

pub fn run_all() -> Result<()> {
    // Tests start their own redis-server processes, and the report test opens the report in
    // headless Chromium.
    ensure_installed(&[("redis-server", "redis-server"), ("chromium", "chromium")])?;

    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    tools::run(fmt)?;

    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]);
    tools::run(clippy)?;

    let mut test = cargo();
    // The property suites run once, below, with their case counts printed.
    test.args(["test", "--workspace", "--exclude", "properties"]);
    tools::run(test)?;

    crate::props::run(&[])?;
    crate::loom::run(&[])?;
    Ok(())
}

pub fn run(args: &[String]) -> Result<()> {
    if let Some(unknown) = args.first() {
        bail!("`cargo xtask test` takes no arguments, got {unknown:?}");
    }
    run_all()
}
