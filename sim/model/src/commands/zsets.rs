//! Sorted-set commands: adding, scoring, counting, ranking, popping and removing here; ranges
//! (ZRANGE and its family, ZRANGESTORE) in `range`; unions, intersections and differences
//! (ZUNION, ZINTER, ZDIFF, their STORE variants, ZINTERCARD) in `algebra`.
//!
//! A sorted set is a listpack until a member longer than 64 bytes or a 129th member arrives
//! ([`ZSet`] tracks it): a listpack stores a score of -0 as 0, and ZSCAN prints its scores as
//! the listpack holds them.

use bytes::Bytes;

use super::super::keyspace::{Value, ZSet};
use super::super::num::{format_g, format_g17, parse_f64_strict, parse_i64};
use super::super::resp::Reply;
use super::{is, not_a_float, not_an_integer, scan, syntax_error, wrong_type, Ctx};

mod algebra;
mod range;

pub(super) use algebra::{zdiff, zdiffstore, zinter, zintercard, zinterstore, zunion, zunionstore};
use range::{emit, lex_range, parse_lex_range, ScoreRange};
pub(super) use range::{zrange, zrangebylex, zrangebyscore, zrangestore, zrevrange, zrevrangebylex, zrevrangebyscore};

fn read<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c ZSet>, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(wrong_type()),
        },
    }
}

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
    ch: bool,
}

/// `zaddGenericCommand`, shared by ZADD and ZINCRBY (which is ZADD with INCR preset, and, as in
/// Redis, reads option words too: `ZINCRBY k nx m` is a syntax error).
fn zadd_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], mut flags: AddFlags) -> Reply {
    let mut idx = 2;
    while idx < args.len() {
        let opt = args[idx];
        if is(opt, "nx") {
            flags.nx = true;
        } else if is(opt, "xx") {
            flags.xx = true;
        } else if is(opt, "ch") {
            flags.ch = true;
        } else if is(opt, "incr") {
            flags.incr = true;
        } else if is(opt, "gt") {
            flags.gt = true;
        } else if is(opt, "lt") {
            flags.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = &args[idx..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return syntax_error();
    }
    if flags.nx && flags.xx {
        return Reply::err("ERR XX and NX options at the same time are not compatible");
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Reply::err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if flags.incr && rest.len() > 2 {
        return Reply::err("ERR INCR option supports a single increment-element pair");
    }
    // All scores are parsed before anything changes: the command applies fully or not at all.
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks(2) {
        match parse_f64_strict(pair[0]) {
            Some(score) => pairs.push((score, pair[1])),
            None => return not_a_float(),
        }
    }
    let key = args[1];
    match ctx.db.keys.get(key, ctx.now_ms) {
        Some(entry) if !matches!(entry.value, Value::ZSet(_)) => return wrong_type(),
        Some(_) => {}
        None => {
            if flags.xx {
                return if flags.incr { Reply::Nil } else { Reply::Integer(0) };
            }
            let zset = ZSet::with_hint(pairs.len(), pairs[0].1.len());
            ctx.store(key, Value::ZSet(zset), false);
        }
    }
    let Some(Value::ZSet(z)) = ctx.db.keys.get_mut(key, ctx.now_ms).map(|e| &mut e.value) else {
        return wrong_type();
    };
    z.maybe_convert(pairs.len());
    let (mut added, mut updated, mut processed) = (0, 0, 0);
    let mut last_score = 0.0;
    for (score, member) in pairs {
        // zsetAdd.
        if score.is_nan() {
            return Reply::err("ERR resulting score is not a number (NaN)");
        }
        match z.score(member) {
            Some(current) => {
                if flags.nx {
                    continue;
                }
                let mut new = score;
                if flags.incr {
                    new += current;
                    if new.is_nan() {
                        return Reply::err("ERR resulting score is not a number (NaN)");
                    }
                }
                if (flags.lt && new >= current) || (flags.gt && new <= current) {
                    continue;
                }
                last_score = new;
                processed += 1;
                if new != current {
                    z.insert(member, new);
                    updated += 1;
                }
            }
            None => {
                if flags.xx {
                    continue;
                }
                z.insert(member, score);
                last_score = score;
                added += 1;
                processed += 1;
            }
        }
    }
    if flags.incr {
        if processed > 0 {
            Reply::Double(last_score)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Integer(if flags.ch { added + updated } else { added })
    }
}

pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zadd_generic(ctx, args, AddFlags::default())
}

pub(super) fn zincrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zadd_generic(ctx, args, AddFlags { incr: true, ..AddFlags::default() })
}

pub(super) fn zrem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let Some(entry) = ctx.db.keys.get_mut(key, ctx.now_ms) else {
        return Reply::Integer(0);
    };
    let Value::ZSet(z) = &mut entry.value else {
        return wrong_type();
    };
    let removed = args[2..].iter().filter(|m| z.remove(m)).count();
    if z.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(removed as i64)
}

pub(super) fn zcard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(z) => Reply::Integer(z.map_or(0, |z| z.len() as i64)),
        Err(e) => e,
    }
}

