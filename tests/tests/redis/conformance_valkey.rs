//! Where Valkey answers otherwise than Redis 7.0, each difference as a test of its own: both
//! servers started side by side (Redis from PATH, Valkey as `cargo xtask test` installs it),
//! the same commands sent to each, and each server's exact reply asserted, so a difference
//! that grows, shrinks or goes away fails here by name. `conformance_support/valkey.rs` says
//! why none changes a decision of the limiter; the other conformance suites compare everything
//! else byte for byte when `REDIS_TESTS_REAL=valkey` makes Valkey their reference.
//!
//! The last test holds what matters most: the limiter's own scripts decide alike on both.

#![allow(clippy::disallowed_methods)] // The algorithms' calls carry the real clock.

use crate::conformance_support;

use conformance_support::resp::{parse, V};
use conformance_support::valkey::{same_double, NOSCRIPT_REDIS, NOSCRIPT_VALKEY};
use conformance_support::{show, RespConn};
use redis_tests::{RealServer, RedisServer};

/// One Redis and one Valkey, a connection to each.
struct Both {
    redis: RespConn,
    valkey: RespConn,
    _servers: [RedisServer; 2],
}

impl Both {
    fn start() -> Both {
        RealServer::Redis.require_for_tests();
        RealServer::Valkey.require_for_tests();
        let start = |kind: RealServer| {
            let server = RedisServer::start_kind(kind).expect("the server starts");
            let conn = RespConn::connect(server.addr()).expect("connect");
            (conn, server)
        };
        let (redis, r) = start(RealServer::Redis);
        let (valkey, v) = start(RealServer::Valkey);
        Both { redis, valkey, _servers: [r, v] }
    }

    /// The same command to both: (Redis's raw reply, Valkey's).
    fn both(&mut self, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        (self.redis.call(args).expect("redis reply"), self.valkey.call(args).expect("valkey reply"))
    }

    /// `EVAL script 0` on both, as text.
    fn eval(&mut self, script: &str) -> (String, String) {
        let (r, v) = self.both(&[b"EVAL", script.as_bytes(), b"0"]);
        (show(&r), show(&v))
    }
}

fn bulk(raw: &[u8]) -> Vec<u8> {
    match parse(raw) {
        Ok(V::Bulk(Some(b))) => b,
        other => panic!("not a bulk string: {other:?} ({})", show(raw)),
    }
}

#[test]
fn the_servers_are_the_ones_named() {
    let mut both = Both::start();
    let (r, v) = both.both(&[b"INFO", b"server"]);
    let (r, v) = (String::from_utf8_lossy(&bulk(&r)).into_owned(), String::from_utf8_lossy(&bulk(&v)).into_owned());
    assert!(r.contains("redis_version:7.0.") && !r.contains("valkey_version"), "{r}");
    let version = format!("valkey_version:{}", sim_real::process::VALKEY_VERSION);
    assert!(v.contains("server_name:valkey") && v.contains(&version), "{v}");
}

/// Difference 1: clients match the code, `NOSCRIPT`, not the words after it.
#[test]
fn noscript_s_words_differ_and_its_code_does_not() {
    let mut both = Both::start();
    let (r, v) = both.both(&[b"EVALSHA", &[b'0'; 40], b"0"]);
    assert_eq!(r, [b"-", NOSCRIPT_REDIS, b"\r\n"].concat(), "{}", show(&r));
    assert_eq!(v, [b"-", NOSCRIPT_VALKEY, b"\r\n"].concat(), "{}", show(&v));
}

/// Difference 2: a script error names the script by its SHA1 on Redis only, and Valkey drops
/// "Redis" from an unknown command's words.
#[test]
fn a_script_error_s_words_differ() {
    let mut both = Both::start();
    let script = "return redis.call('nosuchcmd')";
    let (r, v) = both.eval(script);
    let sha = {
        let (raw, _) = both.both(&[b"SCRIPT", b"LOAD", script.as_bytes()]);
        String::from_utf8(bulk(&raw)).expect("hex")
    };
    assert_eq!(r, format!("-ERR Unknown Redis command called from script script: {sha}, on @user_script:1.\\r\\n"));
    assert_eq!(v, "-ERR Unknown command called from script script: on @user_script:1.\\r\\n");
    let (r, v) = both.eval("redis.call()");
    assert!(r.starts_with("-ERR Please specify at least one argument for this redis lib call script: "), "{r}");
    assert!(v.starts_with("-ERR Please specify at least one argument for this call script: on @user_script:1."), "{v}");
    let (r, v) = both.eval("error('boom')");
    assert_eq!(
        r,
        format!("-ERR user_script:1: boom script: {}, on @user_script:1.\\r\\n", sha1_of(&mut both, "error('boom')"))
    );
    assert_eq!(v, "-ERR user_script:1: boom script: on @user_script:1.\\r\\n");
}

fn sha1_of(both: &mut Both, script: &str) -> String {
    let (raw, _) = both.both(&[b"SCRIPT", b"LOAD", script.as_bytes()]);
    String::from_utf8(bulk(&raw)).expect("hex")
}

