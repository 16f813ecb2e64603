//! `cargo xtask simulate` and `cargo xtask report`.
//!
//! `simulate` is `cargo run --release -p sim --bin simulate -- ARGS` (release: the default
//! catalogue is hundreds of runs). The arguments pass through unread: the simulator's own
//! command line (`sim::cli`) owns them, its `--help` included, and the simulator writes the
//! results JSON and renders the report itself, so there is nothing here to find in them.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::tools::root;

fn release_bin(package: &str, bin: &str) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let manifest = root().join("Cargo.toml");
    cmd.arg("run").arg("--release").arg("--quiet").arg("--manifest-path").arg(manifest);
    cmd.args(["-p", package, "--bin", bin, "--"]);
    cmd
}

/// Runs the simulator with `args` and exits with its status when it is not 0: 1 when a
/// promised bound broke (the JSON and the report are written, the replay commands printed),
/// 2 on bad arguments or errors (or cargo's own status when the build failed).
pub fn run(args: &[OsString]) -> Result<()> {
    let status = release_bin("sim", "simulate").args(args).status().context("cannot run the simulator")?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => bail!("the simulator was killed: {status}"),
    }
}

/// `cargo xtask report --from RESULTS.json --out DIR`: renders the HTML/PNG report from a
/// results file.
pub fn report(json: &Path, out: &Path) -> Result<()> {
    let status = release_bin("reports", "report")
        .arg("--from")
        .arg(json)
        .arg("--out")
        .arg(out)
        .status()
        .context("cannot run the report renderer")?;
    if !status.success() {
        bail!("rendering the report from {} failed: {status}", json.display());
    }
    Ok(())
}
