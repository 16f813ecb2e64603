//! Generic key commands: DEL, EXISTS, TYPE, KEYS, SCAN, RANDOMKEY, TOUCH, COPY, RENAME, OBJECT
//! and the expiry family.
//!
//! Commands that only inspect a key (EXISTS, TYPE, TTL and its family, OBJECT) look it up
//! without counting as a use, as Redis's `LOOKUP_NOTOUCH` does, so OBJECT IDLETIME is not reset
//! by them.

use super::super::keyspace::{Entry, StrEnc, Value};
use super::super::resp::Reply;
use super::glob::string_match;
use super::scan::{parse_cursor, ScanOptions};
use super::{int_arg, is, syntax_error, Ctx};
use bytes::Bytes;

pub(super) fn del(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let mut deleted = 0;
    for key in &args[1..] {
        // A key already past its deadline counts as absent, as in Redis.
        if ctx.db.keys.exists(key, ctx.now_ms) && ctx.db.keys.remove(key) {
            deleted += 1;
        }
    }
    Reply::Integer(deleted)
}

pub(super) fn exists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    // Repeated keys count each time: EXISTS k k -> 2.
    let count = args[1..].iter().filter(|key| ctx.db.keys.get_notouch(key, ctx.now_ms).is_some()).count();
    Reply::Integer(count as i64)
}

pub(super) fn type_(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let name = ctx.db.keys.get_notouch(args[1], ctx.now_ms).map_or("none", |e| e.value.type_name());
    Reply::Status(Bytes::from_static(name.as_bytes()))
}

/// KEYS pattern: every live key matching the glob, in byte order (Redis's order is its hash
/// table's, seeded at startup, so no client can rely on it).
pub(super) fn keys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let pattern = args[1];
    let all = pattern == b"*";
    let found = ctx.db.keys.matching_keys(Some(ctx.now_ms), |key| all || string_match(pattern, key));
    Reply::Array(found.into_iter().map(Reply::Bulk).collect())
}

#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    Millis,
}

/// `expireGenericCommand`. `basetime` is "now" for EXPIRE/PEXPIRE and 0 for the AT variants.
fn expire_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], name: &str, absolute: bool, unit: Unit) -> Reply {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        if super::is(opt, "nx") {
            nx = true;
        } else if super::is(opt, "xx") {
            xx = true;
        } else if super::is(opt, "gt") {
            gt = true;
        } else if super::is(opt, "lt") {
            lt = true;
        } else {
            let mut text = b"ERR Unsupported option ".to_vec();
            text.extend_from_slice(super::cstr(opt));
            return Reply::Error(Bytes::from(text));
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::err("ERR GT and LT options at the same time are not compatible");
    }
    let mut when = match int_arg(args[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    if let Unit::Seconds = unit {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return invalid();
        }
        when *= 1000;
    }
    // Relative deadlines start from the clock as read now (`mstime()`), which inside a script
    // is later than the script's frozen time.
    let basetime = if absolute { 0 } else { ctx.clock_ms() };
    if when > i64::MAX - basetime {
        return invalid();
    }
    when += basetime;
    let key = args[1];
    let Some(entry) = ctx.db.keys.get(key, ctx.now_ms) else {
        return Reply::Integer(0);
    };
    let current = entry.expire_at_ms;
    if nx && current.is_some() {
        return Reply::Integer(0);
    }
    if xx && current.is_none() {
        return Reply::Integer(0);
    }
    if gt && current.is_none_or(|cur| when <= cur) {
        return Reply::Integer(0);
    }
    if lt && current.is_some_and(|cur| when >= cur) {
        return Reply::Integer(0);
    }
    if when <= ctx.clock_ms() {
        // checkAlreadyExpired: a deadline in the past (by the clock read now) deletes the key.
        ctx.db.keys.remove(key);
    } else {
        ctx.db.keys.set_expire(key, Some(when));
    }
    Reply::Integer(1)
}

pub(super) fn expire(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, "expire", false, Unit::Seconds)
}

pub(super) fn pexpire(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, "pexpire", false, Unit::Millis)
}

pub(super) fn expireat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, "expireat", true, Unit::Seconds)
}

pub(super) fn pexpireat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    expire_generic(ctx, args, "pexpireat", true, Unit::Millis)
}

