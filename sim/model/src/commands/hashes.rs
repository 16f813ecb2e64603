//! Hash commands.
//!
//! A hash stays a listpack until a field or value longer than 64 bytes or a 129th field
//! arrives ([`Hash`] tracks it); HSET and HSETNX check their arguments' lengths before writing,
//! HINCRBY and HINCRBYFLOAT only the field and value they write, as Redis does.

use bytes::Bytes;

use super::super::keyspace::{Hash, Value};
use super::super::num::{format_long_double_human, long_double_from_i64, parse_i64, parse_long_double};
use super::super::resp::Reply;
use super::random::{self, Picks};
use super::{int_arg, is, not_a_float, scan, syntax_error, wrong_type, Ctx};

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
        None => ctx.store(key, Value::Hash(Hash::default()), false),
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
        args[2..].iter().map(|f| h.and_then(|h| h.get(f)).map_or(Reply::Nil, |v| Reply::Bulk(v.clone()))).collect();
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
    h.convert_for(&args[2..]);
    let mut created = 0;
    for pair in args[2..].chunks(2) {
        // Updating an existing field keeps its position, as a listpack does.
        if h.set(pair[0], Bytes::copy_from_slice(pair[1])) {
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
    h.convert_for(&args[2..4]);
    h.set(args[2], Bytes::copy_from_slice(args[3]));
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
        if h.remove(field) {
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
    h.set(args[2], Bytes::from(value.to_string()));
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
    h.set(args[2], text.clone());
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

/// HSTRLEN key field: the value's length, 0 for a missing field or key.
pub(super) fn hstrlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(h) => Reply::Integer(h.and_then(|h| h.get(args[2])).map_or(0, |v| v.len() as i64)),
        Err(e) => e,
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT n]: the cursor is checked first, then the key, then
/// the options; fields and values come in the hash's order (see `scan`).
pub(super) fn hscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if let Err(e) = scan::parse_cursor(args[2]) {
        return e;
    }
    // Parsed now, but a parse error only counts once the key has been found.
    let options = scan::ScanOptions::parse(&args[3..], false);
    let h = match read(ctx, args[1]) {
        Ok(Some(h)) => h,
        Ok(None) => return scan::empty(),
        Err(e) => return e,
    };
    match options {
        Ok(options) => scan::reply(options.pairs(h.iter().map(|(f, v)| (f.clone(), v.clone())))),
        Err(e) => e,
    }
}

/// HRANDFIELD and ZRANDMEMBER's arguments: `key [count [WITH...]]`, the count parsed first, then
/// the option; with the option the count must stay within ±2^62 (Redis doubles it).
pub(super) fn random_args(args: &[&[u8]], option: &str) -> Result<(Option<i64>, bool), Reply> {
    let Some(count) = args.get(2) else { return Ok((None, false)) };
    let count = random::count_arg(count)?;
    if args.len() > 4 || (args.len() == 4 && !is(args[3], option)) {
        return Err(syntax_error());
    }
    let with = args.len() == 4;
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Reply::err("ERR value is out of range"));
    }
    Ok((Some(count), with))
}

/// The reply of HRANDFIELD and ZRANDMEMBER with a count: the picks from `all`, each a member
/// and (`with`) its value, flat for RESP2 and in pairs for RESP3. The whole collection comes in
/// its order, or (`backwards`: a sorted set, which Redis walks from its tail there) reversed.
pub(super) fn random_reply(
    ctx: &mut Ctx<'_>,
    all: Vec<(Bytes, Reply)>,
    count: i64,
    with: bool,
    backwards: bool,
) -> Reply {
    if count == 0 {
        return Reply::Array(Vec::new());
    }
    let picked: Vec<usize> = match random::picks(ctx.db, count, all.len()) {
        Err(e) => return e,
        Ok(Picks::All) if backwards => (0..all.len()).rev().collect(),
        Ok(Picks::All) => (0..all.len()).collect(),
        Ok(Picks::Repeated(picked) | Picks::Distinct(picked)) => picked,
    };
    let resp3 = ctx.resp >= 3;
    let mut out = Vec::new();
    for i in picked {
        let (member, value) = all[i].clone();
        match (with, resp3) {
            (false, _) => out.push(Reply::Bulk(member)),
            (true, false) => out.extend([Reply::Bulk(member), value]),
            (true, true) => out.push(Reply::Array(vec![Reply::Bulk(member), value])),
        }
    }
    Reply::Array(out)
}

/// HRANDFIELD key [count [WITHVALUES]]: one field (nil for a missing key), or with a count an
/// array as SRANDMEMBER's (see `random`).
pub(super) fn hrandfield(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (count, with) = match random_args(args, "withvalues") {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    let all: Vec<(Bytes, Reply)> = match read(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil },
        Ok(Some(h)) => h.iter().map(|(f, v)| (f.clone(), Reply::Bulk(v.clone()))).collect(),
    };
    match count {
        None => Reply::Bulk(all[ctx.db.random_below(all.len())].0.clone()),
        Some(count) => random_reply(ctx, all, count, with, false),
    }
}
