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
//! cargo build -p redis-model --bin redis-model
//! REDIS_TESTS_SERVER=$PWD/target/debug/redis-model cargo test -p redis-tests --test redis -- agreement::
//! ```
//!
//! The conformance suites compare the model *with* Redis, so they ask for the real
//! `redis-server` whatever the variable says ([`RedisServer::start_real`]), as any other suite
//! that needs the real thing can.
//!
//! # Valkey instead of Redis
//!
//! When [`REAL_ENV`] (`REDIS_TESTS_REAL`) says `valkey`, "the real server" is `valkey-server`
//! (found as [`RealServer::Valkey`] says) wherever it would be `redis-server`: the store
//! suites, the conformance suites' reference, the module's server and the cluster's nodes.
//! `cargo xtask test` runs its Valkey lane so:
//!
//! ```text
//! REDIS_TESTS_REAL=valkey cargo test -p redis-tests --test redis -- redis_store::
//! REDIS_TESTS_REAL=valkey CONFORMANCE_SUBJECT=redis cargo test -p redis-tests --test redis -- conformance_lua::
//! ```
//!
//! The second compares Redis (the subject, in place of the model) with Valkey.

#![forbid(unsafe_code)]

use std::io;
use std::ops::{Deref, DerefMut};

use sim_real::process::ServerProcess;
pub use sim_real::process::{free_port, RealServer};

/// The environment variable naming a binary to start instead of `redis-server`.
pub const SERVER_ENV: &str = "REDIS_TESTS_SERVER";

/// The environment variable naming the real server the tests start: `redis` (the default) or
/// `valkey`.
pub const REAL_ENV: &str = "REDIS_TESTS_REAL";

/// The real server [`REAL_ENV`] names: Redis when it is unset or empty, an error naming the
/// variable when it names neither.
pub fn real_server() -> io::Result<RealServer> {
    match std::env::var(REAL_ENV) {
        Ok(name) if !name.trim().is_empty() => {
            RealServer::parse(&name).map_err(|e| io::Error::new(e.kind(), format!("{REAL_ENV}: {e}")))
        }
        _ => Ok(RealServer::Redis),
    }
}

/// A `redis-server` or `valkey-server` process (or the binary [`SERVER_ENV`] names) owned by a test. Dropping it
/// kills the process. Port, address, kill, pause and resume are the [`ServerProcess`]'s.
pub struct RedisServer {
    server: ServerProcess,
    /// The real server it runs, or None for the binary [`SERVER_ENV`] names.
    kind: Option<RealServer>,
}

impl Deref for RedisServer {
    type Target = ServerProcess;
    fn deref(&self) -> &ServerProcess {
        &self.server
    }
}

impl DerefMut for RedisServer {
    fn deref_mut(&mut self) -> &mut ServerProcess {
        &mut self.server
    }
}

/// The binary [`RedisServer::start`] runs: [`SERVER_ENV`] if set and not empty, else the real
/// server's ([`real_server`]: `redis-server` from PATH, or `valkey-server`).
///
/// The conformance suites (test binaries named `conformance_*`) always get a real
/// `redis-server`: they compare the model *with* Redis, so swapping Redis for the model
/// would make them compare the model with itself and prove nothing.
///
/// A relative path (`target/debug/redis-model`) is taken from the workspace root, since cargo
/// runs each test binary from its own package's directory; a bare name is looked up on PATH.
pub fn server_program() -> io::Result<String> {
    match std::env::var(SERVER_ENV) {
        Ok(program) if !program.trim().is_empty() => {
            let path = std::path::Path::new(&program);
            if path.is_relative() && path.components().count() > 1 {
                let root =
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(std::path::Path::new("."));
                Ok(root.join(path).to_string_lossy().into_owned())
            } else {
                Ok(program)
            }
        }
        _ => real_server()?.program(),
    }
}

/// `cargo` (the one running the tests, `CARGO`) in the workspace root, without what cargo
/// sets for the crate it runs (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*` and their kin), as
/// `cargo xtask test` starts its own builds: a build script may ask to run again when those
/// change (ring's does), so a build started here with the test's own would recompile ring and
/// everything above it instead of reusing the build the tests came from.
pub fn cargo() -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(std::path::Path::new(".")));
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
    cmd
}

/// True when [`RedisServer::start`] runs something other than the real server (see
/// [`SERVER_ENV`]).
pub fn server_overridden() -> bool {
    std::env::var(SERVER_ENV).is_ok_and(|p| !p.trim().is_empty())
}

impl RedisServer {
    /// Starts the real server ([`REAL_ENV`]: `redis-server` unless it says `valkey`), or the
    /// [`SERVER_ENV`] binary, on a free loopback port and waits until it accepts connections.
    /// A port picked free can be taken by another process before the server binds it: the
    /// server then exits, and the start is tried again on another port (five tries).
    pub fn start() -> io::Result<Self> {
        retry_on_fresh_ports(Self::start_on)
    }

    /// As [`RedisServer::start`], on `port` (used to restart a killed server on the same port).
    pub fn start_on(port: u16) -> io::Result<Self> {
        if server_overridden() {
            return Self::spawn(server_program()?, port, None);
        }
        Self::start_server(real_server()?, port, &[])
    }

    /// Starts the real server ([`real_server`]) on a free loopback port whatever
    /// [`SERVER_ENV`] says: for suites that compare something else with Redis itself.
    pub fn start_real() -> io::Result<Self> {
        let kind = real_server()?;
        retry_on_fresh_ports(|port| Self::start_server(kind, port, &[]))
    }

