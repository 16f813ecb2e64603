//! Command table, argument helpers, and the commands that touch only the keyspace.
//!
//! Each command is a plain function `fn(&mut Ctx, &[&[u8]]) -> Reply`, the same whether a client
//! sent it or a Lua script called it through `redis.call`. The order in which a command checks
//! its arguments and the key's type is copied from Redis 7.0, because that order decides which
//! error a client sees when several things are wrong at once (the conformance suite compares
//! exactly that).
//!
//! Commands that need more than the keyspace (EVAL, SCRIPT, HELLO, CLIENT) are listed here with
//! [`Handler::Model`] and carried out by [`crate::Model`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::keyspace::Keyspace;
use super::resp::Reply;
use super::server_clock::ServerClock;

mod hashes;
mod keys;
mod lists;
mod server;
mod sets;
mod strings;
mod zsets;

pub(crate) use server::REDIS_VERSION as REDIS_VERSION_STR;

/// Counters shared between the connections (which count bytes without taking the model lock)
/// and the model (which reports them in INFO).
#[derive(Debug, Default)]
pub struct NetCounters {
    /// Request bytes read from all connections.
    pub bytes_in: AtomicU64,
    /// Reply bytes written to all connections.
    pub bytes_out: AtomicU64,
    /// Connections accepted (and not refused by a fault).
    pub connections_received: AtomicU64,
    /// Connections currently open.
    pub connected_clients: AtomicU64,
    /// Connections refused because the model was crashed or rejecting.
    pub rejected_connections: AtomicU64,
}

impl NetCounters {
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Everything a command may touch: the keyspace, the clock and the counters. While a script
/// runs, the whole `Db` is lent to the Lua state so `redis.call` can reach it.
pub(crate) struct Db {
    pub(crate) keys: Keyspace,
    pub(crate) clock: Arc<dyn ServerClock>,
    pub(crate) net: Arc<NetCounters>,
    /// Calls per command full name ("get", "script|load"), top-level and from scripts.
    pub(crate) calls: BTreeMap<&'static str, u64>,
    pub(crate) total_commands: u64,
    /// Commands the model does not know, by lower-case name ("lset", "object|freq"), called by
    /// clients or by scripts: what a harness reports when a user's script needs more of Redis.
    pub(crate) unknown_commands: BTreeMap<String, u64>,
    /// The last command the running (or last run) script called that the model does not know.
    pub(crate) script_unknown: Option<String>,
    /// Filled in by the model before INFO can run (the script cache lives outside the `Db`).
    pub(crate) scripts_cached: usize,
    pub(crate) lua_memory: usize,
    /// The server's time, as commands see it (see [`Db::start_command`]).
    time: CommandTime,
}

/// Redis's time as its commands see it: the clock, but never the same microsecond for two
/// commands. On a real server every command takes at least a microsecond, so two scripts run
/// one after the other never read the same `TIME`; an injected clock set by hand (or a
/// simulated one that moves in whole milliseconds) would give every command of one instant
/// the same reading, and a script that uses `TIME` as a unique member would collide where on
/// Redis it never does. So each command starts at least one microsecond after the one before,
/// unless the clock was stepped back, which Redis follows (its `TIME` is the wall clock).
#[derive(Debug, Clone, Copy, Default)]
struct CommandTime {
    /// The clock's reading when the last command started.
    clock_us: u64,
    /// When the last command started, as commands see it.
    command_us: u64,
    /// When the last command a client sent (not one a script called) started.
    top_level_us: u64,
}

impl Db {
    pub(crate) fn new(clock: Arc<dyn ServerClock>, net: Arc<NetCounters>) -> Self {
        Db {
            keys: Keyspace::default(),
            clock,
            net,
            calls: BTreeMap::new(),
            total_commands: 0,
            unknown_commands: BTreeMap::new(),
            script_unknown: None,
            scripts_cached: 0,
            lua_memory: 0,
            time: CommandTime::default(),
        }
    }

