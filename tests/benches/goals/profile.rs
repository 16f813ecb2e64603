//! Where a script's Redis time goes, counted rather than timed: a second `redis-server` runs
//! under valgrind's callgrind, which counts the instructions Redis executes inside `call()`
//! (every command it runs, a script's own `redis.call`s included). A count is the same from one
//! run to the next whatever else the machine is doing, so two scripts' counts compare exactly
//! where their µs, on a shared machine, differ by tens of percent between runs.
//!
//! Each count is split at the functions Redis 7 runs a script through:
//!
//! - **commands**: inside `scriptCall`, the commands the script asks for (`GET`, `SET`, ...);
//! - **Lua**: the rest of `lua_pcall`, the script's own code and the conversion of each
//!   `redis.call`'s arguments and reply between Lua and Redis;
//! - **interface**: the rest of `luaCallFunction`, building `KEYS` and `ARGV` as Lua tables and
//!   turning the script's reply into Redis's, and Lua's garbage collection after the script;
//! - **dispatch**: everything else inside `call()`, finding the script by its SHA and
//!   replying.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::support::*;

/// Instructions per call, split as the module's documentation says.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Profile {
    pub(crate) total: f64,
    pub(crate) commands: f64,
    pub(crate) lua: f64,
    pub(crate) interface: f64,
    pub(crate) dispatch: f64,
}

impl Profile {
    /// `total 50.4k = commands 7.9k + Lua 25.2k + interface 15.5k + dispatch 1.8k`.
    pub(crate) fn describe(&self) -> String {
        let k = |v: f64| format!("{:.1}k", v / 1000.0);
        format!(
            "{} instructions = commands {} + Lua {} + KEYS/ARGV/reply {} + dispatch {}",
            k(self.total),
            k(self.commands),
            k(self.lua),
            k(self.interface),
            k(self.dispatch)
        )
    }
}

/// `redis-server` under callgrind, counting from the first [`Callgrind::profile`] on.
pub(crate) struct Callgrind {
    child: Child,
    port: u16,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Callgrind {
    /// Starts the server, or says why not (valgrind missing, the server never answering): the
    /// profile is an explanation beside the timed goals, so the bench goes on without it.
    pub(crate) fn start() -> Result<Self, String> {
        Self::start_with(&[])
    }

    /// As [`Callgrind::start`], with `extra` arguments for the server (`--loadmodule path`).
    pub(crate) fn start_with(extra: &[&std::ffi::OsStr]) -> Result<Self, String> {
        for program in ["valgrind", "callgrind_control", "callgrind_annotate"] {
            if !sim_real::process::on_path(program) {
                return Err(format!("{program} is not installed (Debian's valgrind package)"));
            }
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = dir.path().join("callgrind.out");
        let port = redis_tests::free_port().map_err(|e| e.to_string())?;
        let child = Command::new("valgrind")
            .args(["--tool=callgrind", "--collect-atstart=no", "--toggle-collect=call"])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .args(["redis-server", "--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server under valgrind: {e}"))?;
        let server = Callgrind { child, port, out, _dir: dir };
        // Valgrind translates the whole server before it listens: seconds, not milliseconds.
        for _ in 0..600 {
            if server.client().and_then(|mut c| redis::cmd("PING").query::<String>(&mut c)).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err("redis-server under valgrind never answered".into())
    }

    pub(crate) fn client(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    fn control(&self, option: &str) -> Result<(), String> {
        let status = Command::new("callgrind_control")
            .args([option, &self.child.id().to_string()])
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("callgrind_control: {e}"))?;
        status.success().then_some(()).ok_or_else(|| format!("callgrind_control {option} failed: {status}"))
    }

    /// The instructions per `EVALSHA` of what `send` sends (through `redis-benchmark` on this
    /// server's port), on a flushed server.
    pub(crate) fn profile(&self, send: impl FnOnce(u16)) -> Result<Profile, String> {
        self.profile_of("evalsha", send)
    }

    /// As [`Callgrind::profile`], per call of `command` (as `INFO commandstats` names it).
    pub(crate) fn profile_of(&self, command: &str, send: impl FnOnce(u16)) -> Result<Profile, String> {
        let mut conn = self.client().map_err(|e| e.to_string())?;
        flush(&mut conn);
        self.control("-z")?;
        send(self.port);
        self.control("-d")?;
        let calls = commandstats(&mut conn).iter().find(|s| s.0 == command).map_or(0.0, |s| s.1);
        if calls == 0.0 {
            return Err(format!("no {command} reached the profiled server"));
        }
        let dump = newest_dump(&self.out)?;
        let annotated = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--threshold=100"])
            .arg(&dump)
            .output()
            .map_err(|e| format!("callgrind_annotate: {e}"))?;
        let _ = std::fs::remove_file(&dump);
        let text = String::from_utf8_lossy(&annotated.stdout);
        let total = inclusive(&text, "call");
        let script = inclusive(&text, "luaCallFunction");
        let pcall = inclusive(&text, "lua_pcall");
        let commands = inclusive(&text, "scriptCall");
        if total == 0.0 || (command == "evalsha" && script == 0.0) {
            return Err("the profile names no call() or luaCallFunction (a redis-server without symbols?)".into());
        }
        Ok(Profile {
            total: total / calls,
            commands: commands / calls,
            lua: (pcall - commands) / calls,
            interface: (script - pcall) / calls,
            dispatch: (total - script) / calls,
        })
    }
}

impl Drop for Callgrind {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The dump callgrind wrote last (`callgrind.out.1`, `.2`, ... beside the base name).
fn newest_dump(base: &Path) -> Result<PathBuf, String> {
    let dir = base.parent().ok_or("no dump directory")?;
    let name = base.file_name().and_then(|n| n.to_str()).ok_or("no dump name")?;
    std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let n: u32 = file.strip_prefix(name)?.strip_prefix('.')?.parse().ok()?;
            Some((n, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
        .ok_or_else(|| "callgrind wrote no dump".into())
}

/// The inclusive count of `function` in `callgrind_annotate --inclusive=yes` output, whose
/// lines read `  96,951,593 (96.30%)  ???:luaCallFunction [/usr/bin/redis-server]`.
fn inclusive(annotated: &str, function: &str) -> f64 {
    annotated
        .lines()
        .find_map(|l| {
            let (count, rest) = l.trim_start().split_once(' ')?;
            let (_, name) = rest.split_once(':')?;
            let name = name.split(" [").next()?;
            (name == function).then(|| count.replace(',', "").parse().ok())?
        })
        .unwrap_or(0.0)
}
