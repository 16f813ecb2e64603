//! String commands: GET, SET and the counters.

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
    ex: bool,
    px: bool,
    exat: bool,
    pxat: bool,
}

/// `parseExtendedStringArgumentsOrReply` for SET: which options may follow which is Redis's.
fn parse_set_flags<'a>(args: &[&'a [u8]]) -> Result<(SetFlags, Option<&'a [u8]>), Reply> {
    let mut f = SetFlags::default();
    let mut expire = None;
    let mut j = 3;
    while j < args.len() {
        let opt = args[j];
        let next = args.get(j + 1).copied();
        let any_ttl = |f: &SetFlags| f.ex || f.px || f.exat || f.pxat;
        if is(opt, "nx") && !f.xx {
            f.nx = true;
        } else if is(opt, "xx") && !f.nx {
            f.xx = true;
        } else if is(opt, "get") {
            f.get = true;
        } else if is(opt, "keepttl") && !any_ttl(&f) {
            f.keepttl = true;
        } else if is(opt, "ex") && !f.keepttl && !f.exat && !f.px && !f.pxat && next.is_some() {
            f.ex = true;
            expire = next;
            j += 1;
        } else if is(opt, "px") && !f.keepttl && !f.ex && !f.exat && !f.pxat && next.is_some() {
            f.px = true;
            expire = next;
            j += 1;
        } else if is(opt, "exat") && !f.keepttl && !f.ex && !f.px && !f.pxat && next.is_some() {
            f.exat = true;
            expire = next;
            j += 1;
        } else if is(opt, "pxat") && !f.keepttl && !f.ex && !f.exat && !f.px && next.is_some() {
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

pub(super) fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let (flags, expire) = match parse_set_flags(args) {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    // getExpireMillisecondsOrReply: positive, no overflow when scaled or made absolute.
    let mut deadline = None;
    if let Some(expire) = expire {
        let mut ms = match int_arg(expire) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let seconds = flags.ex || flags.exat;
        if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
            return invalid_expire("set");
        }
        if seconds {
            ms *= 1000;
        }
        if flags.ex || flags.px {
            // From the clock read now (`mstime()`), not the script's frozen time.
            ms = ms.wrapping_add(ctx.clock_ms());
        }
        if ms <= 0 {
            return invalid_expire("set");
        }
        deadline = Some(ms);
    }
    let key = args[1];
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
    ctx.db.keys.set(key, Value::Str(Bytes::copy_from_slice(args[2])), flags.keepttl);
    if deadline.is_some() {
        ctx.db.keys.set_expire(key, deadline);
    }
    reply
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
