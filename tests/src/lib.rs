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
//! REDIS_TESTS_SERVER=$PWD/target/debug/redis-model cargo test -p redis-tests --test agreement
//! ```
//!
//! The conformance suites compare the model *with* Redis, so they always get a real
//! `redis-server` whatever the variable says (see [`server_program`]); any other suite that
//! needs the real thing can ask for it with [`RedisServer::start_real`].

#![forbid(unsafe_code)]

use std::io;
use std::ops::{Deref, DerefMut};

pub use sim_real::process::free_port;
use sim_real::process::ServerProcess;

/// The environment variable naming a binary to start instead of `redis-server`.
pub const SERVER_ENV: &str = "REDIS_TESTS_SERVER";

/// A `redis-server` process (or the binary [`SERVER_ENV`] names) owned by a test. Dropping it
/// kills the process. Port, address, kill, pause and resume are the [`ServerProcess`]'s.
pub struct RedisServer {
    server: ServerProcess,
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

/// True when [`RedisServer::start`] runs something other than `redis-server` (see
/// [`SERVER_ENV`]).
pub fn server_overridden() -> bool {
    server_program() != "redis-server"
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

    /// Starts a real `redis-server` on a free loopback port with the Redis module at `module`
    /// loaded (`--loadmodule`); see [`build_module`].
    pub fn start_real_with_module(module: &std::path::Path) -> io::Result<Self> {
        sim_real::process::require_for_tests("redis-server", "redis-server");
        let extra = [std::ffi::OsStr::new("--loadmodule"), module.as_os_str()];
        let server =
            ServerProcess::start("redis-server", free_port()?, &extra, "install Debian's `redis-server` package")?;
        Ok(RedisServer { server })
    }

    fn spawn(program: String, port: u16) -> io::Result<Self> {
        if program == "redis-server" {
            sim_real::process::require_for_tests("redis-server", "redis-server");
        }
        let hint = if program == "redis-server" {
            "install Debian's `redis-server` package".to_string()
        } else {
            format!("named by {SERVER_ENV}")
        };
        Ok(RedisServer { server: ServerProcess::start(&program, port, &[], &hint)? })
    }

    /// Restarts a killed server on the same port, empty (the same binary as before).
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let fresh = RedisServer::spawn(self.program().to_owned(), self.port())?;
        *self = fresh;
        Ok(())
    }

    /// A synchronous client connection, for setting up and inspecting state in tests.
    pub fn client(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection()
    }
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
