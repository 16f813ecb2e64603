//! Sorted-set commands.

use bytes::Bytes;

use super::super::keyspace::{Value, ZSet};
use super::super::num::{parse_f64_lenient, parse_f64_strict};
use super::super::resp::Reply;
use super::{is, not_a_float, not_an_integer, syntax_error, wrong_type, Ctx};

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
            ctx.db.keys.set(key, Value::ZSet(zset), false);
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

/// A score interval (`zrangespec`).
#[derive(Clone, Copy)]
struct ScoreRange {
    min: f64,
    max: f64,
    min_ex: bool,
    max_ex: bool,
}

impl ScoreRange {
    /// `zslParseRange`: "(" makes a bound exclusive; the rest is plain `strtod`.
    fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let bound = |s: &[u8]| -> Option<(f64, bool)> {
            match s.split_first() {
                Some((b'(', rest)) => parse_f64_lenient(rest).map(|v| (v, true)),
                _ => parse_f64_lenient(s).map(|v| (v, false)),
            }
        };
        let (min, min_ex) = bound(min)?;
        let (max, max_ex) = bound(max)?;
        Some(ScoreRange { min, max, min_ex, max_ex })
    }

    /// The members in range, ascending, found by a range query from `min`.
    fn members<'z>(&self, z: &'z ZSet) -> impl Iterator<Item = (&'z Bytes, f64)> + 'z {
        let (min_ex, min) = (self.min_ex, self.min);
        let (max_ex, max) = (self.max_ex, self.max);
        z.iter_from(min).skip_while(move |(_, s)| min_ex && *s <= min).take_while(move |(_, s)| {
            if max_ex {
                *s < max
            } else {
                *s <= max
            }
        })
    }

    /// Ranges that can hold nothing (`zslIsInRange`'s first test).
    fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }
}

/// A lexicographic bound (`zslParseLexRangeItem`).
#[derive(Clone)]
enum LexBound {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

impl LexBound {
    fn parse(s: &[u8]) -> Option<LexBound> {
        match s.split_first() {
            Some((b'+', rest)) if super::cstr(rest).is_empty() => Some(LexBound::Max),
            Some((b'-', rest)) if super::cstr(rest).is_empty() => Some(LexBound::Min),
            Some((b'(', rest)) => Some(LexBound::Exclusive(Bytes::copy_from_slice(rest))),
            Some((b'[', rest)) => Some(LexBound::Inclusive(Bytes::copy_from_slice(rest))),
            _ => None,
        }
    }

    fn allows_above(&self, v: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(b) => v >= &b[..],
            LexBound::Exclusive(b) => v > &b[..],
        }
    }

    fn allows_below(&self, v: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => v <= &b[..],
            LexBound::Exclusive(b) => v < &b[..],
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// Builds the reply: members, or members with scores (flat for RESP2, pairs for RESP3).
fn emit(ctx: &Ctx<'_>, items: Vec<(Bytes, f64)>, with_scores: bool) -> Reply {
    if !with_scores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if ctx.resp >= 3 {
        return Reply::Array(
            items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)])).collect(),
        );
    }
    let mut flat = Vec::with_capacity(items.len() * 2);
    for (m, s) in items {
        flat.push(Reply::Bulk(m));
        flat.push(Reply::Double(s));
    }
    Reply::Array(flat)
}

/// Applies LIMIT as Redis does: a negative offset yields nothing, a negative count means all.
fn limit<I: Iterator<Item = (Bytes, f64)>>(iter: I, offset: i64, count: i64) -> Vec<(Bytes, f64)> {
    if offset < 0 {
        return Vec::new();
    }
    let iter = iter.skip(offset as usize);
    if count < 0 {
        iter.collect()
    } else {
        iter.take(count as usize).collect()
    }
}

/// Orders two lex bounds as `sdscmplex` does ("-" below everything, "+" above).
fn lex_bound_cmp(a: &LexBound, b: &LexBound) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let rank = |x: &LexBound| match x {
        LexBound::Min => 0,
        LexBound::Max => 2,
        _ => 1,
    };
    match (a, b) {
        (LexBound::Inclusive(x) | LexBound::Exclusive(x), LexBound::Inclusive(y) | LexBound::Exclusive(y)) => x.cmp(y),
        _ => match rank(a).cmp(&rank(b)) {
            Equal => Equal,
            other => other,
        },
    }
}

