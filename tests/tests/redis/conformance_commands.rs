//! Differential test: generated command sequences go to a real `redis-server` and to the model;
//! every reply must be byte-identical, and after every command so must the keyspace (each
//! key's type, encoding, contents and deadline).
//!
//! Keys come from a three-letter alphabet so strings, hashes, sorted sets, lists and sets collide
//! and provoke WRONGTYPE; arguments come from pools of awkward values (`pools`), and two arms
//! send any command name with any tokens to exercise arity and syntax errors (`gen`).
//! Clock-dependent replies are compared by class or within a tolerance: a positive TTL or PTTL
//! is "positive" (both servers count down in real time), MEMORY USAGE is "an integer", deadlines
//! and idle times may differ by the moment each server ran. Orders Redis leaves to its seeded
//! hash tables are compared sorted, and a scan Redis spreads over several calls is followed to
//! its end (`compare`).

mod compare;
use crate::conformance_support;
mod gen;
mod pools;
mod random;

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

use conformance_support::{show, show_cmd, Pair};

#[test]
fn model_replies_match_redis_for_generated_command_sequences() {
    let pair = RefCell::new(Pair::start());
    let ran = AtomicUsize::new(0);
    let agreed = AtomicUsize::new(0);
    let sent = AtomicUsize::new(0);
    let config = Config {
        // CONFORMANCE_CASES=20000 for a longer hunt; 512 keeps the default run to seconds.
        cases: std::env::var("CONFORMANCE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let sequences = gen::sequences();
    let result = runner.run(&sequences, |seq| {
        ran.fetch_add(1, Ordering::Relaxed);
        let mut pair = pair.borrow_mut();
        pair.reset();
        for (n, cmd) in seq.iter().enumerate() {
            if compare::unspecified(&mut pair, cmd) {
                continue;
            }
            sent.fetch_add(1, Ordering::Relaxed);
            let args: Vec<Vec<u8>> = cmd.iter().map(|a| a.as_bytes().to_vec()).collect();
            let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            let before = random::before(&mut pair, cmd);
            let (r, m) = pair.both(&argv);
            let (r, m) = (compare::normalize(cmd, r), compare::normalize(cmd, m));
            let (r, m) = compare::unordered_replies(&mut pair, cmd, r, m);
            let (r, m) = compare::scan_replies(&mut pair, cmd, r, m);
            let history = || seq[..n].iter().map(|c| c.join(" ")).collect::<Vec<_>>().join("; ");
            let verdict = if r == m {
                Ok(())
            } else if let Some(before) = &before {
                random::check(&mut pair, cmd, before, &r, &m)
            } else if let Some(verdict) = random::check_randomkey(&mut pair, cmd, &r, &m) {
                verdict
            } else if compare::time_tolerance(cmd).is_some_and(|t| compare::integers_close(&r, &m, t)) {
                Ok(())
            } else {
                Err(format!("redis: {}\nmodel: {}", show(&r), show(&m)))
            };
            if let Err(diff) = verdict {
                return Err(TestCaseError::fail(format!("after [{}]\ncommand {}\n{diff}", history(), show_cmd(&args))));
            }
            if let Err(diff) = compare::keyspaces_agree(&mut pair, pools::KEYS) {
                return Err(TestCaseError::fail(format!(
                    "after [{}]\ncommand {} (replies agreed: {})\nthe keyspaces differ at {diff}",
                    history(),
                    show_cmd(&args),
                    show(&r)
                )));
            }
        }
        agreed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let (ran, agreed, sent) =
        (ran.load(Ordering::Relaxed), agreed.load(Ordering::Relaxed), sent.load(Ordering::Relaxed));
    println!("conformance: {ran} command sequences ({sent} commands), {agreed} agreed");
    if let Err(e) = result {
        panic!("the model disagrees with redis-server: {e}");
    }
}

#[test]
fn protocol_errors_match_redis() {
    // Raw malformed input: both servers must answer the same and close the connection.
    use std::io::{Read, Write};
    let pair = Pair::start();
    let redis_addr = pair.redis_addr();
    let cases: &[&[u8]] = &[
        b"*1\r\n$999999999999\r\n",
        b"*1\r\n$-5\r\n",
        b"*99999999999\r\n",
        b"*abc\r\n",
        b"*1\r\n*1\r\n",
        b"*2\r\n$3\r\nGET\r\n:1\r\n",
        b"set a \"unbalanced\r\n",
        b"set a \"b\"c\r\n",
        b"PING\r\n",
        b"ECHO \"a\\x41\\n\"\r\n",
        b"*0\r\nPING\r\n",
        b"\r\n\r\nPING\r\n",
    ];
    let mut ran = 0;
    for input in cases {
        let mut replies = Vec::new();
        for addr in [redis_addr, pair.model_server.addr] {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(std::time::Duration::from_millis(300))).expect("timeout");
            s.write_all(input).expect("write");
            let mut got = Vec::new();
            let mut buf = [0u8; 256];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            replies.push(got);
        }
        assert_eq!(show(&replies[0]), show(&replies[1]), "input {}", show(input));
        ran += 1;
    }
    println!("conformance: {ran} malformed inputs, {ran} agreed");
}

/// Every command added with the key families, called from a script, in RESP2 and after
/// `redis.setresp(3)` (sets, maps, doubles and nested pairs come back to Lua as RESP3 types):
/// each from the same fresh data on both servers, with arguments whose replies Redis fixes.
#[test]
fn scripts_see_the_same_replies_from_the_key_family_commands() {
    let setup: &[&[&str]] = &[
        &["FLUSHALL"],
        &["SET", "s", "hello"],
        &["SET", "n", "5"],
        &["HSET", "h", "f", "1", "g", "2"],
        &["RPUSH", "l", "a", "b", "c", "a"],
        &["SADD", "st", "1", "2", "3"],
        &["SADD", "st2", "a", "b"],
        &["ZADD", "z", "1", "a", "2.5", "b", "-0", "c"],
        &["ZADD", "z2", "0", "x", "0", "y"],
    ];
    let calls: &[&str] = &[
        "'APPEND', 's', 'x'",
        "'GETRANGE', 's', 0, 2",
        "'SUBSTR', 's', -3, -1",
        "'SETRANGE', 's', 1, 'YY'",
        "'MSETNX', 'm1', 1, 'm2', 2",
        "'LCS', 's', 'n'",
        "'LCS', 's', 's', 'IDX', 'WITHMATCHLEN'",
        "'LCS', 's', 's', 'LEN'",
        "'EXPIRETIME', 's'",
        "'PEXPIRETIME', 'nokey'",
        "'TOUCH', 's', 'n', 'nokey'",
        "'COPY', 's', 's2'",
        "'OBJECT', 'ENCODING', 'n'",
        "'OBJECT', 'REFCOUNT', 'n'",
        "'OBJECT', 'FREQ', 'n'",
        "'OBJECT', 'HELP'",
        "'SCAN', 0, 'MATCH', 's'",
        "'HSTRLEN', 'h', 'f'",
        "'HSCAN', 'h', 0",
        "'HRANDFIELD', 'h', 5, 'WITHVALUES'",
        "'LINSERT', 'l', 'BEFORE', 'b', 'X'",
        "'LSET', 'l', 0, 'Z'",
        "'LREM', 'l', 1, 'a'",
        "'LPOS', 'l', 'a', 'COUNT', 0",
        "'LMOVE', 'l', 'l', 'LEFT', 'RIGHT'",
        "'RPOPLPUSH', 'l', 'l2'",
        "'LMPOP', 1, 'l', 'LEFT', 'COUNT', 2",
        "'SMISMEMBER', 'st', 1, 9",
        "'SINTER', 'st', 'st'",
        "'SUNION', 'st', 'st'",
        "'SDIFF', 'st', 'st2'",
        "'SINTERSTORE', 'd', 'st', 'st'",
        "'SUNIONSTORE', 'd', 'st', 'st2'",
        "'SDIFFSTORE', 'd', 'st', 'st2'",
        "'SINTERCARD', 2, 'st', 'st'",
        "'SMOVE', 'st', 'st2', 1",
        "'SSCAN', 'st', 0",
        "'SRANDMEMBER', 'st', 10",
        "'SPOP', 'st', 10",
        "'ZMSCORE', 'z', 'a', 'x'",
        "'ZLEXCOUNT', 'z2', '-', '+'",
        "'ZRANGEBYLEX', 'z2', '-', '+'",
        "'ZREVRANGEBYLEX', 'z2', '+', '-'",
        "'ZREMRANGEBYLEX', 'z2', '[x', '[x'",
        "'ZRANGESTORE', 'd', 'z', 0, -1",
        "'ZPOPMIN', 'z'",
        "'ZPOPMAX', 'z', 2",
        "'ZMPOP', 1, 'z', 'MIN', 'COUNT', 1",
        "'ZUNION', 2, 'z', 'z', 'WITHSCORES'",
        "'ZINTER', 2, 'z', 'z', 'WITHSCORES'",
        "'ZDIFF', 1, 'z', 'WITHSCORES'",
        "'ZUNIONSTORE', 'd', 1, 'z'",
        "'ZINTERSTORE', 'd', 1, 'z'",
        "'ZDIFFSTORE', 'd', 1, 'z'",
        "'ZINTERCARD', 1, 'z'",
        "'ZSCAN', 'z', 0",
        "'ZRANDMEMBER', 'z', 5, 'WITHSCORES'",
        // Inside a script the blocking pops never block: nothing to pop is a null array.
        "'BLMPOP', 0, 2, 'nokey', 'l', 'RIGHT', 'COUNT', 3",
        "'BLMPOP', 0, 1, 'nokey', 'LEFT'",
        "'BZMPOP', 0, 1, 'z', 'MAX'",
        "'BZMPOP', 0, 1, 'nokey', 'MIN'",
    ];
    let mut pair = Pair::start();
    let setup: Vec<Vec<Vec<u8>>> = setup.iter().map(|c| c.iter().map(|a| a.as_bytes().to_vec()).collect()).collect();
    let mut ran = 0;
    for call in calls {
        for resp in ["", "redis.setresp(3) "] {
            let (r, m) = pair.pipeline_both(&setup);
            assert_eq!(r, m, "setup");
            let script = format!("{resp}return redis.call({call})");
            let (r, m) = pair.both(&[b"EVAL", script.as_bytes(), b"0"]);
            assert_eq!(show(&r), show(&m), "{script}");
            ran += 1;
        }
    }
    println!("conformance: {ran} scripts calling the key family commands, {ran} agreed");
}
