//! `cargo xtask simulate`, `cargo xtask verify` and `cargo xtask report`.
//!
//! `simulate` is `cargo run --release -p sim --bin simulate -- ARGS` (release: the default
//! catalogue is hundreds of runs), `verify` the same with the `verify` binary. The arguments
//! pass through unread: the binaries' own command lines own them, `--help` included, and they
//! write the results JSON and render the report themselves, so there is nothing here to find
//! in them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
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

/// Runs `sim`'s binary `bin` (`simulate` or `verify`) with `args` and exits with its status
/// when it is not 0: 1 when a promise broke (the JSON and the report are written, the replay
/// commands printed), 2 on bad arguments or errors (or cargo's own status when the build
/// failed).
pub fn run(bin: &str, args: &[OsString]) -> Result<()> {
    let status = release_bin("sim", bin).args(args).status().with_context(|| format!("cannot run {bin}"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => bail!("{bin} was killed: {status}"),
    }
}

/// `cargo xtask report --from RESULTS.json [--from MORE.json...] --out DIR`: renders the
/// HTML/PNG report from results files (several are merged into one).
pub fn report(jsons: &[PathBuf], out: &Path) -> Result<()> {
    let mut cmd = release_bin("reports", "report");
    for json in jsons {
        cmd.arg("--from").arg(json);
    }
    let status = cmd.arg("--out").arg(out).status().context("cannot run the report renderer")?;
    if !status.success() {
        let shown: Vec<String> = jsons.iter().map(|j| j.display().to_string()).collect();
        bail!("rendering the report from {} failed: {status}", shown.join(", "));
    }
    Ok(())
}
