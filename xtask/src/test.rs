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
    test.args(["test", "--workspace"]);
    tools::run(test)?;

    Ok(())
}

pub fn run(args: &[String]) -> Result<()> {
    if let Some(unknown) = args.first() {
        bail!("`cargo xtask test` takes no arguments, got {unknown:?}");
    }
    run_all()
}
