//! The Redis a real-lane run talks to, and the faults that need its process: a private
//! `redis-server` the run controls, an existing server given by URL (no process control),
//! or the embedded mini-redis.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::AddAssign;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisResult};

use super::process::{save, RealServer, RedisProcess};
use results::RedisCost;

/// Commands the harness itself sends, left out of a run's command count.
const HARNESS_COMMANDS: &[&str] =
    &["info", "dbsize", "save", "client|pause", "client|unpause", "script|flush", "scan", "unlink", "ping"];

/// ServerCounters Redis keeps per process lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ServerCounters {
    commands: u64,
    round_trips: u64,
    scripts_run: u64,
    expired_keys: u64,
    bytes_in: u64,
    bytes_out: u64,
}

impl AddAssign for ServerCounters {
    fn add_assign(&mut self, o: ServerCounters) {
        self.commands += o.commands;
        self.round_trips += o.round_trips;
        self.scripts_run += o.scripts_run;
        self.expired_keys += o.expired_keys;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
    }
}

impl ServerCounters {
    fn since(self, base: ServerCounters) -> ServerCounters {
        ServerCounters {
            commands: self.commands.saturating_sub(base.commands),
            round_trips: self.round_trips.saturating_sub(base.round_trips),
            scripts_run: self.scripts_run.saturating_sub(base.scripts_run),
            expired_keys: self.expired_keys.saturating_sub(base.expired_keys),
            bytes_in: self.bytes_in.saturating_sub(base.bytes_in),
            bytes_out: self.bytes_out.saturating_sub(base.bytes_out),
        }
    }
}

fn info_field(info: &str, name: &str) -> Option<u64> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
}

/// Calls of every command but the harness's own, from `INFO commandstats`
/// (`cmdstat_get:calls=3,usec=...`).
fn client_commands(info: &str) -> u64 {
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            if HARNESS_COMMANDS.contains(&name) {
                return None;
            }
            rest.split(',').find_map(|kv| kv.strip_prefix("calls=")?.parse::<u64>().ok())
        })
        .sum()
}

/// Calls clients sent. Redis counts a script's own calls under their commands too, so where
/// scripts ran (every call of the library is one) the calls are the scripts' (`EVAL`,
/// `EVALSHA`); a client that runs no script (the naive subjects) makes every command a call.
fn round_trips(info: &str) -> u64 {
    let calls = |command: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
            .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix("calls=")?.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    match calls("eval") + calls("evalsha") {
        0 => client_commands(info),
        scripts => scripts,
    }
}

/// Scripts Redis ran: EVAL and EVALSHA calls that did not fail (a NOSCRIPT is a failed call).
fn scripts_run(info: &str) -> u64 {
    let stat = |command: &str, name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
            .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix(&format!("{name}="))?.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    ["eval", "evalsha"].iter().map(|c| stat(c, "calls").saturating_sub(stat(c, "failed_calls"))).sum()
}

/// The counters and `used_memory`, in one `INFO` (Redis 7 takes several sections).
fn snapshot(conn: &mut redis::Connection) -> RedisResult<(ServerCounters, u64)> {
    let info: String = redis::cmd("INFO").arg("stats").arg("commandstats").arg("memory").query(conn)?;
    let counters = ServerCounters {
        commands: client_commands(&info),
        round_trips: round_trips(&info),
        scripts_run: scripts_run(&info),
        expired_keys: info_field(&info, "expired_keys").unwrap_or(0),
        bytes_in: info_field(&info, "total_net_input_bytes").unwrap_or(0),
        bytes_out: info_field(&info, "total_net_output_bytes").unwrap_or(0),
    };
    Ok((counters, info_field(&info, "used_memory").unwrap_or(0)))
}

