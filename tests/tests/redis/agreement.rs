//! The Rust twin and the Lua script on a real `redis-server` give identical decisions for
//! every algorithm over long generated request sequences, in client-time mode (the twin
//! reads the same clock the script receives).
//!
//! Redis expires keys by its own clock while the sequences run on a generated one. Each key's
//! TTL is exactly the time its state needs to come to rest, so an expiry is harmless as long
//! as the generated clock advances at least as fast as the real one between any two requests
//! (`generated - real` never decreases): the generator guarantees that for forward steps, and
//! gives each step [`CALL_MS`] more, since Redis reads its clock when it runs a call, not when
//! the test reads the real one (on a loaded machine a call ran late enough that a key expired
//! in Redis while the twin still counted it).
//! Scheduling jitter still separates the moment a request is sent from the moment Redis runs
//! it, so windows here are 250 ms and more; tiny windows and exact expiry are the property
//! suite's job, on the Redis model whose clock *is* the generated one. Sequences that also
//! step the clock back use slow quotas whose keys live longer than the whole sequence takes.

// Real Redis expires keys on real time, so this test measures it.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::{Algorithm, Decision, Limiter, ManualClock, Quota, RedisStore, TimeSource};
use redis_tests::RedisServer;

const BASE_MS: u64 = 1_700_000_000_000;
const REQUESTS: usize = 600;

/// How much later than the test reads real time Redis may run a call (module docs): each
/// forward step moves the generated clock on by this much more than real time moved.
const CALL_MS: i64 = 25;

/// Quotas with fractional per-millisecond rates, tiny and larger windows, burst != limit.
fn fast_quotas() -> Vec<Quota> {
    vec![
        Quota::new(5, Duration::from_secs(1)),
        Quota::new(3, Duration::from_secs(1)).with_burst(2),
        Quota::new(7, Duration::from_millis(250)).with_burst(10),
        Quota::new(100, Duration::from_secs(60)).with_burst(20),
        Quota::new(1, Duration::from_millis(300)),
    ]
}

/// Every TTL these quotas produce is at least 3 s, longer than a sequence runs.
fn slow_quotas() -> Vec<Quota> {
    vec![Quota::new(10, Duration::from_secs(60)), Quota::new(4, Duration::from_secs(30)).with_burst(6)]
}

/// `backwards`: whether the generated clock may step back (up to 500 ms).
fn generate(rng: &mut SmallRng, q: &Quota, backwards: bool) -> Vec<(i64, usize, u64)> {
    let cap = q.limit().max(q.burst());
    (0..REQUESTS)
        .map(|_| {
            let dt: i64 = match rng.random_range(0..10) {
                0..=2 => 0,
                3..=5 => rng.random_range(1..=20),
                6 => rng.random_range(1..=q.period_ms() as i64),
                7 => rng.random_range(q.period_ms() as i64..=3 * q.period_ms() as i64),
                8 if backwards => -rng.random_range(1..=500),
                _ => rng.random_range(0..=(q.period_ms() as i64 / 4).max(1)),
            };
            let key = rng.random_range(0..3);
            let cost = match rng.random_range(0..10) {
                0 => 0,
                1 => rng.random_range(0..=cap.min(q.limit()).min(q.burst())),
                _ => 1,
            };
            (dt, key, cost)
        })
        .collect()
}

async fn run_sequence(server: &RedisServer, algorithm: Algorithm, q: Quota, seed: u64, backwards: bool) -> usize {
    run_tiers(server, algorithm, &[q], None, seed, backwards, false).await
}

