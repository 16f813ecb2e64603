//! Goal 8: what a decision costs Redis, script by script, against the least a stateful
//! script costs, measured in the same run.
//!
//! Two floors: a script doing one `GET` and one `SET ... PX` (what any single-key limiter
//! on the caller's clock cannot avoid) and the same after a `TIME` (what one on Redis's clock
//! cannot avoid). Each algorithm runs on the caller's clock against the first and on Redis's
//! against the second; the all-or-nothing rules script at 1 to 5 rules of mixed algorithms
//! against the sum of its rules' own scripts. Every figure is `INFO commandstats`'
//! `usec_per_call` for `EVALSHA` under `redis-benchmark -c 50 -P 16` over 100,000 random keys,
//! the least of three interleaved rounds (the machines are shared: the least is the least
//! disturbed).

use super::support::*;
use super::*;
use redis_ratelimit::harness::rules_script::{self, Item, RulesRequest};

const FLOOR: &str = "local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '1', 'PX', 60000) return 1";
const FLOOR_TIME: &str =
    "local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '1', 'PX', 60000) return 1";
/// A fixed caller's time (ms) for the client-time runs: every key is fresh, so one instant
/// serves.
const NOW_MS: u64 = 1_700_000_000_000;
const ROUNDS: usize = 3;

/// One script call as redis-benchmark sends it: the script and its keys and arguments (with
/// `__rand_int__` where the key varies).
struct Call {
    name: String,
    source: &'static str,
    keys: Vec<String>,
    args: Vec<String>,
}

fn algorithm_call(algorithm: Algorithm, server_time: bool) -> Call {
    let call = scripts::Request {
        algorithm,
        quota: &OPEN,
        stem: "ratelimiter:{k__rand_int__}:",
        now_ms: (!server_time).then_some(NOW_MS),
        cost: 1,
    }
    .invocation();
    let script = scripts::for_algorithm(algorithm);
    let clock = if server_time { "Redis's clock" } else { "caller's clock" };
    Call { name: format!("{algorithm}, {clock}"), source: script.source, keys: call.keys, args: call.args }
}

const MIXED: [Algorithm; 5] =
    [Algorithm::Gcra, Algorithm::FixedWindow, Algorithm::TokenBucket, Algorithm::SlidingWindow, Algorithm::SlidingLog];

fn rules_call(n: usize) -> Call {
    let stems: Vec<String> = (0..n).map(|i| format!("rl:{{k__rand_int__}}:r{i}:")).collect();
    let items = MIXED[..n]
        .iter()
        .zip(&stems)
        .map(|(&algorithm, stem)| Item {
            request: scripts::Request { algorithm, quota: &OPEN, stem, now_ms: Some(NOW_MS), cost: 1 },
            shadow: false,
            block: None,
        })
        .collect();
    let call = RulesRequest { items, commit: true }.invocation();
    Call {
        name: format!("rules script, {n} rule(s)"),
        source: rules_script::source(),
        keys: call.keys,
        args: call.args,
    }
}

/// Redis µs per EVALSHA of `call`, one round.
fn usec_per_call(server: &RedisServer, conn: &mut redis::Connection, call: &Call, n: usize) -> f64 {
    flush(conn);
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(call.source).query(conn).expect("SCRIPT LOAD");
    let mut args: Vec<String> =
        ["-c", "50", "-P", "16", "-n", &n.to_string(), "-r", &KEYS.to_string()].iter().map(|s| s.to_string()).collect();
    args.extend(["EVALSHA".to_owned(), sha, call.keys.len().to_string()]);
    args.extend(call.keys.iter().chain(&call.args).cloned());
    redis_benchmark(server.port(), &args.iter().map(String::as_str).collect::<Vec<_>>());
    let stats = commandstats(conn);
    let (calls, usec) = stats.iter().find(|s| s.0 == "evalsha").map_or((0.0, 0.0), |s| (s.1, s.2));
    assert!(calls > 0.0, "{}: redis-benchmark sent no EVALSHA", call.name);
    let stats = info(conn, "commandstats");
    let failed = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|kv| kv.strip_prefix("failed_calls=")))
        .unwrap_or("0");
    assert_eq!(failed, "0", "{}: the script failed on Redis", call.name);
    usec / calls
}