pub(super) fn zscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(Some(z)) => z.score(args[2]).map_or(Reply::Nil, Reply::Double),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub(super) fn zcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let Some(range) = ScoreRange::parse(args[2], args[3]) else {
        return Reply::err("ERR min or max is not a float");
    };
    match read(ctx, args[1]) {
        Ok(Some(z)) => {
            let n = if range.is_empty() { 0 } else { range.members(z).count() };
            Reply::Integer(n as i64)
        }
        Ok(None) => Reply::Integer(0),
        Err(e) => e,
    }
}

/// ZLEXCOUNT key min max: the members a forward BYLEX walk takes (see `range::lex_range`).
pub(super) fn zlexcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (min, max) = match parse_lex_range(args[2], args[3]) {
        Ok(bounds) => bounds,
        Err(e) => return e,
    };
    match read(ctx, args[1]) {
        Ok(Some(z)) => Reply::Integer(lex_range(z, &min, &max, false, 0, -1).len() as i64),
        Ok(None) => Reply::Integer(0),
        Err(e) => e,
    }
}

/// `zremrangeGenericCommand` once the range is parsed: removes what `select` picks from the
/// set under `key` (0 for a missing key), deleting the key if it is left empty.
fn remove_range(ctx: &mut Ctx<'_>, key: &[u8], select: impl FnOnce(&ZSet) -> Vec<Bytes>) -> Reply {
    let Some(entry) = ctx.db.keys.get_mut(key, ctx.now_ms) else {
        return Reply::Integer(0);
    };
    let Value::ZSet(z) = &mut entry.value else {
        return wrong_type();
    };
    let doomed = select(z);
    for m in &doomed {
        z.remove(m);
    }
    if z.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(doomed.len() as i64)
}

pub(super) fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let Some(range) = ScoreRange::parse(args[2], args[3]) else {
        return Reply::err("ERR min or max is not a float");
    };
    remove_range(ctx, args[1], |z| {
        if range.is_empty() {
            Vec::new()
        } else {
            range.members(z).map(|(m, _)| m.clone()).collect()
        }
    })
}

pub(super) fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (min, max) = match parse_lex_range(args[2], args[3]) {
        Ok(bounds) => bounds,
        Err(e) => return e,
    };
    remove_range(ctx, args[1], |z| lex_range(z, &min, &max, false, 0, -1).into_iter().map(|(m, _)| m).collect())
}

/// ZRANK and ZREVRANK: the member's 0-based position, or nil.
fn rank(ctx: &mut Ctx<'_>, args: &[&[u8]], reverse: bool) -> Reply {
    let z = match read(ctx, args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let Some(score) = z.score(args[2]) else { return Reply::Nil };
    // Members before this one: those with a lower score, then equal scores with a lower member.
    let below = z.iter().take_while(|(m, s)| *s < score || (*s == score && &m[..] < args[2])).count();
    let position = if reverse { z.len() - 1 - below } else { below };
    Reply::Integer(position as i64)
}

pub(super) fn zrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    rank(ctx, args, false)
}

pub(super) fn zrevrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    rank(ctx, args, true)
}

/// ZREMRANGEBYRANK key start stop: the indexes are parsed before the key is read.
pub(super) fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (Some(start), Some(end)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return not_an_integer();
    };
    remove_range(ctx, args[1], |z| {
        let len = z.len() as i64;
        let start = if start < 0 { len + start } else { start }.max(0);
        let end = if end < 0 { len + end } else { end };
        if start > end || start >= len {
            return Vec::new();
        }
        let n = (end.min(len - 1) - start + 1) as usize;
        z.iter().skip(start as usize).take(n).map(|(m, _)| m.clone()).collect()
    })
}

/// ZMSCORE key member [member ...]: each score or nil; a missing key is all nil.
pub(super) fn zmscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(z) => Reply::Array(
            args[2..].iter().map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double)).collect(),
        ),
        Err(e) => e,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum PopEnd {
    Min,
    Max,
}

/// The key popped from and its members with their scores, in the order popped.
type Popped = (Bytes, Vec<(Bytes, f64)>);

/// `genericZpopCommand`: pops up to `count` members from the low or high end of the first of
/// `keys` that exists (WRONGTYPE if that key is another type), deleting it if emptied. `None`
/// if no key exists.
fn pop(ctx: &mut Ctx<'_>, keys: &[&[u8]], end: PopEnd, count: usize) -> Result<Option<Popped>, Reply> {
    for key in keys {
        let Some(entry) = ctx.db.keys.get_mut(key, ctx.now_ms) else { continue };
        let Value::ZSet(z) = &mut entry.value else { return Err(wrong_type()) };
        let picked: Vec<(Bytes, f64)> = match end {
            PopEnd::Min => z.iter().take(count).map(|(m, s)| (m.clone(), s)).collect(),
            PopEnd::Max => z.iter().rev().take(count).map(|(m, s)| (m.clone(), s)).collect(),
        };
        for (m, _) in &picked {
            z.remove(m);
        }
        if z.is_empty() {
            ctx.db.keys.remove(key);
        }
        return Ok(Some((Bytes::copy_from_slice(key), picked)));
    }
    Ok(None)
}

