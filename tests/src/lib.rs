//! Support for tests that need a real Redis: [`RedisServer`] starts its own `redis-server`
//! on a free loopback port, with persistence off, and stops it when dropped.
//!
//! Why not one shared server for the whole suite: tests kill, pause and flush their server
//! to prove failure handling, and a shared one would make them interfere. A server starts in
//! a few milliseconds, so each test gets its own.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `redis-server` process owned by a test. Dropping it kills the process.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

/// Picks a loopback port that is free right now. The OS hands out port 0 binds from its
/// ephemeral range, so two tests racing here get different ports.
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port and waits until it accepts connections.
    pub fn start() -> io::Result<Self> {
        Self::start_on(free_port()?)
    }

    /// Starts `redis-server` on `port` (used to restart a killed server on the same port).
    pub fn start_on(port: u16) -> io::Result<Self> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start redis-server (install Debian's `redis-server` package): {e}"),
                )
            })?;
        let mut server = RedisServer { child: Some(child), port };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let addr = self.addr();
        for _ in 0..500 {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    return Err(io::Error::other(format!("redis-server on port {} exited early: {status}", self.port)));
                }
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(io::Error::other(format!("redis-server on port {} never became ready", self.port)))
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
        let pid = self.child.as_ref().map(|c| c.id()).ok_or_else(|| io::Error::other("redis-server is not running"))?;
        let status = Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill -{sig} {pid} failed: {status}")))
        }
    }

    /// Restarts a killed server on the same port, empty.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let fresh = RedisServer::start_on(self.port)?;
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