    /// A command starts now: a client's (`top_level`) or one a script calls. Its time is the
    /// clock's, or a microsecond after the last command's when the clock has not moved past it.
    pub(crate) fn start_command(&mut self, top_level: bool) {
        let clock = self.clock.now_micros();
        let t = &mut self.time;
        t.command_us = if clock < t.clock_us { clock } else { clock.max(t.command_us + 1) };
        t.clock_us = clock;
        if top_level {
            t.top_level_us = t.command_us;
        }
    }

    /// When the running (or last) command started, in microseconds: "now" for a command, as
    /// Redis's `mstime()` reads it while the command runs (each command reads the clock once).
    pub(crate) fn command_micros(&self) -> u64 {
        self.time.command_us
    }

    /// The server's time now, between commands (the active expiry, a replica's catch-up): the
    /// clock, or the last command's time if the clock has not caught up with it (after a step
    /// back, the clock).
    pub(crate) fn now_micros(&self) -> u64 {
        let clock = self.clock.now_micros();
        if clock < self.time.clock_us {
            clock
        } else {
            clock.max(self.time.command_us)
        }
    }

    /// When the last command a client sent started (for EVAL/EVALSHA: when its script ran).
    pub(crate) fn last_command_started_us(&self) -> u64 {
        self.time.top_level_us
    }

    /// Current time in Unix milliseconds, as Redis's `mstime()` reads it.
    pub(crate) fn now_ms(&self) -> i64 {
        (self.now_micros() / 1000) as i64
    }

    /// Counts a call of a command the model does not know (see [`unknown_name`]); `from_script`
    /// also records it as the running script's.
    pub(crate) fn note_unknown(&mut self, args: &[&[u8]], from_script: bool) {
        let name = unknown_name(args);
        if from_script {
            self.script_unknown = Some(name.clone());
        }
        *self.unknown_commands.entry(name).or_insert(0) += 1;
    }

    pub(crate) fn count_call(&mut self, spec: &'static CommandSpec) {
        *self.calls.entry(spec.name).or_insert(0) += 1;
        self.total_commands += 1;
    }
}

/// The context one command runs in.
pub(crate) struct Ctx<'a> {
    pub(crate) db: &'a mut Db,
    /// The time of the command (or of the whole script): keys expire against this instant, so
    /// a key cannot vanish halfway through a script, as in Redis 7.
    pub(crate) now_ms: i64,
    /// Protocol of the caller: 2 for clients, 2 or 3 for scripts (`redis.setresp`). Only
    /// changes the shape of a few replies (WITHSCORES pairs); types are always RESP3 inside.
    pub(crate) resp: u8,
}

impl Ctx<'_> {
    /// The clock read when this command started, Redis 7.0's `mstime()`. Inside a script it moves on while
    /// `now_ms` stays frozen at the script's start, and Redis 7.0 uses it (not the frozen
    /// time) for what a command *computes*: the base of a relative deadline (EXPIRE, PEXPIRE,
    /// SET EX/PX), whether a new deadline is already past, and the TTL PTTL reports. Only the
    /// decision whether a key has expired uses the frozen time, so a key never vanishes
    /// halfway through a script.
    pub(crate) fn clock_ms(&self) -> i64 {
        (self.db.command_micros() / 1000) as i64
    }
}

pub(crate) type DataFn = fn(&mut Ctx<'_>, &[&[u8]]) -> Reply;

/// Commands carried out by the model itself rather than on the keyspace alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelCmd {
    Eval,
    EvalSha,
    ScriptLoad,
    ScriptExists,
    ScriptFlush,
    Hello,
    ClientSetName,
    ClientGetName,
    ClientId,
    ClientSetInfo,
}

