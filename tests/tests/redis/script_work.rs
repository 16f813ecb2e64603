//! What the scripts ask of Redis, counted by Redis (`INFO commandstats`) on a `redis-server`
//! this test starts: the all-or-nothing script of several rules does each rule's own reads and
//! writes once, as the rules' own scripts would, and a request it refuses writes nothing.

use redis_ratelimit::harness::rules_script::{self, RuleCall, RulesRequest};
use redis_ratelimit::harness::scripts::{self, Request};
use redis_ratelimit::{Algorithm, Quota};
use redis_tests::RedisServer;
use std::time::Duration;

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
    RulesRequest {
        items: reqs.iter().map(|&request| RuleCall { request, shadow: false, block: None }).collect(),
        commit: true,
    }
}

#[test]
fn the_rules_script_does_each_rules_reads_and_writes_once() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("connect");
    let q = Quota::new(5, Duration::from_secs(60)).with_burst(5);
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
    let q = Quota::new(5, Duration::from_secs(60)).with_burst(5);
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

/// A request that one rule decides alone costs Redis that rule's own script: the enforcer
/// sends it instead of the all-or-nothing script, which only a request of several rules loads.
#[test]
fn a_request_of_one_rule_is_its_own_script_and_one_of_two_is_the_rules_script() {
    use redis_ratelimit::enforce::Enforcer;
    use redis_ratelimit::rules::{KeyPart, Match, Rule, RuleSet};
    use redis_ratelimit::RedisStore;

    let sha1 = |source: &str| -> String {
        let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, source.as_bytes());
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    };
    let (own, together) = (sha1(scripts::for_algorithm(Algorithm::Gcra).source), sha1(rules_script::source()));
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("connect");
    let loaded = |conn: &mut redis::Connection| -> Vec<bool> {
        redis::cmd("SCRIPT").arg("EXISTS").arg(&own).arg(&together).query(conn).expect("SCRIPT EXISTS")
    };
    let rules = RuleSet::builder()
        .rule(Rule::new("per-key", Algorithm::Gcra, Quota::per_second(5)).key([KeyPart::header("x-api-key")]))
        .rule(Rule::new("login", Algorithm::FixedWindow, Quota::per_second(5)).matching(Match::any().path("/login")))
        .build()
        .expect("rules");
    let enforcer =
        Enforcer::builder(rules).redis(RedisStore::from_url(&server.url()).expect("url")).build().expect("valid");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let ask = |path: &str| {
        let req = http::Request::builder().uri(path).header("x-api-key", "k").body(()).expect("request");
        rt.block_on(enforcer.check(&req)).expect("decides")
    };
    assert_eq!(loaded(&mut conn), [false, false]);
    let _verdict = ask("/api");
    assert_eq!(loaded(&mut conn), [true, false], "one rule: the rule's own script, and no other");
    let _verdict = ask("/login");
    assert_eq!(loaded(&mut conn), [true, true], "two rules: the all-or-nothing script");
}
