//! The module inside Redis: [`Keys`] over Redis's module API, each write replicated by its
//! effect with an absolute expiry (a replica or an AOF replayed later holds the same value and
//! expires it when the primary does, whatever the command decided and whenever it is
//! replayed), and the commands registered.

use std::time::Duration;

use redis_module::{redis_module, Context, KeyType, RedisError, RedisResult, RedisString, RedisValue};

use crate::clock;
use redis_ratelimit_module_commands::Algorithm;
use redis_ratelimit_module_commands::{Command, Keys, Kind, Member, Refusal};

/// A command's view of Redis, through its context and the arguments Redis passed it.
struct Server<'a> {
    ctx: &'a Context,
    /// The arguments, its name first.
    args: &'a [RedisString],
    /// Their bytes, after the name (what the command reads).
    argv: &'a [&'a [u8]],
}

impl Server<'_> {
    /// `key` as Redis takes it: the argument it is, when it is one (no copy; a key the command
    /// copied, as the rules command's held writes do, is found by its bytes), else a new
    /// string (a window's key).
    fn key<R>(&self, key: &[u8], with: impl FnOnce(&RedisString) -> R) -> R {
        let at =
            self.argv.iter().position(|a| std::ptr::eq(*a, key)).or_else(|| self.argv.iter().position(|a| *a == key));
        match at.and_then(|i| self.args.get(i + 1)) {
            Some(arg) => with(arg),
            None => with(&self.ctx.create_string(key)),
        }
    }

    /// Runs the write `command` through Redis and replicates it as it is when it changed
    /// anything (a reply above 0: members added or removed).
    fn call_write(&self, command: &str, args: &[&[u8]]) -> Result<(), Refusal> {
        if let RedisValue::Integer(n) = self.ctx.call(command, args).map_err(refusal)? {
            if n > 0 {
                self.ctx.replicate(command, args);
            }
        }
        Ok(())
    }
}

/// The instant, in ms on Redis's clock, `ttl_ms` from now.
fn expires_at(ttl_ms: u64) -> String {
    (clock::now_us() / 1_000 + ttl_ms).to_string()
}

fn refusal(e: RedisError) -> Refusal {
    match e {
        RedisError::WrongType => Refusal::WrongType,
        RedisError::WrongArity => Refusal::Arity,
        other => Refusal::Error(other.to_string()),
    }
}

