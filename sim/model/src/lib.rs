//! An in-process Redis: the embedded server of the simulation harness.
//!
//! The limiter's production client (redis-rs) talks to it unchanged over any byte stream: a
//! turmoil socket inside a simulation, or loopback TCP in tests and in the `redis-model`
//! binary. It answers as Redis 7.0 does, byte for byte where the conformance suite can check
//! (`tests/tests/redis/conformance_*.rs` compare it with a real `redis-server`), and runs Lua scripts
//! atomically in Lua 5.1 with Redis's sandbox and conversion rules.
//!
//! # Layout
//!
//! - [`resp`]: RESP2 request parsing with hard bounds; [`Reply`] and its encoding.
//! - `num`: Redis's number parsing and printing (`string2ll`, `strtod`, `%.17g`, `long double`).
//! - `keyspace`: strings, hashes, sorted sets, lists, sets (each in Redis's encoding), expiry,
//!   idle times.
//! - `commands`: the command table and every keyspace command.
//! - `session`: per-connection state, CLIENT SETNAME and HELLO.
//! - `script`: EVAL/EVALSHA with mlua.
//! - `lua_libs`: Redis's `cjson`, `bit`, `struct` and `cmsgpack` Lua libraries.
//! - `server`: serving a stream ([`serve_connection`], [`serve_tcp`], [`serve_turmoil`]).
//! - `faults`: crash, refusal, pause, latency.
//! - [`server_clock`]: the injected server clock (microseconds; the limiter's own clock is
//!   `redis_ratelimit::Clock`, in milliseconds).
//!
//! # Commands
//!
//! Strings: GET SET (NX XX GET KEEPTTL EX PX EXAT PXAT) SETNX SETEX PSETEX GETSET GETDEL GETEX (EX
//! PX EXAT PXAT PERSIST) MGET MSET MSETNX INCR DECR INCRBY DECRBY INCRBYFLOAT STRLEN APPEND
//! GETRANGE SUBSTR SETRANGE LCS (LEN IDX MINMATCHLEN WITHMATCHLEN). Keys: DEL UNLINK EXISTS TYPE
//! KEYS SCAN (MATCH COUNT TYPE) RANDOMKEY TOUCH COPY (DB REPLACE) RENAME RENAMENX OBJECT
//! ENCODING|REFCOUNT|IDLETIME|FREQ|HELP, and expiry: EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT
//! LT) TTL PTTL EXPIRETIME PEXPIRETIME PERSIST. Hashes: HGET HSET HMSET HSETNX HMGET HGETALL HKEYS
//! HVALS HDEL HEXISTS HLEN HSTRLEN HINCRBY HINCRBYFLOAT HSCAN HRANDFIELD. Sorted sets: ZADD (NX XX
//! GT LT CH INCR) ZINCRBY ZREM ZCARD ZCOUNT ZLEXCOUNT ZSCORE ZMSCORE ZRANK ZREVRANK ZRANGE (BYSCORE
//! BYLEX REV LIMIT WITHSCORES) ZRANGESTORE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX
//! ZREVRANGEBYLEX ZREMRANGEBYSCORE ZREMRANGEBYRANK ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZMPOP ZUNION
//! ZINTER ZDIFF ZUNIONSTORE ZINTERSTORE ZDIFFSTORE (WEIGHTS AGGREGATE WITHSCORES) ZINTERCARD ZSCAN
//! ZRANDMEMBER BZMPOP. Lists: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP (with a count) LMPOP BLMPOP LLEN
//! LRANGE LTRIM LINDEX LSET LINSERT LREM LPOS (RANK COUNT MAXLEN) LMOVE RPOPLPUSH. Sets: SADD SREM
//! SCARD SISMEMBER SMISMEMBER SMEMBERS SMOVE SINTER SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE
//! SINTERCARD SSCAN SPOP SRANDMEMBER. Scripts: EVAL EVALSHA SCRIPT LOAD|EXISTS|FLUSH. Server: PING
//! ECHO SELECT TIME DBSIZE FLUSHALL FLUSHDB INFO MEMORY USAGE HELLO CLIENT
//! SETNAME|GETNAME|ID|SETINFO. Each value keeps the encoding Redis would give it (OBJECT ENCODING;
//! see `keyspace`). Anything else gets Redis's "unknown command" error, from a client and from
//! `redis.call` alike (where Redis 7.0 answers "Unknown Redis command called from script", naming
//! no command). To tell which command a user's script needed, ask [`Model::script_unknown_command`]
//! (or [`ModelHandle::script_unknown_command`]) after the script ran: the name of the last
//! unimplemented command it called. [`ModelStats`] counts every unimplemented command called, by
//! name.
//!
//! Time follows Redis 7.0: whether a key has expired is judged at the command's start (for a
//! script, the script's start, so no key vanishes mid-script), while relative deadlines
//! (EXPIRE, SET PX) and the TTL that TTL/PTTL report use the clock read at that moment. As on
//! a real server, no two commands share a microsecond: each starts at least one microsecond
//! after the one before, even when the injected clock has not moved (a clock set by hand, or
//! a simulated one moving in whole milliseconds), so two scripts never read the same `TIME`.
//! A clock stepped back is followed, as Redis follows the wall clock.
//!
//! Where it deliberately differs: one database (SELECT of another, and COPY ... DB to another, are
//! refused); RESP2 only (HELLO 3 is refused, clients stay on RESP2); KEYS and SCAN list keys in
//! byte order (Redis's order is its hash table's, seeded at random); HGETALL always in insertion
//! order; a set Redis keeps as a hash table lists in byte order (an intset's members in numeric
//! order, as Redis); every scan (SCAN, HSCAN, SSCAN, ZSCAN) answers in one reply with cursor 0, as
//! Redis does for a small collection, where Redis walks a big one a few buckets a call (see
//! `commands::scan`); SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and RANDOMKEY pick with the
//! model's own fixed-seed generator, and refuse to repeat more than 2^20 picks in one reply (see
//! `commands::random`); BLMPOP and BZMPOP never wait, as in a script, so a client with nothing to
//! pop gets the null array at once, as if its timeout had passed (the other blocking commands,
//! which scripts may not call, are not implemented); BYLEX on a sorted set with different scores
//! walks it as Redis walks a listpack (Redis leaves the result unspecified); MEMORY USAGE and INFO
//! memory figures are estimates; no persistence; a runaway script is killed after an instruction
//! budget instead of leaving the server BUSY (see `script`); library tables in scripts are
//! read-only proxies that `pairs` sees empty (see `script`).
//!
//! # Driving it
//!
//! ```
//! use redis_model::{ManualServerClock, ModelHandle, Reply};
//!
//! let clock = ManualServerClock::from_millis(1_700_000_000_000);
//! let redis = ModelHandle::new(clock.clone());
//! assert_eq!(redis.call(&[b"SET", b"k", b"v", b"PX", b"100"]), Reply::ok());
//! clock.advance_millis(101);
//! assert_eq!(redis.call(&[b"GET", b"k"]), Reply::Nil);
//! ```
//!
//! A host serves it with [`serve_connection`] (one stream) or [`serve_tcp`]/[`serve_turmoil`]
//! (a listener), and injects faults with [`ModelHandle::crash`], [`ModelHandle::restart`],
//! [`ModelHandle::pause`], [`ModelHandle::set_latency`], [`ModelHandle::flush_scripts`] and
//! [`ModelHandle::reject_connections`]. Time for TIME and expiry comes from the [`ServerClock`] given
//! at construction; pauses and latency use `tokio::time` (virtual under turmoil).
//!
//! **Architecture invariant:** nothing in the model reads the system clock except
//! [`SystemServerClock`], and no output depends on `HashMap` iteration order.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