/// ZPOPMIN/ZPOPMAX key [count]: a flat array of member, score, ... (for a RESP3 script with a
/// count, pairs). The count is checked first; a missing key or a count of 0 is an empty array.
fn zpop(ctx: &mut Ctx<'_>, args: &[&[u8]], end: PopEnd) -> Reply {
    if args.len() > 3 {
        return syntax_error();
    }
    let count = match args.get(2).map(|arg| parse_i64(arg)) {
        None => None,
        Some(Some(n)) if n >= 0 => Some(n),
        Some(_) => return Reply::err("ERR value is out of range, must be positive"),
    };
    if count == Some(0) {
        // Still looks the key up, for its type.
        return match read(ctx, args[1]) {
            Err(e) => e,
            Ok(_) => Reply::Array(Vec::new()),
        };
    }
    let n = count.map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX));
    match pop(ctx, &args[1..2], end, n) {
        Err(e) => e,
        Ok(None) => Reply::Array(Vec::new()),
        Ok(Some((_, popped))) if ctx.resp >= 3 && count.is_some() => emit(ctx, popped, true),
        Ok(Some((_, popped))) => {
            Reply::Array(popped.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)]).collect())
        }
    }
}

pub(super) fn zpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zpop(ctx, args, PopEnd::Min)
}

pub(super) fn zpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zpop(ctx, args, PopEnd::Max)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: `[key, [[member, score], ...]]` (nested
/// in RESP2 too) from the first sorted set that exists, or a null array.
pub(super) fn zmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match super::lists::mpop_args(args, end_arg) {
        Ok((keys, end, count)) => mpop_reply(ctx, &keys, end, count),
        Err(e) => e,
    }
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP that never waits, as in
/// a script (see BLMPOP in `lists`).
pub(super) fn bzmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (keys, end, count) = match super::lists::mpop_args(&args[1..], end_arg) {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    match super::lists::timeout_arg(args[1]) {
        Ok(()) => mpop_reply(ctx, &keys, end, count),
        Err(e) => e,
    }
}

fn end_arg(arg: &[u8]) -> Result<PopEnd, Reply> {
    if is(arg, "min") {
        Ok(PopEnd::Min)
    } else if is(arg, "max") {
        Ok(PopEnd::Max)
    } else {
        Err(syntax_error())
    }
}

/// ZMPOP's reply: `[key, [[member, score], ...]]` from the first sorted set, or a null array.
fn mpop_reply(ctx: &mut Ctx<'_>, keys: &[&[u8]], end: PopEnd, count: usize) -> Reply {
    match pop(ctx, keys, end, count) {
        Err(e) => e,
        Ok(None) => Reply::NilArray,
        Ok(Some((key, popped))) => {
            let pairs = popped.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]));
            Reply::Array(vec![Reply::Bulk(key), Reply::Array(pairs.collect())])
        }
    }
}

/// A score as a listpack holds it and ZSCAN prints it: an integer if it is one (within about
/// ±2^62, `double2ll`), else `%.17g`.
fn listpack_score(score: f64) -> String {
    let bound = (i64::MAX / 2) as f64;
    if (-bound..=bound).contains(&score) && score.fract() == 0.0 {
        return (score as i64).to_string();
    }
    format_g(score, 17)
}

/// ZSCAN key cursor [MATCH pattern] [COUNT n] (see `scan`): members and scores in order; a
/// skiplist's scores print as `%.17Lg`, a listpack's as it stores them.
pub(super) fn zscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if let Err(e) = scan::parse_cursor(args[2]) {
        return e;
    }
    let options = scan::ScanOptions::parse(&args[3..], false);
    let z = match read(ctx, args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return scan::empty(),
        Err(e) => return e,
    };
    let text = |s: f64| if z.is_listpack() { listpack_score(s) } else { format_g17(s) };
    match options {
        Ok(options) => scan::reply(options.pairs(z.iter().map(|(m, s)| (m.clone(), Bytes::from(text(s)))))),
        Err(e) => e,
    }
}

/// ZRANDMEMBER key [count [WITHSCORES]]: as HRANDFIELD, with scores for values; the whole set
/// comes highest score first.
pub(super) fn zrandmember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (count, with) = match super::hashes::random_args(args, "withscores") {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    let all: Vec<(Bytes, Reply)> = match read(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil },
        Ok(Some(z)) => z.iter().map(|(m, s)| (m.clone(), Reply::Double(s))).collect(),
    };
    match count {
        None => Reply::Bulk(all[ctx.db.random_below(all.len())].0.clone()),
        Some(count) => super::hashes::random_reply(ctx, all, count, with, true),
    }
}
