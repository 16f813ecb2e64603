//! Differential test for the limiter's own Lua scripts: long generated EVALSHA/EVAL sequences
//! for every script in `lua/` go to a real `redis-server` and to the model, and every reply must
//! be byte-identical (error texts included: both servers name the same SHA).
//!
//! What is generated, per the scripts' contracts (see each file's header):
//!
//! - Quotas in the everyday ranges (limits and bursts 1..=1000, periods 1..=600000 ms), plus
//!   huge ones near the bounds `Quota::validate` accepts (products up to 2^50), costs 0..=capacity.
//! - Client time: a clock starting near 1.7e12 ms that mostly moves forward by 0..3 periods and
//!   sometimes steps back by up to three seconds.
//! - Hostile state written beforehand with SET/HSET/ZADD: text, "NaN", "inf", fractions,
//!   negative and huge numbers, and keys of the wrong type.
//! - EVALSHA mostly; EVAL of the source sometimes; now and then SCRIPT FLUSH, so EVALSHA gets
//!   NOSCRIPT on both before the script is loaded again.
//!
//! **Time.** The scripts set TTLs derived from the generated clock, and each server expires keys
//! by its own real clock, so a key could vanish on one server between the two executions of the
//! same call. To keep real time out of the comparison, each call is pipelined with a snapshot
//! script that reads every key (type, value, PTTL) and PERSISTs it; the test then expires keys
//! itself, identically on both servers, once the *generated* clock passes the deadline the
//! snapshot reported. So the comparison covers the replies, the full state after every call, and
//! the TTLs the scripts set: to the millisecond, since the snapshot runs microseconds after the
//! call, with slack only for the time a loaded machine measurably held a server up. The one
//! real-time effect left is a key with a TTL of 1-2 ms expiring on one server before its
//! snapshot ran; such a key is dropped on both and counted in the summary. Server time
//! (`now` = "") is compared separately and only by the reply's shape and decision.
//!
//! Left out on purpose: a sliding-log sequence counter beyond 2^53 (`SET ...:seq 9007199254740993`)
//! makes the script's member loop spin forever in doubles; Redis then stays BUSY while the model
//! kills the script after its instruction budget (a documented difference of the model).
//!
//! `KEYS pattern` is compared here too, as a command and from a script: the snapshot relies on it.
//!
//! `CONFORMANCE_CALLS=N` changes the calls per script (default 4000); `CONFORMANCE_SEED=S` the
//! seed (a failure prints the one to replay).

// Comparing against a real server means measuring real time in one place (the server-time case).
#![allow(clippy::disallowed_methods)]

mod concurrency;
use crate::conformance_support;
mod generate;
mod runner;
mod snapshot;

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::harness::scripts::{self, LuaScript};
use redis_ratelimit::Quota;

use conformance_support::{show, show_cmd, V};
use generate::{cmd, pick, s, Call, Units};
use runner::{Run, Servers, Totals};

const BASE_MS: i64 = 1_700_000_000_000;
const DEFAULT_CALLS: usize = 4000;
const EPISODE_CALLS: usize = 150;