    /// Starts `kind`'s server on a free loopback port whatever [`SERVER_ENV`] and [`REAL_ENV`]
    /// say: the conformance suites' other side when Redis is compared with Valkey.
    pub fn start_kind(kind: RealServer) -> io::Result<Self> {
        retry_on_fresh_ports(|port| Self::start_server(kind, port, &[]))
    }

    /// Starts the real server ([`real_server`]) on a free loopback port with the Redis module
    /// at `module` loaded (`--loadmodule`); see [`build_module`].
    pub fn start_real_with_module(module: &std::path::Path) -> io::Result<Self> {
        let extra = [std::ffi::OsStr::new("--loadmodule"), module.as_os_str()];
        let kind = real_server()?;
        retry_on_fresh_ports(|port| Self::start_server(kind, port, &extra))
    }

    fn start_server(kind: RealServer, port: u16, extra: &[&std::ffi::OsStr]) -> io::Result<Self> {
        kind.require_for_tests();
        Ok(RedisServer { server: kind.start(port, extra)?, kind: Some(kind) })
    }

    fn spawn(program: String, port: u16, kind: Option<RealServer>) -> io::Result<Self> {
        if let Some(kind) = kind {
            return Self::start_server(kind, port, &[]);
        }
        let hint = format!("named by {SERVER_ENV}");
        Ok(RedisServer { server: ServerProcess::start(&program, port, &[], &hint)?, kind: None })
    }

    /// Which real server this is; None for the binary [`SERVER_ENV`] names.
    pub fn kind(&self) -> Option<RealServer> {
        self.kind
    }

    /// Restarts a killed server on the same port, empty (the same binary as before).
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let fresh = RedisServer::spawn(self.program().to_owned(), self.port(), self.kind)?;
        *self = fresh;
        Ok(())
    }

    /// A synchronous client connection, for setting up and inspecting state in tests.
    pub fn client(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection()
    }
}

/// `start` on a free port, again on another (up to five tries) when it fails for any reason but
/// a missing program or a bad setting.
fn retry_on_fresh_ports(start: impl Fn(u16) -> io::Result<RedisServer>) -> io::Result<RedisServer> {
    let mut last = io::Error::other("no try");
    for _ in 0..5 {
        match start(free_port()?) {
            Ok(server) => return Ok(server),
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::InvalidInput) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Names the Redis module's shared library built with the tests: `cargo xtask test` sets it to
/// the one its single test build made (see `limiter/module/Cargo.toml`), so that no test
/// compiles the module again with other dependency features.
pub const MODULE_ENV: &str = "REDIS_RATELIMIT_MODULE";

/// Builds the Redis module (`limiter/module`, with `profile`'s settings: `dev` or `release`)
/// and returns the path of the shared library `redis-server --loadmodule` takes; for `dev`,
/// the library [`MODULE_ENV`] names when it is set.
pub fn build_module(profile: &str) -> io::Result<std::path::PathBuf> {
    if let Some(built) = std::env::var_os(MODULE_ENV).filter(|_| profile == "dev") {
        return Ok(built.into());
    }
    let out = cargo()
        .args(["build", "-p", "redis-ratelimit-module", "--lib", "--message-format=json", "--profile", profile])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("building the Redis module failed: {}", out.status)));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains("redis_ratelimit_module"))
        .flat_map(|l| l.split('"').filter(|s| s.ends_with(".so")).map(std::path::PathBuf::from).collect::<Vec<_>>())
        .next()
        .ok_or_else(|| io::Error::other("cargo named no shared library for the Redis module"))
}

/// A program of the workspace for a test to start: the path in the environment variable `env`
/// when it is set (a test build that made it already can hand it over), otherwise built with
/// `cargo` and `args` (`build --workspace ...`: with the whole workspace selected, features
/// resolve as in `cargo test --workspace`, so what that build made is found, not built again)
/// and found in cargo's messages as the target `name`.
pub fn program(env: &str, args: &[&str], name: &str) -> io::Result<std::path::PathBuf> {
    if let Some(path) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Ok(path.into());
    }
    let out = cargo().args(args).arg("--message-format=json").stderr(std::process::Stdio::inherit()).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("cargo {} failed: {}", args.join(" "), out.status)));
    }
    let target = format!("\"name\":\"{name}\"");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains(&target))
        .find_map(|l| {
            l.split_once("\"executable\":\"").and_then(|(_, rest)| rest.split_once('"')).map(|(p, _)| p.into())
        })
        .ok_or_else(|| io::Error::other(format!("cargo {} named no executable {name}", args.join(" "))))
}

/// The example gateway (`limiter/examples/gateway.rs`), built once per test binary, or
/// `RATELIMIT_GATEWAY`.
pub fn gateway_binary() -> &'static std::path::Path {
    static BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| {
        let args = ["build", "--workspace", "--example", "gateway", "--features", "redis-ratelimit/metrics"];
        program("RATELIMIT_GATEWAY", &args, "gateway").expect("the example gateway builds")
    })
}

/// The rate limit service (`limiter/server`), built once per test binary, or
/// `RATELIMIT_SERVER`.
pub fn server_binary() -> &'static std::path::Path {
    static BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| {
        let args = ["build", "--workspace", "--bin", "redis-ratelimit-server"];
        program("RATELIMIT_SERVER", &args, "redis-ratelimit-server").expect("the rate limit service builds")
    })
}

/// The project README's examples compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