/// What a run may do to the Redis processes it owns: one `redis-server` ([`Controller`]) or a
/// cluster (`super::cluster_server`). Every method blocks; call them off the runtime's workers
/// (signals excepted: they are quick).
pub(crate) trait ServerControl: Send {
    /// Where instances' proxies connect: the server, or every node of a cluster.
    fn upstreams(&self) -> Vec<SocketAddr>;
    /// The nodes' ports, for a cluster (instances then reach each through its own proxy).
    fn cluster_nodes(&self) -> Option<Vec<u16>> {
        None
    }
    /// SIGSTOP (nested pauses need as many resumes).
    fn pause(&mut self) -> anyhow::Result<()>;
    /// SIGCONT once the last pause ends.
    fn resume(&mut self) -> anyhow::Result<()>;
    /// Nothing is decided after this returns, until the crash.
    fn freeze(&mut self) -> anyhow::Result<()>;
    /// SIGKILL, saving first when `keep_data`.
    fn crash(&mut self, keep_data: bool) -> anyhow::Result<()>;
    /// Back on the same port(s), with the snapshot when `keep_data`.
    fn restart(&mut self, keep_data: bool) -> anyhow::Result<()>;
    /// `SCRIPT FLUSH`.
    fn flush_scripts(&mut self) -> anyhow::Result<()>;
    /// A failover's start (`start`) or end, where the server has replicas; false when it has
    /// none (the lane then plays it as a crash that keeps every write).
    fn fail_over(&mut self, _start: bool) -> anyhow::Result<bool> {
        Ok(false)
    }
    /// What the run cost the server(s).
    fn cost(&mut self) -> RedisCost;
}

impl ServerControl for Controller {
    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.addr()]
    }
    fn pause(&mut self) -> anyhow::Result<()> {
        Controller::pause(self)
    }
    fn resume(&mut self) -> anyhow::Result<()> {
        Controller::resume(self)
    }
    fn freeze(&mut self) -> anyhow::Result<()> {
        Controller::freeze(self)
    }
    fn crash(&mut self, keep_data: bool) -> anyhow::Result<()> {
        Controller::crash(self, keep_data)
    }
    fn restart(&mut self, keep_data: bool) -> anyhow::Result<()> {
        Controller::restart(self, keep_data)
    }
    fn flush_scripts(&mut self) -> anyhow::Result<()> {
        Controller::flush_scripts(self)
    }
    fn cost(&mut self) -> RedisCost {
        Controller::cost(self)
    }
}

/// A private `redis-server` under the run's control. Every method blocks (process start,
/// side-connection round trips); call them off the runtime's workers.
pub(crate) struct Controller {
    process: RedisProcess,
    side: Option<redis::Connection>,
    /// Active pauses (overlapping pauses need as many resumes).
    pause_depth: u32,
    /// Holds the port while the server is dead, so no other socket (another run's server,
    /// or an outgoing connection's ephemeral port) takes it before the restart. It listens
    /// (a merely bound socket does not stop another SO_REUSEADDR bind) but never accepts;
    /// the proxies refuse connections meanwhile, so nothing dials it.
    placeholder: Option<std::net::TcpListener>,
    /// ServerCounters of the process lifetimes that ended in a crash.
    spent: ServerCounters,
    memory_at_start: u64,
}

impl Controller {
    /// Starts `kind`'s server keeping its snapshots in `dir`, loading the Redis `module` if given.
    pub(crate) fn start(
        kind: RealServer,
        dir: &std::path::Path,
        module: Option<&std::path::Path>,
    ) -> anyhow::Result<Controller> {
        let process = RedisProcess::start(kind, dir, module)?;
        let mut c = Controller {
            process,
            side: None,
            pause_depth: 0,
            placeholder: None,
            spent: ServerCounters::default(),
            memory_at_start: 0,
        };
        c.memory_at_start = c.side().and_then(snapshot).map(|(_, m)| m).unwrap_or(0);
        Ok(c)
    }

