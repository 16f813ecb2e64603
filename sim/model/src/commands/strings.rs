//! String commands: GET, SET and its variants, GETEX/GETDEL/GETSET, and the counters.

use bytes::Bytes;

use super::super::keyspace::Value;
use super::super::num::{format_long_double_human, long_double_from_i64, parse_i64, parse_long_double};
use super::super::resp::Reply;
use super::{int_arg, is, not_a_float, not_an_integer, syntax_error, wrong_type, Ctx};

/// Reads a string key: `Ok(None)` if missing, `Err(WRONGTYPE)` if another type.
fn get_string(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    match ctx.db.keys.get(key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::Str(s) => Ok(Some(s.clone())),
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

pub(super) fn mset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() % 2 == 0 {
        return Reply::err("ERR wrong number of arguments for 'mset' command");
    }
    for pair in args[1..].chunks(2) {
        ctx.db.keys.set(pair[0], Value::Str(Bytes::copy_from_slice(pair[1])), false);
    }
    Reply::ok()
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
enum Options {
    Set,
    GetEx,
}

/// `parseExtendedStringArgumentsOrReply`: which options may follow which is Redis's. SET takes
/// NX XX GET KEEPTTL and the four deadlines; GETEX the deadlines and PERSIST.
fn parse_flags<'a>(args: &[&'a [u8]], command: Options) -> Result<(SetFlags, Option<&'a [u8]>), Reply> {
    let set = command == Options::Set;
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
    ctx.db.keys.set(key, Value::Str(Bytes::copy_from_slice(value)), flags.keepttl);
    if deadline.is_some() {
        ctx.db.keys.set_expire(key, deadline);
    }
    reply
}

pub(super) fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match parse_flags(args, Options::Set) {
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
    ctx.db.keys.set(args[1], Value::Str(Bytes::copy_from_slice(args[2])), false);
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
    let (flags, expire) = match parse_flags(args, Options::GetEx) {
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
    ctx.db.keys.set(args[1], Value::Str(Bytes::copy_from_slice(args[2])), false);
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
    ctx.db.keys.set(key, Value::Str(Bytes::from(value.to_string())), true);
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
    ctx.db.keys.set(key, Value::Str(text.clone()), true);
    Reply::Bulk(text)
}
