//! Set commands: SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS, SMOVE, SSCAN, the random
//! SPOP and SRANDMEMBER, and the algebra SINTER, SUNION, SDIFF (each also as a STORE variant)
//! and SINTERCARD.
//!
//! The algebra follows `sinterGenericCommand` and `sunionDiffGenericCommand` step for step
//! where a client can see the steps: which input is walked first (the order of an
//! intersection's members), and how a stored result is built (it starts as an intset and
//! converts as members arrive, so SDIFFSTORE's encoding depends on which of Redis's two
//! algorithms runs).

use bytes::Bytes;

use super::super::keyspace::{Set, Value};
use super::super::num::parse_i64;
use super::super::resp::Reply;
use super::random::{self, Picks};
use super::{is, scan, syntax_error, wrong_type, Ctx};

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
        Ok(None) => ctx.store(key, Value::Set(Set::for_first(args[2])), false),
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

/// SMISMEMBER key member [member ...]: 1 or 0 for each, all 0 for a missing key.
pub(super) fn smismember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read(ctx, args[1]) {
        Ok(set) => Reply::Array(
            args[2..].iter().map(|m| Reply::Integer(i64::from(set.is_some_and(|s| s.contains(m))))).collect(),
        ),
        Err(e) => e,
    }
}

/// SMOVE source destination member: both keys are looked up first; a missing source is 0 even
/// if the destination has the wrong type; moving within one set only asks whether the member is
/// there.
pub(super) fn smove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (from, to, member) = (args[1], args[2], args[3]);
    let src_found = ctx.db.keys.exists(from, ctx.now_ms);
    let dst = ctx.db.keys.get(to, ctx.now_ms).map(|e| matches!(e.value, Value::Set(_)));
    if !src_found {
        return Reply::Integer(0);
    }
    let src = match write(ctx, from) {
        Ok(Some(src)) if dst != Some(false) => src,
        _ => return wrong_type(),
    };
    if from == to {
        return Reply::Integer(i64::from(src.contains(member)));
    }
    if !src.remove(member) {
        return Reply::Integer(0);
    }
    if src.is_empty() {
        ctx.db.keys.remove(from);
    }
    if dst.is_none() {
        ctx.store(to, Value::Set(Set::for_first(member)), false);
    }
    if let Ok(Some(dst)) = write(ctx, to) {
        dst.insert(member);
    }
    Reply::Integer(1)
}

/// SSCAN key cursor [MATCH pattern] [COUNT n] (see `scan`).
pub(super) fn sscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if let Err(e) = scan::parse_cursor(args[2]) {
        return e;
    }
    let options = scan::ScanOptions::parse(&args[3..], false);
    let set = match read(ctx, args[1]) {
        Ok(Some(set)) => set,
        Ok(None) => return scan::empty(),
        Err(e) => return e,
    };
    match options {
        Ok(options) => scan::reply(set.members().into_iter().filter(|m| options.matches(m)).map(Reply::Bulk).collect()),
        Err(e) => e,
    }
}

/// The sets under `keys`, in order (`None` for a missing key), or WRONGTYPE at the first key of
/// another type.
fn read_all(ctx: &mut Ctx<'_>, keys: &[&[u8]]) -> Result<Vec<Option<Set>>, Reply> {
    keys.iter().map(|key| read(ctx, key).map(|s| s.cloned())).collect()
}

/// `sinterGenericCommand`'s result: the members of the smallest set (the first of the
/// smallest, as a stable sort leaves them) that every other set has, in that set's order.
fn intersection(sets: &[Option<Set>], limit: usize) -> Vec<Bytes> {
    let Some(mut sets) = sets.iter().map(Option::as_ref).collect::<Option<Vec<&Set>>>() else {
        return Vec::new();
    };
    sets.sort_by_key(|s| s.len());
    let (first, rest) = sets.split_first().map_or((None, &[][..]), |(f, r)| (Some(*f), r));
    let Some(first) = first else { return Vec::new() };
    first.members().into_iter().filter(|m| rest.iter().all(|s| s.contains(m))).take(limit).collect()
}