/// BYLEX as Redis's listpack code walks it. Redis only promises sensible results when all
/// scores are equal; with mixed scores the answer depends on the walk, so the walk is copied:
/// check the ends, find the first element past `min` (from the tail: the last before `max`),
/// skip `offset` elements unchecked, then take elements while they stay within the far bound.
fn lex_range(z: &ZSet, min: &LexBound, max: &LexBound, reverse: bool, offset: i64, count: i64) -> Vec<(Bytes, f64)> {
    let exclusive = |b: &LexBound| matches!(b, LexBound::Exclusive(_) | LexBound::Min | LexBound::Max);
    let cmp = lex_bound_cmp(min, max);
    if cmp == std::cmp::Ordering::Greater || (cmp == std::cmp::Ordering::Equal && (exclusive(min) || exclusive(max))) {
        return Vec::new();
    }
    let all: Vec<(Bytes, f64)> = z.iter().map(|(m, s)| (m.clone(), s)).collect();
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return Vec::new();
    };
    if !min.allows_above(&last.0) || !max.allows_below(&first.0) {
        return Vec::new();
    }
    let ordered: Vec<&(Bytes, f64)> = if reverse { all.iter().rev().collect() } else { all.iter().collect() };
    type Check<'a> = &'a dyn Fn(&[u8]) -> bool;
    let (near_ok, far_ok): (Check<'_>, Check<'_>) = if reverse {
        (&|v| max.allows_below(v), &|v| min.allows_above(v))
    } else {
        (&|v| min.allows_above(v), &|v| max.allows_below(v))
    };
    let Some(start) = ordered.iter().position(|(m, _)| near_ok(m)) else {
        return Vec::new();
    };
    if !far_ok(&ordered[start].0) || offset < 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (m, s) in ordered.iter().skip(start + offset as usize) {
        if count >= 0 && out.len() as i64 >= count {
            break;
        }
        if !far_ok(m) {
            break;
        }
        out.push((m.clone(), *s));
    }
    out
}

