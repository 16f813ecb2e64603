//! The round-trip modes through the library, on a Redis server this test starts: each saves the
//! calls it says it saves, decides what it says it decides, and a configuration that cannot work
//! is refused by name. Calls are counted with Redis's own `INFO commandstats` (which the model
//! does not keep, so these run on a real `redis-server` always).

use std::sync::Arc;
use std::time::Duration;

use redis_ratelimit::modes::{Batching, DenialCache, Leases};
use redis_ratelimit::{Algorithm, Limiter, ManualClock, Quota, RedisStore, Source};
use redis_tests::RedisServer;

/// EVAL and EVALSHA calls the server has run: the limiter's round trips.
fn script_calls(server: &RedisServer) -> u64 {
    let mut conn = server.client().expect("connect");
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn).expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_eval:") || l.starts_with("cmdstat_evalsha:"))
        .filter_map(|l| l.split(',').find_map(|kv| kv.split("calls=").nth(1)?.parse::<u64>().ok()))
        .sum()
}

fn builder(server: &RedisServer, algorithm: Algorithm, quota: Quota, prefix: &str) -> redis_ratelimit::LimiterBuilder {
    Limiter::builder(algorithm, quota).redis(RedisStore::from_url(&server.url()).expect("url")).key_prefix(prefix)
}

#[tokio::test]
async fn leases_decide_a_busy_key_locally_and_never_beyond_its_burst() {
    let server = RedisServer::start_real().expect("redis-server starts");
    for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
        // 100 per minute, burst 50: a 600 ms lease leaves one unit of the burst unused.
        let quota = Quota::per_minute(100).with_burst(50);
        let leases = Leases::default().with_lifetime(Duration::from_millis(600)).with_max_units(20);
        let l =
            builder(&server, algorithm, quota, &format!("lease-{algorithm}")).leases(leases).build().expect("valid");
        let before = script_calls(&server);
        let mut admitted = 0;
        let mut sources = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let d = l.check("busy").await.expect("decides");
            admitted += d.allowed as u64;
            sources.insert(d.source);
        }
        let calls = script_calls(&server) - before;
        assert!(admitted <= 50, "{algorithm}: {admitted} admitted, beyond the burst of 50");
        assert!(admitted >= 40, "{algorithm}: only {admitted} of the burst admitted");
        assert!((1..=20).contains(&calls), "{algorithm}: {calls} calls for 200 decisions");
        assert_eq!(sources.into_iter().collect::<Vec<_>>(), [Source::Lease], "{algorithm}");
        println!("modes: {algorithm} with leases: 200 decisions, {admitted} admitted, {calls} calls to Redis");
    }
}

#[tokio::test]
async fn the_denial_cache_answers_a_denied_key_without_a_call_until_its_retry_after() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let clock = ManualClock::new(1_800_000_000_000);
    let quota = Quota::per_minute(3);
    let l = builder(&server, Algorithm::SlidingLog, quota, "deny")
        .denial_cache(DenialCache::default().with_clock_tolerance_ppm(0))
        .clock(Arc::new(clock.clone()))
        .time_source(redis_ratelimit::TimeSource::Client)
        .build()
        .expect("valid");
    for _ in 0..3 {
        assert!(l.check("k").await.expect("decides").allowed);
    }
    let denied = l.check("k").await.expect("decides");
    assert_eq!((denied.allowed, denied.source, denied.retry_after.as_millis()), (false, Source::Store, 60_000));
    let before = script_calls(&server);
    clock.advance(59_999);
    let cached = l.check("k").await.expect("decides");
    assert_eq!((cached.allowed, cached.source, cached.retry_after.as_millis()), (false, Source::DenialCache, 1));
    assert!(before >= 4, "the four checks so far were calls: {before}");
    assert_eq!(script_calls(&server), before, "a cached denial is no call");
    clock.advance(1);
    let again = l.check("k").await.expect("decides");
    assert_eq!((again.allowed, again.source), (true, Source::Store), "at its Retry-After Redis is asked and admits");
    println!("modes: the denial cache answered until Redis's Retry-After, then asked again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batching_sends_concurrent_checks_together_and_decides_them_as_one_by_one() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let quota = Quota::per_minute(100);
    let l =
        builder(&server, Algorithm::SlidingLog, quota, "batch").batching(Batching::default()).build().expect("valid");
    let _decided = l.check("warm").await.expect("decides");
    let before = script_calls(&server);
    let checks: Vec<_> = (0..300)
        .map(|i| {
            let l = l.clone();
            tokio::spawn(async move { l.check(&format!("k{}", i % 3)).await.expect("decides") })
        })
        .collect();
    let mut admitted = 0;
    for c in checks {
        let d = c.await.expect("task");
        assert_eq!(d.source, Source::Store);
        admitted += d.allowed as u64;
    }
    let calls = script_calls(&server) - before;
    // Three keys of 100 per minute: all 300 fit.
    assert_eq!(admitted, 300, "every check fits three keys' budgets");
    assert!((1..300).contains(&calls), "{calls} calls for 300 concurrent checks");
    // Decisions as one by one: of eight checks of a key allowed five per minute, five pass.
    let l = builder(&server, Algorithm::SlidingLog, Quota::per_minute(5), "batch-deny")
        .batching(Batching::default())
        .build()
        .expect("valid");
    let results: Vec<bool> = futures::future::join_all((0..8).map(|_| l.check("one")))
        .await
        .into_iter()
        .map(|d| d.expect("decides").allowed)
        .collect();
    assert_eq!(results.iter().filter(|&&a| a).count(), 5, "{results:?}");
    println!("modes: 300 concurrent checks went to Redis in {calls} calls");
}

