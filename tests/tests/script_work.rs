//! What the scripts ask of Redis, counted by Redis (`INFO commandstats`) on a `redis-server`
//! this test starts: the all-or-nothing script of several rules does each rule's own reads and
//! writes once, as the rules' own scripts would, and a request it refuses writes nothing.

use redis_ratelimit::harness::rules_script::{self, Item, RulesRequest};
use redis_ratelimit::harness::scripts::{self, Request};
use redis_ratelimit::{Algorithm, Quota};
use redis_tests::RedisServer;

const NOW_MS: u64 = 1_700_000_000_000;

/// Commands Redis ran from inside scripts since the last reset, by name (the script calls and
/// the test's own commands left out).
fn inner_commands(conn: &mut redis::Connection) -> Vec<(String, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO");
    let mut out: Vec<(String, u64)> = info
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .filter(|(name, _)| !matches!(name.as_str(), "eval" | "evalsha" | "config" | "info" | "flushall" | "script"))
        .collect();
    out.sort();
    out
}

fn reset(conn: &mut redis::Connection) {
    let _: () = redis::cmd("FLUSHALL").query(conn).expect("FLUSHALL");
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(conn).expect("RESETSTAT");
}

fn eval(conn: &mut redis::Connection, source: &str, call: &scripts::Invocation) -> Vec<i64> {
    redis::cmd("EVAL").arg(source).arg(call.keys.len()).arg(&call.keys).arg(&call.args).query(conn).expect("EVAL")
}

/// Five rules, one of each algorithm.
const RULES: [(Algorithm, &str); 5] = [
    (Algorithm::FixedWindow, "rl:{k}:a:"),
    (Algorithm::SlidingWindow, "rl:{k}:b:"),
    (Algorithm::SlidingLog, "rl:{k}:c:"),
    (Algorithm::TokenBucket, "rl:{k}:d:"),
    (Algorithm::Gcra, "rl:{k}:e:"),
];

fn requests(q: &Quota, cost: u64) -> Vec<Request<'_>> {
    RULES.iter().map(|&(algorithm, stem)| Request { algorithm, quota: q, stem, now_ms: Some(NOW_MS), cost }).collect()
}

fn rules<'a>(reqs: &'a [Request<'a>]) -> RulesRequest<'a> {
    RulesRequest { items: reqs.iter().map(|&request| Item { request, shadow: false }).collect(), commit: true }
}

#[test]
fn the_rules_script_does_each_rules_reads_and_writes_once() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("connect");
    let q = Quota::new(5, 60_000).with_burst(5);
    // Each rule's own script, twice (state on the second), then the rules script the same way.
    reset(&mut conn);
    for _ in 0..2 {
        for r in requests(&q, 2) {
            let script = scripts::for_algorithm(r.algorithm);
            eval(&mut conn, script.source, &r.invocation_of_stem());
        }
    }
    let alone = inner_commands(&mut conn);
    reset(&mut conn);
    for _ in 0..2 {
        let reqs = requests(&q, 2);
        let reply = eval(&mut conn, rules_script::source(), &rules(&reqs).invocation());
        assert_eq!(reply[0], 1, "every rule fits: {reply:?}");
    }
    let together = inner_commands(&mut conn);
    assert_eq!(together, alone, "the rules script's commands against its rules' own");
    println!("script work: 5 rules, twice: {together:?}");
}

#[test]
fn a_request_the_rules_script_refuses_writes_nothing() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("connect");
    let q = Quota::new(5, 60_000).with_burst(5);
    reset(&mut conn);
    // Four rules that would admit 2 and one whose key is full: refused, nothing consumed.
    let full = Request { algorithm: Algorithm::Gcra, quota: &q, stem: "rl:{k}:e:", now_ms: Some(NOW_MS), cost: 5 };
    let reply = eval(&mut conn, scripts::for_algorithm(Algorithm::Gcra).source, &full.invocation_of_stem());
    assert_eq!(reply[0], 1, "the GCRA key filled: {reply:?}");
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut conn).expect("RESETSTAT");
    let keys_before: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    let reqs = requests(&q, 2);
    let reply = eval(&mut conn, rules_script::source(), &rules(&reqs).invocation());
    let read = rules(&reqs).read_reply(&reply).expect("a well-formed reply");
    assert!(!read.allowed, "{read:?}");
    assert!(read.items.iter().all(|i| !i.item.consumed), "{read:?}");
    // The rules that fitted report their standing as a peek does: all 5 left.
    for (item, (algorithm, _)) in read.items.iter().zip(RULES).take(4) {
        assert!(item.item.outcome.allowed && item.item.outcome.remaining == 5, "{algorithm}: {item:?}");
    }
    let ran = inner_commands(&mut conn);
    let writes = ["set", "incrby", "pexpire", "zadd", "zremrangebyscore", "hset", "del"];
    assert!(ran.iter().all(|(name, _)| !writes.contains(&name.as_str())), "a refused request wrote: {ran:?}");
    let keys_after: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert_eq!(keys_after, keys_before);
    println!("script work: a refused request of 5 rules ran {ran:?}");
}
