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

/// `cargo` as invoked (respects the toolchain that runs xtask), without the variables cargo
/// set for xtask itself (see [`without_crate_env`]).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    without_crate_env(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment what cargo sets for the crate it runs (`cargo xtask` is
/// `cargo run -p xtask`; a test executable gets the same): `CARGO_MANIFEST_DIR`, `CARGO_PKG_*`
/// and their kin. A build script may read them (ring's does, through `cc`) and ask to run again
/// when they change, so a cargo started with xtask's `CARGO_MANIFEST_DIR` and one started by a
/// test with its own recompile ring and everything above it for each other. Without them every
/// build of `cargo xtask test` sees one environment and reuses one set of artifacts.
pub fn without_crate_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let set_by_cargo = ["CARGO_PKG_", "CARGO_BIN_"].iter().any(|p| key.starts_with(p))
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
            ]
            .contains(&key);
        if set_by_cargo {
            cmd.env_remove(key);
        }
    }
}

/// Runs `cmd`, failing with its command line if it fails.
pub fn run(cmd: Command) -> Result<()> {
    run_watching(cmd, |_| ())
}

/// Runs `cmd` as [`run`] does, then prints how long `label` took and the CPU it used: what CI's
/// minutes went to, and whether a step waited (wall time well above its CPU time) or computed.
pub fn run_timed(label: &str, cmd: Command) -> Result<()> {
    #[allow(clippy::disallowed_methods)] // a step's wall time, printed for the reader
    let started = std::time::Instant::now();
    let mut cpu = None;
    let ran = run_watching(cmd, |pid| cpu = cpu_seconds_at_exit(pid));
    let wall = started.elapsed().as_secs_f64();
    match cpu {
        Some(cpu) => println!("{label}: {wall:.1} s, {cpu:.1} s of CPU"),
        None => println!("{label}: {wall:.1} s"),
    }
    ran
}

/// Runs `cmd`, calls `watch` with its pid before waiting for it, and fails with its command
/// line if it fails.
fn run_watching(mut cmd: Command, watch: impl FnOnce(u32)) -> Result<()> {
    let shown = format!("{cmd:?}");
    println!("$ {shown}");
    let mut child = cmd.spawn().with_context(|| format!("cannot start {shown}"))?;
    watch(child.id());
    let status = child.wait().with_context(|| format!("waiting for {shown}"))?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(())
}

/// The CPU time (user and system, in seconds) process `pid` used with every child it waited
/// for, read once it has exited and before it is waited for: a zombie's `/proc/<pid>/stat` still
/// holds its `utime`, `stime`, `cutime` and `cstime`. Counted for that one process, not as the
/// difference of this process's own children's totals, which would also take in any job beside
/// (`beside`) that ended meanwhile. None where there is no such file.
fn cpu_seconds_at_exit(pid: u32) -> Option<f64> {
    static TICKS_PER_SECOND: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let ticks = *TICKS_PER_SECOND.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    });
    let path = format!("/proc/{pid}/stat");
    loop {
        let stat = std::fs::read_to_string(&path).ok()?;
        // After the command name (in parentheses, which may hold spaces) come the fields from
        // the third on: the state is the 3rd, utime to cstime the 14th to the 17th.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).copied();
        if field(3)? != "Z" {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        let ticks_used: f64 = (14..=17).map(|n| field(n)?.parse::<f64>().ok()).sum::<Option<f64>>()?;
        return Some(ticks_used / ticks);
    }
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// What stands for libclang in a `(program, package)` pair: the Redis module's build runs
/// bindgen, which loads libclang (a library, not a program on PATH) and clang's own headers.
pub const LIBCLANG: &str = "libclang";

/// Whether `what` is there: a program on PATH, or [`LIBCLANG`].
fn present(what: &str) -> bool {
    if what != LIBCLANG {
        return on_path(what);
    }
    if std::env::var_os("LIBCLANG_PATH").is_some() {
        return true;
    }
    // On Debian the package says it all (the library and clang's headers bindgen includes).
    if on_path("dpkg") {
        return Command::new("dpkg").args(["-s", "libclang-dev"]).output().is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Status: install ok installed")
        });
    }
    let mut dirs: Vec<std::path::PathBuf> =
        ["/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"]
            .iter()
            .map(std::path::PathBuf::from)
            .collect();
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        dirs.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("llvm"))
                .map(|e| e.path().join("lib")),
        );
    }
    dirs.iter().filter_map(|d| std::fs::read_dir(d).ok()).flatten().flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.starts_with("libclang.so")
            || (name.starts_with("libclang-") && !name.starts_with("libclang-cpp") && name.contains(".so"))
    })
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// The Debian packages being installed for the programs that were missing, in the background:
/// downloading and unpacking them waits on the network and the disk, and the steps that need
/// none of them (rustfmt, clippy, building the tests) use the cores meanwhile.
pub struct Installing {
    job: Option<(String, std::thread::JoinHandle<Result<()>>)>,
}

