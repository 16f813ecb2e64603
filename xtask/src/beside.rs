//! Test executables that run beside the other steps of `cargo xtask test`.
//!
//! The real lanes spend most of their minutes waiting on real Redis in real time. Run after
//! everything else they would add those minutes to every CI run; run beside the CPU-bound
//! steps they cost little. Each runs in a process group of its own, its output going to a
//! log file that is printed whole when it ends (two suites writing into one terminal at once
//! would be unreadable). If `cargo xtask test` stops early, the groups are killed: the
//! redis-server processes a test started go with it.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};

use anyhow::{bail, Context, Result};

use crate::testbins::Executable;
use crate::tools;

/// Test executables started and not yet waited for.
pub struct Beside {
    running: Vec<Running>,
}

struct Running {
    label: String,
    child: Child,
    log: PathBuf,
}

impl Beside {
    /// Starts each of `binaries` (one test at a time inside each, as they assume).
    pub fn start(binaries: &[Executable]) -> Result<Beside> {
        let dir = tools::target_dir().join("xtask");
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut beside = Beside { running: Vec::new() };
        for b in binaries {
            let log = dir.join(format!("{}.log", b.name));
            let out = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
            let mut cmd = b.command();
            cmd.args(["--show-output", "--test-threads", "1"]);
            cmd.stdout(out.try_clone().context("cannot share the log file")?).stderr(out).process_group(0);
            let child = cmd.spawn().with_context(|| format!("cannot start {}", b.exe.display()))?;
            println!("started {} beside the next steps; its output goes to {}", b.label(), log.display());
            beside.running.push(Running { label: b.label(), child, log });
        }
        Ok(beside)
    }

    /// Waits for every one, prints each one's output, and fails naming those that failed.
    pub fn finish(mut self) -> Result<()> {
        let mut failed = Vec::new();
        for mut r in std::mem::take(&mut self.running) {
            let status = r.child.wait().with_context(|| format!("waiting for {}", r.label))?;
            let output = std::fs::read_to_string(&r.log).unwrap_or_else(|e| format!("({}: {e})", r.log.display()));
            println!("---- {} ({status}) ----\n{output}", r.label);
            if !status.success() {
                failed.push(format!("{} ({status}; output above and in {})", r.label, r.log.display()));
            }
        }
        if !failed.is_empty() {
            bail!("failed beside the other steps: {}", failed.join(", "));
        }
        Ok(())
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        for r in &mut self.running {
            // The negative pid names the process group: the test and every server it started.
            let group = format!("-{}", r.child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = r.child.wait();
        }
    }
}
