//! List commands: pushes and pops at both ends (LMPOP from the first of several lists), moves
//! between lists (LMOVE, RPOPLPUSH), ranges, trimming, indexing, searching (LPOS), inserting,
//! replacing and removing elements.
//!
//! Where Redis reads its arguments before the key and where after decides which error a client
//! sees first, so each command keeps Redis's order: LRANGE, LTRIM and LREM parse their numbers
//! first, LINDEX and LSET look the key up first. A list left empty is deleted.

use std::collections::VecDeque;

use bytes::Bytes;

use super::super::keyspace::Value;
use super::super::num::{parse_i64, parse_long_double};
use super::super::resp::Reply;
use super::{int_arg, is, syntax_error, wrong_type, Ctx};

type List = VecDeque<Bytes>;

/// Reads a list: `Ok(None)` if the key is missing, WRONGTYPE for another type.
fn read<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c List>, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::List(l) => Ok(Some(l)),
            _ => Err(wrong_type()),
        },
    }
}

/// The list under `key` for writing: `Ok(None)` if missing, WRONGTYPE for another type.
fn write<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut List>, Reply> {
    match ctx.db.keys.get_mut(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::List(l) => Ok(Some(l)),
            _ => Err(wrong_type()),
        },
    }
}

#[derive(Clone, Copy, PartialEq)]
enum ListEnd {
    Head,
    Tail,
}

/// `pushGenericCommand`: LPUSH, RPUSH and the X variants that push only onto an existing list.
fn push(ctx: &mut Ctx<'_>, args: &[&[u8]], end: ListEnd, only_existing: bool) -> Reply {
    let key = args[1];
    match write(ctx, key) {
        Err(e) => return e,
        Ok(Some(_)) => {}
        Ok(None) if only_existing => return Reply::Integer(0),
        Ok(None) => ctx.store(key, Value::List(List::new()), false),
    }
    let Ok(Some(list)) = write(ctx, key) else { return wrong_type() };
    for element in &args[2..] {
        let element = Bytes::copy_from_slice(element);
        match end {
            ListEnd::Head => list.push_front(element),
            ListEnd::Tail => list.push_back(element),
        }
    }
    Reply::Integer(list.len() as i64)
}

pub(super) fn lpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, ListEnd::Head, false)
}

pub(super) fn rpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, ListEnd::Tail, false)
}

pub(super) fn lpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, ListEnd::Head, true)
}

pub(super) fn rpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, ListEnd::Tail, true)
}

/// `popGenericCommand`: one element as a bulk string, or with a count an array of up to that
/// many (a missing key is then a null array, and a count of 0 an empty one).
fn pop(ctx: &mut Ctx<'_>, args: &[&[u8]], end: ListEnd, name: &str) -> Reply {
    if args.len() > 3 {
        return Reply::error(format!("ERR wrong number of arguments for '{name}' command"));
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match parse_i64(arg) {
            Some(n) if n >= 0 => Some(n),
            _ => return Reply::err("ERR value is out of range, must be positive"),
        },
    };
    let key = args[1];
    let list = match write(ctx, key) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::NilArray } else { Reply::Nil },
        Ok(Some(list)) => list,
    };
    let take = |list: &mut List| match end {
        ListEnd::Head => list.pop_front(),
        ListEnd::Tail => list.pop_back(),
    };
    let reply = match count {
        Some(0) => return Reply::Array(Vec::new()),
        None => take(list).map_or(Reply::Nil, Reply::Bulk),
        Some(n) => {
            let n = n.min(list.len() as i64);
            Reply::Array((0..n).filter_map(|_| take(list)).map(Reply::Bulk).collect())
        }
    };
    if list.is_empty() {
        ctx.db.keys.remove(key);
    }
    reply
}

pub(super) fn lpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    pop(ctx, args, ListEnd::Head, "lpop")
}

pub(super) fn rpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    pop(ctx, args, ListEnd::Tail, "rpop")
}

pub(super) fn llen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(l) => Reply::Integer(l.map_or(0, |l| l.len() as i64)),
        Err(e) => e,
    }
}