/// Stores `result` under `dst` (replacing whatever was there, deadline included), or deletes
/// `dst` when it is empty. Answers the size.
fn store_result(ctx: &mut Ctx<'_>, dst: &[u8], result: Set) -> Reply {
    let len = result.len();
    if len == 0 {
        ctx.db.keys.remove(dst);
    } else {
        ctx.store(dst, Value::Set(result), false);
    }
    Reply::Integer(len as i64)
}

/// A stored result as Redis builds one: from an empty intset, converting as members arrive.
fn collect(members: Vec<Bytes>) -> Set {
    let mut set = Set::intset();
    for m in &members {
        set.insert(m);
    }
    set
}

pub(super) fn sinter(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read_all(ctx, &args[1..]) {
        Ok(sets) => Reply::Set(intersection(&sets, usize::MAX).into_iter().map(Reply::Bulk).collect()),
        Err(e) => e,
    }
}

pub(super) fn sinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read_all(ctx, &args[2..]) {
        Ok(sets) => {
            let result = collect(intersection(&sets, usize::MAX));
            store_result(ctx, args[1], result)
        }
        Err(e) => e,
    }
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: numkeys and the options are checked before
/// any key is read.
pub(super) fn sintercard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let numkeys = match parse_i64(args[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Reply::err("ERR numkeys should be greater than 0"),
    };
    if numkeys > args.len() as u64 - 2 {
        return Reply::err("ERR Number of keys can't be greater than number of args");
    }
    let keys_end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut j = keys_end;
    while j < args.len() {
        if is(args[j], "limit") && j + 1 < args.len() {
            match parse_i64(args[j + 1]) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => return Reply::err("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return syntax_error();
        }
    }
    match read_all(ctx, &args[2..keys_end]) {
        Ok(sets) => {
            let limit = if limit == 0 { usize::MAX } else { limit };
            Reply::Integer(intersection(&sets, limit).len() as i64)
        }
        Err(e) => e,
    }
}

fn union(sets: &[Option<Set>]) -> Set {
    let mut result = Set::intset();
    for set in sets.iter().flatten() {
        for m in set.members() {
            result.insert(&m);
        }
    }
    result
}

/// `sunionDiffGenericCommand`'s difference. Algorithm 1 adds each member of the first set that
/// no other set has; algorithm 2 adds the whole first set and removes the others' members, so
/// its result has converted from an intset if the first set held any non-integer. Redis picks
/// the one with less estimated work, and so does the model. The first key named again leaves
/// nothing.
fn difference(keys: &[&[u8]], sets: &[Option<Set>]) -> Set {
    let mut result = Set::intset();
    let Some(Some(first)) = sets.first() else { return result };
    if keys[1..].contains(&keys[0]) {
        return result;
    }
    let others: Vec<&Set> = sets[1..].iter().flatten().collect();
    let present = others.len() as u64 + 1;
    let algo_one = first.len() as u64 * present / 2;
    let algo_two = first.len() as u64 + others.iter().map(|s| s.len() as u64).sum::<u64>();
    if algo_one <= algo_two {
        for m in first.members() {
            if !others.iter().any(|s| s.contains(&m)) {
                result.insert(&m);
            }
        }
    } else {
        for m in first.members() {
            result.insert(&m);
        }
        for m in others.iter().flat_map(|s| s.members()) {
            result.remove(&m);
        }
    }
    result
}

fn members_reply(set: &Set) -> Reply {
    Reply::Set(set.members().into_iter().map(Reply::Bulk).collect())
}

pub(super) fn sunion(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read_all(ctx, &args[1..]) {
        Ok(sets) => members_reply(&union(&sets)),
        Err(e) => e,
    }
}

pub(super) fn sunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read_all(ctx, &args[2..]) {
        Ok(sets) => store_result(ctx, args[1], union(&sets)),
        Err(e) => e,
    }
}

