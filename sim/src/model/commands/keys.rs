//! Generic key commands: DEL, EXISTS, TYPE and the expiry family.

use super::super::resp::Reply;
use super::{int_arg, Ctx};
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
    let count = args[1..].iter().filter(|key| ctx.db.keys.exists(key, ctx.now_ms)).count();
    Reply::Integer(count as i64)
}

pub(super) fn type_(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let name = ctx.db.keys.get(args[1], ctx.now_ms).map_or("none", |e| e.value.type_name());
    Reply::Status(Bytes::from_static(name.as_bytes()))
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
    let basetime = if absolute { 0 } else { ctx.now_ms };
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
    if when <= ctx.now_ms {
        // checkAlreadyExpired: a deadline in the past deletes the key at once.
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

/// `ttlGenericCommand`: -2 no key, -1 no deadline, else the remaining time, seconds rounded.
fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], millis: bool) -> Reply {
    let Some(entry) = ctx.db.keys.get(key, ctx.now_ms) else {
        return Reply::Integer(-2);
    };
    match entry.expire_at_ms {
        None => Reply::Integer(-1),
        Some(at) => {
            let ttl = (at - ctx.now_ms).max(0);
            Reply::Integer(if millis { ttl } else { (ttl + 500) / 1000 })
        }
    }
}

pub(super) fn ttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], false)
}

pub(super) fn pttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    ttl_generic(ctx, args[1], true)
}

pub(super) fn persist(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let had_deadline = ctx.db.keys.get(args[1], ctx.now_ms).is_some_and(|e| e.expire_at_ms.is_some());
    if had_deadline {
        ctx.db.keys.set_expire(args[1], None);
    }
    Reply::Integer(i64::from(had_deadline))
}
