//! The library deciding with the Redis module (`RedisStore::with_module`), on a `redis-server`
//! this test starts with the module loaded: every algorithm decides what its script decides
//! (reconciled costs too, by the scripts on the module's state),
//! batching pipelines the commands, no script is ever sent for a decision, and a server
//! without the module is named as such instead of being answered by scripts.

use std::sync::Arc;
use std::time::Duration;

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
        let quota = Quota::new(5, Duration::from_secs(1)).with_burst(4);
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
        let (mut admitted, mut reconciled) = (0, 0);
        for i in 0..300 {
            clock.advance(rng.random_range(0..120));
            let (key, cost) = (format!("k{}", rng.random_range(0..3)), rng.random_range(0..=3));
            let (s, m) = (scripts.check_n(&key, cost).await.expect("decides"), module.check_n(&key, cost).await);
            let m = m.expect("the module decides");
            let fields = |d: &redis_ratelimit::Decision| {
                (d.allowed, d.remaining, d.retry_after.as_millis(), d.reset_after.as_millis())
            };
            assert_eq!(fields(&s), fields(&m), "{algorithm} request {i}: {key} cost {cost}");
            assert_eq!((s.source, s.degraded), (m.source, m.degraded), "{algorithm} request {i}");
            admitted += u32::from(m.allowed && cost > 0);
            // Now and then the request cost more or less than it was checked at: the debit or
            // refund script acts on what the module wrote, and the module reads what it wrote.
            if rng.random_ratio(1, 8) {
                let actual = rng.random_range(0..=6);
                let (s, m) = (scripts.reconcile(&key, cost, actual).await, module.reconcile(&key, cost, actual).await);
                assert_eq!(
                    s.expect("reconciled"),
                    m.expect("reconciled"),
                    "{algorithm} request {i}: {cost} -> {actual}"
                );
                reconciled += u64::from(actual != cost);
            }
        }
        let sent = (calls(&server, "evalsha") - before.0, calls(&server, "ratelimit.") - before.1);
        // Each store sends a reconciliation as a script, whichever decides.
        assert_eq!(
            sent,
            (300 + 2 * reconciled, 300),
            "{algorithm}: the script store's EVALSHAs and the module store's commands"
        );
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
    let results: Vec<bool> = futures::future::join_all((0..8).map(|_| l.check("one")))
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
        match l.check("k").await {
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

/// A leasing limiter on the module leases with `RATELIMIT.LEASE.GCRA` or `.LEASE.TB` and
/// decides as the same limiter on the lease scripts: 300 requests of three instances, each its
/// own limiter spending its own leases, answered alike.
#[tokio::test]
async fn a_leasing_limiter_decides_with_the_module_as_with_scripts() {
    let server = module_server();
    let clock = ManualClock::new(1_800_000_000_000);
    for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
        let limiter = |store: RedisStore, prefix: &str| {
            Limiter::builder(algorithm, Quota::new(20, Duration::from_secs(1)).with_burst(20))
                .redis(store)
                .key_prefix(prefix)
                .clock(Arc::new(clock.clone()))
                .time_source(TimeSource::Client)
                .leases(Leases::default())
                .build()
                .expect("valid")
        };
        let scripts: Vec<Limiter> =
            (0..3).map(|_| limiter(RedisStore::from_url(&server.url()).expect("url"), "ls")).collect();
        let module: Vec<Limiter> = (0..3).map(|_| limiter(with_module(&server), "lm")).collect();
        let before = (calls(&server, "evalsha"), calls(&server, "ratelimit.lease"));
        let mut rng = SmallRng::seed_from_u64(3);
        let mut admitted = 0;
        for i in 0..300 {
            clock.advance(rng.random_range(0..30));
            let (instance, key) = (rng.random_range(0..3), format!("k{}", rng.random_range(0..2)));
            let s = scripts[instance].check(&key).await.expect("decides");
            let m = module[instance].check(&key).await.expect("the module decides");
            let fields = |d: &redis_ratelimit::Decision| (d.allowed, d.remaining, d.retry_after.as_millis(), d.source);
            assert_eq!(fields(&s), fields(&m), "{algorithm} request {i}: instance {instance} {key}");
            admitted += u32::from(m.allowed);
        }
        let leased = calls(&server, "ratelimit.lease") - before.1;
        assert!(leased > 10 && leased < 300, "{algorithm}: {leased} lease commands for 300 requests");
        assert_eq!(calls(&server, "evalsha") - before.0, leased, "{algorithm}: the scripts' store leased as often");
        assert!((100..300).contains(&admitted), "{algorithm}: {admitted} of 300 admitted");
    }
}

