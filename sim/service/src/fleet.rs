//! What a verification starts: a private `redis-server`, one fault proxy per instance, and the
//! subject's instances, each in a process group of its own. Everything is stopped when the
//! [`Fleet`] drops, whatever happened: an error, a panic, or Ctrl-C (the verification's future
//! is dropped, and this with it).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sim_real::process::{free_port, RedisProcess};
use sim_real::proxy::Proxy;

use crate::ask;
use crate::file::{Ready, ServiceFile, Values};

/// One instance of the subject, running.
pub struct Instance {
    child: Option<Child>,
    /// Where it listens.
    pub port: u16,
    /// Its stdout and stderr.
    log: PathBuf,
    _scratch: tempfile::TempDir,
}

impl Instance {
    /// The process group's id (the leader's pid), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The last lines it wrote, for an error.
    fn tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(2_000)));
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().rev().take(12).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// SIGTERM to its whole group, then SIGKILL after `grace`: whatever it started goes too.
    fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else { return };
        signal_group(child.id(), Signal::Term);
        let polls = grace.as_millis() / 20;
        for _ in 0..polls {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The group, not only the leader: a shell script's children outlive it otherwise.
        signal_group(child.id(), Signal::Kill);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pid: u32, signal: Signal) {
    use rustix::process::{kill_process_group, Pid, Signal as S};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return };
    let signal = match signal {
        Signal::Term => S::TERM,
        Signal::Kill => S::KILL,
    };
    // ESRCH (the group is gone) is what we want.
    let _ = kill_process_group(pid, signal);
}

#[cfg(not(unix))]
fn signal_group(_pid: u32, _signal: Signal) {}

/// Everything one verification runs on.
pub struct Fleet {
    // Field order is drop order: the instances stop before their proxies and Redis.
    /// The subject's instances, in order.
    pub instances: Vec<Instance>,
    /// One fault proxy per instance, between it and Redis.
    pub proxies: Vec<Proxy>,
    /// The private Redis.
    pub redis: RedisProcess,
    _redis_dir: tempfile::TempDir,
}

impl Fleet {
    /// Starts Redis, the proxies, runs the file's set-up commands, then starts every instance
    /// and waits until each is ready. Must be called inside a tokio runtime.
    ///
    /// With `skew_ms` (one per instance, ms), each instance runs under libfaketime with its
    /// wall clock that far off the true one (its monotonic clock shifted alike, so its timers
    /// keep true durations): honoured by runtimes that read the time through the C library (Python,
    /// Node, Rust, the JVM), not by statically linked ones.
    pub async fn start(file: &ServiceFile, skew_ms: &[i64]) -> Result<Fleet> {
        let redis_dir = tempfile::Builder::new().prefix("ratelimit-verify-").tempdir()?;
        let redis = RedisProcess::start(sim_real::RealServer::Redis, redis_dir.path(), None)
            .context("starting the private redis-server")?;
        let mut proxies = Vec::new();
        for i in 0..file.start.instances {
            proxies.push(Proxy::start(redis.addr(), (0, 0), i as u64).await.context("starting a fault proxy")?);
        }
        run_setup(file)?;
        let mut fleet = Fleet { instances: Vec::new(), proxies, redis, _redis_dir: redis_dir };
        let faketime = if skew_ms.iter().any(|&s| s != 0) {
            Some(libfaketime().context(
                "the skew scenario runs instances under libfaketime, which is not installed (Debian's `libfaketime`; \
                 or set RATELIMIT_LIBFAKETIME to its libfaketimeMT.so.1)",
            )?)
        } else {
            None
        };
        for i in 0..file.start.instances {
            let skew = faketime.as_deref().map(|lib| (lib, skew_ms.get(i).copied().unwrap_or(0)));
            let instance = start_instance(file, i, fleet.proxies[i].addr(), skew).await?;
            fleet.instances.push(instance);
        }
        Ok(fleet)
    }

    /// The process ids of the instances still running (for a test that checks none is left).
    pub fn pids(&self) -> Vec<u32> {
        self.instances.iter().filter_map(Instance::pid).collect()
    }
}

/// The file's set-up commands, once, in its directory.
fn run_setup(file: &ServiceFile) -> Result<()> {
    let dir = file.dir.display().to_string();
    let v = Values { dir: &dir, ..Values::default() };
    for (i, command) in file.start.setup.iter().enumerate() {
        let argv: Vec<String> = command.iter().map(|t| t.render(&v)).collect();
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&file.dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("service.setup[{i}]: cannot run {:?}", argv[0]))?;
        if !out.status.success() {
            bail!(
                "service.setup[{i}] ({}) failed ({}):\n{}",
                argv.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            );
        }
    }
    Ok(())
}

