//! Jobs that run beside the other steps of `cargo xtask test`.
//!
//! Four kinds. The real lanes spend most of their minutes waiting on real Redis in real time:
//! run after everything else they would add those minutes to every CI run; run beside the
//! CPU-bound steps they cost little. The builds that only the last steps need are the
//! opposite, all CPU and no waiting: the published packages and the adopter run at the lowest
//! priority (`nice -n 19`) beside the tests, so they take only the cores the tests leave idle
//! while those wait on Redis, on a server's start or on real time, and a test that measures
//! time is not slowed by them; they build in a target directory of their own, since cargo locks
//! a target directory for a whole build and the tests run `cargo build` of the example gateway
//! in the workspace's. The builds in the workspace's own target directory (the installed
//! command line, the loom models) run beside the steps that need no cargo (the model lane,
//! memcheck, the property suites), which leave a core idle. And the suites on the model, which
//! keep both cores busy for minutes, run at the lowest priority beside every step after the
//! build: they fill the cores those steps leave idle, and slowed, a deterministic simulation
//! decides as it would have.
//!
//! A job is one or more commands run one after the other, in a process group of their own,
//! their output going to a log file that is printed whole when the job ends (several jobs
//! writing into one terminal at once would be unreadable). If `cargo xtask test` stops early,
//! the groups are killed: the redis-server processes a test started, and the compilers a build
//! started, go with them.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};

use crate::tools;

/// Commands to run one after the other beside the next steps, and what to call them.
pub struct Job {
    pub label: String,
    pub cmds: Vec<Command>,
}

impl Job {
    /// `cmds`, one after the other.
    pub fn new(label: &str, cmds: Vec<Command>) -> Job {
        Job { label: label.to_owned(), cmds }
    }

    /// `cmds` at the lowest CPU priority: they run only on cores nothing else wants.
    pub fn niced(label: &str, cmds: &[Command]) -> Job {
        let niced = cmds
            .iter()
            .map(|cmd| {
                let mut niced = Command::new("nice");
                niced.args(["-n", "19"]).arg(cmd.get_program()).args(cmd.get_args());
                if let Some(dir) = cmd.get_current_dir() {
                    niced.current_dir(dir);
                }
                for (key, value) in cmd.get_envs() {
                    match value {
                        Some(value) => niced.env(key, value),
                        None => niced.env_remove(key),
                    };
                }
                niced
            })
            .collect();
        Job::new(label, niced)
    }
}

/// Jobs started and not yet waited for.
pub struct Beside {
    running: Vec<Running>,
}

#[derive(Default)]
struct Current {
    group: Option<u32>,
    stopped: bool,
}

struct Running {
    label: String,
    log: PathBuf,
    /// The process group of the command running now, and whether xtask stopped early (then no
    /// further command starts, and the running one is killed).
    current: Arc<Mutex<Current>>,
    /// The status of the first command that failed, or of the last, and how long the job ran
    /// (where CI's time goes, as each step says).
    done: JoinHandle<std::io::Result<(ExitStatus, std::time::Duration)>>,
}

impl Beside {
    /// Starts every job, each with its output in `target/xtask/<name>.log`.
    pub fn start(jobs: Vec<Job>) -> Result<Beside> {
        let dir = tools::target_dir().join("xtask");
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut beside = Beside { running: Vec::new() };
        for Job { label, cmds } in jobs {
            let file: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
            let log = dir.join(format!("{file}.log"));
            let out = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
            let current = Arc::new(Mutex::new(Current::default()));
            let shared = current.clone();
            let done = std::thread::spawn(move || {
                #[allow(clippy::disallowed_methods)] // a job's wall time, printed for the reader
                let started = std::time::Instant::now();
                let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
                let mut last = None;
                for mut cmd in cmds {
                    cmd.stdout(out.try_clone()?).stderr(out.try_clone()?).process_group(0);
                    // Spawned under the lock, so a stop either comes first or sees the group.
                    let mut child = {
                        let mut now = lock();
                        if now.stopped {
                            return Err(std::io::Error::other("stopped"));
                        }
                        let child = cmd.spawn()?;
                        now.group = Some(child.id());
                        child
                    };
                    let status = child.wait()?;
                    lock().group = None;
                    if !status.success() {
                        return Ok((status, started.elapsed()));
                    }
                    last = Some(status);
                }
                let last = last.ok_or_else(|| std::io::Error::other("a job without a command"))?;
                Ok((last, started.elapsed()))
            });
            println!("started {label} beside the next steps; its output goes to {}", log.display());
            beside.running.push(Running { label, log, current, done });
        }
        Ok(beside)
    }

    /// Waits for every one, prints each one's output, and fails naming those that failed.
    pub fn finish(mut self) -> Result<()> {
        let mut failed = Vec::new();
        for r in std::mem::take(&mut self.running) {
            let (status, ran) = match r.done.join() {
                Ok(status) => status.with_context(|| format!("running {}", r.label))?,
                Err(_) => bail!("the thread running {} panicked", r.label),
            };
            let output = std::fs::read_to_string(&r.log).unwrap_or_else(|e| format!("({}: {e})", r.log.display()));
            println!("---- {} ({status}, in {:.0?}) ----\n{output}", r.label, ran);
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
        for r in std::mem::take(&mut self.running) {
            // The negative pid names the process group: the command and everything it started.
            // Killed, it ends its job's thread (a job stops at its first failed command).
            let mut now = r.current.lock().unwrap_or_else(|p| p.into_inner());
            now.stopped = true;
            if let Some(pid) = now.group {
                let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
            }
            drop(now);
            let _ = r.done.join();
        }
    }
}