/// `ttlGenericCommand`: -2 no key, -1 no deadline, else the remaining time (TTL, PTTL) or the
/// deadline itself (EXPIRETIME, PEXPIRETIME), seconds rounded to the nearest.
fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], millis: bool, absolute: bool) -> Reply {
    let Some(entry) = ctx.db.keys.get_notouch(key, ctx.now_ms) else {
        return Reply::Integer(-2);
    };
    match entry.expire_at_ms {
        None => Reply::Integer(-1),
        Some(at) => {
            // Counted down to the clock read now: inside a script a key past its deadline but
            // alive (by the script's frozen time) reports 0.
            let ttl = if absolute { at } else { at - ctx.clock_ms() }.max(0);
            Reply::Integer(if millis { ttl } else { (ttl + 500) / 1000 })
        }
    }
}

pub(super) fn ttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], false, false)
}

pub(super) fn pttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], true, false)
}

/// EXPIRETIME key: the deadline in Unix seconds.
pub(super) fn expiretime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], false, true)
}

/// PEXPIRETIME key: the deadline in Unix milliseconds.
pub(super) fn pexpiretime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], true, true)
}

/// TOUCH key [key ...]: how many of the keys exist; each counts as used (OBJECT IDLETIME).
pub(super) fn touch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let count = args[1..].iter().filter(|key| ctx.db.keys.get(key, ctx.now_ms).is_some()).count();
    Reply::Integer(count as i64)
}

/// `selectDb`'s check for a database index. The model has only database 0: any other index
/// gets the error Redis gives for an index past its last database (as SELECT does).
fn db_index(arg: &[u8]) -> Result<(), Reply> {
    match int_arg(arg) {
        Ok(id) if i32::try_from(id).is_err() => {
            Err(Reply::err("ERR value is out of range, value must between -2147483648 and 2147483647"))
        }
        Ok(0) => Ok(()),
        Ok(_) => Err(Reply::err("ERR DB index is out of range")),
        Err(e) => Err(e),
    }
}

/// COPY source destination [DB index] [REPLACE]: options first, then the same-key check, then
/// the source (missing: 0), then the destination (present without REPLACE: 0). The copy keeps
/// the source's deadline and encoding, except that a shared integer becomes a private one.
pub(super) fn copy(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let mut replace = false;
    let mut j = 3;
    while j < args.len() {
        if is(args[j], "replace") {
            replace = true;
        } else if is(args[j], "db") && j + 1 < args.len() {
            if let Err(e) = db_index(args[j + 1]) {
                return e;
            }
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let (from, to) = (args[1], args[2]);
    if from == to {
        return Reply::err("ERR source and destination objects are the same");
    }
    let Some(entry) = ctx.db.keys.get(from, ctx.now_ms) else { return Reply::Integer(0) };
    let deadline = entry.expire_at_ms;
    let value = match &entry.value {
        Value::Str(s, enc) => Value::Str(s.clone(), enc.duplicate()),
        other => other.clone(),
    };
    if ctx.db.keys.exists(to, ctx.now_ms) && !replace {
        return Reply::Integer(0);
    }
    ctx.store(to, value, false);
    if deadline.is_some() {
        ctx.db.keys.set_expire(to, deadline);
    }
    Reply::Integer(1)
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: every live key in byte order, in one reply
/// with cursor 0, whatever the cursor and COUNT (Redis walks its hash table, seeded at random,
/// a few buckets a call; a small keyspace also comes back whole). Keys past their deadline are
/// removed as the scan meets them, after the TYPE filter, as in Redis.
pub(super) fn scan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if let Err(e) = parse_cursor(args[1]) {
        return e;
    }
    let options = match ScanOptions::parse(&args[2..], true) {
        Ok(options) => options,
        Err(e) => return e,
    };
    let candidates = ctx.db.keys.matching_keys(None, |key| options.matches(key));
    let mut found = Vec::new();
    for key in candidates {
        if let Some(wanted) = options.type_name {
            let actual = ctx.db.keys.get_notouch(&key, ctx.now_ms).map_or("none", |e| e.value.type_name());
            if !actual.as_bytes().eq_ignore_ascii_case(super::cstr(wanted)) {
                continue;
            }
        } else if ctx.db.keys.get_notouch(&key, ctx.now_ms).is_none() {
            continue;
        }
        found.push(Reply::Bulk(key));
    }
    super::scan::reply(found)
}

/// RENAME key newkey: the value moves with its deadline; whatever was under `newkey` is gone.
/// (Scripts that rotate a window's counter into "previous" use it.)
pub(super) fn rename(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    rename_to(ctx, args[1], args[2], false)
}

/// RENAMENX key newkey: as RENAME, unless `newkey` exists (0).
pub(super) fn renamenx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    rename_to(ctx, args[1], args[2], true)
}

/// Redis 7.0's `renameGenericCommand`: a missing source is an error, even onto itself; a key
/// renamed onto itself is OK (RENAMENX: 0) and keeps everything.
fn rename_to(ctx: &mut Ctx<'_>, from: &[u8], to: &[u8], nx: bool) -> Reply {
    let Some(entry) = ctx.db.keys.get(from, ctx.now_ms) else { return Reply::err("ERR no such key") };
    let (value, deadline) = (entry.value.clone(), entry.expire_at_ms);
    if from == to {
        return if nx { Reply::Integer(0) } else { Reply::ok() };
    }
    if nx && ctx.db.keys.exists(to, ctx.now_ms) {
        return Reply::Integer(0);
    }
    ctx.db.keys.remove(from);
    ctx.db.keys.remove(to);
    ctx.store(to, value, false);
    if deadline.is_some() {
        ctx.db.keys.set_expire(to, deadline);
    }
    if nx {
        Reply::Integer(1)
    } else {
        Reply::ok()
    }
}

pub(super) fn persist(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let had_deadline = ctx.db.keys.get(args[1], ctx.now_ms).is_some_and(|e| e.expire_at_ms.is_some());
    if had_deadline {
        ctx.db.keys.set_expire(args[1], None);
    }
    Reply::Integer(i64::from(had_deadline))
}

/// RANDOMKEY: a random key (nil for an empty keyspace), picked with the model's generator (see
/// `random`). A key past its deadline that comes up is removed and another picked, as
/// `dbRandomKey` does.
pub(super) fn randomkey(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> Reply {
    loop {
        let all = ctx.db.keys.matching_keys(None, |_| true);
        if all.is_empty() {
            return Reply::Nil;
        }
        let key = all[ctx.db.random_below(all.len())].clone();
        if ctx.db.keys.get_notouch(&key, ctx.now_ms).is_some() {
            return Reply::Bulk(key);
        }
    }
}

/// OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key (and HELP): the key is looked up without
/// counting as a use; a missing key is nil.
fn object_lookup<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Option<&'c Entry> {
    ctx.db.keys.get_notouch(key, ctx.now_ms)
}

pub(super) fn object_encoding(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    object_lookup(ctx, args[2]).map_or(Reply::Nil, |e| Reply::Bulk(Bytes::from_static(e.value.encoding().as_bytes())))
}

/// The shared integers 0..10000 have Redis's `OBJ_SHARED_REFCOUNT` (`INT_MAX`); every other
/// value belongs to its key alone.
pub(super) fn object_refcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    object_lookup(ctx, args[2]).map_or(Reply::Nil, |e| {
        Reply::Integer(if matches!(e.value, Value::Str(_, StrEnc::SharedInt)) { i64::from(i32::MAX) } else { 1 })
    })
}