#[test]
fn a_mode_that_cannot_work_is_refused_by_name() {
    let store = || RedisStore::from_url("redis://127.0.0.1:1/").expect("url");
    let q = Quota::per_second(10);
    let refused = |b: redis_ratelimit::LimiterBuilder| match b.build() {
        Err(e) => format!("{}: {}", e.field(), e.message()),
        other => panic!("built: {other:?}"),
    };
    let e = refused(Limiter::builder(Algorithm::SlidingLog, q).redis(store()).leases(Leases::default()));
    assert!(e.starts_with("leases:") && e.contains("sliding-log") && e.contains("cannot lease"), "{e}");
    let e = refused(Limiter::builder(Algorithm::FixedWindow, q).redis(store()).leases(Leases::default()));
    assert!(e.contains("fixed-window"), "{e}");
    let e = refused(
        Limiter::builder(Algorithm::Gcra, q).redis(store()).leases(Leases::default()).batching(Batching::default()),
    );
    assert!(e.starts_with("batching:") && e.contains("leases"), "{e}");
    let e = refused(Limiter::builder(Algorithm::Gcra, q).leases(Leases::default()));
    assert!(e.contains("need a Redis store"), "{e}");
    let e = refused(
        Limiter::builder(Algorithm::Gcra, q)
            .redis(store())
            .leases(Leases::default().with_lifetime(Duration::from_secs(1))),
    );
    assert!(e.starts_with("leases.lifetime:") && e.contains("could hold nothing"), "{e}");
    let e =
        refused(Limiter::builder(Algorithm::Gcra, q).redis(store()).batching(Batching::default().with_max_batch(0)));
    assert!(e.starts_with("batching.max_batch:"), "{e}");
    let e = refused(
        Limiter::builder(Algorithm::Gcra, q).redis(store()).denial_cache(DenialCache::default().with_max_keys(0)),
    );
    assert!(e.starts_with("denial_cache.max_keys:"), "{e}");
}

/// The modes serve the limiter's own quota; a request under another (`Limiter::check_with`) is
/// one script call of its own, decided under its quota: a cached denial of the limiter's quota
/// does not deny it, a lease does not answer it, and a batch does not carry it under the wrong
/// quota. (Without a name the other quota has state of its own, so each mode, were it to
/// answer, would answer wrongly.)
#[tokio::test]
async fn a_quota_per_request_is_decided_by_redis_under_that_quota_whatever_the_mode() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let (own, larger) = (Quota::per_minute(2), Quota::per_minute(4));
    type Mode = fn(redis_ratelimit::LimiterBuilder) -> redis_ratelimit::LimiterBuilder;
    let modes: [(&str, Mode); 3] = [
        ("denials", |b| b.denial_cache(DenialCache::default())),
        ("leases", |b| b.leases(Leases::default())),
        ("batching", |b| b.batching(Batching::default())),
    ];
    for (mode, with) in modes {
        let l = with(builder(&server, Algorithm::Gcra, own, mode)).build().expect("valid");
        let mut own_admitted = 0;
        for _ in 0..3 {
            own_admitted += l.check("k").await.expect("decides").allowed as u64;
        }
        // Leases leave a part of a small burst unused; the third request is denied either way
        // (for the denial cache, a denial it now holds).
        assert!((1..=2).contains(&own_admitted), "{mode}: {own_admitted}");
        let before = script_calls(&server);
        let mut admitted = Vec::new();
        for _ in 0..5 {
            let d = l.check_with("k", larger).await.expect("decides");
            assert_eq!((d.source, d.capacity), (Source::Store, 4), "{mode}: {d:?}");
            admitted.push(d.allowed);
        }
        assert_eq!(admitted, [true, true, true, true, false], "{mode}");
        assert_eq!(script_calls(&server) - before, 5, "{mode}: one call per request under another quota");
    }
}

