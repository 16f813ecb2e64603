//! `cargo xtask simulate`: builds and runs the simulator in release mode (speed matters:
//! the default catalogue is hundreds of runs), then renders the report from its results.
//! Arguments pass through; see `cargo xtask simulate --help`.

use std::path::PathBuf;
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

/// Where the simulator writes its JSON and where the report goes, read from the same
/// arguments the simulator gets.
fn output_paths(args: &[String]) -> (PathBuf, PathBuf) {
    let find = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let out = find("--out").unwrap_or_else(|| PathBuf::from("target/simulate"));
    let json = find("--json").unwrap_or_else(|| out.join("results.json"));
    (json, out)
}

pub fn run(args: &[String]) -> Result<()> {
    let status = release_bin("sim", "simulate").args(args).status().context("cannot run the simulator")?;
    let informational = args.iter().any(|a| a == "--list" || a == "--help" || a == "-h");
    match status.code() {
        Some(0) | Some(1) if !informational => {}
        Some(0) => return Ok(()),
        Some(code) => std::process::exit(code),
        None => bail!("the simulator was killed: {status}"),
    }
    let (json, out) = output_paths(args);
    if root().join("reports").join("Cargo.toml").is_file() {
        report(&json, &out)?;
    }
    if !status.success() {
        // A promised bound broke: the simulator printed the replay commands.
        std::process::exit(1);
    }
    Ok(())
}

/// Renders the HTML/PNG report from a results file.
pub fn report(json: &std::path::Path, out: &std::path::Path) -> Result<()> {
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

/// `cargo xtask report --from RESULTS.json --out DIR`.
pub fn run_report(args: &[String]) -> Result<()> {
    let mut from = None;
    let mut out = None;
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().with_context(|| format!("{} needs a value", args[i]));
        match args[i].as_str() {
            "--from" => from = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            other => bail!("unknown option {other:?}; usage: cargo xtask report --from RESULTS.json --out DIR"),
        }
        i += 2;
    }
    let from = from.context("--from RESULTS.json is required")?;
    let out = out.unwrap_or_else(|| PathBuf::from("target/simulate"));
    report(&from, &out)
}
