//! Command lookup, argument helpers, and the commands that touch only the keyspace, one file
//! per family (strings, keys, hashes, lists, sets, zsets, server); the table itself is in
//! `table`.
//!
//! Each command is a plain function `fn(&mut Ctx, &[&[u8]]) -> Reply`, the same whether a client
//! sent it or a Lua script called it through `redis.call`. The order in which a command checks
//! its arguments and the key's type is copied from Redis 7.0, because that order decides which
//! error a client sees when several things are wrong at once (the conformance suite compares
//! exactly that).
//!
//! Commands that need more than the keyspace (EVAL, SCRIPT, HELLO, CLIENT) are listed in the
//! table with [`Handler::Model`] and carried out by [`crate::Model`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::keyspace::{Keyspace, Value};
use super::resp::Reply;
use super::server_clock::ServerClock;

mod glob;
mod hashes;
mod keys;
mod lists;
mod random;
mod ratelimit;
mod scan;
mod server;
mod sets;
mod strings;
mod table;
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

    /// Every running total back to zero; the connections open now stay counted.
    pub(crate) fn reset(&self) {
        for total in [&self.bytes_in, &self.bytes_out, &self.connections_received, &self.rejected_connections] {
            total.store(0, Ordering::Relaxed);
        }
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
    /// Scripts run (an EVAL or EVALSHA that found its script), whether they succeeded or not.
    pub(crate) scripts_run: u64,
    /// Commands the model does not know, by lower-case name ("dump", "client|kill"), called by
    /// clients or by scripts: what a harness reports when a user's script needs more of Redis.
    pub(crate) unknown_commands: BTreeMap<String, u64>,
    /// The last command the running (or last run) script called that the model does not know.
    pub(crate) script_unknown: Option<String>,
    /// Filled in by the model before INFO can run (the script cache lives outside the `Db`).
    pub(crate) scripts_cached: usize,
    pub(crate) lua_memory: usize,
    /// The server's time, as commands see it (see [`Db::start_command`]).
    time: CommandTime,
    /// The state of the random source of SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and
    /// RANDOMKEY (see `random`).
    random: u64,
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
            keys: Keyspace::started_at((clock.now_micros() / 1000) as i64),
            clock,
            net,
            calls: BTreeMap::new(),
            total_commands: 0,
            scripts_run: 0,
            unknown_commands: BTreeMap::new(),
            script_unknown: None,
            scripts_cached: 0,
            lua_memory: 0,
            time: CommandTime::default(),
            random: random::SEED,
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

    /// Stores `value` under `key` (see [`Keyspace::set`]), as of this command.
    pub(crate) fn store(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        self.db.keys.set(key, value, keep_ttl, self.now_ms);
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

/// The result of looking a command up.
pub(crate) enum Lookup {
    Found(&'static CommandSpec),
    /// No such command.
    Unknown,
    /// A known container with an unknown subcommand.
    UnknownSubcommand,
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
    let Some(spec) = lowercase(first, &mut buf).and_then(table::find) else {
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
    arity_error_named(spec.name)
}

/// `addReplyErrorArity`, for commands that check their argument count themselves.
pub(crate) fn arity_error_named(name: &str) -> Reply {
    Reply::error(format!("ERR wrong number of arguments for '{name}' command"))
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

/// `addReplyHelp`: "<COMMAND> <subcommand> ..." and the help lines, each a status reply.
pub(crate) fn help_reply(command: &[u8], lines: &[&'static str]) -> Reply {
    let mut header: Vec<u8> = cstr(command).to_ascii_uppercase();
    header.extend_from_slice(b" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    let mut items = vec![Reply::Status(Bytes::from(header))];
    items.extend(lines.iter().map(|l| Reply::Status(Bytes::from_static(l.as_bytes()))));
    Reply::Array(items)
}

/// `getLongLongFromObjectOrReply`.
pub(crate) fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    super::num::parse_i64(arg).ok_or_else(not_an_integer)
}
