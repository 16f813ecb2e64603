//! Differential test for Lua: generated scripts run with EVAL on a real `redis-server` and on
//! the model; replies must be byte-identical, error texts included (the SHA in
//! "script: <sha>, on @user_script:1." is the SHA1 of the same body on both sides).
//!
//! The generator aims at the conversion rules: floats, negatives, 2^53, 2^63, 1e300, -0.0,
//! 1/0 and 0/0 as return values and as `redis.call` arguments; arrays with nil holes and
//! `false`; nested tables; `{ok=}`, `{err=}` and both; `redis.status_reply`/`error_reply`;
//! `pcall` and `redis.pcall` on errors; writes to globals; RESP3 conversions after
//! `redis.setresp(3)`. It never raises a table without an `err` field: Redis 7.0.15 crashes on
//! that (the model answers with an error instead).

mod conformance_support;

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

use conformance_support::{show, Pair};

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "3.99",
    "-3.99",
    "2^53",
    "2^53+1",
    "2^63",
    "-2^63",
    "2^64",
    "1e300",
    "-1e300",
    "-0.0",
    "1/0",
    "-1/0",
    "0/0",
    "0.1",
    "1e-300",
    "123456789012",
    "-(2^31)",
    "0.5",
    "-0.5",
    "4503599627370496.5",
    "1e17",
    "1e16",
    "100",
    "7/3",
];
const STRINGS: &[&str] = &["'a'", "''", "'1'", "'x y'", "'a\\0b'", "'a\\r\\nb'", "'-ERR x'", "'3.5'"];
const OTHER_LEAVES: &[&str] = &[
    "true",
    "false",
    "nil",
    "KEYS[1]",
    "ARGV[1]",
    "ARGV[2]",
    "ARGV[9]",
    "#KEYS",
    "#ARGV",
    "redis.call('get', KEYS[1])",
    "redis.call('get', 'nokey')",
    "redis.call('ping')",
    "redis.call('hgetall', 'h')",
    "redis.call('zrange', 'z', 0, -1, 'withscores')",
    "redis.call('zscore', 'z', 'm')",
    "redis.call('zscore', 'z', 'nomember')",
    "redis.call('incrbyfloat', 'f', 0.1)",
    "redis.call('hmget', 'h', 'f', 'nofield', 'g')",
    "redis.call('zadd', 'z', 'incr', 1, 'm')",
    "redis.call('exists', 'nokey')",
    "redis.call('set', 'k2', 'v', 'get')",
    "redis.call('type', 'z')",
    "redis.pcall('incr', 'h')",
    "redis.pcall('nosuch')",
    "redis.pcall('get')",
    "redis.pcall('eval', 'return 1', 0)",
    "redis.pcall()",
    "redis.pcall('set', 'k', {})",
    "redis.status_reply('FINE')",
    "redis.error_reply('E x')",
    "redis.error_reply('boom')",
    "redis.error_reply('-X y')",
    "redis.error_reply('')",
    "redis.status_reply(1)",
    "redis.sha1hex('abc')",
    "tostring(0.1)",
    "tostring(2^63)",
    "tostring(-0.0)",
    "tonumber('0x10')",
    "tonumber(' 5 ')",
    "math.floor(2.5)",
    "math.huge",
    "string.format('%.3f', 1.23456)",
    "select('#', 1, nil, 3)",
    "type(nil)",
    "redis.LOG_NOTICE",
    "redis.REDIS_VERSION",
    "string.rep('ab', 3)",
    "#'abc'",
    "'a' .. 1.5",
    "10 % 3",
    "2^0.5",
];
const STATEMENTS: &[&str] = &[
    "x = 1",
    "return y",
    "string.x = 1",
    "redis.call = nil",
    "KEYS = {}",
    "rawset(_G, 'z', 1)",
    "redis.call('incr', 'h')",
    "redis.call('nosuch', 'a')",
    "redis.call()",
    "redis.call('set', 'k', {})",
    "redis.call('set', 'k', true)",
    "redis.call('get', 'a', 'b')",
    "redis.call('hello', 2)",
    "redis.call('script', 'flush')",
    "redis.call('memory', 'nosuch')",
    "error('plain')",
    "error('plain', 0)",
    "error('plain', 2)",
    "error()",
    "error(12)",
    "error(1.5)",
    "error({err = 'E custom'})",
    "error({err = 'nocode'})",
    "error(redis.error_reply('MY thing'))",
    "return 1 + {}",
    "return nil .. 'x'",
    "local t = nil; return t.x",
    "return string.rep()",
    "return ('x'):bad()",
    "redis.sha1hex()",
    "redis.log()",
    "redis.log('x', 'y')",
    "redis.log(9, 'y')",
    "redis.setresp(4)",
    "redis.setresp()",
    "local function f() error('deep') end\nf()",
    "local function f() return redis.call('incr', 'h') end\nreturn f()",
    "return redis.call('incr', 'h')",
    "return redis.call('nosuch')",
    "local ok, e = pcall(redis.call, 'incr', 'h') return e",
    "local ok, e = pcall(error, {err = 'E1'}) return e",
    "local ok, e = pcall(error, 'E2') return {ok, e}",
    "local ok, e = xpcall(function() return redis.call('incr', 'h') end, function(e) return e.err end) return e",
    "return {pcall(function() return 1 + {} end)}",
];

