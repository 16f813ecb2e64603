//! String commands: GET, SET and its variants, GETEX/GETDEL/GETSET, MSET/MSETNX, the counters,
//! and the byte-range commands APPEND, GETRANGE (SUBSTR), SETRANGE and LCS.
//!
//! A string remembers the encoding Redis would give it ([`StrEnc`]), which depends on the
//! command that made it: SET's argument may become an integer, APPEND and SETRANGE leave a
//! `raw` string, INCRBYFLOAT an `embstr` or `raw` one.

use bytes::Bytes;

use super::super::keyspace::{StrEnc, Value};
use super::super::num::{format_long_double_human, long_double_from_i64, parse_i64, parse_long_double};
use super::super::resp::{Reply, MAX_BULK_LEN};
use super::{arity_error_named, int_arg, is, not_a_float, not_an_integer, syntax_error, wrong_type, Ctx};

mod lcs;

pub(super) use lcs::lcs;

/// Reads a string key: `Ok(None)` if missing, `Err(WRONGTYPE)` if another type.
fn get_string(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::Str(s, _) => Ok(Some(s.clone())),
            _ => Err(wrong_type()),
        },
    }
}

pub(super) fn get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match get_string(ctx, args[1]) {
        Ok(Some(s)) => Reply::Bulk(s),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub(super) fn strlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match get_string(ctx, args[1]) {
        Ok(Some(s)) => Reply::Integer(s.len() as i64),
        Ok(None) => Reply::Integer(0),
        Err(e) => e,
    }
}

pub(super) fn mget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let items = args[1..]
        .iter()
        .map(|key| match get_string(ctx, key) {
            Ok(Some(s)) => Reply::Bulk(s),
            _ => Reply::Nil,
        })
        .collect();
    Reply::Array(items)
}

/// `msetGenericCommand`: MSETNX sets nothing (0) if any key exists, checking them in order.
fn mset_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], nx: bool) -> Reply {
    if args.len() % 2 == 0 {
        return arity_error_named(if nx { "msetnx" } else { "mset" });
    }
    if nx && args[1..].chunks(2).any(|pair| ctx.db.keys.exists(pair[0], ctx.now_ms)) {
        return Reply::Integer(0);
    }
    for pair in args[1..].chunks(2) {
        ctx.store(pair[0], Value::string(pair[1]), false);
    }
    if nx {
        Reply::Integer(1)
    } else {
        Reply::ok()
    }
}

pub(super) fn mset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    mset_generic(ctx, args, false)
}

pub(super) fn msetnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    mset_generic(ctx, args, true)
}

#[derive(Default)]
struct SetFlags {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    ex: bool,
    px: bool,
    exat: bool,
    pxat: bool,
}

impl SetFlags {
    fn any_ttl(&self) -> bool {
        self.ex || self.px || self.exat || self.pxat
    }
}

/// Which command `parseExtendedStringArgumentsOrReply` reads options for.
#[derive(Clone, Copy, PartialEq)]
enum SetOptions {
    Set,
    GetEx,
}