/// A reset reaches past the modes: the denial cache forgets the key's denial and the leases
/// drop its lease, so the next request is decided afresh, and admitted.
#[tokio::test]
async fn a_reset_clears_what_the_modes_hold_for_the_key() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let quota = Quota::per_minute(2);
    type Mode = fn(redis_ratelimit::LimiterBuilder) -> redis_ratelimit::LimiterBuilder;
    let modes: [(&str, Mode); 2] = [
        ("reset-denials", |b| b.denial_cache(DenialCache::default())),
        ("reset-leases", |b| b.leases(Leases::default())),
    ];
    for (mode, with) in modes {
        let l = with(builder(&server, Algorithm::Gcra, quota, mode)).build().expect("valid");
        let mut denied = false;
        for _ in 0..4 {
            denied |= !l.check("k").await.expect("decides").allowed;
        }
        assert!(denied, "{mode}: the key is spent");
        l.reset("k").await.expect("reset");
        let d = l.check("k").await.expect("decides");
        assert!(d.allowed, "{mode}: decided afresh after the reset: {d:?}");
    }
}

/// A refund reaches past the denial cache: the cached denial is forgotten, so the next request
/// is asked of Redis, which now has room. (A bucket, not an aligned window: a window boundary
/// falling between the requests would refill the key by itself, whatever the refund did.)
#[tokio::test]
async fn a_refund_clears_the_cached_denial_of_the_key() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let l = builder(&server, Algorithm::Gcra, Quota::new(2, Duration::from_secs(600)), "refund-denials")
        .denial_cache(DenialCache::default())
        .build()
        .expect("valid");
    for _ in 0..2 {
        assert!(l.check("k").await.expect("decides").allowed);
    }
    assert!(!l.check("k").await.expect("decides").allowed, "spent, and the denial is cached");
    assert!(l.refund("k", 1).await.expect("refund"));
    let d = l.check("k").await.expect("decides");
    assert!(d.allowed, "asked of Redis again after the refund: {d:?}");
}

/// Blocks reach through the modes that keep using Redis: a blockable limiter's batches run each
/// request behind its key's block, and a lifted block makes the denial cache forget the denial
/// it cached while the key was blocked.
#[tokio::test]
async fn blocks_reach_through_batching_and_the_denial_cache() {
    let server = RedisServer::start_real().expect("redis-server starts");
    let quota = Quota::new(10, Duration::from_secs(600));
    type Mode = fn(redis_ratelimit::LimiterBuilder) -> redis_ratelimit::LimiterBuilder;
    let modes: [(&str, Mode); 2] = [
        ("block-batches", |b| b.batching(Batching::default())),
        ("block-denials", |b| b.denial_cache(DenialCache::default())),
    ];
    for (mode, with) in modes {
        let l = with(builder(&server, Algorithm::SlidingWindow, quota, mode)).blockable().build().expect("valid");
        l.block("k", Duration::from_secs(60)).await.expect("blocks");
        let checks = futures::future::join_all((0..4).map(|_| l.check("k"))).await;
        assert!(checks.iter().all(|d| !d.as_ref().expect("decides").allowed), "{mode}: blocked: {checks:?}");
        assert!(l.check("other").await.expect("decides").allowed, "{mode}: another key is not blocked");
        l.block("k", Duration::ZERO).await.expect("lifts");
        let d = l.check("k").await.expect("decides");
        assert!(d.allowed && d.source == Source::Store, "{mode}: asked of Redis again once lifted: {d:?}");
    }
}
