//! Running commands and making sure the system tools the project needs are installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
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

/// Makes sure `program` is on PATH: installs Debian's `package` with apt-get when running
/// as root, otherwise stops and says what to install.
pub fn ensure_installed(program: &str, package: &str) -> Result<()> {
    if on_path(program) {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!("`{program}` is missing: install Debian's `{package}` package (apt-get install {package}) and run again");
    }
    println!("`{program}` is missing; installing Debian's `{package}` package");
    let mut update = Command::new("apt-get");
    update.args(["update", "-qq"]);
    run(update)?;
    let mut install = Command::new("apt-get");
    install.args(["install", "-y", "-qq", "--no-install-recommends", package]).env("DEBIAN_FRONTEND", "noninteractive");
    run(install)?;
    if !on_path(program) {
        bail!("installed `{package}` but `{program}` is still not on PATH");
    }
    Ok(())
}