/// Each request is decided under one of `tiers`, drawn per request (`Limiter::check_with`; the
/// first tier is the limiter's own), by limiters named `name` or, without one, by their quota.
/// With `blocks`, both limiters are blockable and a tenth of the steps block a key instead
/// (for up to three periods, or 0 to lift the block), on both.
async fn run_tiers(
    server: &RedisServer,
    algorithm: Algorithm,
    tiers: &[Quota],
    name: Option<&str>,
    seed: u64,
    backwards: bool,
    blocks: bool,
) -> usize {
    let q = tiers[0];
    let mut rng = SmallRng::seed_from_u64(seed);
    let steps = generate(&mut rng, tiers.iter().max_by_key(|t| t.period_ms()).unwrap_or(&q), backwards);
    let mut pick = SmallRng::seed_from_u64(!seed);
    let clock = ManualClock::new(BASE_MS);
    let prefix = format!("agree{seed}");
    let built = |builder: redis_ratelimit::LimiterBuilder| {
        let builder = builder.clock(Arc::new(clock.clone()));
        let builder = if blocks { builder.blockable() } else { builder };
        match name {
            Some(name) => builder.name(name),
            None => builder,
        }
        .build()
        .expect("valid limiter")
    };
    let redis = built(
        Limiter::builder(algorithm, q)
            .redis(RedisStore::from_url(&server.url()).expect("url"))
            .time_source(TimeSource::Client)
            .key_prefix(&prefix),
    );
    let twin = built(Limiter::builder(algorithm, q).local());

    let started = Instant::now();
    let mut now = BASE_MS as i64;
    let mut high = now;
    // The most the generated clock has been ahead of the real one; it never shrinks.
    let mut lead = 0i64;
    for (i, (dt, key, cost)) in steps.into_iter().enumerate() {
        now += dt;
        let real = BASE_MS as i64 + started.elapsed().as_millis() as i64;
        if dt >= 0 {
            // Advance at least as fast as real time since any earlier request (module docs).
            now = now.max(real + lead + CALL_MS).max(high);
            lead = lead.max(now - real);
        }
        high = high.max(now);
        clock.set(now as u64);
        let key = format!("user-{key}");
        if blocks && pick.random_range(0..10) == 0 {
            let ms = if pick.random_bool(0.2) { 0 } else { pick.random_range(1..=3 * q.period_ms()) };
            let duration = std::time::Duration::from_millis(ms);
            twin.block(&key, duration).await.expect("twin blocks");
            redis.block(&key, duration).await.expect("redis blocks");
            continue;
        }
        let tier = tiers[pick.random_range(0..tiers.len())];
        let cost = cost.min(tier.capacity(algorithm));
        let expected: Decision = twin.check_n_with(&key, tier, cost).await.expect("twin decides");
        let got: Decision = redis.check_n_with(&key, tier, cost).await.expect("redis decides");
        assert_eq!(
            got,
            expected,
            "{algorithm} quota {tier:?} of {tiers:?} ({name:?}) seed {seed}: request #{i} (key {key}, cost {cost}, t={}) differs",
            now - BASE_MS as i64
        );
    }
    REQUESTS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twin_and_lua_on_real_redis_agree_for_every_algorithm() {
    let server = RedisServer::start().expect("redis-server starts");
    let mut total = 0;
    let mut seed = 1;
    for algorithm in Algorithm::ALL {
        for q in fast_quotas() {
            total += run_sequence(&server, algorithm, q, seed, false).await;
            seed += 1;
        }
        // Window keys are per window index: a clock stepping back reads an older window,
        // which Redis may or may not still hold, so only the single-state algorithms are
        // compared across backward steps.
        if !algorithm.is_windowed() {
            for q in slow_quotas() {
                total += run_sequence(&server, algorithm, q, seed, true).await;
                seed += 1;
            }
        }
    }
    println!("agreement: {total} requests over {} algorithms, all identical", Algorithm::ALL.len());
    assert!(total >= Algorithm::ALL.len() * 5 * REQUESTS);
}

/// A quota chosen per request (a client's plan) is decided alike by the twin and the script:
/// without a name each quota keeps its own state, and with one the tiers share a key's state
/// as a change of quota carries it (`Limiter::check_with`). A named limiter's state is shared
/// across tiers whose reading of it expires alike (the key's TTL is the writer's, the twin's
/// forgetting the reader's): any tiers for the windows and GCRA, one period for a sliding log, and
/// for a token bucket tiers of different periods, each its own bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_per_request_is_decided_alike_by_twin_and_script() {
    let server = RedisServer::start().expect("redis-server starts");
    let tiers = [
        Quota::new(3, Duration::from_secs(1)),
        Quota::new(8, Duration::from_secs(1)).with_burst(5),
        Quota::new(5, Duration::from_secs(2)).with_burst(2),
    ];
    let mut total = 0;
    for (seed, algorithm) in (100..).zip(Algorithm::ALL) {
        total += run_tiers(&server, algorithm, &tiers, None, seed, false, false).await;
        let shared: &[Quota] = match algorithm {
            Algorithm::SlidingLog => &tiers[..2],
            Algorithm::TokenBucket => &[tiers[0], tiers[2], Quota::new(4, Duration::from_millis(1_500))],
            _ => &tiers,
        };
        total += run_tiers(&server, algorithm, shared, Some("plans"), seed + 50, false, false).await;
    }
    println!("agreement: {total} requests under a quota per request, all identical");
    assert_eq!(total, 2 * Algorithm::ALL.len() * REQUESTS);
}