pub(super) fn sdiff(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read_all(ctx, &args[1..]) {
        Ok(sets) => members_reply(&difference(&args[1..], &sets)),
        Err(e) => e,
    }
}

pub(super) fn sdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match read_all(ctx, &args[2..]) {
        Ok(sets) => store_result(ctx, args[1], difference(&args[2..], &sets)),
        Err(e) => e,
    }
}

/// SRANDMEMBER key [count]: one member (nil for a missing key), or with a count an array: a
/// negative count repeats picks, a count at least the set's size is the whole set in its order,
/// any other count distinct members (see `random`).
pub(super) fn srandmember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return syntax_error();
    }
    let count = match args.get(2).map(|arg| random::count_arg(arg)).transpose() {
        Ok(count) => count,
        Err(e) => return e,
    };
    let members = match read(ctx, args[1]) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil },
        Ok(Some(set)) => set.members(),
    };
    let Some(count) = count else {
        return Reply::Bulk(members[ctx.db.random_below(members.len())].clone());
    };
    if count == 0 {
        return Reply::Array(Vec::new());
    }
    match random::picks(ctx.db, count, members.len()) {
        Err(e) => e,
        Ok(Picks::All) => Reply::Array(members.into_iter().map(Reply::Bulk).collect()),
        Ok(Picks::Repeated(picked) | Picks::Distinct(picked)) => {
            Reply::Array(picked.into_iter().map(|i| Reply::Bulk(members[i].clone())).collect())
        }
    }
}

/// SPOP key [count]: removes and returns random members, deleting the key once it is empty.
/// With a count (checked before the key) `spopWithCountCommand`'s three cases: a count at least
/// the size takes the whole set (listed as a union of it would be); a small count removes
/// random members; a count close to the size picks the members to *keep* and rebuilds the set
/// from them, so it becomes an intset again if they are all integers.
pub(super) fn spop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return syntax_error();
    }
    let key = args[1];
    let count = match args.get(2).map(|arg| parse_i64(arg)) {
        None => None,
        Some(Some(n)) if n >= 0 => Some(n as u64),
        Some(_) => return Reply::err("ERR value is out of range, must be positive"),
    };
    let set = match read(ctx, key) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::Set(Vec::new()) } else { Reply::Nil },
        Ok(Some(set)) => set.clone(),
    };
    let members = set.members();
    let size = members.len() as u64;
    let popped: Vec<Bytes> = match count {
        Some(0) => return Reply::Set(Vec::new()),
        Some(n) if n >= size => {
            ctx.db.keys.remove(key);
            return members_reply(&union(&[Some(set)]));
        }
        None => vec![members[ctx.db.random_below(members.len())].clone()],
        Some(n) if (size - n) * 5 > n => {
            ctx.db.random_distinct(n as usize, members.len()).into_iter().map(|i| members[i].clone()).collect()
        }
        Some(n) => {
            let kept: Vec<Bytes> = ctx
                .db
                .random_distinct((size - n) as usize, members.len())
                .into_iter()
                .map(|i| members[i].clone())
                .collect();
            let mut rebuilt = Set::for_first(&kept[0]);
            for m in &kept {
                rebuilt.insert(m);
            }
            ctx.store(key, Value::Set(rebuilt), true);
            return Reply::Set(members.into_iter().filter(|m| !kept.contains(m)).map(Reply::Bulk).collect());
        }
    };
    if let Ok(Some(set)) = write(ctx, key) {
        for m in &popped {
            set.remove(m);
        }
        if set.is_empty() {
            ctx.db.keys.remove(key);
        }
    }
    match count {
        None => Reply::Bulk(popped[0].clone()),
        Some(_) => Reply::Set(popped.into_iter().map(Reply::Bulk).collect()),
    }
}