/// A blockable limiter on the module decides each request behind its key's block with
/// `RATELIMIT.RULES` (the request its one rule), as the blockable script does on scripts:
/// 200 requests per algorithm, with blocks set on both now and then, answered alike.
#[tokio::test]
async fn a_blockable_limiter_decides_behind_its_blocks_with_the_module_as_with_scripts() {
    let server = module_server();
    let clock = ManualClock::new(1_800_000_000_000);
    for algorithm in Algorithm::ALL {
        let limiter = |store: RedisStore, prefix: &str| {
            Limiter::builder(algorithm, Quota::new(5, Duration::from_secs(1)).with_burst(4))
                .redis(store)
                .key_prefix(prefix)
                .clock(Arc::new(clock.clone()))
                .time_source(TimeSource::Client)
                .blockable()
                .build()
                .expect("valid")
        };
        let scripts = limiter(RedisStore::from_url(&server.url()).expect("url"), "bs");
        let module = limiter(with_module(&server), "bm");
        let before = calls(&server, "ratelimit.rules");
        let mut rng = SmallRng::seed_from_u64(5);
        let mut blocked = 0;
        for i in 0..200 {
            clock.advance(rng.random_range(0..120));
            let (key, cost) = (format!("k{}", rng.random_range(0..3)), rng.random_range(0..=3));
            if rng.random_bool(0.05) {
                let ms = rng.random_range(1..800);
                for l in [&scripts, &module] {
                    l.block(&key, std::time::Duration::from_millis(ms)).await.expect("blocks");
                }
            }
            let (s, m) = (scripts.check_n(&key, cost).await.expect("decides"), module.check_n(&key, cost).await);
            let m = m.expect("the module decides");
            let fields = |d: &redis_ratelimit::Decision| {
                (d.allowed, d.remaining, d.retry_after.as_millis(), d.reset_after.as_millis())
            };
            assert_eq!(fields(&s), fields(&m), "{algorithm} request {i}: {key} cost {cost}");
            blocked += u32::from(!m.allowed && m.remaining == 0 && cost == 0);
        }
        assert_eq!(calls(&server, "ratelimit.rules") - before, 200, "{algorithm}: every request one RATELIMIT.RULES");
        assert!(blocked > 0, "{algorithm}: no request met a block");
    }
    // Batched: one pipeline of the rules command, one request each, behind the block.
    let l = Limiter::builder(Algorithm::FixedWindow, Quota::per_minute(5))
        .redis(with_module(&server))
        .batching(Batching::default())
        .blockable()
        .build()
        .expect("valid");
    let admitted = |l: Limiter, key: &'static str| async move {
        let all = futures::future::join_all((0..8).map(|_| l.check(key))).await;
        all.into_iter().filter(|d| d.as_ref().expect("decides").allowed).count()
    };
    assert_eq!(admitted(l.clone(), "one").await, 5, "five of eight admitted");
    l.block("two", std::time::Duration::from_secs(60)).await.expect("blocks");
    assert_eq!(admitted(l.clone(), "two").await, 0, "none admitted while blocked");
}