mod commands;
mod faults;
mod keyspace;
mod lua_libs;
mod lua_stack;
mod num;
mod replica;
pub mod resp;
mod script;
mod server;
pub mod server_clock;
mod session;
pub mod standalone;

pub use commands::NetCounters;
pub use replica::Failover;
pub use resp::Reply;
pub use server::{serve_connection, serve_tcp, serve_turmoil};
pub use server_clock::{FnServerClock, ManualServerClock, ServerClock, SystemServerClock};
pub use session::Session;

use commands::{arity_error, is, lookup, unknown_command, unknown_subcommand, Ctx, Db, Handler, Lookup, ModelCmd};
use faults::{lock, Faults};
use keyspace::Keyspace;
use replica::Replica;
use script::ScriptEngine;
use session::{hello, set_client_name};

/// Limits of the model that Redis expresses differently (see the `script` module docs).
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Lua VM instructions one script may execute before the model kills it. Default 10^8
    /// (a fraction of a second of pure Lua), far beyond any rate-limiting script.
    pub script_instruction_budget: u64,
    /// Bytes the Lua state may hold (scripts, their tables and strings). Default 256 MiB.
    pub lua_memory_limit: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig { script_instruction_budget: 100_000_000, lua_memory_limit: 256 << 20 }
    }
}