/// Difference 3: doubles as text, `%.17g` on Redis, the shortest that reads back on Valkey;
/// the same double but for -0.
#[test]
fn doubles_print_in_other_text_and_read_back_the_same() {
    let mut both = Both::start();
    for (score, on_redis) in [("-7.040912967344561e-206", "-7.0409129673445615e-206"), ("1e17", "1e+17")] {
        both.both(&[b"ZADD", b"z", score.as_bytes(), b"m"]);
        let (r, v) = both.both(&[b"ZSCORE", b"z", b"m"]);
        let (r, v) = (bulk(&r), bulk(&v));
        assert_eq!(r, on_redis.as_bytes(), "{}", show(&r));
        assert_ne!(r, v, "Valkey prints {score} as Redis does");
        assert!(same_double(&r, &v), "{} and {} are different doubles", show(&r), show(&v));
    }
    // The Lua number passed to a command: 0.1 and -0.
    let (r, v) = both.eval("redis.call('set', 'k', 0.1) return redis.call('get', 'k')");
    assert_eq!((r.as_str(), v.as_str()), ("$19\\r\\n0.10000000000000001\\r\\n", "$3\\r\\n0.1\\r\\n"));
    let (r, v) = both.eval("redis.call('set', 'k', -0e0) return redis.call('get', 'k')");
    assert_eq!((r.as_str(), v.as_str()), ("$2\\r\\n-0\\r\\n", "$1\\r\\n0\\r\\n"));
    // Redis's own integer parsing refuses its `-0`; Valkey's `0` is an index like any other.
    let (r, v) = both.eval("redis.call('rpush', 'l', 'a') return redis.call('lrange', 'l', -0e0, -1)");
    assert!(r.starts_with("-ERR value is not an integer or out of range"), "{r}");
    assert_eq!(v, "*1\\r\\n$1\\r\\na\\r\\n");
    // Whole numbers, the limiter's scores and arguments, print alike.
    let (r, v) =
        both.eval("redis.call('zadd', 'w', 1700000000123, 'm') return {redis.call('zscore', 'w', 'm'), tostring(2.5)}");
    assert_eq!(r, v);
}

/// Difference 4: Valkey freezes time at the script's start for TTLs and past deadlines too.
#[test]
fn inside_a_script_time_stands_still_on_valkey_for_ttls_and_deadlines() {
    let mut both = Both::start();
    let script = r#"
local function now_ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local function spin(ms) local s = now_ms() while now_ms() - s <= ms do end end
redis.call('SET', 'a', 1, 'PX', 5)
spin(20)
local out = {redis.call('GET', 'a') or false, redis.call('PTTL', 'a')}
redis.call('SET', 'c', 1)
out[#out + 1] = redis.call('PEXPIREAT', 'c', now_ms() - 10)
out[#out + 1] = redis.call('EXISTS', 'c')
return out
"#;
    let (r, v) = both.both(&[b"EVAL", script.as_bytes(), b"0"]);
    // Both keep `a` alive by the frozen time; Redis counts its TTL, and judges the deadline
    // 10 ms ago, by the clock; Valkey by the script's start, 20 ms earlier.
    assert_eq!(parse(&r).expect("reply").render(), "['1', 0, 1, 0]", "{}", show(&r));
    assert_eq!(parse(&v).expect("reply").render(), "['1', 5, 1, 1]", "{}", show(&v));
    // TIME itself moves on both: the spin above ended.
}

/// Difference 5: a table's string keys come out of `pairs` in another order.
#[test]
fn a_lua_table_s_string_keys_come_out_in_another_order() {
    let mut both = Both::start();
    let script = "local t = {} for i = 1, 20 do t['k' .. i] = i end \
                  local keys = {} for k in pairs(t) do keys[#keys + 1] = k end return keys";
    let (r, v) = both.both(&[b"EVAL", script.as_bytes(), b"0"]);
    let sorted = |raw: &[u8]| match parse(raw) {
        Ok(V::Array(Some(mut items))) => {
            items.sort();
            items
        }
        other => panic!("not an array: {other:?}"),
    };
    assert_ne!(r, v, "the same order on both");
    assert_eq!(sorted(&r), sorted(&v), "the same keys");
}

/// What matters: every algorithm's script, called as the library calls it, decides alike on
/// both servers, request after request, across the quota and into the next window.
#[test]
fn the_limiter_s_scripts_decide_alike_on_both() {
    use redis_ratelimit::harness::scripts::{self, Request};
    use redis_ratelimit::Quota;
    let mut both = Both::start();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis();
    let now = u64::try_from(now).expect("ms fit u64");
    let quota = Quota::per_second(4);
    let mut compared = 0;
    for script in scripts::ALL {
        let stem = format!("ratelimiter:{{{}}}:", script.file);
        for i in 0..12u64 {
            // Client time, so both servers see the same clock: 4 per second, 100 ms apart.
            let request = Request {
                algorithm: script.algorithm,
                quota: &quota,
                stem: &stem,
                now_ms: Some(now + i * 100),
                cost: 1,
            };
            let call = request.invocation();
            let mut args: Vec<&[u8]> = vec![b"EVAL", script.source.as_bytes()];
            let count = call.keys.len().to_string();
            args.push(count.as_bytes());
            args.extend(call.keys.iter().map(|k| k.as_bytes()));
            args.extend(call.args.iter().map(|a| a.as_bytes()));
            let (r, v) = both.both(&args);
            assert_eq!(show(&r), show(&v), "{} call {i}", script.file);
            assert!(!r.starts_with(b"-"), "{}: {}", script.file, show(&r));
            compared += 1;
        }
    }
    println!("conformance: {compared} limiter calls, every one decided alike on Redis and Valkey");
}