/// Every call's least µs over the rounds, the rounds interleaved so a noisy moment touches all.
fn measure(server: &RedisServer, calls: &[Call]) -> Vec<f64> {
    let n = scaled(100_000);
    let mut conn = server.client().expect("connect");
    let mut best = vec![f64::INFINITY; calls.len()];
    for _ in 0..ROUNDS {
        for (b, call) in best.iter_mut().zip(calls) {
            *b = b.min(usec_per_call(server, &mut conn, call, n));
        }
    }
    flush(&mut conn);
    best
}

fn floor_call(name: &str, source: &'static str) -> Call {
    Call { name: name.into(), source, keys: vec!["k__rand_int__".into()], args: Vec::new() }
}

/// The goal each algorithm is held to, against its floor.
fn target(algorithm: Algorithm) -> (f64, &'static str) {
    match algorithm {
        Algorithm::FixedWindow | Algorithm::Gcra => (1.25, "<= 1.25x"),
        Algorithm::TokenBucket | Algorithm::SlidingWindow => (1.4, "<= 1.4x"),
        // The sliding log keeps a member per unit.
        _ => (2.2, "<= 2.2x"),
    }
}

pub(crate) fn script_cost(server: &RedisServer) -> Vec<Goal> {
    let mut calls = vec![floor_call("floor", FLOOR), floor_call("floor with TIME", FLOOR_TIME)];
    for server_time in [false, true] {
        calls.extend(MIXED.iter().map(|&a| algorithm_call(a, server_time)));
    }
    calls.extend((1..=MIXED.len()).map(rules_call));
    let us = measure(server, &calls);
    let (floor, floor_time) = (us[0], us[1]);
    let mut goals = Vec::new();
    for (i, server_time) in [(2, false), (2 + MIXED.len(), true)] {
        for (j, &algorithm) in MIXED.iter().enumerate() {
            let (reference, label) = if server_time {
                (floor_time, format!("TIME+GET+SET PX: {floor_time:.2} us"))
            } else {
                (floor, format!("GET+SET PX: {floor:.2} us"))
            };
            let measured = us[i + j];
            let ratio = measured / reference;
            let (most, goal) = target(algorithm);
            goals.push(Goal {
                what: format!("Redis us per decision: {}", calls[i + j].name),
                measured: format!("{measured:.2} us per call"),
                reference: label,
                ratio,
                goal,
                met: ratio <= most,
                note: if ratio <= most {
                    String::new()
                } else {
                    format!(
                        "{:.0}% over: the floor takes no arguments and answers one integer; a decision parses its \
                         4-5 arguments (tonumber) and answers five integers, each a conversion Redis does around \
                         the script ({})",
                        (ratio / most - 1.0) * 100.0,
                        calls[i + j].name
                    )
                },
            });
        }
    }
    // The rules script against the sum of its rules' own scripts on the caller's clock.
    let rules_at = 2 + 2 * MIXED.len();
    for n in 1..=MIXED.len() {
        let sum: f64 = us[2..2 + n].iter().sum();
        let measured = us[rules_at + n - 1];
        let ratio = measured / sum;
        goals.push(Goal {
            what: format!("Redis us per request: rules script, {n} rule(s) of mixed algorithms"),
            measured: format!("{measured:.2} us per call"),
            reference: format!("its rules' own scripts: {sum:.2} us"),
            ratio,
            goal: "<= 1.05x",
            met: ratio <= 1.05,
            note: if ratio <= 1.05 {
                String::new()
            } else {
                format!(
                    "{:.0}% over: the script parses every rule's arguments and builds one reply of 2 + 6n integers; \
                     each rule's reads and writes are its own script's, once",
                    (ratio / 1.05 - 1.0) * 100.0
                )
            },
        });
    }
    goals
}
