//! Where Valkey answers otherwise than Redis 7.0 (and the model, which copies Redis 7.0), when
//! `REDIS_TESTS_REAL=valkey` makes Valkey the suites' reference. Each difference is written
//! here once, with why it changes no decision of the limiter, and proved by a test of its own
//! (`conformance_lua`'s and `conformance_scripts`' `valkey_*` tests) that fails when Valkey stops
//! differing so; everywhere else the suites compare byte for byte as against Redis.
//!
//! 1. **NOSCRIPT's text.** Valkey says `NOSCRIPT No matching script.`, Redis 7.0 adds ` Please
//!    use EVAL.`. Clients (this library's through redis-rs among them) match the error code,
//!    `NOSCRIPT`, and send the script again.
//! 2. **A script error's text.** Redis 7.0 names the script by its SHA1 (`script: <sha1>, on
//!    @user_script:1.`), Valkey does not (`script: on @user_script:1.`), and Valkey rewords many
//!    of the Lua API's own errors (`server.log()` for `redis.log()`, `Unknown command called
//!    from script` for `Unknown Redis command ...`): a script's error is compared by its code
//!    and its place, and [`REWORDED`] puts the common rewordings of errors a script catches in
//!    Valkey's words. The limiter reports such an error as Redis's own; it never parses it.
//! 3. **Doubles as text.** Redis 7.0 prints a double with `%.17g`, Valkey with the shortest
//!    text that reads back as the same double: a score of -7.040912967344561e-206 is
//!    `-7.0409129673445615e-206` on Redis, as given on Valkey; 1e17 is `1e+17` and
//!    `100000000000000000`; the Lua number 0.1 passed to `redis.call` is `0.10000000000000001`
//!    and `0.1`. Both read back as the same double, but for -0, which Redis passes as `-0` (and
//!    its own integer parsing then refuses) and Valkey as `0`. The limiter's scores and
//!    arguments are whole milliseconds and counts, which both print alike, and its stored
//!    fractions read back the same.
//! 4. **Time inside a script.** Valkey freezes time at the script's start for everything:
//!    expiry, PTTL and deadlines given as "already past". Redis 7.0 judges expiry by the start
//!    but computes TTLs and past deadlines from the clock read at that moment. The limiter's
//!    scripts run in microseconds and read `TIME` once, so the two agree on every decision.
//! 5. **The order of a Lua table's string keys.** `pairs`, `next` and `cjson.encode` of a table
//!    with string keys go in another order on Valkey (its Lua hashes strings otherwise). The
//!    limiter's scripts never walk a table by its keys.
//!
//! Not compared on Valkey: `conformance_lua`'s generated scripts
//! (`model_runs_generated_lua_like_redis`), which roam the whole Lua sandbox and meet Valkey's
//! own texts in more corners than these (errors caught and packed by `cmsgpack`, `nan`'s sign,
//! a double's text in a status reply or after `tostring`): none is a place the limiter's
//! scripts go, and the Valkey lane skips that test. Against Redis it compares every byte.

#![allow(dead_code)] // Each suite uses a different part of this module.

use redis_tests::RealServer;

use super::resp::V;

/// Whether the suites' reference server is Valkey (`REDIS_TESTS_REAL=valkey`).
pub fn reference_is_valkey() -> bool {
    redis_tests::real_server().is_ok_and(|s| s == RealServer::Valkey)
}

/// Redis 7.0's NOSCRIPT error, and Valkey's.
pub const NOSCRIPT_REDIS: &[u8] = b"NOSCRIPT No matching script. Please use EVAL.";
pub const NOSCRIPT_VALKEY: &[u8] = b"NOSCRIPT No matching script.";

/// `reply` with differences 1, 2, 3 and 5 taken out, so the rest can be compared byte for
/// byte: Valkey's NOSCRIPT in Redis's words, every script error's `script: <sha1>, ` as
/// `script: `, every bulk string that reads as a double in one text, every JSON object's keys
/// in one order. Applied to both sides when Valkey is the reference.
pub fn in_common_words(reply: &V) -> V {
    match reply {
        V::Error(t) if t == NOSCRIPT_VALKEY => V::Error(NOSCRIPT_REDIS.to_vec()),
        V::Error(t) => V::Error(code_and_place(&without_script_sha(t))),
        V::Bulk(Some(t)) => {
            let t = without_script_sha(t);
            V::Bulk(Some(as_double(&t).or_else(|| as_json(&t)).unwrap_or(t)))
        }
        V::Status(t) => V::Status(without_script_sha(t)),
        V::Array(Some(items)) => V::Array(Some(items.iter().map(in_common_words).collect())),
        other => other.clone(),
    }
}