/// `parseExtendedStringArgumentsOrReply`: which options may follow which is Redis's. SET takes
/// NX XX GET KEEPTTL and the four deadlines; GETEX the deadlines and PERSIST.
fn parse_flags<'a>(args: &[&'a [u8]], command: SetOptions) -> Result<(SetFlags, Option<&'a [u8]>), Reply> {
    let set = command == SetOptions::Set;
    let mut f = SetFlags::default();
    let mut expire = None;
    let mut j = if set { 3 } else { 2 };
    while j < args.len() {
        let opt = args[j];
        let next = args.get(j + 1).copied();
        if is(opt, "nx") && !f.xx && set {
            f.nx = true;
        } else if is(opt, "xx") && !f.nx && set {
            f.xx = true;
        } else if is(opt, "get") && set {
            f.get = true;
        } else if is(opt, "keepttl") && !f.persist && !f.any_ttl() && set {
            f.keepttl = true;
        } else if is(opt, "persist") && !set && !f.any_ttl() && !f.keepttl {
            f.persist = true;
        } else if is(opt, "ex") && !f.keepttl && !f.persist && !f.exat && !f.px && !f.pxat && next.is_some() {
            f.ex = true;
            expire = next;
            j += 1;
        } else if is(opt, "px") && !f.keepttl && !f.persist && !f.ex && !f.exat && !f.pxat && next.is_some() {
            f.px = true;
            expire = next;
            j += 1;
        } else if is(opt, "exat") && !f.keepttl && !f.persist && !f.ex && !f.px && !f.pxat && next.is_some() {
            f.exat = true;
            expire = next;
            j += 1;
        } else if is(opt, "pxat") && !f.keepttl && !f.persist && !f.ex && !f.exat && !f.px && next.is_some() {
            f.pxat = true;
            expire = next;
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok((f, expire))
}

fn invalid_expire(command: &str) -> Reply {
    Reply::error(format!("ERR invalid expire time in '{command}' command"))
}

/// `getExpireMillisecondsOrReply`: the absolute deadline in ms for `arg`, in seconds or
/// milliseconds, relative to the clock read now or absolute. Positive, and no overflow when
/// scaled or made absolute.
fn deadline_ms(ctx: &Ctx<'_>, arg: &[u8], seconds: bool, relative: bool, command: &str) -> Result<i64, Reply> {
    let mut ms = int_arg(arg)?;
    if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
        return Err(invalid_expire(command));
    }
    if seconds {
        ms *= 1000;
    }
    if relative {
        // From the clock read now (`mstime()`), not the script's frozen time.
        ms = ms.wrapping_add(ctx.clock_ms());
    }
    if ms <= 0 {
        return Err(invalid_expire(command));
    }
    Ok(ms)
}

/// `setGenericCommand`, for SET, SETEX and PSETEX.
fn set_generic(
    ctx: &mut Ctx<'_>,
    flags: &SetFlags,
    key: &[u8],
    value: &[u8],
    expire: Option<&[u8]>,
    command: &str,
) -> Reply {
    let deadline = match expire {
        None => None,
        Some(arg) => match deadline_ms(ctx, arg, flags.ex || flags.exat, flags.ex || flags.px, command) {
            Ok(ms) => Some(ms),
            Err(e) => return e,
        },
    };
    let mut reply = Reply::ok();
    if flags.get {
        reply = match get_string(ctx, key) {
            Ok(Some(s)) => Reply::Bulk(s),
            Ok(None) => Reply::Nil,
            Err(e) => return e,
        };
    }
    let found = ctx.db.keys.exists(key, ctx.now_ms);
    if (flags.nx && found) || (flags.xx && !found) {
        return if flags.get { reply } else { Reply::Nil };
    }
    ctx.store(key, Value::string(value), flags.keepttl);
    if deadline.is_some() {
        ctx.db.keys.set_expire(key, deadline);
    }
    reply
}

pub(super) fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match parse_flags(args, SetOptions::Set) {
        Ok((flags, expire)) => set_generic(ctx, &flags, args[1], args[2], expire, "set"),
        Err(e) => e,
    }
}

/// SETEX key seconds value.
pub(super) fn setex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let flags = SetFlags { ex: true, ..SetFlags::default() };
    set_generic(ctx, &flags, args[1], args[3], Some(args[2]), "setex")
}

/// PSETEX key milliseconds value.
pub(super) fn psetex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let flags = SetFlags { px: true, ..SetFlags::default() };
    set_generic(ctx, &flags, args[1], args[3], Some(args[2]), "psetex")
}

/// GETSET key value: the old value, and the key loses its deadline as with SET.
pub(super) fn getset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let old = match get_string(ctx, args[1]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    ctx.store(args[1], Value::string(args[2]), false);
    old.map_or(Reply::Nil, Reply::Bulk)
}

pub(super) fn getdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match get_string(ctx, args[1]) {
        Ok(Some(s)) => {
            ctx.db.keys.remove(args[1]);
            Reply::Bulk(s)
        }
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: the options are parsed first, the key
/// read next, the deadline checked last (a missing key answers nil whatever the deadline).
pub(super) fn getex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (flags, expire) = match parse_flags(args, SetOptions::GetEx) {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    let key = args[1];
    let value = match get_string(ctx, key) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let deadline = match expire {
        None => None,
        Some(arg) => match deadline_ms(ctx, arg, flags.ex || flags.exat, flags.ex || flags.px, "getex") {
            Ok(ms) => Some(ms),
            Err(e) => return e,
        },
    };
    if let Some(at) = deadline {
        if (flags.exat || flags.pxat) && at <= ctx.clock_ms() {
            // checkAlreadyExpired: an absolute deadline already past deletes the key.
            ctx.db.keys.remove(key);
        } else {
            ctx.db.keys.set_expire(key, Some(at));
        }
    } else if flags.persist {
        ctx.db.keys.set_expire(key, None);
    }
    Reply::Bulk(value)
}

pub(super) fn setnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if ctx.db.keys.exists(args[1], ctx.now_ms) {
        return Reply::Integer(0);
    }
    ctx.store(args[1], Value::string(args[2]), false);
    Reply::Integer(1)
}

