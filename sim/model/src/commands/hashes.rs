//! Hash commands.

use bytes::Bytes;
use indexmap::IndexMap;

use super::super::keyspace::Value;
use super::super::num::{format_long_double_human, long_double_from_i64, parse_i64, parse_long_double};
use super::super::resp::Reply;
use super::{int_arg, not_a_float, wrong_type, Ctx};

type Hash = IndexMap<Bytes, Bytes>;

/// Reads a hash: `Ok(None)` if the key is missing, WRONGTYPE for another type.
fn read<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Hash>, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(wrong_type()),
        },
    }
}

/// `hashTypeLookupWriteOrCreate`: the hash under `key`, created empty if missing.
fn write_or_create<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<&'c mut Hash, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        Some(entry) if !matches!(entry.value, Value::Hash(_)) => return Err(wrong_type()),
        Some(_) => {}
        None => ctx.db.keys.set(key, Value::Hash(Hash::new()), false),
    }
    match ctx.db.keys.get_mut(key, ctx.now_ms).map(|e| &mut e.value) {
        Some(Value::Hash(h)) => Ok(h),
        _ => Err(wrong_type()),
    }
}

pub(super) fn hget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(Some(h)) => h.get(args[2]).map_or(Reply::Nil, |v| Reply::Bulk(v.clone())),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub(super) fn hmget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let h = match read(ctx, args[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let items =
        args[2..].iter().map(|f| h.and_then(|h| h.get(*f)).map_or(Reply::Nil, |v| Reply::Bulk(v.clone()))).collect();
    Reply::Array(items)
}

pub(super) fn hgetall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(Some(h)) => Reply::Map(h.iter().map(|(f, v)| (Reply::Bulk(f.clone()), Reply::Bulk(v.clone()))).collect()),
        Ok(None) => Reply::Map(Vec::new()),
        Err(e) => e,
    }
}

pub(super) fn hexists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(h) => Reply::Integer(i64::from(h.is_some_and(|h| h.contains_key(args[2])))),
        Err(e) => e,
    }
}

pub(super) fn hlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(h) => Reply::Integer(h.map_or(0, |h| h.len() as i64)),
        Err(e) => e,
    }
}

/// HSET and HMSET (same code in Redis; only the reply differs).
pub(super) fn hset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let is_hset = args[0].get(1).is_some_and(|c| c.eq_ignore_ascii_case(&b's'));
    if args.len() % 2 == 1 {
        let name = if is_hset { "hset" } else { "hmset" };
        return Reply::error(format!("ERR wrong number of arguments for '{name}' command"));
    }
    let h = match write_or_create(ctx, args[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let mut created = 0;
    for pair in args[2..].chunks(2) {
        // Updating an existing field keeps its position, as a listpack does.
        if h.insert(Bytes::copy_from_slice(pair[0]), Bytes::copy_from_slice(pair[1])).is_none() {
            created += 1;
        }
    }
    if is_hset {
        Reply::Integer(created)
    } else {
        Reply::ok()
    }
}

pub(super) fn hsetnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let h = match write_or_create(ctx, args[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    if h.contains_key(args[2]) {
        return Reply::Integer(0);
    }
    h.insert(Bytes::copy_from_slice(args[2]), Bytes::copy_from_slice(args[3]));
    Reply::Integer(1)
}

pub(super) fn hdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let Some(entry) = ctx.db.keys.get_mut(key, ctx.now_ms) else {
        return Reply::Integer(0);
    };
    let Value::Hash(h) = &mut entry.value else {
        return wrong_type();
    };
    let mut deleted = 0;
    for field in &args[2..] {
        // shift_remove keeps the remaining fields in order, as deleting from a listpack does.
        if h.shift_remove(*field).is_some() {
            deleted += 1;
        }
    }
    if h.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(deleted)
}

pub(super) fn hincrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let incr = match int_arg(args[3]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let h = match write_or_create(ctx, args[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let old = match h.get(args[2]) {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(v) => v,
            None => return Reply::err("ERR hash value is not an integer"),
        },
    };
    let Some(value) = old.checked_add(incr) else {
        return Reply::err("ERR increment or decrement would overflow");
    };
    h.insert(Bytes::copy_from_slice(args[2]), Bytes::from(value.to_string()));
    Reply::Integer(value)
}

pub(super) fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let Some(incr) = parse_long_double(args[3]) else {
        return not_a_float();
    };
    if !incr.is_finite() {
        return Reply::err("ERR value is NaN or Infinity");
    }
    let h = match write_or_create(ctx, args[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let old = match h.get(args[2]) {
        None => long_double_from_i64(0),
        Some(v) => match parse_long_double(v) {
            Some(v) => v,
            None => return Reply::err("ERR hash value is not a float"),
        },
    };
    let sum = old.add(incr);
    if !sum.is_finite() {
        return Reply::err("ERR increment would produce NaN or Infinity");
    }
    let text = Bytes::from(format_long_double_human(sum));
    h.insert(Bytes::copy_from_slice(args[2]), text.clone());
    Reply::Bulk(text)
}

/// HKEYS and HVALS (`genericHgetallCommand` with one side).
fn one_side(ctx: &mut Ctx<'_>, key: &[u8], keys: bool) -> Reply {
    match read(ctx, key) {
        Ok(Some(h)) => {
            Reply::Array(h.iter().map(|(f, v)| Reply::Bulk(if keys { f.clone() } else { v.clone() })).collect())
        }
        Ok(None) => Reply::Array(Vec::new()),
        Err(e) => e,
    }
}

pub(super) fn hkeys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    one_side(ctx, args[1], true)
}

pub(super) fn hvals(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    one_side(ctx, args[1], false)
}
