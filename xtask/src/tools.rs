//! Running commands and making sure the system tools the project needs are installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (a relative one is read from the
/// workspace root, where xtask runs cargo), `target/` otherwise.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

/// `cargo` as invoked (respects the toolchain that runs xtask).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

/// Runs `cmd`, failing with its command line if it fails.
pub fn run(mut cmd: Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    println!("$ {shown}");
    let status = cmd.status().with_context(|| format!("cannot start {shown}"))?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// Makes sure every `(program, Debian package)` is on PATH: installs the missing packages
/// with apt-get (one update, one install) when running as root, otherwise stops and says
/// what to install.
pub fn ensure_installed(tools: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<_> = tools.iter().filter(|(program, _)| !on_path(program)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().map(|(_, package)| *package).collect();
    if !(is_root() && on_path("apt-get")) {
        let programs: Vec<&str> = missing.iter().map(|(program, _)| *program).collect();
        bail!(
            "missing {}: install Debian's {} (apt-get install {}) and run again",
            programs.join(", "),
            packages.join(", "),
            packages.join(" ")
        );
    }
    println!("installing Debian's {} (missing)", packages.join(", "));
    let mut update = Command::new("apt-get");
    update.args(["update", "-qq"]);
    run(update)?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&packages)
        .env("DEBIAN_FRONTEND", "noninteractive");
    run(install)?;
    for (program, package) in missing {
        if !on_path(program) {
            bail!("installed `{package}` but `{program}` is still not on PATH");
        }
    }
    Ok(())
}