impl Installing {
    /// Waits until every program is on PATH, or fails saying what went wrong (apt-get's output
    /// is in the log the message names).
    pub fn wait(self) -> Result<()> {
        let Some((packages, job)) = self.job else { return Ok(()) };
        match job.join() {
            Ok(done) => done.with_context(|| format!("installing Debian's {packages}")),
            Err(_) => bail!("installing Debian's {packages}: the installing thread panicked"),
        }
    }
}

/// Makes sure every `(program, Debian package)` will be there (on PATH, or for [`LIBCLANG`] where
/// bindgen finds it): when some are missing, starts
/// installing their packages with apt-get (an update and an install, tried up to three times)
/// if running as root, and otherwise stops at once and says what to install.
pub fn start_installing(tools: &[(&str, &str)]) -> Result<Installing> {
    let missing: Vec<(String, String)> = tools
        .iter()
        .filter(|(program, _)| !present(program))
        .map(|(program, package)| (program.to_string(), package.to_string()))
        .collect();
    if missing.is_empty() {
        return Ok(Installing { job: None });
    }
    let packages: Vec<String> = missing.iter().map(|(_, package)| package.clone()).collect();
    if !(is_root() && on_path("apt-get")) {
        let programs: Vec<&str> = missing.iter().map(|(program, _)| program.as_str()).collect();
        bail!(
            "missing {}: install Debian's {} (apt-get install {}) and run again",
            programs.join(", "),
            packages.join(", "),
            packages.join(" ")
        );
    }
    let dir = target_dir().join("xtask");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("apt-get.log");
    println!(
        "installing Debian's {} (missing) in the background; apt-get's output goes to {}",
        packages.join(", "),
        log.display()
    );
    let named = packages.join(", ");
    let job = std::thread::spawn(move || -> Result<()> {
        let out = std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        let apt_get = |args: &[&str]| -> Result<()> {
            let mut cmd = Command::new("apt-get");
            // A fresh machine may still be running its own apt-get or unattended-upgrades when
            // this starts: wait for dpkg's lock rather than fail on it at once.
            cmd.args(["-o", "DPkg::Lock::Timeout=300"]).args(args).env("DEBIAN_FRONTEND", "noninteractive");
            cmd.stdout(out.try_clone()?).stderr(out.try_clone()?);
            let shown = format!("{cmd:?}");
            let status = cmd.status().with_context(|| format!("cannot start {shown}"))?;
            if !status.success() {
                bail!("{shown} failed: {status}; the end of its output ({}):\n{}", log.display(), tail(&log, 15));
            }
            Ok(())
        };
        let install: Vec<&str> = ["install", "-y", "-qq", "--no-install-recommends"]
            .into_iter()
            .chain(packages.iter().map(String::as_str))
            .collect();
        // A mirror that fails halfway (a package list being replaced, a dropped download) is the
        // common failure and a passing one: each try refreshes the lists and installs again.
        let mut tries = 0;
        loop {
            tries += 1;
            match apt_get(&["update", "-qq"]).and_then(|()| apt_get(&install)) {
                Ok(()) => break,
                Err(e) if tries < 3 => {
                    eprintln!("xtask: installing Debian's packages failed (try {tries} of 3), trying again: {e:#}");
                    std::thread::sleep(std::time::Duration::from_secs(10 * tries));
                }
                Err(e) => return Err(e),
            }
        }
        for (program, package) in &missing {
            if !present(program) {
                bail!("installed `{package}` but `{program}` is still missing");
            }
        }
        Ok(())
    });
    Ok(Installing { job: Some((named, job)) })
}

/// The last `lines` lines of the file at `path`, or a note that it could not be read.
fn tail(path: &std::path::Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read it: {e})"),
    }
}

/// Makes sure every `(program, Debian package)` is on PATH before returning (see
/// [`start_installing`]).
pub fn ensure_installed(tools: &[(&str, &str)]) -> Result<()> {
    start_installing(tools)?.wait()
}