/// `zrangeGenericCommand`: ZRANGE and its older spellings.
fn zrange_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], mut range_type: RangeType, mut direction: Direction) -> Reply {
    let key = args[1];
    let (mut min_idx, mut max_idx) = (2, 3);
    let mut with_scores = false;
    let (mut offset, mut count) = (0i64, -1i64);
    let mut j = 4;
    while j < args.len() {
        let left = args.len() - j - 1;
        let opt = args[j];
        if is(opt, "withscores") {
            with_scores = true;
        } else if is(opt, "limit") && left >= 2 {
            match (super::super::num::parse_i64(args[j + 1]), super::super::num::parse_i64(args[j + 2])) {
                (Some(o), Some(c)) => {
                    offset = o;
                    count = c;
                }
                _ => return not_an_integer(),
            }
            j += 2;
        } else if direction == Direction::Auto && is(opt, "rev") {
            direction = Direction::Reverse;
        } else if range_type == RangeType::Auto && is(opt, "bylex") {
            range_type = RangeType::Lex;
        } else if range_type == RangeType::Auto && is(opt, "byscore") {
            range_type = RangeType::Score;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    if direction == Direction::Auto {
        direction = Direction::Forward;
    }
    if range_type == RangeType::Auto {
        range_type = RangeType::Rank;
    }
    if count != -1 && range_type == RangeType::Rank {
        return Reply::err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    }
    if with_scores && range_type == RangeType::Lex {
        return Reply::err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let reverse = direction == Direction::Reverse;
    if reverse && range_type != RangeType::Rank {
        std::mem::swap(&mut min_idx, &mut max_idx);
    }
    enum Parsed {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexBound, LexBound),
    }
    let parsed = match range_type {
        RangeType::Score => match ScoreRange::parse(args[min_idx], args[max_idx]) {
            Some(r) => Parsed::Score(r),
            None => return Reply::err("ERR min or max is not a float"),
        },
        RangeType::Lex => match (LexBound::parse(args[min_idx]), LexBound::parse(args[max_idx])) {
            (Some(a), Some(b)) => Parsed::Lex(a, b),
            _ => return Reply::err("ERR min or max not valid string range item"),
        },
        _ => match (super::super::num::parse_i64(args[min_idx]), super::super::num::parse_i64(args[max_idx])) {
            (Some(a), Some(b)) => Parsed::Rank(a, b),
            _ => return not_an_integer(),
        },
    };
    let z = match read(ctx, key) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    let items: Vec<(Bytes, f64)> = match parsed {
        Parsed::Rank(start, end) => {
            let len = z.len() as i64;
            let mut start = if start < 0 { len + start } else { start };
            let end = if end < 0 { len + end } else { end };
            if start < 0 {
                start = 0;
            }
            if start > end || start >= len {
                Vec::new()
            } else {
                let end = end.min(len - 1);
                let n = (end - start + 1) as usize;
                let all = z.iter().map(|(m, s)| (m.clone(), s));
                // Walk from the nearer end: `ZRANGE key -1 -1` must not visit every member.
                let from_far_end = (len - 1 - end) as usize;
                let near_back = from_far_end < start as usize;
                match (reverse, near_back) {
                    (false, false) => all.skip(start as usize).take(n).collect(),
                    (true, false) => all.rev().skip(start as usize).take(n).collect(),
                    (false, true) => {
                        let mut v: Vec<_> = all.rev().skip(from_far_end).take(n).collect();
                        v.reverse();
                        v
                    }
                    (true, true) => {
                        let mut v: Vec<_> = all.skip(from_far_end).take(n).collect();
                        v.reverse();
                        v
                    }
                }
            }
        }
        Parsed::Score(range) => {
            if range.is_empty() {
                Vec::new()
            } else {
                let all = range.members(z).map(|(m, s)| (m.clone(), s));
                if reverse {
                    let ascending: Vec<_> = all.collect();
                    limit(ascending.into_iter().rev(), offset, count)
                } else {
                    limit(all, offset, count)
                }
            }
        }
        Parsed::Lex(min, max) => lex_range(z, &min, &max, reverse, offset, count),
    };
    emit(ctx, items, with_scores)
}

pub(super) fn zrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, RangeType::Auto, Direction::Auto)
}

pub(super) fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, RangeType::Score, Direction::Forward)
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, RangeType::Score, Direction::Reverse)
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

pub(super) fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let Some(range) = ScoreRange::parse(args[2], args[3]) else {
        return Reply::err("ERR min or max is not a float");
    };
    let key = args[1];
    let Some(entry) = ctx.db.keys.get_mut(key, ctx.now_ms) else {
        return Reply::Integer(0);
    };
    let Value::ZSet(z) = &mut entry.value else {
        return wrong_type();
    };
    let doomed: Vec<Bytes> =
        if range.is_empty() { Vec::new() } else { range.members(z).map(|(m, _)| m.clone()).collect() };
    for m in &doomed {
        z.remove(m);
    }
    if z.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(doomed.len() as i64)
}

pub(super) fn zrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, RangeType::Rank, Direction::Reverse)
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
    let (Some(start), Some(end)) = (super::super::num::parse_i64(args[2]), super::super::num::parse_i64(args[3]))
    else {
        return not_an_integer();
    };
    let key = args[1];
    let Some(entry) = ctx.db.keys.get_mut(key, ctx.now_ms) else {
        return Reply::Integer(0);
    };
    let Value::ZSet(z) = &mut entry.value else {
        return wrong_type();
    };
    let len = z.len() as i64;
    let mut start = if start < 0 { len + start } else { start };
    let end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return Reply::Integer(0);
    }
    let end = end.min(len - 1);
    let doomed: Vec<Bytes> =
        z.iter().skip(start as usize).take((end - start + 1) as usize).map(|(m, _)| m.clone()).collect();
    for m in &doomed {
        z.remove(m);
    }
    if z.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(doomed.len() as i64)
}