fn pick(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(pool).prop_map(str::to_string).boxed()
}

/// A Lua expression, possibly a table of expressions, at most three levels deep.
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![pick(NUMBERS), pick(STRINGS), pick(OTHER_LEAVES)];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|items| format!("{{{}}}", items.join(", "))),
            inner.clone().prop_map(|e| format!("{{ok = {e}}}")),
            inner.clone().prop_map(|e| format!("{{err = {e}}}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{{err = {a}, ok = {b}}}")),
            (pick(NUMBERS), inner.clone()).prop_map(|(n, e)| format!("{{double = {n}, ok = {e}}}")),
            pick(NUMBERS).prop_map(|n| format!("{{double = {n}}}")),
            inner.clone().prop_map(|e| format!("{{map = {{a = {e}}}}}")),
            pick(STRINGS).prop_map(|s| format!("{{set = {{[{s}] = true}}}}")),
            pick(NUMBERS).prop_map(|n| format!(
                "(function() redis.call('set', KEYS[1], {n}) return redis.call('get', KEYS[1]) end)()"
            )),
            (inner.clone(), inner).prop_map(|(a, b)| format!("{{{a}, nil, {b}}}")),
        ]
    })
}

/// A whole script: a return, a statement and a return, or a statement alone; sometimes under
/// `redis.setresp(3)`.
fn script() -> impl Strategy<Value = String> {
    let body = prop_oneof![
        3 => expr().prop_map(|e| format!("return {e}")),
        1 => (pick(STATEMENTS), expr()).prop_map(|(s, e)| format!("{s}\nreturn {e}")),
        2 => pick(STATEMENTS),
    ];
    (any::<u8>(), body).prop_map(|(dice, body)| if dice % 5 == 0 { format!("redis.setresp(3)\n{body}") } else { body })
}

fn setup(pair: &mut Pair) {
    pair.reset();
    let commands: &[&[&[u8]]] = &[
        &[b"SET", b"s", b"10"],
        &[b"SET", b"f", b"1.1"],
        &[b"HSET", b"h", b"f", b"v", b"g", b"2"],
        &[b"ZADD", b"z", b"1.5", b"m", b"2", b"n", b"0.1", b"o"],
    ];
    for cmd in commands {
        let (r, m) = pair.both(cmd);
        assert_eq!(r, m, "setup {:?}", cmd);
    }
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases: std::env::var("CONFORMANCE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases),
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    })
}