#[derive(Clone, Copy)]
pub(crate) enum Handler {
    Data(DataFn),
    Model(ModelCmd),
    /// A command with subcommands (SCRIPT, CLIENT, MEMORY).
    Container(&'static [CommandSpec]),
}

/// One row of the command table.
pub(crate) struct CommandSpec {
    /// Lower-case full name as Redis prints it in errors: "get", "script|load".
    pub(crate) name: &'static str,
    /// The sub-command's own name ("load"); equal to `name` for plain commands.
    pub(crate) word: &'static str,
    /// Redis arity: `n` means exactly n arguments (command included), `-n` at least n.
    pub(crate) arity: i32,
    /// Refused inside scripts ("This Redis command is not allowed from script").
    pub(crate) noscript: bool,
    pub(crate) handler: Handler,
}

impl CommandSpec {
    pub(crate) fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

const fn data(name: &'static str, arity: i32, f: DataFn) -> CommandSpec {
    CommandSpec { name, word: name, arity, noscript: false, handler: Handler::Data(f) }
}

const fn model(name: &'static str, word: &'static str, arity: i32, cmd: ModelCmd) -> CommandSpec {
    CommandSpec { name, word, arity, noscript: true, handler: Handler::Model(cmd) }
}

static SCRIPT_SUBCOMMANDS: [CommandSpec; 3] = [
    model("script|load", "load", 3, ModelCmd::ScriptLoad),
    model("script|exists", "exists", -3, ModelCmd::ScriptExists),
    model("script|flush", "flush", -2, ModelCmd::ScriptFlush),
];

static CLIENT_SUBCOMMANDS: [CommandSpec; 4] = [
    model("client|setname", "setname", 3, ModelCmd::ClientSetName),
    model("client|getname", "getname", 2, ModelCmd::ClientGetName),
    model("client|id", "id", 2, ModelCmd::ClientId),
    // Redis 7.2 added SETINFO; 7.0 does not know it. Clients send it on connect and ignore a
    // failure, and the model answers OK so their logs stay quiet.
    model("client|setinfo", "setinfo", -4, ModelCmd::ClientSetInfo),
];

static MEMORY_SUBCOMMANDS: [CommandSpec; 1] =
    [CommandSpec { word: "usage", ..data("memory|usage", -3, server::memory_usage) }];

static COMMANDS: [CommandSpec; 84] = [
    data("ping", -1, server::ping),
    data("echo", 2, server::echo),
    data("select", 2, server::select),
    data("time", 1, server::time),
    data("dbsize", 1, server::dbsize),
    data("flushall", -1, server::flushall),
    data("flushdb", -1, server::flushdb),
    data("info", -1, server::info),
    data("get", 2, strings::get),
    data("set", -3, strings::set),
    data("setnx", 3, strings::setnx),
    data("setex", 4, strings::setex),
    data("psetex", 4, strings::psetex),
    data("getset", 3, strings::getset),
    data("getdel", 2, strings::getdel),
    data("getex", -2, strings::getex),
    data("mget", -2, strings::mget),
    data("mset", -3, strings::mset),
    data("incr", 2, strings::incr),
    data("decr", 2, strings::decr),
    data("incrby", 3, strings::incrby),
    data("decrby", 3, strings::decrby),
    data("incrbyfloat", 3, strings::incrbyfloat),
    data("strlen", 2, strings::strlen),
    data("del", -2, keys::del),
    data("unlink", -2, keys::del),
    data("exists", -2, keys::exists),
    data("type", 2, keys::type_),
    data("keys", 2, keys::keys),
    data("expire", -3, keys::expire),
    data("pexpire", -3, keys::pexpire),
    data("expireat", -3, keys::expireat),
    data("pexpireat", -3, keys::pexpireat),
    data("ttl", 2, keys::ttl),
    data("pttl", 2, keys::pttl),
    data("persist", 2, keys::persist),
    data("rename", 3, keys::rename),
    data("renamenx", 3, keys::renamenx),
    data("hget", 3, hashes::hget),
    data("hset", -4, hashes::hset),
    data("hmset", -4, hashes::hset),
    data("hsetnx", 4, hashes::hsetnx),
    data("hmget", -3, hashes::hmget),
    data("hgetall", 2, hashes::hgetall),
    data("hdel", -3, hashes::hdel),
    data("hexists", 3, hashes::hexists),
    data("hlen", 2, hashes::hlen),
    data("hincrby", 4, hashes::hincrby),
    data("hincrbyfloat", 4, hashes::hincrbyfloat),
    data("hkeys", 2, hashes::hkeys),
    data("hvals", 2, hashes::hvals),
    data("zadd", -4, zsets::zadd),
    data("zincrby", 4, zsets::zincrby),
    data("zrem", -3, zsets::zrem),
    data("zcard", 2, zsets::zcard),
    data("zcount", 4, zsets::zcount),
    data("zscore", 3, zsets::zscore),
    data("zrange", -4, zsets::zrange),
    data("zrangebyscore", -4, zsets::zrangebyscore),
    data("zrevrangebyscore", -4, zsets::zrevrangebyscore),
    data("zremrangebyscore", 4, zsets::zremrangebyscore),
    data("zrevrange", -4, zsets::zrevrange),
    data("zrank", 3, zsets::zrank),
    data("zrevrank", 3, zsets::zrevrank),
    data("zremrangebyrank", 4, zsets::zremrangebyrank),
    data("lpush", -3, lists::lpush),
    data("rpush", -3, lists::rpush),
    data("lpushx", -3, lists::lpushx),
    data("rpushx", -3, lists::rpushx),
    data("lpop", -2, lists::lpop),
    data("rpop", -2, lists::rpop),
    data("llen", 2, lists::llen),
    data("lrange", 4, lists::lrange),
    data("ltrim", 4, lists::ltrim),
    data("lindex", 3, lists::lindex),
    data("sadd", -3, sets::sadd),
    data("srem", -3, sets::srem),
    data("scard", 2, sets::scard),
    data("sismember", 3, sets::sismember),
    data("smembers", 2, sets::smembers),
    CommandSpec { arity: -2, ..model("script", "script", -2, ModelCmd::Eval) }.container(&SCRIPT_SUBCOMMANDS),
    CommandSpec { arity: -2, ..model("client", "client", -2, ModelCmd::Eval) }.container(&CLIENT_SUBCOMMANDS),
    CommandSpec { noscript: false, ..model("memory", "memory", -2, ModelCmd::Eval) }.container(&MEMORY_SUBCOMMANDS),
    model("hello", "hello", -1, ModelCmd::Hello),
];

static EVAL_COMMANDS: [CommandSpec; 2] =
    [model("eval", "eval", -3, ModelCmd::Eval), model("evalsha", "evalsha", -3, ModelCmd::EvalSha)];

impl CommandSpec {
    const fn container(self, subs: &'static [CommandSpec]) -> CommandSpec {
        CommandSpec { handler: Handler::Container(subs), ..self }
    }
}

/// The result of looking a command up.
pub(crate) enum Lookup {
    Found(&'static CommandSpec),
    /// No such command.
    Unknown,
    /// A known container with an unknown subcommand.
    UnknownSubcommand,
}

/// FNV-1a, for the command table: its keys are a few short words the model chose itself, so
/// SipHash's defence against chosen collisions buys nothing there, and every command (each
/// `redis.call` too) pays for the hash.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

type CommandTable = HashMap<&'static [u8], &'static CommandSpec, std::hash::BuildHasherDefault<Fnv>>;

fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(|| COMMANDS.iter().chain(EVAL_COMMANDS.iter()).map(|spec| (spec.name.as_bytes(), spec)).collect())
}

/// Lower-cases a command word into `buf`; `None` if it is too long to be any command.
fn lowercase<'b>(word: &[u8], buf: &'b mut [u8; 24]) -> Option<&'b [u8]> {
    if word.len() > buf.len() {
        return None;
    }
    for (dst, src) in buf.iter_mut().zip(word) {
        *dst = src.to_ascii_lowercase();
    }
    Some(&buf[..word.len()])
}

