//! List commands: pushes and pops at both ends, ranges, trimming, indexing.
//!
//! Where Redis reads its arguments before the key and where after decides which error a client
//! sees first, so each command keeps Redis's order: LRANGE and LTRIM parse their indexes first,
//! LINDEX looks the key up first.

use std::collections::VecDeque;

use bytes::Bytes;

use super::super::keyspace::Value;
use super::super::num::parse_i64;
use super::super::resp::Reply;
use super::{int_arg, wrong_type, Ctx};

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
enum End {
    Head,
    Tail,
}

/// `pushGenericCommand`: LPUSH, RPUSH and the X variants that push only onto an existing list.
fn push(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End, only_existing: bool) -> Reply {
    let key = args[1];
    match write(ctx, key) {
        Err(e) => return e,
        Ok(Some(_)) => {}
        Ok(None) if only_existing => return Reply::Integer(0),
        Ok(None) => ctx.db.keys.set(key, Value::List(List::new()), false),
    }
    let Ok(Some(list)) = write(ctx, key) else { return wrong_type() };
    for element in &args[2..] {
        let element = Bytes::copy_from_slice(element);
        match end {
            End::Head => list.push_front(element),
            End::Tail => list.push_back(element),
        }
    }
    Reply::Integer(list.len() as i64)
}

pub(super) fn lpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, End::Head, false)
}

pub(super) fn rpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, End::Tail, false)
}

pub(super) fn lpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, End::Head, true)
}

pub(super) fn rpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    push(ctx, args, End::Tail, true)
}

/// `popGenericCommand`: one element as a bulk string, or with a count an array of up to that
/// many (a missing key is then a null array, and a count of 0 an empty one).
fn pop(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End, name: &str) -> Reply {
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
        End::Head => list.pop_front(),
        End::Tail => list.pop_back(),
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
    pop(ctx, args, End::Head, "lpop")
}

pub(super) fn rpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    pop(ctx, args, End::Tail, "rpop")
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