/// Start and end indexes as Redis sanitises them for LRANGE and LTRIM: negative ones count from
/// the tail, `None` for an empty range.
fn span(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len.saturating_add(start) } else { start };
    let end = if end < 0 { len.saturating_add(end) } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

fn two_indexes(args: &[&[u8]]) -> Result<(i64, i64), Reply> {
    Ok((int_arg(args[2])?, int_arg(args[3])?))
}

pub(super) fn lrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (start, end) = match two_indexes(args) {
        Ok(v) => v,
        Err(e) => return e,
    };
    match read(ctx, args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Array(Vec::new()),
        Ok(Some(list)) => match span(start, end, list.len()) {
            None => Reply::Array(Vec::new()),
            Some((a, b)) => Reply::Array(list.range(a..=b).cloned().map(Reply::Bulk).collect()),
        },
    }
}

pub(super) fn ltrim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (start, end) = match two_indexes(args) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let key = args[1];
    let list = match write(ctx, key) {
        Err(e) => return e,
        Ok(None) => return Reply::ok(),
        Ok(Some(list)) => list,
    };
    match span(start, end, list.len()) {
        None => list.clear(),
        Some((a, b)) => {
            list.truncate(b + 1);
            list.drain(..a);
        }
    }
    if list.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::ok()
}

pub(super) fn lindex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let list = match read(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Nil,
        Ok(Some(list)) => list,
    };
    let index = match int_arg(args[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let len = list.len() as i64;
    let at = if index < 0 { len.saturating_add(index) } else { index };
    if (0..len).contains(&at) {
        list.get(at as usize).cloned().map_or(Reply::Nil, Reply::Bulk)
    } else {
        Reply::Nil
    }
}

/// `getPositiveLongFromObjectOrReply`: a count of 0 or more; `message` replaces the default
/// error for a negative number and, as in Redis, for something that is no number at all.
fn non_negative(arg: &[u8], message: &'static str) -> Result<i64, Reply> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(Reply::err(message)),
    }
}

/// LINSERT key BEFORE|AFTER pivot element: the length after, -1 without the pivot, 0 without
/// the key.
pub(super) fn linsert(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let after = if is(args[2], "after") {
        true
    } else if is(args[2], "before") {
        false
    } else {
        return syntax_error();
    };
    let list = match write(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Integer(0),
        Ok(Some(list)) => list,
    };
    let Some(at) = list.iter().position(|e| e == args[3]) else { return Reply::Integer(-1) };
    list.insert(if after { at + 1 } else { at }, Bytes::copy_from_slice(args[4]));
    Reply::Integer(list.len() as i64)
}

/// LSET key index element: a missing key is "no such key", an index outside the list "index
/// out of range" (the key is checked before the index is parsed).
pub(super) fn lset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let list = match write(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::err("ERR no such key"),
        Ok(Some(list)) => list,
    };
    let index = match int_arg(args[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let len = list.len() as i64;
    let at = if index < 0 { len.saturating_add(index) } else { index };
    match usize::try_from(at).ok().and_then(|at| list.get_mut(at)) {
        Some(slot) if at < len => {
            *slot = Bytes::copy_from_slice(args[3]);
            Reply::ok()
        }
        _ => Reply::err("ERR index out of range"),
    }
}

/// LREM key count element: count > 0 removes from the head, < 0 from the tail, 0 all.
pub(super) fn lrem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let count = match int_arg(args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let key = args[1];
    let list = match write(ctx, key) {
        Err(e) => return e,
        Ok(None) => return Reply::Integer(0),
        Ok(Some(list)) => list,
    };
    let limit = if count == 0 { usize::MAX } else { usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX) };
    let matches: Vec<usize> = if count < 0 {
        (0..list.len()).rev().filter(|&i| list[i] == args[3]).take(limit).collect()
    } else {
        (0..list.len()).filter(|&i| list[i] == args[3]).take(limit).collect()
    };
    let doomed: std::collections::BTreeSet<usize> = matches.into_iter().collect();
    let mut index = 0;
    list.retain(|_| {
        let keep = !doomed.contains(&index);
        index += 1;
        keep
    });
    if list.is_empty() {
        ctx.db.keys.remove(key);
    }
    Reply::Integer(doomed.len() as i64)
}