/// Starts instance `i` on a free port, retried on another port if it exits at once (a port
/// picked free can be taken before the instance binds it).
async fn start_instance(
    file: &ServiceFile,
    i: usize,
    proxy: SocketAddr,
    skew: Option<(&Path, i64)>,
) -> Result<Instance> {
    let mut last = None;
    for _ in 0..3 {
        let scratch = tempfile::Builder::new().prefix("ratelimit-verify-instance-").tempdir()?;
        let port = free_port()?;
        let scratch_path = scratch.path().display().to_string();
        let dir = file.dir.display().to_string();
        let v = Values { port, redis_port: proxy.port(), instance: i, scratch: &scratch_path, dir: &dir, key: "" };
        let argv: Vec<String> = file.start.command.iter().map(|t| t.render(&v)).collect();
        let log = scratch.path().join("output.log");
        let out = File::create(&log)?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&file.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .envs(file.start.env.iter().map(|(k, t)| (k, t.render(&v))));
        if let Some((lib, ms)) = skew {
            // Its monotonic clock moves by the same offset (libfaketime 0.9.10 with the
            // monotonic clock left alone fails Python's time.sleep with EINVAL): durations
            // and timers stay true.
            cmd.env("LD_PRELOAD", lib).env("FAKETIME", format!("{:+.3}", ms as f64 / 1000.0));
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().with_context(|| format!("instance {i}: cannot start {:?}", argv[0]))?;
        let mut instance = Instance { child: Some(child), port, log, _scratch: scratch };
        match wait_ready(file, &mut instance, &v).await {
            Ok(()) => return Ok(instance),
            Err(Exited(e)) => last = Some(e),
            Err(NeverReady(e)) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("instance {i} never started")))
}

enum NotReady {
    /// It exited: maybe its port was taken; worth another try.
    Exited(anyhow::Error),
    /// It runs but never became ready.
    NeverReady(anyhow::Error),
}
use NotReady::{Exited, NeverReady};

async fn wait_ready(file: &ServiceFile, instance: &mut Instance, v: &Values<'_>) -> Result<(), NotReady> {
    let name = &file.name;
    let deadline = tokio::time::Instant::now() + file.start.ready_within;
    loop {
        if let Some(child) = instance.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                instance.child = None;
                return Err(Exited(anyhow::anyhow!(
                    "instance {} of {name:?} exited before it was ready ({status}); its last output:\n{}",
                    v.instance,
                    instance.tail()
                )));
            }
        }
        let ready = match &file.start.ready {
            Ready::Port => {
                TcpStream::connect_timeout(&([127, 0, 0, 1], instance.port).into(), Duration::from_millis(200)).is_ok()
            }
            Ready::Url(url) => ask::get_ok(&url.render(v)).await,
        };
        if ready {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let tail = instance.tail();
            instance.stop(Duration::from_secs(1));
            return Err(NeverReady(anyhow::anyhow!(
                "instance {} of {name:?} was not ready within {:?} (service.ready_within_ms); its last output:\n{tail}",
                v.instance,
                file.start.ready_within
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// libfaketime's library for multi-threaded programs: `RATELIMIT_LIBFAKETIME`, or where
/// Debian's `libfaketime` puts it.
pub fn libfaketime() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RATELIMIT_LIBFAKETIME").filter(|p| !p.is_empty()) {
        return Some(path.into());
    }
    let arch = std::env::consts::ARCH;
    [
        format!("/usr/lib/{arch}-linux-gnu/faketime"),
        "/usr/lib/faketime".to_owned(),
        "/usr/local/lib/faketime".to_owned(),
    ]
    .into_iter()
    .map(|dir| Path::new(&dir).join("libfaketimeMT.so.1"))
    .find(|p| p.is_file())
}

/// Whether a process with this id still exists (for the tests that check nothing is left).
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
            .unwrap_or(false)
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet").field("redis", &self.redis.port()).field("instances", &self.instances.len()).finish()
    }
}

/// Whether something accepts connections on loopback `port` (false when refused): the tests' check
/// that nothing a verification started still listens.
pub fn listening(port: u16) -> io::Result<bool> {
    match TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(false),
        Err(e) => Err(e),
    }
}
