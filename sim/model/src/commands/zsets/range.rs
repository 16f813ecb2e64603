//! Ranges of a sorted set: by rank, by score and by lex (`zrangeGenericCommand` and the range
//! parsers), for ZRANGE and its older spellings, ZRANGESTORE, and the counting and removing
//! commands that take the same ranges.

use bytes::Bytes;

use super::super::super::keyspace::{Value, ZSet};
use super::super::super::num::{parse_f64_lenient, parse_i64};
use super::super::super::resp::Reply;
use super::super::{cstr, is, not_an_integer, syntax_error, Ctx};
use super::read;

/// A score interval (`zrangespec`).
#[derive(Clone, Copy)]
pub(super) struct ScoreRange {
    min: f64,
    max: f64,
    min_ex: bool,
    max_ex: bool,
}

impl ScoreRange {
    /// `zslParseRange`: "(" makes a bound exclusive; the rest is plain `strtod`.
    pub(super) fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
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
    pub(super) fn members<'z>(&self, z: &'z ZSet) -> impl Iterator<Item = (&'z Bytes, f64)> + 'z {
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
    pub(super) fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }
}

/// A lexicographic bound (`zslParseLexRangeItem`).
#[derive(Clone)]
pub(super) enum LexBound {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

impl LexBound {
    fn parse(s: &[u8]) -> Option<LexBound> {
        match s.split_first() {
            Some((b'+', rest)) if cstr(rest).is_empty() => Some(LexBound::Max),
            Some((b'-', rest)) if cstr(rest).is_empty() => Some(LexBound::Min),
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

/// `zslParseLexRange`: both bounds, or the error Redis gives for either.
pub(super) fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<(LexBound, LexBound), Reply> {
    match (LexBound::parse(min), LexBound::parse(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Reply::err("ERR min or max not valid string range item")),
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
pub(super) fn emit(ctx: &Ctx<'_>, items: Vec<(Bytes, f64)>, with_scores: bool) -> Reply {
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
pub(super) fn lex_range(
    z: &ZSet,
    min: &LexBound,
    max: &LexBound,
    reverse: bool,
    offset: i64,
    count: i64,
) -> Vec<(Bytes, f64)> {
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

/// A parsed range.
enum ParsedRange {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexBound, LexBound),
}

/// `zrangeGenericCommand`: ZRANGE and its older spellings, and ZRANGESTORE (`dst`), whose
/// source key is at `args[first]`. Options first (ZRANGESTORE takes no WITHSCORES), then the
/// range, then the key.
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    first: usize,
    dst: Option<&[u8]>,
    mut range_type: RangeType,
    mut direction: Direction,
) -> Reply {
    let key = args[first];
    let (mut min_idx, mut max_idx) = (first + 1, first + 2);
    let mut with_scores = false;
    let (mut offset, mut count) = (0i64, -1i64);
    let mut j = first + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let opt = args[j];
        if dst.is_none() && is(opt, "withscores") {
            with_scores = true;
        } else if is(opt, "limit") && left >= 2 {
            match (parse_i64(args[j + 1]), parse_i64(args[j + 2])) {
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
    let range = match range_type {
        RangeType::Score => match ScoreRange::parse(args[min_idx], args[max_idx]) {
            Some(r) => ParsedRange::Score(r),
            None => return Reply::err("ERR min or max is not a float"),
        },
        RangeType::Lex => match parse_lex_range(args[min_idx], args[max_idx]) {
            Ok((a, b)) => ParsedRange::Lex(a, b),
            Err(e) => return e,
        },
        _ => match (parse_i64(args[min_idx]), parse_i64(args[max_idx])) {
            (Some(a), Some(b)) => ParsedRange::Rank(a, b),
            _ => return not_an_integer(),
        },
    };
    let by_rank = matches!(range, ParsedRange::Rank(..));
    let items = match read(ctx, key) {
        Ok(Some(z)) => range_items(z, range, reverse, offset, count),
        Ok(None) => Vec::new(),
        Err(e) => return e,
    };
    match dst {
        None => emit(ctx, items, with_scores),
        Some(dst) if items.is_empty() => {
            ctx.db.keys.remove(dst);
            Reply::Integer(0)
        }
        Some(dst) => {
            // `zrangeResultBeginStore`: a listpack unless a rank range is known to be long,
            // filled in the order the range lists its members (so a -0 stored before a long
            // member converts the set is 0, one stored after it stays -0).
            let mut stored = ZSet::with_hint(if by_rank { items.len() } else { 0 }, 0);
            for (member, score) in &items {
                stored.insert(member, *score);
            }
            ctx.store(dst, Value::ZSet(stored), false);
            Reply::Integer(items.len() as i64)
        }
    }
}

/// The members (with scores) a range selects, in the order it lists them.
fn range_items(z: &ZSet, range: ParsedRange, reverse: bool, offset: i64, count: i64) -> Vec<(Bytes, f64)> {
    match range {
        ParsedRange::Rank(start, end) => {
            let len = z.len() as i64;
            let start = if start < 0 { len + start } else { start }.max(0);
            let end = if end < 0 { len + end } else { end };
            if start > end || start >= len {
                return Vec::new();
            }
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
        ParsedRange::Score(range) if range.is_empty() => Vec::new(),
        ParsedRange::Score(range) => {
            let all = range.members(z).map(|(m, s)| (m.clone(), s));
            if reverse {
                let ascending: Vec<_> = all.collect();
                limit(ascending.into_iter().rev(), offset, count)
            } else {
                limit(all, offset, count)
            }
        }
        ParsedRange::Lex(min, max) => lex_range(z, &min, &max, reverse, offset, count),
    }
}

pub(in super::super) fn zrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 1, None, RangeType::Auto, Direction::Auto)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]: the range ZRANGE
/// would list, stored under `dst` (replacing it, deadline and all); an empty range deletes `dst`.
pub(in super::super) fn zrangestore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 2, Some(args[1]), RangeType::Auto, Direction::Auto)
}

pub(in super::super) fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 1, None, RangeType::Score, Direction::Forward)
}

pub(in super::super) fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 1, None, RangeType::Score, Direction::Reverse)
}

pub(in super::super) fn zrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 1, None, RangeType::Lex, Direction::Forward)
}

pub(in super::super) fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 1, None, RangeType::Lex, Direction::Reverse)
}

pub(in super::super) fn zrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    zrange_generic(ctx, args, 1, None, RangeType::Rank, Direction::Reverse)
}