/// The model proper: keyspace, script engine and counters. Single-threaded; share it through
/// a [`ModelHandle`].
pub struct Model {
    db: Db,
    scripts: ScriptEngine,
    next_client_id: u64,
    /// A replica behind this primary, when replication is on ([`Model::enable_replication`]).
    replica: Option<Replica>,
    client_commands: u64,
}

/// Counters a report can show.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelStats {
    /// Calls per command (full name, lower case: "evalsha", "script|load"), including commands
    /// run by scripts.
    pub calls: BTreeMap<String, u64>,
    /// All commands executed.
    pub total_commands: u64,
    /// Scripts run (EVAL or EVALSHA that found the script): with one script per decision, runs
    /// beyond the decisions a client received are calls it gave up on that Redis ran anyway.
    pub scripts_run: u64,
    /// Commands clients sent (a script's own calls are not counted): the round trips.
    pub client_commands: u64,
    /// Calls of commands the model does not implement (by lower-case name, "dump" or
    /// "client|kill"), from clients and from scripts. Redis would know most of them: they name
    /// what a script needs that the model lacks.
    pub unknown_commands: BTreeMap<String, u64>,
    /// Request bytes read and reply bytes written, over all connections.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Connections accepted, refused by a fault, and open now.
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub connected_clients: u64,
    /// Keys, keys with a deadline, and keys removed by expiry.
    pub keys: usize,
    pub keys_with_expiry: usize,
    pub expired_keys: u64,
    /// Estimated bytes of all keys (the sum of MEMORY USAGE) and of the Lua state.
    pub dataset_bytes: usize,
    pub lua_bytes: usize,
    /// Scripts in the cache.
    pub cached_scripts: usize,
}

/// Errors building a model (only the Lua state can fail to start).
#[derive(Debug)]
pub struct ModelError(String);

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start the Redis model: {}", self.0)
    }
}

impl std::error::Error for ModelError {}

impl Model {
    /// A model reading time from `clock`, with default limits.
    pub fn try_new(clock: Arc<dyn ServerClock>, config: ModelConfig) -> Result<Model, ModelError> {
        let scripts = ScriptEngine::new(&config).map_err(|e| ModelError(e.to_string()))?;
        Ok(Model {
            db: Db::new(clock, Arc::new(NetCounters::default())),
            scripts,
            next_client_id: 1,
            replica: None,
            client_commands: 0,
        })
    }

    /// A fresh connection state with a new client id.
    pub fn new_session(&mut self) -> Session {
        let id = self.next_client_id;
        self.next_client_id += 1;
        Session { id, name: None }
    }

    /// Runs one command as a client would send it (`args[0]` is the command name).
    pub fn execute(&mut self, session: &mut Session, args: &[&[u8]]) -> Reply {
        self.client_commands += 1;
        let reply = self.execute_here(session, args);
        self.replicate();
        reply
    }

    /// Hands what the last command wrote to the replica, if there is one.
    fn replicate(&mut self) {
        if let Some(replica) = &mut self.replica {
            let now_ms = self.db.now_ms();
            replica.record(&mut self.db.keys, now_ms);
        }
    }

    /// Starts a replica `lag_ms` behind this primary, as a copy of its data now (see
    /// `replica`): every later write reaches it `lag_ms` after it was made.
    pub fn enable_replication(&mut self, lag_ms: u64) {
        self.db.keys.track_writes(true);
        self.replica = Some(Replica::new(lag_ms, &self.db.keys));
    }

