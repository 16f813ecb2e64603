//! The library deciding with the Redis module (`RedisStore::with_module`), on a `redis-server`
//! this test starts with the module loaded: every algorithm decides what its script decides,
//! batching pipelines the commands, no script is ever sent for a decision, and a server
//! without the module is named as such instead of being answered by scripts.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::modes::{Batching, Leases};
use redis_ratelimit::{Algorithm, Error, Limiter, ManualClock, Quota, RedisStore, TimeSource};
use redis_tests::RedisServer;

/// How many calls the server has run of each command whose name starts with `prefix`.
fn calls(server: &RedisServer, prefix: &str) -> u64 {
    let mut conn = server.client().expect("connect");
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn).expect("INFO");
    info.lines()
        .filter(|l| l.starts_with(&format!("cmdstat_{prefix}")))
        .filter_map(|l| l.split(',').find_map(|kv| kv.split("calls=").nth(1)?.parse::<u64>().ok()))
        .sum()
}

fn with_module(server: &RedisServer) -> RedisStore {
    RedisStore::from_url(&server.url()).expect("url").with_module().expect("a new store")
}

fn module_server() -> RedisServer {
    let module = redis_tests::build_module("dev").expect("the Redis module builds");
    RedisServer::start_real_with_module(&module).expect("redis-server loads the module")
}

#[tokio::test]
async fn every_algorithm_decides_with_the_module_as_with_its_script() {
    let server = module_server();
    let clock = ManualClock::new(1_800_000_000_000);
    for algorithm in Algorithm::ALL {
        let quota = Quota::new(5, 1_000).with_burst(4);
        let limiter = |store: RedisStore, prefix: &str| {
            Limiter::builder(algorithm, quota)
                .redis(store)
                .key_prefix(prefix)
                .clock(Arc::new(clock.clone()))
                .time_source(TimeSource::Client)
                .build()
                .expect("valid")
        };
        let scripts = limiter(RedisStore::from_url(&server.url()).expect("url"), "s");
        let module = limiter(with_module(&server), "m");
        let before = (calls(&server, "evalsha"), calls(&server, "ratelimit."));
        let mut rng = SmallRng::seed_from_u64(7);
        let mut admitted = 0;
        for i in 0..300 {
            clock.advance(rng.random_range(0..120));
            let (key, cost) = (format!("k{}", rng.random_range(0..3)), rng.random_range(0..=3));
            let (s, m) = (scripts.check(&key, cost).await.expect("decides"), module.check(&key, cost).await);
            let m = m.expect("the module decides");
            let fields = |d: &redis_ratelimit::Decision| (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms);
            assert_eq!(fields(&s), fields(&m), "{algorithm} request {i}: {key} cost {cost}");
            assert_eq!((s.source, s.degraded), (m.source, m.degraded), "{algorithm} request {i}");
            admitted += u32::from(m.allowed && cost > 0);
        }
        let sent = (calls(&server, "evalsha") - before.0, calls(&server, "ratelimit.") - before.1);
        assert_eq!(sent, (300, 300), "{algorithm}: the script store's EVALSHAs and the module store's commands");
        assert!((60..240).contains(&admitted), "{algorithm}: {admitted} of 300 admitted, a sequence that tests little");
        println!("module store: {algorithm}: 300 decisions equal to the script's, {admitted} admitted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batching_over_the_module_pipelines_its_commands_and_decides_them_as_one_by_one() {
    let server = module_server();
    let l = Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(5))
        .redis(with_module(&server))
        .batching(Batching::default())
        .build()
        .expect("valid");
    let results: Vec<bool> = futures::future::join_all((0..8).map(|_| l.check("one", 1)))
        .await
        .into_iter()
        .map(|d| d.expect("decides").allowed)
        .collect();
    assert_eq!(results.iter().filter(|&&a| a).count(), 5, "{results:?}");
    assert_eq!(calls(&server, "ratelimit.sl"), 8, "one command per check");
    assert_eq!(calls(&server, "eval"), 0, "no script");
}

#[tokio::test]
async fn a_server_without_the_module_is_named_and_never_answered_by_scripts() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let l =
        Limiter::builder(Algorithm::Gcra, Quota::per_second(10)).redis(with_module(&server)).build().expect("valid");
    for _ in 0..2 {
        match l.check("k", 1).await {
            Err(e @ Error::ModuleNotLoaded { .. }) => {
                let says = e.to_string();
                for part in ["ratelimit", "RATELIMIT.GCRA", "--loadmodule", "MODULE LOAD", "with_module()"] {
                    assert!(says.contains(part), "{says:?} names {part}");
                }
                assert!(!says.contains("redis://"), "where, as host and port: {says}");
            }
            other => panic!("a store without its module decided: {other:?}"),
        }
    }
    assert_eq!(calls(&server, "eval"), 0, "no script was sent instead");
}