    /// Where the server listens (the same port across restarts).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.process.addr()
    }

    fn side(&mut self) -> RedisResult<&mut redis::Connection> {
        if self.side.is_none() {
            self.side = Some(self.process.client()?);
        }
        match self.side.as_mut() {
            Some(conn) => Ok(conn),
            None => unreachable!("set above"),
        }
    }

    /// Runs `f` on the side connection; on any error the connection is dropped (its state
    /// is unknown) and the next call dials afresh.
    fn with_side<T>(&mut self, f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>) -> RedisResult<T> {
        let result = self.side().and_then(f);
        if result.is_err() {
            self.side = None;
        }
        result
    }

    /// SIGSTOP (unless already paused or down).
    pub(crate) fn pause(&mut self) -> anyhow::Result<()> {
        self.pause_depth += 1;
        if self.pause_depth == 1 && self.process.is_running() {
            self.process.pause()?;
        }
        Ok(())
    }

    /// SIGCONT once the last pause ends.
    pub(crate) fn resume(&mut self) -> anyhow::Result<()> {
        if self.pause_depth == 0 {
            return Ok(());
        }
        self.pause_depth -= 1;
        if self.pause_depth == 0 && self.process.is_running() {
            self.process.resume()?;
        }
        Ok(())
    }

    /// The instant of a crash, as far as decisions go: `CLIENT PAUSE .. WRITE` makes every
    /// script and SET wait (reads still answer) until the process dies, so nothing is
    /// decided after this returns. A paused (SIGSTOP) server decides nothing anyway.
    pub(crate) fn freeze(&mut self) -> anyhow::Result<()> {
        if self.process.is_running() && self.pause_depth == 0 {
            self.with_side(|c| redis::cmd("CLIENT").arg("PAUSE").arg(60_000).arg("WRITE").query::<()>(c))
                .context("CLIENT PAUSE WRITE before a crash")?;
        }
        Ok(())
    }

    /// SIGKILL, after [`Controller::freeze`]. With `keep_data` the data is saved first, so
    /// the snapshot holds everything Redis decided before it died, as persistence would. A
    /// server that is paused (SIGSTOP) at that moment cannot save: it dies with what it
    /// last saved.
    pub(crate) fn crash(&mut self, keep_data: bool) -> anyhow::Result<()> {
        if !self.process.is_running() {
            return Ok(());
        }
        if self.pause_depth == 0 {
            if let Ok((counters, _)) = self.with_side(snapshot) {
                self.spent += counters;
            }
            if keep_data {
                self.with_side(save).context("SAVE before a crash that keeps its data")?;
            }
        }
        self.side = None;
        self.process.kill();
        self.placeholder = std::net::TcpListener::bind(self.process.addr()).ok();
        Ok(())
    }

    /// Starts the crashed server again on its port, with its snapshot when `keep_data`.
    /// A pause still in force stops the new process too.
    pub(crate) fn restart(&mut self, keep_data: bool) -> anyhow::Result<()> {
        if self.process.is_running() {
            return Ok(());
        }
        self.placeholder = None;
        self.process.restart(keep_data).context("restarting the server after a crash")?;
        if self.pause_depth > 0 {
            self.process.pause()?;
        }
        Ok(())
    }

    /// `SCRIPT FLUSH`. A paused server gets the command written to a fresh connection and
    /// runs it when it resumes (it cannot answer now); a dead one has no scripts anyway.
    pub(crate) fn flush_scripts(&mut self) -> anyhow::Result<()> {
        if !self.process.is_running() {
            return Ok(());
        }
        if self.pause_depth > 0 {
            let mut raw = std::net::TcpStream::connect_timeout(&self.addr(), Duration::from_millis(500))?;
            raw.write_all(b"*2\r\n$6\r\nSCRIPT\r\n$5\r\nFLUSH\r\n")?;
            return Ok(());
        }
        self.with_side(|c| redis::cmd("SCRIPT").arg("FLUSH").query::<()>(c)).context("SCRIPT FLUSH")?;
        Ok(())
    }

    /// What the run cost, summed over the server's lifetimes. Resumes a paused server.
    pub(crate) fn cost(&mut self) -> RedisCost {
        if self.pause_depth > 0 {
            self.pause_depth = 1;
            let _ = self.resume();
        }
        let mut total = self.spent;
        let mut keys = 0;
        let mut memory = 0;
        if self.process.is_running() {
            if let Ok((counters, used)) = self.with_side(snapshot) {
                total += counters;
                memory = used.saturating_sub(self.memory_at_start);
            }
            keys = self.with_side(|c| redis::cmd("DBSIZE").query::<u64>(c)).unwrap_or(0);
        }
        let immortal = if self.process.is_running() {
            self.with_side(|c| keys_without_ttl(c, "*")).unwrap_or_default()
        } else {
            Vec::new()
        };
        RedisCost {
            commands: total.commands,
            round_trips: total.round_trips,
            scripts_run: total.scripts_run,
            expired_keys: total.expired_keys,
            bytes_in: total.bytes_in,
            bytes_out: total.bytes_out,
            keys,
            memory_bytes: memory,
            ..RedisCost::without_ttl(immortal)
        }
    }
}