    /// The primary dies now and its replica takes over: the data becomes what the replica had
    /// received (writes younger than the lag are lost) and the script cache is empty. A new
    /// replica, as far behind, follows the new primary. `None` without replication.
    pub fn fail_over(&mut self) -> Option<Failover> {
        let now_ms = self.db.now_ms();
        let replica = self.replica.as_mut()?;
        let (data, report) = replica.promote(now_ms);
        let lag_ms = replica.lag_ms();
        self.db.keys = data;
        self.scripts.flush();
        self.replica = Some(Replica::new(lag_ms, &self.db.keys));
        Some(report)
    }

    fn execute_here(&mut self, session: &mut Session, args: &[&[u8]]) -> Reply {
        self.db.start_command(true);
        let spec = match lookup(args) {
            Lookup::Found(spec) => spec,
            Lookup::Unknown => {
                self.db.note_unknown(args, false);
                return unknown_command(args);
            }
            Lookup::UnknownSubcommand => {
                self.db.note_unknown(args, false);
                return unknown_subcommand(args);
            }
        };
        if !spec.arity_ok(args.len()) {
            return arity_error(spec);
        }
        self.db.count_call(spec);
        match spec.handler {
            Handler::Data(f) => {
                if spec.name == "info" {
                    self.db.scripts_cached = self.scripts.cached();
                    self.db.lua_memory = self.scripts.used_memory();
                }
                let now_ms = (self.db.command_micros() / 1000) as i64;
                let mut ctx = Ctx { db: &mut self.db, now_ms, resp: 2 };
                f(&mut ctx, args)
            }
            Handler::Model(cmd) => self.model_command(cmd, session, args),
            // A container reaches here only without a subcommand, which its arity refuses.
            Handler::Container(_) => unknown_subcommand(args),
        }
    }