impl Keys for Server<'_> {
    fn now_us(&mut self) -> u64 {
        clock::now_us()
    }

    fn string<T>(&mut self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Kind> {
        // Read-only: a decision that writes nothing leaves the key exactly as it was (a key
        // opened for writing would have its value unshared to read it in place).
        self.key(key, |key| {
            let k = self.ctx.open_key(key);
            match k.key_type() {
                KeyType::Empty => Ok(None),
                KeyType::String => Ok(k.read().ok().flatten().map(read)),
                KeyType::Hash => Err(Kind::Hash),
                KeyType::ZSet => Err(Kind::ZSet),
                _ => Err(Kind::Other),
            }
        })
    }

    fn hash_field(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        let field = String::from_utf8_lossy(field);
        let value = self.key(key, |key| self.ctx.open_key(key).hash_get(&field).ok().flatten())?;
        Some(value.as_slice().to_vec())
    }

    fn members_above(&mut self, key: &[u8], after: Option<i128>) -> Result<Vec<Member>, Refusal> {
        // The module API has no sorted-set reads: Redis's own command, called from here.
        let from = after.map_or_else(|| "-inf".to_owned(), |after| format!("({after}"));
        let reply = self.ctx.call("ZRANGEBYSCORE", &[key, from.as_bytes(), b"+inf", b"WITHSCORES"][..]);
        let RedisValue::Array(items) = reply.map_err(refusal)? else {
            return Err(Refusal::Error("ERR ZRANGEBYSCORE answered no array".into()));
        };
        let bytes = |item: Option<&RedisValue>| match item {
            Some(RedisValue::SimpleString(s)) => s.as_bytes().to_vec(),
            Some(RedisValue::StringBuffer(b)) => b.clone(),
            other => format!("{other:?}").into_bytes(),
        };
        Ok(items.chunks(2).map(|pair| (bytes(pair.first()), bytes(pair.get(1)))).collect())
    }

    fn set(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> Result<(), Refusal> {
        let k = self.key(key, |key| self.ctx.open_key_writable(key));
        match ttl_ms {
            Some(ttl_ms) => {
                k.write(&String::from_utf8_lossy(value)).map_err(refusal)?;
                k.set_expire(Duration::from_millis(ttl_ms)).map_err(refusal)?;
                // An absolute instant, as Redis itself propagates a relative expiry.
                let at = expires_at(ttl_ms);
                self.ctx.replicate("SET", &[key, value, b"PXAT", at.as_bytes()][..]);
            }
            None => {
                // In place: setting a string value would drop the key's expiry.
                k.as_string_dma().map_err(refusal)?.write(value).map_err(refusal)?;
                self.ctx.replicate("SET", &[key, value, b"KEEPTTL"][..]);
            }
        }
        Ok(())
    }

    fn trim(&mut self, key: &[u8], through: u64) -> Result<(), Refusal> {
        self.call_write("ZREMRANGEBYSCORE", &[key, b"-inf", through.to_string().as_bytes()])
    }

    fn add(&mut self, key: &[u8], score: u64, members: &[String]) -> Result<(), Refusal> {
        let score = score.to_string();
        let mut args: Vec<&[u8]> = Vec::with_capacity(1 + 2 * members.len());
        args.push(key);
        for member in members {
            args.extend([score.as_bytes(), member.as_bytes()]);
        }
        self.call_write("ZADD", &args)
    }

    fn remove(&mut self, key: &[u8], member: &[u8]) -> Result<(), Refusal> {
        self.call_write("ZREM", &[key, member])
    }

    fn expire(&mut self, key: &[u8], ttl_ms: u64) -> Result<(), Refusal> {
        let k = self.key(key, |key| self.ctx.open_key_writable(key));
        k.set_expire(Duration::from_millis(ttl_ms)).map_err(refusal)?;
        self.ctx.replicate("PEXPIREAT", &[key, expires_at(ttl_ms).as_bytes()][..]);
        Ok(())
    }
}

/// Runs `command` with the arguments Redis passed (its name first); or, when Redis asks where
/// its keys are (a cluster's routing, `COMMAND GETKEYS`, ACLs), says so.
fn run(command: Command, ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv: Vec<&[u8]> = args.iter().skip(1).map(RedisString::as_slice).collect();
    if ctx.is_keys_position_request() {
        // Positions counted with the name as 0, every one within the arguments Redis holds.
        for at in command.key_positions(&argv) {
            ctx.key_at_pos(at as i32 + 1);
        }
        return Ok(RedisValue::NoReply);
    }
    match command.run(&mut Server { ctx, args: &args, argv: &argv }, &argv) {
        Ok(reply) => Ok(RedisValue::Array(reply.values().iter().map(|&n| RedisValue::Integer(n as i64)).collect())),
        Err(Refusal::Arity) => Err(RedisError::WrongArity),
        Err(Refusal::WrongType) => Err(RedisError::WrongType),
        Err(Refusal::Error(text)) => Err(RedisError::String(text)),
    }
}

fn fixed_window(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Decide(Algorithm::FixedWindow), ctx, args)
}

fn sliding_window(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Decide(Algorithm::SlidingWindow), ctx, args)
}

fn sliding_log(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Decide(Algorithm::SlidingLog), ctx, args)
}

fn token_bucket(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Decide(Algorithm::TokenBucket), ctx, args)
}

fn gcra(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Decide(Algorithm::Gcra), ctx, args)
}

fn rules(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Rules, ctx, args)
}

fn lease_gcra(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Lease(Algorithm::Gcra), ctx, args)
}

fn lease_token_bucket(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Lease(Algorithm::TokenBucket), ctx, args)
}

fn concurrency(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    run(Command::Concurrency, ctx, args)
}

redis_module! {
    name: "ratelimit",
    version: 1,
    // The system's allocator, not Redis's: a command allocates only what it frees before it
    // returns (its arguments' vector, a value's text), and with Redis's the crate's own tests
    // could not run outside a server.
    allocator: (std::alloc::System, std::alloc::System),
    data_types: [],
    // Each declares its one key (the first argument), so Redis Cluster routes it by it; the
    // rules command's keys move with its key count, so Redis asks it (`getkeys-api`, `run`).
    commands: [
        ["ratelimit.fw", fixed_window, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.sw", sliding_window, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.sl", sliding_log, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.tb", token_bucket, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.gcra", gcra, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.rules", rules, "write deny-oom getkeys-api", 1, 1, 1, ""],
        ["ratelimit.lease.gcra", lease_gcra, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.lease.tb", lease_token_bucket, "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.concurrency", concurrency, "write deny-oom", 1, 1, 1, ""],
    ],
}