/// The third-party limiter services the service verifier's tests drive
/// (`sim/examples/services/pylimits` on PyPI's `limits`, `flexible` on npm's
/// `rate-limiter-flexible`), installed from their own registries under `target/services`: a
/// Python venv with the pinned requirements, and the Node modules of the lock (`npm ci` in a
/// copy of the service's manifests, so no `node_modules` lands in the source tree). Each is
/// installed again only when its pins change. Returns the variables their subject files read:
/// `RATELIMIT_PYTHON` (the venv's python) and `RATELIMIT_NODE_MODULES` (for `NODE_PATH`).
pub fn install_services() -> Result<Vec<(&'static str, PathBuf)>> {
    let services = root().join("sim/examples/services");
    let into = target_dir().join("services");
    ensure_installed(&[("python3", "python3"), ("node", "nodejs"), ("npm", "npm")])?;

    // Debian's python3 makes venvs only with python3-venv (its ensurepip).
    let venv_works =
        || Command::new("python3").args(["-c", "import ensurepip, venv"]).output().is_ok_and(|o| o.status.success());
    if !venv_works() {
        if !(is_root() && on_path("apt-get")) {
            bail!("`python3 -m venv` does not work here: install Debian's python3-venv (apt-get install python3-venv) and run again");
        }
        for args in [&["update", "-qq"][..], &["install", "-y", "-qq", "--no-install-recommends", "python3-venv"]] {
            let mut apt_get = Command::new("apt-get");
            apt_get.args(["-o", "DPkg::Lock::Timeout=300"]).args(args).env("DEBIAN_FRONTEND", "noninteractive");
            run(apt_get)?;
        }
        if !venv_works() {
            bail!("installed python3-venv but `python3 -m venv` still does not work");
        }
    }
    let venv = into.join("pyenv");
    let python = venv.join("bin/python");
    let requirements = services.join("pylimits/requirements.txt");
    let pins =
        std::fs::read_to_string(&requirements).with_context(|| format!("cannot read {}", requirements.display()))?;
    let stamp = venv.join("installed-requirements.txt");
    if !python.exists() || std::fs::read_to_string(&stamp).ok().as_deref() != Some(pins.as_str()) {
        let mut make = Command::new("python3");
        make.args(["-m", "venv", "--clear"]).arg(&venv);
        run(make)?;
        let mut pip = Command::new(&python);
        pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"]).arg(&requirements);
        run(pip)?;
        std::fs::write(&stamp, &pins).with_context(|| format!("cannot write {}", stamp.display()))?;
    }

    let node = into.join("flexible");
    let lock = services.join("flexible/package-lock.json");
    let locked = std::fs::read_to_string(&lock).with_context(|| format!("cannot read {}", lock.display()))?;
    let modules = node.join("node_modules");
    if !modules.exists() || std::fs::read_to_string(node.join("package-lock.json")).ok() != Some(locked) {
        std::fs::create_dir_all(&node).with_context(|| format!("cannot create {}", node.display()))?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(services.join("flexible").join(file), node.join(file))
                .with_context(|| format!("cannot copy {file} into {}", node.display()))?;
        }
        let mut npm = Command::new("npm");
        npm.args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel", "error"]).current_dir(&node);
        run(npm)?;
    }
    Ok(vec![("RATELIMIT_PYTHON", python), ("RATELIMIT_NODE_MODULES", modules)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command's CPU is its own: a busy process this one waits for while the command runs
    /// (as a job beside is) is not counted in it, and a busy command's own work is.
    #[test]
    fn a_command_s_cpu_is_its_own_and_not_a_neighbour_s() {
        let busy = || {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"]);
            cmd
        };
        let mut idle = Command::new("sleep").arg("1").spawn().expect("sleep starts");
        assert!(busy().status().expect("sh runs").success(), "the neighbour, waited for meanwhile");
        let idle_cpu = cpu_seconds_at_exit(idle.id()).expect("/proc is there");
        idle.wait().expect("sleep ends");
        assert!(idle_cpu < 0.05, "sleep used {idle_cpu} s of CPU");
        let mut worker = busy().spawn().expect("sh starts");
        let cpu = cpu_seconds_at_exit(worker.id()).expect("/proc is there");
        worker.wait().expect("sh ends");
        assert!(cpu > 0.02, "a busy loop used {cpu} s of CPU");
    }
}