    fn model_command(&mut self, cmd: ModelCmd, session: &mut Session, args: &[&[u8]]) -> Reply {
        match cmd {
            ModelCmd::Eval => self.scripts.eval(&mut self.db, args, false),
            ModelCmd::EvalSha => self.scripts.eval(&mut self.db, args, true),
            ModelCmd::ScriptLoad => match self.scripts.load(args[2]) {
                Ok(sha) => Reply::Bulk(Bytes::from(sha)),
                Err(e) => e,
            },
            ModelCmd::ScriptExists => {
                Reply::Array(args[2..].iter().map(|sha| Reply::Integer(i64::from(self.scripts.exists(sha)))).collect())
            }
            ModelCmd::ScriptFlush => {
                let ok = args.len() == 2 || (args.len() == 3 && (is(args[2], "sync") || is(args[2], "async")));
                if !ok {
                    return Reply::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
                self.scripts.flush();
                Reply::ok()
            }
            ModelCmd::Hello => hello(session, args),
            ModelCmd::ClientSetName => set_client_name(session, args[2]),
            ModelCmd::ClientGetName => session.name.clone().map_or(Reply::Nil, Reply::Bulk),
            ModelCmd::ClientId => Reply::Integer(session.id as i64),
            ModelCmd::ClientSetInfo => Reply::ok(),
        }
    }

    /// Runs `args` with a throwaway session: for hosts and benchmarks calling in process.
    pub fn call(&mut self, args: &[&[u8]]) -> Reply {
        let mut session = Session { id: 0, name: None };
        self.execute(&mut session, args)
    }

    /// The command the last script run called through `redis.call`/`redis.pcall` that the model
    /// does not implement (the last such call if there were several), by lower-case name.
    ///
    /// Inside a script such a call fails exactly as an unknown command fails in Redis 7.0 ("ERR
    /// Unknown Redis command called from script"), a text that names no command; this is how a
    /// harness tells which one. `None` if the last script called none.
    pub fn script_unknown_command(&self) -> Option<&str> {
        self.db.script_unknown.as_deref()
    }

    /// When the last command a client sent started, in microseconds since the epoch, as the
    /// server's `TIME` read then: for EVAL and EVALSHA, the instant the script ran, which is
    /// when a limiter script decided. Commands never share a microsecond (see `TIME` in the
    /// module docs).
    pub fn last_command_started_us(&self) -> u64 {
        self.db.last_command_started_us()
    }

    /// Removes every key past its deadline; returns how many.
    pub fn active_expire(&mut self) -> usize {
        let now = self.db.now_ms();
        let removed = self.db.keys.expire_due(now);
        self.replicate();
        removed
    }

    /// Forgets every cached script (SCRIPT FLUSH).
    pub fn flush_scripts(&mut self) {
        self.scripts.flush();
    }

    /// Back to how [`Model::try_new`] made it, on the same clock and the same Lua state: no
    /// key, no script, no client id given, every running total at zero and `math.random` seeded
    /// afresh. Only the Lua heap's size differs (`used_memory_lua`): the state keeps what it
    /// grew to hold, such as its string table, and no script can read it.
    ///
    /// Creating a Lua state and loading Redis's libraries into it is most of what a new model
    /// costs, and the verifier runs each schedule it tries on a model of its own.
    pub fn recycle(&mut self) {
        let (clock, net) = (self.db.clock.clone(), self.db.net.clone());
        net.reset();
        self.db = Db::new(clock, net);
        self.scripts.reset();
        self.next_client_id = 1;
        self.replica = None;
        self.client_commands = 0;
    }

    /// Drops every key (a restart without persistence).
    pub fn clear_data(&mut self) {
        self.db.keys.clear();
        self.replicate();
    }

    /// MEMORY USAGE's estimate for one key, if it exists.
    pub fn memory_usage(&self, key: &[u8]) -> Option<usize> {
        self.db.keys.peek(key).map(|e| Keyspace::memory_usage(key, e))
    }

    /// Counters for reports.
    pub fn stats(&self) -> ModelStats {
        let net = &self.db.net;
        let get = |c: &std::sync::atomic::AtomicU64| NetCounters::get(c);
        ModelStats {
            calls: self.db.calls.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
            total_commands: self.db.total_commands,
            scripts_run: self.db.scripts_run,
            client_commands: self.client_commands,
            unknown_commands: self.db.unknown_commands.clone(),
            bytes_in: get(&net.bytes_in),
            bytes_out: get(&net.bytes_out),
            connections_received: get(&net.connections_received),
            rejected_connections: get(&net.rejected_connections),
            connected_clients: get(&net.connected_clients),
            keys: self.db.keys.len(),
            keys_with_expiry: self.db.keys.expires_len(),
            expired_keys: self.db.keys.expired_keys,
            dataset_bytes: self.db.keys.estimated_bytes(),
            lua_bytes: self.scripts.used_memory(),
            cached_scripts: self.scripts.cached(),
        }
    }
}

struct Shared {
    /// A `std` mutex, not tokio's: it is held only while one command (or script) executes,
    /// never across an `.await`, which is also what makes every script atomic.
    model: Mutex<Model>,
    net: Arc<NetCounters>,
    faults: Faults,
}

/// A shared, cloneable handle to one model: what hosts keep and what connections serve.
///
/// It is `Send + Sync`, so the same handle works on a turmoil host's single thread and behind
/// a multi-threaded tokio listener.
#[derive(Clone)]
pub struct ModelHandle {
    shared: Arc<Shared>,
}

impl ModelHandle {
    /// A model reading time from `clock`.
    ///
    /// # Panics
    ///
    /// If the Lua state cannot be created (out of memory at startup); see
    /// [`ModelHandle::try_with_config`] for the fallible form.
    pub fn new(clock: impl ServerClock + 'static) -> ModelHandle {
        match Self::try_with_config(Arc::new(clock), ModelConfig::default()) {
            Ok(handle) => handle,
            Err(e) => panic!("{e}"),
        }
    }

    /// A model with explicit limits.
    pub fn try_with_config(clock: Arc<dyn ServerClock>, config: ModelConfig) -> Result<ModelHandle, ModelError> {
        let model = Model::try_new(clock, config)?;
        let net = model.db.net.clone();
        Ok(ModelHandle { shared: Arc::new(Shared { model: Mutex::new(model), net, faults: Faults::default() }) })
    }

    /// Runs `f` with the model locked. Keep it short: connections wait meanwhile.
    pub fn with_model<R>(&self, f: impl FnOnce(&mut Model) -> R) -> R {
        f(&mut lock(&self.shared.model))
    }