/// The enforcement point decides with the module's commands as it does with the scripts: a
/// request one rule decides with the rule's command, a request several rules decide with
/// `RATELIMIT.RULES` (all of them or none consumed), every rule's answer equal.
#[tokio::test]
async fn the_enforcer_decides_one_rule_and_several_with_the_module_as_with_scripts() {
    use redis_ratelimit::enforce::{Enforcer, Ruling};
    use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};

    let server = module_server();
    let clock = ManualClock::new(1_800_000_000_000);
    let rule = |name: &str, algorithm, limit| {
        Rule::new(name, algorithm, Quota::new(limit, Duration::from_secs(2)).with_burst(limit))
            .key([KeyPart::header("x-api-key")])
            .time_source(TimeSource::Client)
    };
    let enforcer = |rules: RuleSet, store: RedisStore, prefix: &str| {
        Enforcer::builder(rules).redis(store).clock(Arc::new(clock.clone())).key_prefix(prefix).build().expect("valid")
    };
    let request = |key: u64| http::Request::builder().header("x-api-key", format!("k{key}")).body(()).unwrap();
    let mut sets: Vec<(String, Vec<Rule>)> =
        Algorithm::ALL.iter().map(|&a| (format!("{a}"), vec![rule("one", a, 4)])).collect();
    for (i, &a) in Algorithm::ALL.iter().enumerate() {
        let b = Algorithm::ALL[(i + 2) % Algorithm::ALL.len()];
        let rules = vec![rule("a", a, 5), rule("b", b, 3).blockable(true), rule("c", a, 2).shadow(true)];
        sets.push((format!("{a} + {b} + shadow {a}"), rules));
    }
    let mut rng = SmallRng::seed_from_u64(11);
    for (n, (name, rules)) in sets.into_iter().enumerate() {
        let set = || rules.iter().cloned().fold(RuleSet::builder(), |b, r| b.rule(r)).build().expect("valid rules");
        let scripts = enforcer(set(), RedisStore::from_url(&server.url()).expect("url"), &format!("es{n}"));
        let module = enforcer(set(), with_module(&server), &format!("em{n}"));
        let (mut allowed, mut denied) = (0, 0);
        for i in 0..100 {
            clock.advance(rng.random_range(0..200));
            let key = rng.random_range(0..2);
            let (Ruling::Decided(s), Ruling::Decided(m)) = (
                scripts.check(&request(key)).await.expect("the scripts decide"),
                module.check(&request(key)).await.expect("the module decides"),
            ) else {
                panic!("{name} request {i}: both decide");
            };
            let fields = |d: &redis_ratelimit::Decision| {
                (d.allowed, d.remaining, d.retry_after.as_millis(), d.reset_after.as_millis())
            };
            assert_eq!(s.rules.len(), m.rules.len(), "{name} request {i}");
            for (rs, rm) in s.rules.iter().zip(&m.rules) {
                assert_eq!(fields(&rs.decision), fields(&rm.decision), "{name} request {i}");
            }
            let all = m.rules.iter().all(|r| r.decision.allowed);
            allowed += u32::from(all);
            denied += u32::from(!all);
        }
        assert!(
            allowed > 10 && denied > 10,
            "{name}: {allowed} allowed, {denied} denied: a sequence that tests little"
        );
    }
    assert!(calls(&server, "ratelimit.rules") >= 500, "several rules went to the rules command");
}

#[tokio::test]
async fn a_concurrency_limiter_holds_its_permits_with_the_module_and_sends_no_script() {
    use redis_ratelimit::{Acquired, ConcurrencyLimiter};
    let server = module_server();
    let limiter = |store: RedisStore| {
        ConcurrencyLimiter::builder(2, Duration::from_secs(30)).redis(store).name("cm").build().expect("valid")
    };
    // Two instances with the module, and one with the script, all counting the same holders.
    let (one, two, scripted) = (
        limiter(with_module(&server)),
        limiter(with_module(&server)),
        limiter(RedisStore::from_url(&server.url()).expect("url")),
    );
    // `eval` counts EVAL and EVALSHA alike.
    let before = (calls(&server, "eval"), calls(&server, "ratelimit.concurrency"));
    let Acquired::Held(a) = one.acquire("k").await.expect("decides") else { panic!("the first permit") };
    let Acquired::Held(b) = two.acquire("k").await.expect("decides") else { panic!("the second permit") };
    let Acquired::Full(full) = one.acquire("k").await.expect("decides") else { panic!("a third of two") };
    assert_eq!((full.remaining, full.allowed), (0, false));
    assert_eq!(two.state("k").await.expect("reads").remaining, 0);
    assert!(a.release().await.expect("released"));
    let Acquired::Held(c) = two.acquire("k").await.expect("decides") else { panic!("the freed permit") };
    assert!(b.release().await.expect("released") && c.release().await.expect("released"));
    let sent = (calls(&server, "eval") - before.0, calls(&server, "ratelimit.concurrency") - before.1);
    assert_eq!(sent, (0, 8), "the module store's calls: no script, one command per call");
    // The script store reads what the module wrote: every permit free again.
    assert_eq!(scripted.state("k").await.expect("reads").remaining, 2);
}