#[test]
fn what_the_module_has_no_command_for_is_refused_when_the_limiter_is_built() {
    let store = || RedisStore::from_url("redis://127.0.0.1:1/").expect("url").with_module().expect("a new store");
    let q = Quota::per_second(10).with_burst(10);
    for (builder, says) in [
        (Limiter::builder(Algorithm::Gcra, q).redis(store()).blockable(), "a key's block"),
        (Limiter::builder(Algorithm::Gcra, q).redis(store()).leases(Leases::default()), "leases"),
    ] {
        match builder.build() {
            Err(Error::Config { field: "with_module", message }) => assert!(message.contains(says), "{message}"),
            other => panic!("built: {other:?}"),
        }
    }
}

/// The enforcement point decides a request one rule decides with the module's command, as it
/// does with the rule's script; a request two rules decide needs the rules command, which the
/// module does not have yet, and is refused naming that.
#[tokio::test]
async fn the_enforcer_decides_one_rule_with_the_module_and_refuses_several_by_name() {
    use redis_ratelimit::enforce::{Enforcer, Verdict};
    use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};

    let server = module_server();
    let clock = ManualClock::new(1_800_000_000_000);
    let rule = |name: &str, algorithm| {
        Rule::new(name, algorithm, Quota::new(4, 2_000).with_burst(5))
            .key([KeyPart::header("x-api-key")])
            .time_source(TimeSource::Client)
    };
    let enforcer = |rules: RuleSet, store: RedisStore, prefix: &str| {
        Enforcer::builder(rules).redis(store).clock(Arc::new(clock.clone())).key_prefix(prefix).build().expect("valid")
    };
    let request = |key: u64| http::Request::builder().header("x-api-key", format!("k{key}")).body(()).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    for algorithm in Algorithm::ALL {
        let one = || RuleSet::builder().rule(rule("one", algorithm)).build().expect("valid rules");
        let scripts = enforcer(one(), RedisStore::from_url(&server.url()).expect("url"), "es");
        let module = enforcer(one(), with_module(&server), "em");
        for i in 0..100 {
            clock.advance(rng.random_range(0..200));
            let key = rng.random_range(0..2);
            let (Verdict::Decided(s), Verdict::Decided(m)) = (
                scripts.check(&request(key)).await.expect("the scripts decide"),
                module.check(&request(key)).await.expect("the module decides"),
            ) else {
                panic!("{algorithm} request {i}: both decide");
            };
            let fields = |d: &redis_ratelimit::Decision| (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms);
            assert_eq!(fields(&s.rules[0].decision), fields(&m.rules[0].decision), "{algorithm} request {i}");
        }
    }
    let two = RuleSet::builder().rule(rule("a", Algorithm::Gcra)).rule(rule("b", Algorithm::FixedWindow));
    let both = enforcer(two.build().expect("valid rules"), with_module(&server), "e2");
    let refused = both.check(&request(0)).await.expect_err("no rules command yet").to_string();
    assert!(refused.contains("several rules decided together") && refused.contains("with_module"), "{refused}");
}