#[test]
fn model_runs_generated_lua_like_redis() {
    let pair = RefCell::new(Pair::start());
    let (ran, agreed) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let result = runner(512).run(&script(), |body| {
        ran.fetch_add(1, Ordering::Relaxed);
        let mut pair = pair.borrow_mut();
        setup(&mut pair);
        let args: [&[u8]; 6] = [b"EVAL", body.as_bytes(), b"1", b"s", b"a1", b"2.5"];
        let (r, m) = pair.both(&args);
        if std::env::var_os("CONFORMANCE_DUMP").is_some() {
            println!("--- {body}\n=> {}", show(&r));
        }
        if r != m {
            return Err(TestCaseError::fail(format!("script:\n{body}\nredis: {}\nmodel: {}", show(&r), show(&m))));
        }
        // SCRIPT LOAD names it (or fails to compile it) the same way on both, and running it
        // again by SHA must give the same answer on both.
        let (r_sha, m_sha) = pair.both(&[b"SCRIPT", b"LOAD", body.as_bytes()]);
        if r_sha != m_sha {
            return Err(TestCaseError::fail(format!(
                "SCRIPT LOAD of:\n{body}\nredis: {}\nmodel: {}",
                show(&r_sha),
                show(&m_sha)
            )));
        }
        let Some(sha) = r_sha.strip_prefix(b"$40\r\n").and_then(|s| s.get(..40)) else {
            agreed.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let args: [&[u8]; 6] = [b"EVALSHA", sha, b"1", b"s", b"a1", b"2.5"];
        let (r2, m2) = pair.both(&args);
        if r2 != m2 {
            return Err(TestCaseError::fail(format!(
                "EVALSHA of:\n{body}\nredis: {}\nmodel: {}",
                show(&r2),
                show(&m2)
            )));
        }
        agreed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let (ran, agreed) = (ran.load(Ordering::Relaxed), agreed.load(Ordering::Relaxed));
    println!("conformance: {ran} Lua scripts, {agreed} agreed");
    if let Err(e) = result {
        panic!("the model disagrees with redis-server: {e}");
    }
}

/// Random doubles through every path that prints them: `%.17g` for `redis.call` arguments and
/// for scores, `%.17Lf` (trimmed) for INCRBYFLOAT sums.
#[test]
fn float_formatting_matches_redis() {
    let pair = RefCell::new(Pair::start());
    let (ran, agreed) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let finite = prop_oneof![
        any::<f64>().prop_filter("finite", |x| x.is_finite()),
        (-1e6f64..1e6).prop_map(|x| (x * 1000.0).round() / 1000.0),
        (-20i32..20).prop_map(|e| 10f64.powi(e)),
        (0u64..1 << 60).prop_map(|i| i as f64),
    ];
    let result = runner(512).run(&(finite.clone(), finite), |(a, b)| {
        ran.fetch_add(1, Ordering::Relaxed);
        let mut pair = pair.borrow_mut();
        pair.reset();
        let (la, lb) = (format!("{a:e}"), format!("{b:e}"));
        let script = format!(
            "redis.call('set', KEYS[1], {la}) local x = redis.call('get', KEYS[1]) \
             redis.call('zadd', 'z', {lb}, 'm') return {{x, redis.call('zscore', 'z', 'm'), \
             redis.call('zrange', 'z', 0, -1, 'withscores')}}"
        );
        let checks: Vec<Vec<Vec<u8>>> = vec![
            vec![b"EVAL".to_vec(), script.into_bytes(), b"1".to_vec(), b"k".to_vec()],
            vec![b"SET".to_vec(), b"n".to_vec(), la.clone().into_bytes()],
            vec![b"INCRBYFLOAT".to_vec(), b"n".to_vec(), lb.clone().into_bytes()],
            vec![b"HINCRBYFLOAT".to_vec(), b"h".to_vec(), b"f".to_vec(), la.into_bytes()],
            vec![b"HINCRBYFLOAT".to_vec(), b"h".to_vec(), b"f".to_vec(), lb.clone().into_bytes()],
            vec![b"ZINCRBY".to_vec(), b"z".to_vec(), lb.into_bytes(), b"m".to_vec()],
        ];
        for cmd in &checks {
            let argv: Vec<&[u8]> = cmd.iter().map(|a| &a[..]).collect();
            let (r, m) = pair.both(&argv);
            if r != m {
                return Err(TestCaseError::fail(format!(
                    "a = {a:e}, b = {b:e}\ncommand {}\nredis: {}\nmodel: {}",
                    show(&cmd.concat()),
                    show(&r),
                    show(&m)
                )));
            }
        }
        agreed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let (ran, agreed) = (ran.load(Ordering::Relaxed), agreed.load(Ordering::Relaxed));
    println!("conformance: {ran} float pairs, {agreed} agreed");
    if let Err(e) = result {
        panic!("the model disagrees with redis-server: {e}");
    }
}