fn sha1_of(pair_servers: &mut Servers, source: &str) -> Vec<u8> {
    let (r, m) = pair_servers.both(&[cmd(&[b"SCRIPT", b"LOAD", source.as_bytes()])]);
    assert_eq!(r[0].0, m[0].0, "SCRIPT LOAD");
    match &r[0].1 {
        V::Bulk(Some(sha)) => sha.clone(),
        other => panic!("SCRIPT LOAD answered {other:?}"),
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn every_script_answers_like_redis_for_generated_calls_hostile_state_and_clock_steps() {
    let calls_per_script = env_number("CONFORMANCE_CALLS").map_or(DEFAULT_CALLS, |n| n as usize);
    let seed = env_number("CONFORMANCE_SEED").unwrap_or(20_240_601);
    let mut servers = Servers::start();
    let mut totals = Totals::default();
    let started = Instant::now();
    // Each algorithm's own script, then each behind a blockable limiter's guard.
    let blockable =
        scripts::ALL.map(|s| LuaScript { file: "blockable.lua", source: scripts::blockable_source(s.algorithm), ..s });
    let runs = scripts::ALL.into_iter().map(|s| (s, false)).chain(blockable.into_iter().map(|s| (s, true)));
    for (i, (script, blockable)) in runs.enumerate() {
        let sha = sha1_of(&mut servers, script.source);
        let mut run = Run {
            servers: &mut servers,
            rng: SmallRng::seed_from_u64(seed.wrapping_add(i as u64)),
            script,
            blockable,
            sha,
            deadlines: BTreeMap::new(),
            totals: &mut totals,
            seed,
        };
        let mut left = calls_per_script;
        while left > 0 {
            let n = left.min(EPISODE_CALLS);
            run.episode(n);
            left -= n;
        }
    }
    println!(
        "conformance: {} script calls over {} scripts (each algorithm's own and a blockable limiter's), {} agreed",
        totals.calls,
        2 * scripts::ALL.len(),
        totals.agreed
    );
    println!(
        "  ({} admitted, {} denied, {} errors, {} refunds, {} debits, {} blocks; {} keys dropped after a real-time \
         expiry race; {:.1} s)",
        totals.allowed,
        totals.denied,
        totals.errors,
        totals.refunds,
        totals.debits,
        totals.blocks,
        totals.expiry_races,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(totals.calls, totals.agreed);
    assert!(totals.calls >= 2 * scripts::ALL.len() * calls_per_script);
    // Hostile state reached the keys the scripts read: keys of the wrong type made some fail.
    assert!(totals.errors > 0 && totals.blocks > 0, "{} errors, {} blocks", totals.errors, totals.blocks);
    assert!(totals.refunds > 0 && totals.debits > 0, "{} refunds, {} debits", totals.refunds, totals.debits);
}

/// With `now` = "" each server reads its own TIME, so only the reply's shape and the decision
/// can be compared (and the clocks the replies report, loosely). ADR-002's script has no
/// server-time mode: an empty `now` is a Lua error, which must read the same on both.
#[test]
fn server_time_calls_agree_on_shape_and_decision() {
    let mut servers = Servers::start();
    let mut compared = 0;
    for script in scripts::ALL {
        let sha = sha1_of(&mut servers, script.source);
        let algorithm = script.algorithm;
        // Two per ten minutes: the third call is denied whatever the two clocks read.
        let q = Quota::new(2, Duration::from_secs(600)).with_burst(2);
        for i in 0..3 {
            let c = Call {
                algorithm,
                quota: q,
                stem: "ratelimiter:{server-time}:".to_string(),
                now_ms: 0,
                cost: 1,
                units: None,
                blockable: false,
                block: None,
            };
            let (r, m) = servers.both(&[c.command_at(b"EVALSHA", &sha, true)]);
            let ((rr, rv), (mr, mv)) = (&r[0], &m[0]);
            let ints = |v: &V| match v {
                V::Array(Some(items)) => {
                    items.iter().map(|x| if let V::Int(n) = x { Some(*n) } else { None }).collect()
                }
                _ => None,
            };
            let (Some(a), Some(b)): (Option<Vec<i64>>, Option<Vec<i64>>) = (ints(rv), ints(mv)) else {
                panic!("{}: not arrays of integers\nredis: {}\nmodel: {}", script.file, show(rr), show(mr));
            };
            assert_eq!((a.len(), b.len()), (5, 5), "{}: {} / {}", script.file, show(rr), show(mr));
            assert_eq!(a[0], b[0], "{} call {i}: allowed flag\nredis: {}\nmodel: {}", script.file, show(rr), show(mr));
            assert_eq!(a[0], i64::from(i < 2), "{} call {i}: two of three admitted", script.file);
            // Both report the clock they decided by: the same real clock, read moments apart.
            let (ra, mb) = (a[4], b[4]);
            assert!(ra > BASE_MS && mb > BASE_MS, "{}: {ra} / {mb}", script.file);
            assert!(ra.abs_diff(mb) <= 5_000, "{}: clocks {ra} / {mb}", script.file);
            compared += 1;
        }
        // A refund on Redis's clock: both give one unit back, and then admit one more request.
        let refund = Call {
            algorithm,
            quota: q,
            stem: "ratelimiter:{server-time}:".to_string(),
            now_ms: 0,
            cost: 1,
            units: Some(Units::Refund),
            blockable: false,
            block: None,
        };
        let (r, m) = servers.both(&[refund.command_at(b"EVAL", scripts::REFUND.as_bytes(), true)]);
        assert_eq!(
            (&r[0].1, &m[0].1),
            (&V::Int(1), &V::Int(1)),
            "{}: refund {} / {}",
            script.file,
            show(&r[0].0),
            show(&m[0].0)
        );
        let again = Call { units: None, ..refund };
        let (r, m) = servers.both(&[again.command_at(b"EVALSHA", &sha, true)]);
        let allowed = |v: &V| matches!(v, V::Array(Some(items)) if items.first() == Some(&V::Int(1)));
        assert!(
            allowed(&r[0].1) && allowed(&m[0].1),
            "{}: after the refund {} / {}",
            script.file,
            show(&r[0].0),
            show(&m[0].0)
        );
        compared += 2;
    }
    println!("conformance: {compared} server-time script calls over {} scripts, {compared} agreed", scripts::ALL.len());
}

/// KEYS with Redis's glob rules, as a command and from a script. Redis lists keys in its hash
/// table's order, so both replies are compared as sorted lists.
#[test]
fn keys_glob_patterns_select_the_same_keys_as_redis() {
    let mut servers = Servers::start();
    servers.pair.reset();
    let names: &[&[u8]] = &[
        b"",
        b"a",
        b"b",
        b"ab",
        b"abc",
        b"abd",
        b"a*",
        b"a?",
        b"[a]",
        b"a\\b",
        b"a-b",
        b"^",
        b"]",
        b"-",
        b"A",
        b"z",
        b"{k}",
        b"ratelimiter:{a}:fw:1",
        b"ratelimiter:{a}:sl:seq",
        b"ratelimiter:{b}:tb",
        b"\xff",
        b"\xc3\xa9",
        b"a\x00b",
        b"hello",
        b"hallo",
        b"hxllo",
        b"hllo",
        b"heeello",
    ];
    for name in names {
        servers.both(&[vec![s("SET"), name.to_vec(), s("v")]]);
    }
    servers.both(&[vec![s("SET"), b"a".repeat(1001), s("v")], vec![s("SET"), b"a".repeat(1002), s("v")]]);
    // Already past its deadline: KEYS must skip it on both.
    servers.both(&[cmd(&[b"SET", b"gone", b"v", b"PXAT", b"1"])]);
    let mut patterns: Vec<Vec<u8>> = [
        "*",
        "**",
        "",
        "?",
        "??",
        "?*",
        "a*",
        "*b",
        "a*b",
        "a*c*",
        "h?llo",
        "h*llo",
        "h[ae]llo",
        "h[^e]llo",
        "h[a-b]llo",
        "h[b-a]llo",
        "[abc",
        "a[",
        "[",
        "[^",
        "[]",
        "[]a]",
        "\\*",
        "a\\*",
        "a\\",
        "\\",
        "[\\]]",
        "[a-]",
        "[-a]",
        "*:{a}:*",
        "ratelimiter:\\{a\\}*",
        "*seq",
        "[\u{ff}-a]",
        "[a-z]",
        "*\u{e9}*",
        "a?b",
        "*gone*",
        "g*",
    ]
    .iter()
    .map(|p| p.as_bytes().to_vec())
    .collect();
    patterns.push(b"[\xff-a]".to_vec());
    patterns.push(b"a*".repeat(1001));
    patterns.push(b"a*".repeat(1002));
    let mut rng = SmallRng::seed_from_u64(env_number("CONFORMANCE_SEED").unwrap_or(7));
    let alphabet: &[u8] = b"ab*?[]^-\\{}:eh\xff";
    for _ in 0..400 {
        let len = rng.random_range(0..8);
        patterns.push((0..len).map(|_| *pick(&mut rng, alphabet)).collect());
    }
    let sorted = |v: &V| match v {
        V::Array(Some(items)) => {
            let mut items = items.clone();
            items.sort();
            Some(items)
        }
        _ => None,
    };
    let mut compared = 0;
    for pattern in &patterns {
        let commands = [
            vec![s("KEYS"), pattern.clone()],
            vec![s("EVAL"), s("return redis.call('KEYS', ARGV[1])"), s("0"), pattern.clone()],
        ];
        for command in commands {
            let (r, m) = servers.both(std::slice::from_ref(&command));
            let (a, b) = (sorted(&r[0].1), sorted(&m[0].1));
            assert!(a.is_some(), "{}: {}", show_cmd(&command), show(&r[0].0));
            assert_eq!(a, b, "{}\nredis: {}\nmodel: {}", show_cmd(&command), show(&r[0].0), show(&m[0].0));
            compared += 1;
        }
    }
    println!("conformance: {compared} KEYS patterns, {compared} agreed");
}

/// Inside a script Redis 7.0 judges expiry by the script's start time, but computes relative
/// deadlines, "already past" deadlines and PTTL from the clock read at that moment. A script
/// that spins 20 ms on TIME makes the two differ by far more than the servers' timing noise.
#[test]
fn inside_a_script_deadlines_and_ttls_use_the_clock_read_now() {
    let mut servers = Servers::start();
    servers.pair.reset();
    let script = r#"
local function now_ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local function spin(ms) local s = now_ms() while now_ms() - s <= ms do end end
redis.call('SET', KEYS[1], 1, 'PX', 5)
redis.call('SET', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], 5)
spin(20)
local out = {redis.call('GET', KEYS[1]) or false, redis.call('PTTL', KEYS[1]), redis.call('EXISTS', KEYS[2]),
             redis.call('PTTL', KEYS[2])}
redis.call('SET', KEYS[3], 1)
out[#out + 1] = redis.call('PEXPIREAT', KEYS[3], now_ms() - 10)
out[#out + 1] = redis.call('EXISTS', KEYS[3])
redis.call('SET', KEYS[4], 1, 'PX', 100000)
out[#out + 1] = redis.call('SET', KEYS[4], 2, 'NX') or false
out[#out + 1] = redis.call('INCR', KEYS[4])
return out
"#;
    let command = vec![s("EVAL"), s(script), s("4"), s("a"), s("b"), s("c"), s("d")];
    let (r, m) = servers.both(std::slice::from_ref(&command));
    if servers.pair.reference_is_valkey() {
        // Valkey freezes time at the script's start for TTLs and past deadlines too
        // (conformance_support/valkey.rs, difference 4): TTLs whole, and the deadline 10 ms
        // before the clock is still ahead of the frozen time, so the key stays.
        assert_eq!(r[0].1.render(), "['1', 5, 1, 5, 1, 1, nil, 2]", "{}", show(&r[0].0));
        assert_eq!(m[0].1.render(), "['1', 0, 1, 0, 1, 0, nil, 2]", "{}", show(&m[0].0));
        println!("conformance: 1 script timing case, Valkey's frozen time as documented");
        return;
    }
    assert_eq!(show(&r[0].0), show(&m[0].0));
    // Alive by the frozen time, TTL 0 by the clock; a deadline 10 ms ago deletes at once.
    assert_eq!(r[0].1.render(), "['1', 0, 1, 0, 1, 0, nil, 2]", "{}", show(&r[0].0));
    println!("conformance: 1 script timing case, 1 agreed");
}