/// LPOS key element [RANK rank] [COUNT count] [MAXLEN len]: options first (RANK 0 and negative
/// counts are refused), then the key. RANK n starts from the n-th match (negative: from the tail),
/// COUNT 0 means every match, MAXLEN bounds how many elements are compared.
pub(super) fn lpos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
    let mut j = 3;
    while j < args.len() {
        let has_value = j + 1 < args.len();
        if is(args[j], "rank") && has_value {
            rank =
                match int_arg(args[j + 1]) {
                    Ok(0) => return Reply::err(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
                         negative to start from the end of the list",
                    ),
                    Ok(r) => r,
                    Err(e) => return e,
                };
        } else if is(args[j], "count") && has_value {
            count = match non_negative(args[j + 1], "ERR COUNT can't be negative") {
                Ok(n) => Some(n),
                Err(e) => return e,
            };
        } else if is(args[j], "maxlen") && has_value {
            maxlen = match non_negative(args[j + 1], "ERR MAXLEN can't be negative") {
                Ok(n) => n,
                Err(e) => return e,
            };
        } else {
            return syntax_error();
        }
        j += 2;
    }
    let list = match read(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil },
        Ok(Some(list)) => list,
    };
    let from_tail = rank < 0;
    // C negates LONG_MIN into itself: that rank skips no match, and the count check overflows
    // so that COUNT no longer stops the search.
    let skip = if rank == i64::MIN { 0 } else { rank.unsigned_abs() - 1 };
    let len = list.len();
    let scanned = if maxlen == 0 { len } else { len.min(maxlen as usize) };
    let positions = (0..scanned).map(|i| if from_tail { len - 1 - i } else { i });
    let mut found = positions.filter(|&i| list[i] == args[2]).skip(usize::try_from(skip).unwrap_or(usize::MAX));
    match count {
        None => found.next().map_or(Reply::Nil, |i| Reply::Integer(i as i64)),
        Some(n) => {
            let wanted = if n == 0 || rank == i64::MIN { usize::MAX } else { n as usize };
            Reply::Array(found.take(wanted).map(|i| Reply::Integer(i as i64)).collect())
        }
    }
}

/// `getListPositionFromObjectOrReply`: LEFT is the head, RIGHT the tail.
fn end_arg(arg: &[u8]) -> Result<ListEnd, Reply> {
    if is(arg, "right") {
        Ok(ListEnd::Tail)
    } else if is(arg, "left") {
        Ok(ListEnd::Head)
    } else {
        Err(syntax_error())
    }
}

/// `lmoveGenericCommand`: pops from one end of `from` and pushes onto an end of `to` (the same
/// list rotates). A missing source is nil; the destination's type is checked before anything
/// moves; the destination keeps its deadline and a source left empty is deleted.
fn lmove_generic(ctx: &mut Ctx<'_>, from: &[u8], to: &[u8], from_end: ListEnd, to_end: ListEnd) -> Reply {
    match read(ctx, from) {
        Err(e) => return e,
        Ok(None) => return Reply::Nil,
        Ok(Some(_)) => {}
    }
    let dst_exists = match write(ctx, to) {
        Err(e) => return e,
        Ok(found) => found.is_some(),
    };
    let Ok(Some(src)) = write(ctx, from) else { return wrong_type() };
    let Some(value) = (match from_end {
        ListEnd::Head => src.pop_front(),
        ListEnd::Tail => src.pop_back(),
    }) else {
        return Reply::Nil;
    };
    if !dst_exists && from != to {
        ctx.store(to, Value::List(List::new()), false);
    }
    let Ok(Some(dst)) = write(ctx, to) else { return wrong_type() };
    match to_end {
        ListEnd::Head => dst.push_front(value.clone()),
        ListEnd::Tail => dst.push_back(value.clone()),
    }
    if read(ctx, from).is_ok_and(|l| l.is_some_and(|l| l.is_empty())) {
        ctx.db.keys.remove(from);
    }
    Reply::Bulk(value)
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT (both ends parsed before any key is read).
pub(super) fn lmove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match (end_arg(args[3]), end_arg(args[4])) {
        (Ok(from_end), Ok(to_end)) => lmove_generic(ctx, args[1], args[2], from_end, to_end),
        (Err(e), _) | (_, Err(e)) => e,
    }
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub(super) fn rpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    lmove_generic(ctx, args[1], args[2], ListEnd::Tail, ListEnd::Head)
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops up to `count` elements from the
/// first non-empty list, answering `[key, [elements...]]`, or a null array if every list is
/// missing. A key of another type before the first list found is WRONGTYPE.
pub(super) fn lmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match mpop_args(args, end_arg) {
        Ok((keys, end, count)) => pop_first(ctx, &keys, end, count),
        Err(e) => e,
    }
}

