//! The Redis module's commands (`RATELIMIT.FW`, `.SW`, `.SL`, `.TB`, `.GCRA`, `.RULES`, `.LEASE.GCRA`, `.LEASE.TB`,
//! `.CONCURRENCY`, crate
//! `redis-ratelimit-module-commands`), as a `redis-server` that loaded the module runs them: the
//! module's own code ([`Command::run`]), whose every read and write goes through the model's
//! own commands here, as the module's go through Redis's. So the model decides what the
//! module decides, and its writes are the model's ordinary writes (replicated, expired and
//! shown to clients as any other).

use redis_ratelimit_module_commands::{Command, Keys, Kind, Member, Refusal};

use super::{arity_error_named, hashes, keys, strings, wrong_type, zsets, Ctx};
use crate::resp::Reply;

/// The module's commands over one command's context.
struct ModelKeys<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
}

impl ModelKeys<'_, '_> {
    /// A write's reply as the module sees a call's: an error is its text.
    fn wrote(reply: Reply) -> Result<(), Refusal> {
        match reply {
            Reply::Error(text) if text.starts_with(b"WRONGTYPE") => Err(Refusal::WrongType),
            Reply::Error(text) => Err(Refusal::Error(String::from_utf8_lossy(&text).into_owned())),
            _ => Ok(()),
        }
    }
}

impl Keys for ModelKeys<'_, '_> {
    fn now_us(&mut self) -> u64 {
        // A reading of the clock during the command, as the module reads the system's and a
        // script its TIME: a nested command's time (a microsecond on at least), so a decision
        // on Redis's clock is the script's to the microsecond.
        self.ctx.db.start_command(false);
        self.ctx.db.command_micros()
    }

    fn string<T>(&mut self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Kind> {
        match strings::get(self.ctx, &[b"get", key]) {
            Reply::Bulk(value) => Ok(Some(read(&value))),
            Reply::Error(_) => Err(match keys::type_(self.ctx, &[b"type", key]) {
                Reply::Status(name) if &name[..] == b"hash" => Kind::Hash,
                Reply::Status(name) if &name[..] == b"zset" => Kind::ZSet,
                _ => Kind::Other,
            }),
            _ => Ok(None),
        }
    }

    fn hash_field(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        match hashes::hget(self.ctx, &[b"hget", key, field]) {
            Reply::Bulk(value) => Some(value.to_vec()),
            _ => None,
        }
    }

    fn members_above(&mut self, key: &[u8], after: Option<i128>) -> Result<Vec<Member>, Refusal> {
        let from = after.map_or_else(|| "-inf".to_owned(), |after| format!("({after}"));
        let reply = zsets::zrangebyscore(self.ctx, &[b"zrangebyscore", key, from.as_bytes(), b"+inf", b"WITHSCORES"]);
        let bytes = |item: Option<&Reply>| match item {
            Some(Reply::Bulk(text)) => text.to_vec(),
            Some(Reply::Double(score)) => crate::num::format_g17(*score).into_bytes(),
            other => format!("{other:?}").into_bytes(),
        };
        match reply {
            Reply::Array(items) => Ok(items.chunks(2).map(|pair| (bytes(pair.first()), bytes(pair.get(1)))).collect()),
            other => Self::wrote(other).map(|()| Vec::new()),
        }
    }

    fn set(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> Result<(), Refusal> {
        let reply = match ttl_ms {
            Some(ttl) => strings::set(self.ctx, &[b"set", key, value, b"PX", ttl.to_string().as_bytes()]),
            None => strings::set(self.ctx, &[b"set", key, value, b"KEEPTTL"]),
        };
        Self::wrote(reply)
    }

    fn trim(&mut self, key: &[u8], through: u64) -> Result<(), Refusal> {
        Self::wrote(zsets::zremrangebyscore(
            self.ctx,
            &[b"zremrangebyscore", key, b"-inf", through.to_string().as_bytes()],
        ))
    }

    fn add(&mut self, key: &[u8], score: u64, members: &[String]) -> Result<(), Refusal> {
        let score = score.to_string();
        let mut args: Vec<&[u8]> = vec![b"zadd", key];
        for member in members {
            args.extend([score.as_bytes(), member.as_bytes()]);
        }
        Self::wrote(zsets::zadd(self.ctx, &args))
    }

    fn remove(&mut self, key: &[u8], member: &[u8]) -> Result<(), Refusal> {
        Self::wrote(zsets::zrem(self.ctx, &[b"zrem", key, member]))
    }

    fn expire(&mut self, key: &[u8], ttl_ms: u64) -> Result<(), Refusal> {
        Self::wrote(keys::pexpire(self.ctx, &[b"pexpire", key, ttl_ms.to_string().as_bytes()]))
    }
}

/// Runs the module's command `args[0]` names.
fn run(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let Some(command) = Command::named(args[0]) else {
        return Reply::error(format!("ERR unknown command '{}'", String::from_utf8_lossy(args[0])));
    };
    match command.run(&mut ModelKeys { ctx }, &args[1..]) {
        Ok(reply) => Reply::Array(reply.values().iter().map(|&n| Reply::Integer(n as i64)).collect()),
        Err(Refusal::Arity) => arity_error_named(&command.name().to_ascii_lowercase()),
        Err(Refusal::WrongType) => wrong_type(),
        Err(Refusal::Error(text)) => Reply::error(text),
    }
}

pub(super) fn ratelimit_fw(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_sw(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_sl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_tb(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_gcra(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_rules(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_lease(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}

pub(super) fn ratelimit_concurrency(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    run(ctx, args)
}