/// `incrDecrCommand`: type check, parse the stored value, overflow check, store (the key keeps
/// its deadline, as an in-place update).
fn incr_decr(ctx: &mut Ctx<'_>, key: &[u8], incr: i64) -> Reply {
    let current = match get_string(ctx, key) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let old = match &current {
        None => 0,
        Some(s) => match parse_i64(s) {
            Some(v) => v,
            None => return not_an_integer(),
        },
    };
    let Some(value) = old.checked_add(incr) else {
        return Reply::err("ERR increment or decrement would overflow");
    };
    ctx.store(key, Value::Str(Bytes::from(value.to_string()), StrEnc::of_int(value)), true);
    Reply::Integer(value)
}

pub(super) fn incr(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    incr_decr(ctx, args[1], 1)
}

pub(super) fn decr(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    incr_decr(ctx, args[1], -1)
}

pub(super) fn incrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match int_arg(args[2]) {
        Ok(incr) => incr_decr(ctx, args[1], incr),
        Err(e) => e,
    }
}

pub(super) fn decrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match int_arg(args[2]) {
        Ok(i64::MIN) => Reply::err("ERR decrement would overflow"),
        Ok(incr) => incr_decr(ctx, args[1], -incr),
        Err(e) => e,
    }
}

pub(super) fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let current = match get_string(ctx, key) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let value = match &current {
        None => long_double_from_i64(0),
        Some(s) => match parse_long_double(s) {
            Some(v) => v,
            None => return not_a_float(),
        },
    };
    let Some(incr) = parse_long_double(args[2]) else {
        return not_a_float();
    };
    let sum = value.add(incr);
    if !sum.is_finite() {
        return Reply::err("ERR increment would produce NaN or Infinity");
    }
    let text = Bytes::from(format_long_double_human(sum));
    ctx.store(key, Value::Str(text.clone(), StrEnc::of_created(text.len())), true);
    Reply::Bulk(text)
}

/// `checkStringLength`: a string may not grow past `proto-max-bulk-len` (512 MB).
fn check_length(size: u64, append: usize) -> Result<(), Reply> {
    if u128::from(size) + append as u128 > MAX_BULK_LEN as u128 {
        return Err(Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    Ok(())
}

/// APPEND key value: a new key is stored as SET would store it; an existing string grows in
/// place (keeping its deadline) and becomes `raw`, whatever it was.
pub(super) fn append(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (key, tail) = (args[1], args[2]);
    match get_string(ctx, key) {
        Err(e) => e,
        Ok(None) => {
            ctx.store(key, Value::string(tail), false);
            Reply::Integer(tail.len() as i64)
        }
        Ok(Some(s)) => {
            if let Err(e) = check_length(s.len() as u64, tail.len()) {
                return e;
            }
            let grown = [&s[..], tail].concat();
            let len = grown.len() as i64;
            ctx.store(key, Value::Str(Bytes::from(grown), StrEnc::Raw), true);
            Reply::Integer(len)
        }
    }
}

/// GETRANGE key start end (and its old name SUBSTR): both ends inclusive, negative ones count
/// from the end, as `getrangeCommand` clamps them (so `GETRANGE k 0 -100` of "hello" is "h").
/// The indexes are parsed before the key is read; a missing key is "".
pub(super) fn getrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (start, end) = match (int_arg(args[2]), int_arg(args[3])) {
        (Ok(start), Ok(end)) => (start, end),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let s = match get_string(ctx, args[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Bulk(Bytes::new()),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Reply::Bulk(Bytes::new());
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    if start > end || len == 0 {
        return Reply::Bulk(Bytes::new());
    }
    Reply::Bulk(s.slice(start as usize..=end as usize))
}

/// SETRANGE key offset value: overwrites from `offset`, padding with zero bytes. An empty value
/// changes nothing (and creates no key) but still answers the length; otherwise the string
/// becomes `raw` and keeps its deadline.
pub(super) fn setrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let offset = match int_arg(args[2]) {
        Ok(v) if v < 0 => return Reply::err("ERR offset is out of range"),
        Ok(v) => v as u64,
        Err(e) => return e,
    };
    let (key, value) = (args[1], args[3]);
    let current = match get_string(ctx, key) {
        Ok(current) => current,
        Err(e) => return e,
    };
    if value.is_empty() {
        return Reply::Integer(current.map_or(0, |s| s.len() as i64));
    }
    if let Err(e) = check_length(offset, value.len()) {
        return e;
    }
    let existed = current.is_some();
    let mut bytes = current.map(|s| s.to_vec()).unwrap_or_default();
    let (from, to) = (offset as usize, offset as usize + value.len());
    if bytes.len() < to {
        bytes.resize(to, 0);
    }
    bytes[from..to].copy_from_slice(value);
    let len = bytes.len() as i64;
    ctx.store(key, Value::Str(Bytes::from(bytes), StrEnc::Raw), existed);
    Reply::Integer(len)
}