/// Finds the command `args` names (Redis's `lookupCommand`).
pub(crate) fn lookup(args: &[&[u8]]) -> Lookup {
    let Some(first) = args.first() else { return Lookup::Unknown };
    let mut buf = [0u8; 24];
    let Some(spec) = lowercase(first, &mut buf).and_then(|name| table().get(name).copied()) else {
        return Lookup::Unknown;
    };
    match (spec.handler, args.get(1)) {
        (Handler::Container(subs), Some(sub)) => {
            let mut buf = [0u8; 24];
            let found = lowercase(sub, &mut buf).and_then(|word| subs.iter().find(|s| s.word.as_bytes() == word));
            match found {
                Some(sub_spec) => Lookup::Found(sub_spec),
                None => Lookup::UnknownSubcommand,
            }
        }
        _ => Lookup::Found(spec),
    }
}

/// C string view of an argument: C code stops at the first NUL byte.
pub(crate) fn cstr(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(nul) => &arg[..nul],
        None => arg,
    }
}

/// C's `%.*s` of an argument: up to the first NUL, at most `max` bytes.
fn c_printf(arg: &[u8], max: usize) -> &[u8] {
    let s = cstr(arg);
    &s[..s.len().min(max)]
}

/// `strcasecmp(arg, word) == 0`.
pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    cstr(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// The name an unknown command is reported under: the command word lower-cased, plus
/// "|subcommand" when the command is a known container ("script|foo").
pub(crate) fn unknown_name(args: &[&[u8]]) -> String {
    let word = |a: &[u8]| String::from_utf8_lossy(a).to_lowercase();
    let first = args.first().map_or_else(String::new, |a| word(a));
    match (lookup(&args[..args.len().min(1)]), args.get(1)) {
        (Lookup::Found(spec), Some(sub)) if matches!(spec.handler, Handler::Container(_)) => {
            format!("{first}|{}", word(sub))
        }
        _ => first,
    }
}

/// Redis 7.0's reply to an unknown command, byte for byte.
pub(crate) fn unknown_command(args: &[&[u8]]) -> Reply {
    let mut listed: Vec<u8> = Vec::new();
    for arg in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        let budget = 128 - listed.len();
        listed.push(b'\'');
        listed.extend_from_slice(c_printf(arg, budget));
        listed.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(c_printf(args.first().copied().unwrap_or_default(), 128));
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend_from_slice(&listed);
    Reply::Error(Bytes::from(text))
}

/// Redis 7.0's reply to an unknown subcommand of a container command.
pub(crate) fn unknown_subcommand(args: &[&[u8]]) -> Reply {
    let mut text = b"ERR unknown subcommand '".to_vec();
    text.extend_from_slice(c_printf(args.get(1).copied().unwrap_or_default(), 128));
    text.extend_from_slice(b"'. Try ");
    text.extend(cstr(args.first().copied().unwrap_or_default()).iter().map(|c| c.to_ascii_uppercase()));
    text.extend_from_slice(b" HELP.");
    Reply::Error(Bytes::from(text))
}

pub(crate) fn arity_error(spec: &CommandSpec) -> Reply {
    Reply::error(format!("ERR wrong number of arguments for '{}' command", spec.name))
}

pub(crate) fn wrong_type() -> Reply {
    Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value")
}

pub(crate) fn not_an_integer() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

pub(crate) fn not_a_float() -> Reply {
    Reply::err("ERR value is not a valid float")
}

pub(crate) fn syntax_error() -> Reply {
    Reply::err("ERR syntax error")
}

/// `getLongLongFromObjectOrReply`.
pub(crate) fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    super::num::parse_i64(arg).ok_or_else(not_an_integer)
}
