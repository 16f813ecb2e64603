//! Support for tests that need a real Redis: [`RedisServer`] starts its own `redis-server`
//! on a free loopback port, with persistence off, and stops it when dropped.
//!
//! Why not one shared server for the whole suite: tests kill, pause and flush their server
//! to prove failure handling, and a shared one would make them interfere. A server starts in
//! a few milliseconds, so each test gets its own.
//!
//! # Running the same tests against another server
//!
//! When the environment variable [`SERVER_ENV`] (`REDIS_TESTS_SERVER`) names a binary, for
//! example the simulation's Redis model (`target/debug/redis-model`), [`RedisServer::start`]
//! spawns that binary instead, with the very same arguments (`--port N --bind 127.0.0.1
//! --save "" --appendonly no --protected-mode no`), and kill, pause, resume and restart act
//! on its process exactly as on `redis-server` (a killed and restarted model starts empty, as a
//! Redis without persistence does). That is how the limiter's own Redis tests prove the model
//! behaves like Redis for everything the limiter does (`cargo xtask test` runs them so):
//!
//! ```text
//! cargo build -p sim --bin redis-model
//! REDIS_TESTS_SERVER=$PWD/target/debug/redis-model cargo test -p redis-tests --test agreement
//! ```
//!
//! The conformance suites compare the model *with* Redis, so they always get a real
//! `redis-server` whatever the variable says (see [`server_program`]); any other suite that
//! needs the real thing can ask for it with [`RedisServer::start_real`].

#![forbid(unsafe_code)]

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The environment variable naming a binary to start instead of `redis-server`.
pub const SERVER_ENV: &str = "REDIS_TESTS_SERVER";

/// A `redis-server` process (or the binary [`SERVER_ENV`] names) owned by a test. Dropping it
/// kills the process.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    program: String,
}

/// The binary [`RedisServer::start`] runs: [`SERVER_ENV`] if set and not empty, else
/// `redis-server` from PATH.
///
/// The conformance suites (test binaries named `conformance_*`) always get a real
/// `redis-server`: they compare the model *with* Redis, so swapping Redis for the model
/// would make them compare the model with itself and prove nothing.
///
/// A relative path (`target/debug/redis-model`) is taken from the workspace root, since cargo
/// runs each test binary from its own package's directory; a bare name is looked up on PATH.
pub fn server_program() -> String {
    match std::env::var(SERVER_ENV) {
        Ok(program) if !program.trim().is_empty() && !is_conformance_suite() => {
            let path = std::path::Path::new(&program);
            if path.is_relative() && path.components().count() > 1 {
                let root =
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(std::path::Path::new("."));
                root.join(path).to_string_lossy().into_owned()
            } else {
                program
            }
        }
        _ => "redis-server".to_string(),
    }
}

/// True inside a test binary built from `tests/tests/conformance_*.rs` (cargo names the
/// executable after the file, plus a hash).
fn is_conformance_suite() -> bool {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_name().map(|name| name.to_string_lossy().starts_with("conformance_")))
        .unwrap_or(false)
}

/// True when [`RedisServer::start`] runs something other than `redis-server` (see
/// [`SERVER_ENV`]).
pub fn server_overridden() -> bool {
    server_program() != "redis-server"
}

/// Picks a loopback port that is free right now. The OS hands out port 0 binds from its
/// ephemeral range, so two tests racing here get different ports.
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl RedisServer {
    /// Starts `redis-server` (or the [`SERVER_ENV`] binary) on a free loopback port and waits
    /// until it accepts connections.
    pub fn start() -> io::Result<Self> {
        Self::start_on(free_port()?)
    }

    /// Starts `redis-server` (or the [`SERVER_ENV`] binary) on `port` (used to restart a
    /// killed server on the same port).
    pub fn start_on(port: u16) -> io::Result<Self> {
        Self::spawn(server_program(), port)
    }

    /// Starts a real `redis-server` on a free loopback port whatever [`SERVER_ENV`] says: for
    /// suites that compare something else with Redis itself.
    pub fn start_real() -> io::Result<Self> {
        Self::spawn("redis-server".to_string(), free_port()?)
    }

    fn spawn(program: String, port: u16) -> io::Result<Self> {
        let child = Command::new(&program)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                let hint = if program == "redis-server" {
                    "install Debian's `redis-server` package".to_string()
                } else {
                    format!("named by {SERVER_ENV}")
                };
                io::Error::new(e.kind(), format!("cannot start {program} ({hint}): {e}"))
            })?;
        let mut server = RedisServer { child: Some(child), port, program };
        server.wait_ready()?;
        Ok(server)
    }

    /// The binary this server runs (`redis-server` unless [`SERVER_ENV`] names another).
    pub fn program(&self) -> &str {
        &self.program
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let addr = self.addr();
        for _ in 0..500 {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    return Err(io::Error::other(format!(
                        "{} on port {} exited early: {status}",
                        self.program, self.port
                    )));
                }
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(io::Error::other(format!("{} on port {} never became ready", self.program, self.port)))
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

    /// Kills the server at once (SIGKILL): every connection drops, every key is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process with SIGSTOP: connections stay open but nothing is answered,
    /// which is what a Redis stuck in a slow command or a long fork looks like to clients.
    pub fn pause(&self) -> io::Result<()> {
        self.signal("STOP")
    }

    /// Resumes a paused server (SIGCONT).
    pub fn resume(&self) -> io::Result<()> {
        self.signal("CONT")
    }

    fn signal(&self, sig: &str) -> io::Result<()> {
        let pid = self
            .child
            .as_ref()
            .map(|c| c.id())
            .ok_or_else(|| io::Error::other(format!("{} is not running", self.program)))?;
        let status = Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill -{sig} {pid} failed: {status}")))
        }
    }

    /// Restarts a killed server on the same port, empty (the same binary as before).
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let fresh = RedisServer::spawn(self.program.clone(), self.port)?;
        *self = fresh;
        Ok(())
    }

    /// A synchronous client connection, for setting up and inspecting state in tests.
    pub fn client(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            // A paused server cannot die of SIGKILL until it is continued on some systems'
            // process accounting; continue it first so drop never leaves a stopped process.
            let _ = Command::new("kill").args(["-CONT", &child.id().to_string()]).status();
        }
        self.kill();
    }
}