    /// Runs one command in process, as an anonymous client.
    pub fn call(&self, args: &[&[u8]]) -> Reply {
        self.with_model(|m| m.call(args))
    }

    /// Runs one command for a connection's session.
    pub fn execute(&self, session: &mut Session, args: &[&[u8]]) -> Reply {
        self.with_model(|m| m.execute(session, args))
    }

    /// A new connection state (client id).
    pub fn new_session(&self) -> Session {
        self.with_model(|m| m.new_session())
    }

    pub(crate) fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    pub(crate) fn net(&self) -> &NetCounters {
        &self.shared.net
    }

    /// Crashes the server: every connection is dropped at once, replies in flight are lost,
    /// and new connections are closed on arrival until [`ModelHandle::restart`].
    pub fn crash(&self) {
        self.shared.faults.crash();
    }

    /// Starts the server again after a crash (or restarts a running one, dropping nothing but
    /// the script cache). `keep_data` keeps every key as persistence (RDB/AOF) would; without
    /// it the keyspace starts empty. The script cache is always lost, as in a real restart, so
    /// clients see NOSCRIPT and must fall back to EVAL.
    pub fn restart(&self, keep_data: bool) {
        self.with_model(|m| {
            m.flush_scripts();
            if !keep_data {
                m.clear_data();
            }
        });
        self.shared.faults.restart();
    }

    /// See [`Model::enable_replication`].
    pub fn enable_replication(&self, lag_ms: u64) {
        self.with_model(|m| m.enable_replication(lag_ms));
    }

    /// A failover: the primary crashes (connections drop, new ones are refused) and its
    /// replica's data and empty script cache replace its own ([`Model::fail_over`]); it serves
    /// again as the promoted replica on [`ModelHandle::restart`] with `keep_data`.
    pub fn fail_over(&self) -> Option<Failover> {
        self.shared.faults.crash();
        self.with_model(|m| m.fail_over())
    }

    /// True unless crashed.
    pub fn is_up(&self) -> bool {
        !self.shared.faults.is_crashed()
    }

    /// Pauses for `duration` of tokio time from now: connections are accepted and requests
    /// read, but nothing runs or answers until the pause ends (like `kill -STOP`). Call it
    /// from within the runtime serving the model so "now" is that runtime's (virtual) time.
    pub fn pause(&self, duration: Duration) {
        self.shared.faults.pause_until(tokio::time::Instant::now() + duration);
    }

    /// Pauses until `until` (tokio time).
    pub fn pause_until(&self, until: tokio::time::Instant) {
        self.shared.faults.pause_until(until);
    }

    /// Ends a pause early.
    pub fn resume(&self) {
        self.shared.faults.resume();
    }

    /// Adds `latency` (tokio time) before every reply; zero turns it off.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.faults.set_latency(latency);
    }

    /// SCRIPT FLUSH from outside: the next EVALSHA of any script gets NOSCRIPT.
    pub fn flush_scripts(&self) {
        self.with_model(|m| m.flush_scripts());
    }

    /// Refuses (closes on arrival) new connections while `reject` is true; open ones go on.
    pub fn reject_connections(&self, reject: bool) {
        self.shared.faults.set_rejecting(reject);
    }

    /// The active expiry sweep: removes every key past its deadline, returns how many.
    pub fn active_expire(&self) -> usize {
        self.with_model(|m| m.active_expire())
    }

    /// MEMORY USAGE's estimate for `key`.
    pub fn memory_usage(&self, key: &[u8]) -> Option<usize> {
        self.with_model(|m| m.memory_usage(key))
    }

    /// Counters for reports.
    pub fn stats(&self) -> ModelStats {
        self.with_model(|m| m.stats())
    }

    /// See [`Model::script_unknown_command`].
    pub fn script_unknown_command(&self) -> Option<String> {
        self.with_model(|m| m.script_unknown_command().map(str::to_owned))
    }

    /// See [`Model::last_command_started_us`].
    pub fn last_command_started_us(&self) -> u64 {
        self.with_model(|m| m.last_command_started_us())
    }

    /// Serves a tokio listener forever (see [`serve_tcp`]).
    pub async fn serve_tcp(self, listener: tokio::net::TcpListener) {
        serve_tcp(self, listener).await
    }
}