/// An existing server given by URL: shared, so the run's keys get their own prefix and
/// its cost is the difference of the server's counters (other clients' traffic included).
pub(crate) struct External {
    addr: SocketAddr,
    conn: redis::Connection,
    prefix: String,
    base: ServerCounters,
    memory_at_start: u64,
}

impl std::fmt::Debug for External {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("External").field("addr", &self.addr).field("prefix", &self.prefix).finish()
    }
}

impl External {
    /// Connects to `url` (plain TCP, database 0, no password: the limiter's store dials
    /// through the proxy and speaks to database 0 without AUTH).
    pub(crate) fn connect(url: &str, prefix: String) -> anyhow::Result<External> {
        let info = url.into_connection_info().map_err(|e| anyhow!("--redis-url {url:?} is not a Redis URL: {e}"))?;
        let settings = info.redis_settings();
        if settings.db() != 0 || settings.password().is_some() {
            bail!(
                "--redis-url {url:?}: the real lane talks to database 0 without a password (its limiters dial \
                 through a fault-injecting proxy with no AUTH/SELECT); give a URL without them"
            );
        }
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            bail!("--redis-url {url:?}: only plain TCP (redis://host:port) is supported");
        };
        let addr = (host.as_str(), *port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}:{port}"))?
            .next()
            .ok_or_else(|| anyhow!("{host}:{port} resolves to no address"))?;
        let conn = redis::Client::open(url)?
            .get_connection_with_timeout(Duration::from_secs(2))
            .with_context(|| format!("cannot connect to --redis-url {url}"))?;
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut e = External { addr, conn, prefix, base: ServerCounters::default(), memory_at_start: 0 };
        let (base, memory) = snapshot(&mut e.conn).context("INFO on --redis-url")?;
        (e.base, e.memory_at_start) = (base, memory);
        Ok(e)
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn flush_scripts(&mut self) -> anyhow::Result<()> {
        redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut self.conn).context("SCRIPT FLUSH")?;
        Ok(())
    }

    fn own_keys(&mut self) -> RedisResult<Vec<String>> {
        // The library's keys start with the prefix; a subject's have it where its key goes.
        let pattern = format!("*{}:*", self.prefix);
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let (next, mut batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut self.conn)?;
            keys.append(&mut batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// The counters' growth since the start, the run's own keys (then deleted).
    pub(crate) fn cost(&mut self) -> RedisCost {
        let (counters, memory) = snapshot(&mut self.conn).unwrap_or((self.base, self.memory_at_start));
        let spent = counters.since(self.base);
        let keys = self.own_keys().unwrap_or_default();
        let immortal = keys_without_ttl(&mut self.conn, &format!("*{}:*", self.prefix)).unwrap_or_default();
        for chunk in keys.chunks(500) {
            let _: RedisResult<u64> = redis::cmd("UNLINK").arg(chunk).query(&mut self.conn);
        }
        RedisCost {
            commands: spent.commands,
            round_trips: spent.round_trips,
            scripts_run: spent.scripts_run,
            expired_keys: spent.expired_keys,
            bytes_in: spent.bytes_in,
            bytes_out: spent.bytes_out,
            keys: keys.len() as u64,
            memory_bytes: memory.saturating_sub(self.memory_at_start),
            ..RedisCost::without_ttl(immortal)
        }
    }
}

/// The keys matching `pattern` that will never expire (`PTTL` -1).
fn keys_without_ttl(conn: &mut redis::Connection, pattern: &str) -> RedisResult<Vec<String>> {
    let mut out = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000).query(conn)?;
        for key in batch {
            if redis::cmd("PTTL").arg(&key).query::<i64>(conn)? == -1 {
                out.push(key);
            }
        }
        if next == 0 {
            out.sort();
            return Ok(out);
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(c: &mut Controller, key: &str) -> Option<String> {
        c.with_side(|conn| redis::cmd("GET").arg(key).query(conn)).expect("GET")
    }

    #[test]
    fn a_crash_keeps_its_data_only_when_asked_and_a_pause_answers_nothing_until_resumed() -> anyhow::Result<()> {
        crate::process::require_for_tests("redis-server", "redis-server");
        let dir = tempfile::tempdir()?;
        let mut c = Controller::start(RealServer::Redis, dir.path(), None)?;
        let addr = c.addr();
        c.with_side(|conn| redis::cmd("SET").arg("k").arg("v").query::<()>(conn))?;

        c.freeze()?;
        c.crash(true)?;
        assert!(std::net::TcpStream::connect(addr).is_ok(), "the placeholder holds the port");
        c.restart(true)?;
        assert_eq!(c.addr(), addr, "same port");
        assert_eq!(get(&mut c, "k").as_deref(), Some("v"), "kept through SAVE and reload");
        c.with_side(|conn| redis::cmd("SET").arg("w").arg("1").query::<()>(conn))?;

        c.freeze()?;
        c.crash(false)?;
        c.restart(false)?;
        assert_eq!(get(&mut c, "k"), None, "restarted empty");
        assert_eq!(get(&mut c, "w"), None);

        c.pause()?;
        let mut raw = std::net::TcpStream::connect(addr)?;
        raw.set_read_timeout(Some(Duration::from_millis(200)))?;
        raw.write_all(b"PING\r\n")?;
        let mut buf = [0u8; 16];
        assert!(raw.read(&mut buf).is_err(), "a stopped server answers nothing");
        c.resume()?;
        raw.set_read_timeout(Some(Duration::from_secs(2)))?;
        let n = raw.read(&mut buf)?;
        assert_eq!(&buf[..n], b"+PONG\r\n", "and answers what queued up once resumed");

        let cost = c.cost();
        assert!(cost.commands >= 3, "{cost:?}");
        Ok(())
    }

    #[test]
    fn info_parsing_counts_the_limiters_commands_and_not_the_harness() {
        let info = "# Stats\r\ntotal_net_input_bytes:1234\r\ntotal_net_output_bytes:99\r\n\
                    # Commandstats\r\ncmdstat_evalsha:calls=10,usec=5,usec_per_call=0.5,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_eval:calls=2,usec=5\r\ncmdstat_info:calls=7,usec=1\r\ncmdstat_client|pause:calls=1,usec=1\r\n\
                    # Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n";
        assert_eq!(client_commands(info), 12);
        assert_eq!(info_field(info, "total_net_input_bytes"), Some(1234));
        assert_eq!(info_field(info, "used_memory"), Some(1_048_576));
    }
}