/// Blocks are decided alike too: blockable limiters on Redis and in process, on one generated
/// clock, with keys blocked for up to three periods and blocks lifted among the requests, give
/// the same decision for every request (refused while blocked, with the same Retry-After and
/// reset), under the limiter's own quota and under others chosen per request: a block stops the
/// key whatever its plan, named or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_are_decided_alike_by_twin_and_script() {
    let server = RedisServer::start().expect("redis-server starts");
    let tiers = [Quota::new(3, Duration::from_secs(1)), Quota::new(8, Duration::from_secs(1)).with_burst(5)];
    let mut total = 0;
    for (seed, algorithm) in (200..).zip(Algorithm::ALL) {
        total += run_tiers(&server, algorithm, &fast_quotas()[..1], None, seed, false, true).await;
        total += run_tiers(&server, algorithm, &tiers, None, seed + 50, false, true).await;
        let name = (algorithm != Algorithm::TokenBucket).then_some("plans");
        total += run_tiers(&server, algorithm, &tiers, name, seed + 100, false, true).await;
    }
    println!("agreement: {total} steps of requests and blocks, all identical");
    assert_eq!(total, 3 * Algorithm::ALL.len() * REQUESTS);
}

/// The all-or-nothing script of several rules and its twin (`redis_ratelimit::harness::algo::all_or_nothing`)
/// agree too: an enforcer on Redis and one in process, on the same generated clock, answer
/// every request with the same decision for every rule: verdict, remaining, Retry-After,
/// reset, and whether it consumed. The rules mix every algorithm, costs of 0 to 2 and a
/// shadow rule, over three API keys, so requests are often denied by one rule while the
/// others would admit them; a third of the requests are on the `pro` plan, whose tiers change
/// limits and, for the windows and the token bucket, periods. Three rules are blockable, and
/// now and then a key is blocked under one of them (or its block lifted), on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_all_or_nothing_script_and_its_twin_agree() {
    use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};

    let server = RedisServer::start().expect("redis-server starts");
    let key = || [KeyPart::header("x-api-key")];
    let rule = |name: &str, algorithm: Algorithm, q: Quota, cost: u64| {
        Rule::new(name, algorithm, q).key(key()).cost(cost).time_source(TimeSource::Client)
    };
    let rules = RuleSet::builder()
        .rule(
            rule("fw", Algorithm::FixedWindow, Quota::new(9, Duration::from_secs(60)), 1)
                .tier("pro", Quota::new(12, Duration::from_secs(30)))
                .blockable(true),
        )
        .rule(
            rule("sw", Algorithm::SlidingWindow, Quota::new(6, Duration::from_secs(30)), 0)
                .tier("pro", Quota::new(4, Duration::from_secs(20))),
        )
        .rule(
            rule("sl", Algorithm::SlidingLog, Quota::new(5, Duration::from_secs(30)), 1)
                .tier("pro", Quota::new(8, Duration::from_secs(30)))
                .blockable(true),
        )
        .rule(
            rule("tb", Algorithm::TokenBucket, Quota::new(4, Duration::from_secs(30)).with_burst(6), 2)
                .tier("pro", Quota::new(6, Duration::from_secs(20)).with_burst(8))
                .blockable(true),
        )
        .rule(
            rule("gcra", Algorithm::Gcra, Quota::new(10, Duration::from_secs(60)).with_burst(3), 1)
                .tier("pro", Quota::new(20, Duration::from_secs(30))),
        )
        .rule(rule("dark", Algorithm::SlidingLog, Quota::new(2, Duration::from_secs(30)), 1).shadow(true))
        .build()
        .expect("valid rules");
    let (admitted, mixed, blocks) = enforcers_agree(&server, rules, &["fw", "sl", "tb"], 11).await;
    println!(
        "agreement: {REQUESTS} multi-rule requests, {admitted} admitted, {mixed} denied by one rule while others \
         admitted, {blocks} blocks set or lifted"
    );
    assert!(mixed > 20 && admitted > 20 && blocks > 10, "mixed {mixed}, admitted {admitted}, blocks {blocks}");
}

/// Counts of one run of [`enforcers_agree`]: admitted requests, requests denied by one rule while
/// another admitted them, blocks set or lifted.
type Agreed = (usize, usize, usize);