/// Seconds since the value was last used, by Redis's one-second LRU clock. The model's eviction
/// policy is Redis's default, `noeviction`, so idle time is tracked and frequency is not.
pub(super) fn object_idletime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if object_lookup(ctx, args[2]).is_none() {
        return Reply::Nil;
    }
    ctx.db.keys.idle_seconds(args[2], ctx.now_ms).map_or(Reply::Nil, Reply::Integer)
}

pub(super) fn object_freq(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match object_lookup(ctx, args[2]) {
        None => Reply::Nil,
        Some(_) => Reply::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
    }
}

pub(super) fn object_help(_ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    const LINES: [&str; 14] = [
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    super::help_reply(args[0], &LINES)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use crate::{FnServerClock, ManualServerClock, ModelHandle, Reply};

    const T0_MS: u64 = 1_700_000_000_000;

    /// A clock that moves 3 ms every time anything reads it, so a script's frozen time and
    /// the clock read "now" (`mstime()`) drift apart by a known amount.
    fn drifting_model() -> ModelHandle {
        let reads = Arc::new(AtomicU64::new(0));
        ModelHandle::new(FnServerClock(move || (T0_MS + 3 * reads.fetch_add(1, Ordering::SeqCst)) * 1000))
    }

    #[test]
    fn inside_a_script_deadlines_and_ttls_use_the_clock_read_now_but_expiry_uses_the_frozen_time() {
        let model = drifting_model();
        // Each command reads the clock once, when it starts: EVAL at T0 (frozen); SET at T0+3
        // (deadline T0+8); PTTL at T0+6 (2 left); SET b at T0+9; PEXPIREAT T0+7 at T0+12:
        // already past, so the key is deleted even though the frozen time T0 is before it;
        // EXISTS a uses the frozen T0.
        let script = format!(
            "redis.call('set', 'a', 1, 'px', 5) local ttl = redis.call('pttl', 'a') \
             redis.call('set', 'b', 1) local deleted = redis.call('pexpireat', 'b', '{}') \
             return {{ttl, deleted, redis.call('exists', 'b'), redis.call('exists', 'a')}}",
            T0_MS + 7
        );
        let reply = model.call(&[b"EVAL", script.as_bytes(), b"0"]);
        let ints = |v: &[i64]| Reply::Array(v.iter().map(|&i| Reply::Integer(i)).collect());
        assert_eq!(reply, ints(&[2, 1, 0, 1]));
    }

    #[test]
    fn keys_lists_live_matching_keys_in_byte_order_without_expiring_any() {
        let clock = ManualServerClock::from_millis(T0_MS);
        let model = ModelHandle::new(clock.clone());
        for key in ["b:2", "a:1", "b:1", "c", ""] {
            model.call(&[b"SET", key.as_bytes(), b"v"]);
        }
        model.call(&[b"PEXPIRE", b"b:1", b"10"]);
        let bulk = |keys: &[&str]| Reply::Array(keys.iter().map(|k| Reply::bulk(k.as_bytes())).collect());
        assert_eq!(model.call(&[b"KEYS", b"*"]), bulk(&["", "a:1", "b:1", "b:2", "c"]));
        assert_eq!(model.call(&[b"KEYS", b"**"]), bulk(&["a:1", "b:1", "b:2", "c"]));
        clock.advance_millis(11);
        assert_eq!(model.call(&[b"KEYS", b"b:*"]), bulk(&["b:2"]));
        assert_eq!(model.call(&[b"DBSIZE"]), Reply::Integer(5), "KEYS skips an expired key but does not delete it");
        assert_eq!(model.call(&[b"KEYS", b"?"]), bulk(&["c"]));
    }

    #[test]
    fn idle_time_counts_from_the_last_use_and_small_integers_share_theirs() {
        let clock = ManualServerClock::from_millis(T0_MS);
        let model = ModelHandle::new(clock.clone());
        let idle = |key: &[u8]| model.call(&[b"OBJECT", b"IDLETIME", key]);
        model.call(&[b"SET", b"text", b"v"]);
        model.call(&[b"SET", b"five", b"5"]);
        clock.advance_millis(3_000);
        assert_eq!(idle(b"text"), Reply::Integer(3));
        assert_eq!(idle(b"five"), Reply::Integer(3), "the shared 5 was made when the server started");
        model.call(&[b"TTL", b"text"]);
        model.call(&[b"TYPE", b"text"]);
        assert_eq!(idle(b"text"), Reply::Integer(3), "inspecting a key is no use of it");
        model.call(&[b"GET", b"text"]);
        model.call(&[b"SET", b"other", b"5"]);
        model.call(&[b"GET", b"other"]);
        assert_eq!(idle(b"text"), Reply::Integer(0));
        assert_eq!(idle(b"five"), Reply::Integer(0), "reading another key holding 5 used the shared 5");
        assert_eq!(model.call(&[b"OBJECT", b"REFCOUNT", b"five"]), Reply::Integer(i64::from(i32::MAX)));
        model.call(&[b"COPY", b"five", b"copy"]);
        assert_eq!(model.call(&[b"OBJECT", b"REFCOUNT", b"copy"]), Reply::Integer(1), "a copy is private");
        assert_eq!(idle(b"missing"), Reply::Nil);
    }

    #[test]
    fn scan_lists_every_live_key_at_once_and_expires_the_dead_it_meets() {
        let clock = ManualServerClock::from_millis(T0_MS);
        let model = ModelHandle::new(clock.clone());
        for key in ["b", "a", "c"] {
            model.call(&[b"SET", key.as_bytes(), b"v"]);
        }
        model.call(&[b"HSET", b"h", b"f", b"v"]);
        model.call(&[b"PEXPIRE", b"c", b"10"]);
        clock.advance_millis(11);
        let scan = |keys: &[&str]| {
            Reply::Array(vec![
                Reply::bulk(b"0"),
                Reply::Array(keys.iter().map(|k| Reply::bulk(k.as_bytes())).collect()),
            ])
        };
        assert_eq!(model.call(&[b"SCAN", b"0", b"COUNT", b"1"]), scan(&["a", "b", "h"]));
        assert_eq!(model.call(&[b"DBSIZE"]), Reply::Integer(3), "the scan removed the expired key");
        assert_eq!(model.call(&[b"SCAN", b"0", b"TYPE", b"hash", b"MATCH", b"*"]), scan(&["h"]));
        assert_eq!(model.call(&[b"SCAN", b"x"]), Reply::err("ERR invalid cursor"));
    }
}