/// Redis 7.0's words for the Lua API's own errors, and Valkey's, where they differ.
pub const REWORDED: [(&[u8], &[u8]); 2] = [
    (b"Unknown Redis command called from script", b"Unknown command called from script"),
    (b"at least one argument for this redis lib call", b"at least one argument for this call"),
];

/// `text` with every `script: <40 hex digits>, ` as `script: `, and Redis's words for the Lua
/// API's errors as Valkey's ([`REWORDED`]).
pub fn without_script_sha(text: &[u8]) -> Vec<u8> {
    let mut text = text.to_vec();
    for (redis, valkey) in REWORDED {
        text = replace(&text, redis, valkey);
    }
    let text = &text[..];
    const MARK: &[u8] = b"script: ";
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with(MARK) {
            let after = &rest[MARK.len()..];
            let sha = after.len() >= 42 && after[..40].iter().all(|b| b.is_ascii_hexdigit()) && &after[40..42] == b", ";
            out.extend_from_slice(MARK);
            i += MARK.len() + if sha { 42 } else { 0 };
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// A script error's code and place, without its words (difference 2): Valkey rewords many of
/// the Lua API's messages (`server.log()` for `redis.log()`, `Command arguments must be ...`
/// for `Lua redis lib command arguments must be ...`), and clients read the code. An error
/// that names no place in a script is kept whole.
fn code_and_place(text: &[u8]) -> Vec<u8> {
    const PLACE: &[u8] = b" script: ";
    let Some(at) = text.windows(PLACE.len()).rposition(|w| w == PLACE) else { return text.to_vec() };
    let code_end = text.iter().position(|&b| b == b' ').unwrap_or(text.len()).min(at);
    [&text[..code_end], b" ...", &text[at..]].concat()
}

/// `text` with every `from` as `to`.
fn replace(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// Text that reads as a finite double, in one form: differences 3 taken out (-0 as 0).
fn as_double(text: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() || !text.iter().all(|b| b.is_ascii_digit() || b"+-.eE".contains(b)) {
        return None;
    }
    let x = std::str::from_utf8(text).ok()?.parse::<f64>().ok().filter(|x| x.is_finite())?;
    // Rust's shortest text, with no exponent: a whole number reads as itself.
    Some(if x == 0.0 { b"0".to_vec() } else { format!("{x}").into_bytes() })
}

/// JSON text with every object's keys in one order (difference 5).
fn as_json(text: &[u8]) -> Option<Vec<u8>> {
    if !(text.starts_with(b"{") || text.starts_with(b"[")) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(text).ok()?;
    serde_json::to_vec(&value).ok()
}

/// Both texts read as the same finite double.
pub fn same_double(a: &[u8], b: &[u8]) -> bool {
    matches!((as_double(a), as_double(b)), (Some(x), Some(y)) if x == y)
}

#[test]
fn the_words_taken_out_are_exactly_the_sha_and_noscript_s_tail() {
    let sha = "f01f0776df71cc5b400c2268135aa7f30dce2e53";
    let redis = format!("ERR boom script: {sha}, on @user_script:1.");
    assert_eq!(without_script_sha(redis.as_bytes()), b"ERR boom script: on @user_script:1.");
    let valkey = b"ERR boom script: on @user_script:1.";
    assert_eq!(without_script_sha(valkey), valkey);
    assert_eq!(without_script_sha(b"script: short, x"), b"script: short, x");
    assert_eq!(
        without_script_sha(b"ERR Unknown Redis command called from script"),
        b"ERR Unknown command called from script"
    );
    assert_eq!(in_common_words(&V::Error(NOSCRIPT_VALKEY.to_vec())), V::Error(NOSCRIPT_REDIS.to_vec()));
    let redis = V::Error(b"ERR redis.log() requires two arguments or more. script: on @user_script:2.".to_vec());
    let valkey = V::Error(b"ERR server.log() requires two arguments or more. script: on @user_script:2.".to_vec());
    assert_eq!(in_common_words(&redis), in_common_words(&valkey));
    let elsewhere = V::Error(b"ERR server.log() requires two arguments or more. script: on @user_script:3.".to_vec());
    assert_ne!(in_common_words(&redis), in_common_words(&elsewhere), "the place is compared");
    let wrongtype = V::Error(
        b"WRONGTYPE Operation against a key holding the wrong kind of value script: on @user_script:2.".to_vec(),
    );
    assert_ne!(in_common_words(&redis), in_common_words(&wrongtype), "the code is compared");
    assert!(same_double(b"-7.040912967344561e-206", b"-7.0409129673445615e-206"));
    assert!(same_double(b"1e+17", b"100000000000000000"));
    assert!(same_double(b"-0", b"0"));
    assert!(!same_double(b"0.1", b"0.10000000000000002"));
    assert!(!same_double(b"1", b"x"));
    assert_eq!(as_json(br#"{"b":1,"a":2}"#), as_json(br#"{"a":2,"b":1}"#));
}
