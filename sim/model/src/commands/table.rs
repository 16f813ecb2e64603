//! The command table: every command the model knows, with its Redis 7.0 arity, and the lookup
//! table built from it. A new command is one function in the file of its family and one row
//! here.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::{hashes, keys, lists, ratelimit, server, sets, strings, zsets, CommandSpec, DataFn, Handler, ModelCmd};

const fn data(name: &'static str, arity: i32, f: DataFn) -> CommandSpec {
    CommandSpec { name, word: name, arity, noscript: false, handler: Handler::Data(f) }
}

const fn model(name: &'static str, word: &'static str, arity: i32, cmd: ModelCmd) -> CommandSpec {
    CommandSpec { name, word, arity, noscript: true, handler: Handler::Model(cmd) }
}

/// A command of subcommands (`SCRIPT LOAD`...): at least the subcommand's name, which picks
/// the row of `subs` that carries it out; `noscript` when scripts may not call any of them.
const fn container(name: &'static str, noscript: bool, subs: &'static [CommandSpec]) -> CommandSpec {
    CommandSpec { name, word: name, arity: -2, noscript, handler: Handler::Container(subs) }
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

static COMMAND_SUBCOMMANDS: [CommandSpec; 1] =
    [CommandSpec { word: "info", ..data("command|info", -2, server::command_info) }];

static MEMORY_SUBCOMMANDS: [CommandSpec; 1] =
    [CommandSpec { word: "usage", ..data("memory|usage", -3, server::memory_usage) }];

static OBJECT_SUBCOMMANDS: [CommandSpec; 5] = [
    CommandSpec { word: "encoding", ..data("object|encoding", 3, keys::object_encoding) },
    CommandSpec { word: "refcount", ..data("object|refcount", 3, keys::object_refcount) },
    CommandSpec { word: "idletime", ..data("object|idletime", 3, keys::object_idletime) },
    CommandSpec { word: "freq", ..data("object|freq", 3, keys::object_freq) },
    CommandSpec { word: "help", ..data("object|help", 2, keys::object_help) },
];

static COMMANDS: [CommandSpec; 149] = [
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
    data("msetnx", -3, strings::msetnx),
    data("append", 3, strings::append),
    data("getrange", 4, strings::getrange),
    data("substr", 4, strings::getrange),
    data("setrange", 4, strings::setrange),
    data("lcs", -3, strings::lcs),
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
    data("expiretime", 2, keys::expiretime),
    data("pexpiretime", 2, keys::pexpiretime),
    data("touch", -2, keys::touch),
    data("copy", -3, keys::copy),
    data("scan", -2, keys::scan),
    data("randomkey", 1, keys::randomkey),
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
    data("hstrlen", 3, hashes::hstrlen),
    data("hscan", -3, hashes::hscan),
    data("hrandfield", -2, hashes::hrandfield),
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
    data("zmscore", -3, zsets::zmscore),
    data("zlexcount", 4, zsets::zlexcount),
    data("zremrangebylex", 4, zsets::zremrangebylex),
    data("zrangebylex", -4, zsets::zrangebylex),
    data("zrevrangebylex", -4, zsets::zrevrangebylex),
    data("zrangestore", -5, zsets::zrangestore),
    data("zpopmin", -2, zsets::zpopmin),
    data("zpopmax", -2, zsets::zpopmax),
    data("zmpop", -4, zsets::zmpop),
    data("bzmpop", -5, zsets::bzmpop),
    data("zscan", -3, zsets::zscan),
    data("zrandmember", -2, zsets::zrandmember),
    data("zunionstore", -4, zsets::zunionstore),
    data("zinterstore", -4, zsets::zinterstore),
    data("zdiffstore", -4, zsets::zdiffstore),
    data("zunion", -3, zsets::zunion),
    data("zinter", -3, zsets::zinter),
    data("zintercard", -3, zsets::zintercard),
    data("zdiff", -3, zsets::zdiff),
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
    data("linsert", 5, lists::linsert),
    data("lset", 4, lists::lset),
    data("lrem", 4, lists::lrem),
    data("lpos", -3, lists::lpos),
    data("lmove", 5, lists::lmove),
    data("rpoplpush", 3, lists::rpoplpush),
    data("lmpop", -4, lists::lmpop),
    data("blmpop", -5, lists::blmpop),
    data("sadd", -3, sets::sadd),
    data("srem", -3, sets::srem),
    data("scard", 2, sets::scard),
    data("sismember", 3, sets::sismember),
    data("smembers", 2, sets::smembers),
    data("smismember", -3, sets::smismember),
    data("smove", 4, sets::smove),
    data("sscan", -3, sets::sscan),
    data("sinter", -2, sets::sinter),
    data("sinterstore", -3, sets::sinterstore),
    data("sintercard", -3, sets::sintercard),
    data("sunion", -2, sets::sunion),
    data("sunionstore", -3, sets::sunionstore),
    data("sdiff", -2, sets::sdiff),
    data("sdiffstore", -3, sets::sdiffstore),
    data("srandmember", -2, sets::srandmember),
    data("spop", -2, sets::spop),
    container("script", true, &SCRIPT_SUBCOMMANDS),
    container("client", true, &CLIENT_SUBCOMMANDS),
    container("memory", false, &MEMORY_SUBCOMMANDS),
    container("command", false, &COMMAND_SUBCOMMANDS),
    container("object", false, &OBJECT_SUBCOMMANDS),
    model("hello", "hello", -1, ModelCmd::Hello),
    // The Redis module's commands, as a server that loaded it has them (`ratelimit`).
    data("ratelimit.fw", -2, ratelimit::ratelimit_fw),
    data("ratelimit.sw", -2, ratelimit::ratelimit_sw),
    data("ratelimit.sl", -2, ratelimit::ratelimit_sl),
    data("ratelimit.tb", -2, ratelimit::ratelimit_tb),
    data("ratelimit.gcra", -2, ratelimit::ratelimit_gcra),
    data("ratelimit.rules", -2, ratelimit::ratelimit_rules),
    data("ratelimit.lease.gcra", -2, ratelimit::ratelimit_lease),
    data("ratelimit.lease.tb", -2, ratelimit::ratelimit_lease),
    data("ratelimit.concurrency", -2, ratelimit::ratelimit_concurrency),
];

static EVAL_COMMANDS: [CommandSpec; 2] =
    [model("eval", "eval", -3, ModelCmd::Eval), model("evalsha", "evalsha", -3, ModelCmd::EvalSha)];

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

/// The command named `name` (already lower-cased).
pub(super) fn find(name: &[u8]) -> Option<&'static CommandSpec> {
    table().get(name).copied()
}
