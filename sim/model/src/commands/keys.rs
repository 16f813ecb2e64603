//! Generic key commands: DEL, EXISTS, TYPE, KEYS and the expiry family.

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

/// KEYS pattern: every live key matching the glob, in byte order (Redis's order is its hash
/// table's, seeded at startup, so no client can rely on it).
pub(super) fn keys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let pattern = args[1];
    let all = pattern == b"*";
    let found = ctx.db.keys.matching_keys(ctx.now_ms, |key| all || string_match(pattern, key));
    Reply::Array(found.into_iter().map(Reply::Bulk).collect())
}

/// Redis's `stringmatchlen` (util.c), case-sensitive: `*`, `?`, `[abc]`, `[^a-z]`, `\x`.
///
/// Translated step by step, quirks included, because KEYS must select exactly the keys Redis
/// selects: an unclosed `[` takes the rest of the pattern as its set; a range may be written
/// backwards (`[z-a]`); range ends compare as C's signed `char`, so bytes from 0x80 sort below
/// ASCII; a pattern nested deeper than 1000 `*`s matches nothing; and once `*` found no match
/// for the rest of the pattern anywhere, earlier `*`s give up instead of trying longer spans.
pub(crate) fn string_match(pattern: &[u8], string: &[u8]) -> bool {
    let mut skip_longer = false;
    match_from(pattern, 0, pattern.len() as isize, string, &mut skip_longer, 0)
}

/// `stringmatchlen_impl` on `pattern[p..p + plen]`. C reads one byte past the end (the NUL
/// terminator) in places; `at` answers 0 there.
fn match_from(
    pattern: &[u8],
    mut p: usize,
    mut plen: isize,
    mut s: &[u8],
    skip_longer: &mut bool,
    nesting: u32,
) -> bool {
    if nesting > 1000 {
        return false;
    }
    let at = |i: usize| pattern.get(i).copied().unwrap_or(0);
    // C's `char` is signed on the platforms Redis ships for.
    let signed = |b: u8| i32::from(b as i8);
    while plen > 0 && !s.is_empty() {
        match at(p) {
            b'*' => {
                while plen > 0 && at(p + 1) == b'*' {
                    p += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_from(pattern, p + 1, plen - 1, s, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p += 1;
                plen -= 1;
                let not = at(p) == b'^';
                if not {
                    p += 1;
                    plen -= 1;
                }
                let mut matched = false;
                loop {
                    if at(p) == b'\\' && plen >= 2 {
                        p += 1;
                        plen -= 1;
                        if at(p) == s[0] {
                            matched = true;
                        }
                    } else if at(p) == b']' {
                        break;
                    } else if plen == 0 {
                        // Unclosed: step back so the advance below ends the pattern.
                        p -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && at(p + 1) == b'-' {
                        let (mut start, mut end) = (signed(at(p)), signed(at(p + 2)));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = signed(s[0]);
                        p += 2;
                        plen -= 2;
                        if (start..=end).contains(&c) {
                            matched = true;
                        }
                    } else if at(p) == s[0] {
                        matched = true;
                    }
                    p += 1;
                    plen -= 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                let literal = if c == b'\\' && plen >= 2 {
                    p += 1;
                    plen -= 1;
                    at(p)
                } else {
                    c
                };
                if literal != s[0] {
                    return false;
                }
                s = &s[1..];
            }
        }
        p += 1;
        plen -= 1;
        if s.is_empty() {
            while at(p) == b'*' {
                p += 1;
                plen -= 1;
            }
            break;
        }
    }
    plen == 0 && s.is_empty()
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

/// `ttlGenericCommand`: -2 no key, -1 no deadline, else the remaining time, seconds rounded.
fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], millis: bool) -> Reply {
    let Some(entry) = ctx.db.keys.get(key, ctx.now_ms) else {
        return Reply::Integer(-2);
    };
    match entry.expire_at_ms {
        None => Reply::Integer(-1),
        Some(at) => {
            // Counted down to the clock read now: inside a script a key past its deadline but
            // alive (by the script's frozen time) reports 0.
            let ttl = (at - ctx.clock_ms()).max(0);
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
    ctx.db.keys.set(to, value, false);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::string_match;
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
    fn glob_patterns_follow_redis_stringmatchlen() {
        let cases: &[(&str, &str, bool)] = &[
            // Only KEYS's `*` shortcut lists the empty key: the matcher itself needs a byte.
            ("*", "", false),
            ("**", "", false),
            ("*", "anything", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "a", true),
            ("a*b", "ab", true),
            ("a*b", "acb", true),
            ("a*b", "acbd", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hbllo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("[abc", "a", true),
            ("[abc", "ab", false),
            ("a[", "a", false),
            ("ratelimiter:{*}:*", "ratelimiter:{a}:tb", true),
            ("ratelimiter:\\{a\\}*", "ratelimiter:{a}:tb", true),
            ("*:tb", "ratelimiter:{a}:gcra", false),
            ("**a", "ba", true),
            ("a**", "a", true),
            ("a\\", "a\\", true),
        ];
        for &(pattern, string, expected) in cases {
            assert_eq!(string_match(pattern.as_bytes(), string.as_bytes()), expected, "{pattern:?} vs {string:?}");
        }
        // Range ends compare as signed chars: 0xff is -1, below 'a'.
        assert!(string_match(b"[\xff-a]", b"A"));
        assert!(!string_match(b"[a-z]", b"\xe9"));
        // A star more than 1000 stars deep matches nothing.
        assert!(string_match("a*".repeat(1001).as_bytes(), "a".repeat(1001).as_bytes()));
        assert!(!string_match("a*".repeat(1002).as_bytes(), "a".repeat(1002).as_bytes()));
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
}