/// An enforcer of `rules` on Redis and one in process, on one generated clock, answer every one
/// of [`REQUESTS`] requests (three API keys, a third on the `pro` plan) with the same decision
/// for every rule: verdict, remaining, Retry-After, reset, and whether it consumed. Now and then
/// a key is blocked under one of the `blockable` rules, or its block lifted, on both.
async fn enforcers_agree(
    server: &RedisServer,
    rules: redis_ratelimit::rules::RuleSet,
    blockable: &[&str],
    seed: u64,
) -> Agreed {
    use redis_ratelimit::enforce::{Enforcer, Ruling};
    let clock = ManualClock::new(BASE_MS);
    let redis = Enforcer::builder(rules.clone())
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .clock(Arc::new(clock.clone()))
        .key_prefix(&format!("batch{seed}"))
        .build()
        .expect("valid enforcer");
    let twin = Enforcer::builder(rules).clock(Arc::new(clock.clone())).build().expect("valid enforcer");

    let mut rng = SmallRng::seed_from_u64(seed);
    let started = Instant::now();
    let (mut now, mut lead) = (BASE_MS as i64, 0i64);
    let (mut mixed, mut admitted, mut blocks) = (0, 0, 0);
    for i in 0..REQUESTS {
        now += match rng.random_range(0..10) {
            0..=3 => 0,
            4..=7 => rng.random_range(1..=400),
            _ => rng.random_range(1_000..=8_000),
        };
        // Never behind real time by more than before (see the module docs on expiry).
        let real = BASE_MS as i64 + started.elapsed().as_millis() as i64;
        now = now.max(real + lead + CALL_MS);
        lead = lead.max(now - real);
        clock.set(now as u64);
        let mut req =
            http::Request::builder().header("x-api-key", format!("k{}", rng.random_range(0..3))).body(()).unwrap();
        if rng.random_range(0..3) == 0 {
            req.extensions_mut().insert(redis_ratelimit::rules::Plan("pro".into()));
        }
        if !blockable.is_empty() && rng.random_range(0..15) == 0 {
            let rule = blockable[rng.random_range(0..blockable.len())];
            let ms = if rng.random_bool(0.2) { 0 } else { rng.random_range(1..=20_000) };
            let duration = std::time::Duration::from_millis(ms);
            redis.block(rule, &req, duration).await.expect("redis blocks");
            twin.block(rule, &req, duration).await.expect("twin blocks");
            blocks += 1;
        }
        let (Ruling::Decided(got), Ruling::Decided(want)) =
            (redis.check(&req).await.expect("redis decides"), twin.check(&req).await.expect("twin decides"))
        else {
            panic!("request #{i}: both enforcers decide");
        };
        assert_eq!(got.allowed, want.allowed, "request #{i} at t={}", now - BASE_MS as i64);
        for (g, w) in got.rules.iter().zip(&want.rules) {
            let strip = |d: &redis_ratelimit::Decision| {
                (d.allowed, d.remaining, d.retry_after.as_millis(), d.reset_after.as_millis())
            };
            assert_eq!(
                (strip(&g.decision), g.consumed),
                (strip(&w.decision), w.consumed),
                "request #{i}, rule {}, t={}",
                g.rule,
                now - BASE_MS as i64
            );
        }
        admitted += got.allowed as usize;
        mixed += (!got.allowed && got.rules.iter().any(|r| !r.shadow && r.decision.allowed)) as usize;
    }
    (admitted, mixed, blocks)
}

/// A request that one rule decides alone goes to that rule's own script, not the all-or-nothing
/// one: for every algorithm, as an enforced rule (blockable, now and then blocked) and as a
/// shadow rule, an enforcer on Redis and one in process decide every request alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_one_rule_decides_is_decided_alike_by_its_own_script_and_the_twin() {
    use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};

    let server = RedisServer::start().expect("redis-server starts");
    let mut total = (0, 0);
    for (seed, algorithm) in (300..).zip(Algorithm::ALL) {
        for shadow in [false, true] {
            let rule = Rule::new("one", algorithm, Quota::new(4, Duration::from_secs(20)).with_burst(5))
                .key([KeyPart::header("x-api-key")])
                .cost(1 + seed % 2)
                .time_source(TimeSource::Client)
                .tier("pro", Quota::new(6, Duration::from_secs(20)))
                .shadow(shadow)
                .blockable(!shadow);
            let rules = RuleSet::builder().rule(rule).build().expect("valid rules");
            let blockable: &[&str] = if shadow { &[] } else { &["one"] };
            let (admitted, _, blocks) = enforcers_agree(&server, rules, blockable, seed + 10 * u64::from(shadow)).await;
            total = (total.0 + admitted, total.1 + blocks);
            assert!(admitted > 0 && (admitted < REQUESTS || shadow), "{algorithm}: {admitted} admitted");
        }
    }
    println!("agreement: {} one-rule requests, {} admitted, {} blocks set or lifted", 10 * REQUESTS, total.0, total.1);
}