/// `getTimeoutFromObjectOrReply` in seconds: a `long double`, made milliseconds rounding up,
/// and not negative.
pub(super) fn timeout_arg(arg: &[u8]) -> Result<(), Reply> {
    let Some(seconds) = parse_long_double(arg) else {
        return Err(Reply::err("ERR timeout is not a float or out of range"));
    };
    if seconds.millis_ceil() < 0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    Ok(())
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]: LMPOP that, with nothing to
/// pop, would wait up to `timeout` seconds for a push. A script may call it, and there Redis
/// never waits: it answers the null array at once, as the model does. The model cannot hold a
/// client either, so a client's BLMPOP with nothing to pop also gets the null array at once, as
/// if its timeout had passed. The timeout is checked after the other arguments.
pub(super) fn blmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (keys, end, count) = match mpop_args(&args[1..], end_arg) {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    match timeout_arg(args[1]) {
        Ok(()) => pop_first(ctx, &keys, end, count),
        Err(e) => e,
    }
}

/// Pops up to `count` elements from the first of `keys` holding a list (WRONGTYPE at a key of
/// another type before it): `[key, [elements...]]`, or a null array.
fn pop_first(ctx: &mut Ctx<'_>, keys: &[&[u8]], end: ListEnd, count: usize) -> Reply {
    for key in keys {
        let list = match write(ctx, key) {
            Err(e) => return e,
            Ok(None) => continue,
            Ok(Some(list)) => list,
        };
        let n = count.min(list.len());
        let popped: Vec<Reply> = (0..n)
            .filter_map(|_| match end {
                ListEnd::Head => list.pop_front(),
                ListEnd::Tail => list.pop_back(),
            })
            .map(Reply::Bulk)
            .collect();
        if list.is_empty() {
            ctx.db.keys.remove(key);
        }
        return Reply::Array(vec![Reply::bulk(key), Reply::Array(popped)]);
    }
    Reply::NilArray
}

/// The arguments of LMPOP and ZMPOP (`lmpopGenericCommand`, `zmpopGenericCommand`): numkeys
/// (at least 1), the keys, the end (read by `end`), then an optional COUNT (at least 1).
/// BLMPOP and BZMPOP pass their arguments from the timeout on, so numkeys is `args[1]` again.
pub(super) fn mpop_args<'a, E>(
    args: &[&'a [u8]],
    end: impl Fn(&[u8]) -> Result<E, Reply>,
) -> Result<(Vec<&'a [u8]>, E, usize), Reply> {
    let numkeys = match parse_i64(args[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(Reply::err("ERR numkeys should be greater than 0")),
    };
    let where_at = numkeys.saturating_add(2);
    if where_at >= args.len() as u64 {
        return Err(syntax_error());
    }
    let where_at = where_at as usize;
    let end = end(args[where_at])?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && is(args[j], "count") && j + 1 < args.len() {
            match parse_i64(args[j + 1]) {
                Some(n) if n >= 1 => count = Some(n),
                _ => return Err(Reply::err("ERR count should be greater than 0")),
            }
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    Ok((args[2..where_at].to_vec(), end, count))
}
