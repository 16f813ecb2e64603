//! `cargo xtask simulate`, `cargo xtask verify` and `cargo xtask report`.
//!
//! Each is `cargo run --release -p sim --bin ratelimit-lab -- SUBCOMMAND ARGS` (release: the
//! default catalogue is hundreds of runs), the command line a user installs. The arguments pass
//! through unread: its own command line owns them, `--help` included, and it writes the results
//! JSON and renders the report itself, so there is nothing here to find in them. It is told it
//! runs as `cargo xtask`, so the replay commands it prints are ones to paste in this repository.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::tools::root;

/// What `results::command` reads to name the tool in the replay commands it prints.
const INVOKED_AS_ENV: &str = "RATELIMIT_LAB_INVOKED_AS";

fn ratelimit_lab(subcommand: &str) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let manifest = root().join("Cargo.toml");
    cmd.arg("run").arg("--release").arg("--quiet").arg("--manifest-path").arg(manifest);
    cmd.args(["-p", "sim", "--bin", "ratelimit-lab", "--", subcommand]);
    cmd.env(INVOKED_AS_ENV, "cargo xtask");
    cmd
}

/// Runs `ratelimit-lab SUBCOMMAND` (`simulate` or `verify`) with `args` and exits with its
/// status when it is not 0: 1 when a promise broke (the JSON and the report are written, the
/// replay commands printed), 2 on bad arguments or errors (or cargo's own status when the build
/// failed), 3 when verify could not judge a check on the model.
pub fn run(subcommand: &str, args: &[OsString]) -> Result<()> {
    let status = ratelimit_lab(subcommand)
        .args(args)
        .status()
        .with_context(|| format!("cannot run ratelimit-lab {subcommand}"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => bail!("ratelimit-lab {subcommand} was killed: {status}"),
    }
}

/// `cargo xtask report --from RESULTS.json [--from MORE.json...] --out DIR`: renders the
/// HTML/PNG report from results files (several are merged into one).
pub fn report(jsons: &[PathBuf], out: &Path) -> Result<()> {
    let mut cmd = ratelimit_lab("report");
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
