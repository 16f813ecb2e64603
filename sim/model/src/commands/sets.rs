//! Set commands: SADD, SREM, SCARD, SISMEMBER, SMEMBERS.

use super::super::keyspace::{Set, Value};
use super::super::resp::Reply;
use super::{wrong_type, Ctx};

/// Reads a set: `Ok(None)` if the key is missing, WRONGTYPE for another type.
fn read<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Set>, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::Set(s) => Ok(Some(s)),
            _ => Err(wrong_type()),
        },
    }
}

fn write<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Set>, Reply> {
    match ctx.db.keys.get_mut(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::Set(s) => Ok(Some(s)),
            _ => Err(wrong_type()),
        },
    }
}

pub(super) fn sadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let key = args[1];
    match write(ctx, key) {
        Err(e) => return e,
        Ok(Some(_)) => {}
        // The encoding follows the first member (`setTypeCreate`).
        Ok(None) => ctx.db.keys.set(key, Value::Set(Set::for_first(args[2])), false),
    }
    let Ok(Some(set)) = write(ctx, key) else { return wrong_type() };
    let added = args[2..].iter().filter(|m| set.insert(m)).count();
    Reply::Integer(added as i64)
}

pub(super) fn srem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let set = match write(ctx, key) {
        Err(e) => return e,
        Ok(None) => return Reply::Integer(0),
        Ok(Some(set)) => set,
    };
    let removed = args[2..].iter().filter(|m| set.remove(m)).count();
    if set.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(removed as i64)
}

pub(super) fn scard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(set) => Reply::Integer(set.map_or(0, |s| s.len() as i64)),
        Err(e) => e,
    }
}

pub(super) fn sismember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(set) => Reply::Integer(i64::from(set.is_some_and(|s| s.contains(args[2])))),
        Err(e) => e,
    }
}

/// SMEMBERS: a RESP3 set (an array for RESP2 clients and scripts).
pub(super) fn smembers(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(set) => Reply::Set(set.map_or_else(Vec::new, |s| s.members().into_iter().map(Reply::Bulk).collect())),
        Err(e) => e,
    }
}
