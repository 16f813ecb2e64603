//! The Redis store against real `redis-server` processes: server time, TTLs, NOSCRIPT
//! recovery, hostile keys and wrong-type keys.

use std::time::Duration;

use redis::Commands;
use redis_ratelimit::{Algorithm, Error, Limiter, Quota, RedisStore, Source, TimeSource};
use redis_tests::RedisServer;

/// `REDIS_TESTS_REAL` picks the server these tests run on: Redis unless it says `valkey`, the
/// model when `REDIS_TESTS_SERVER` names it.
#[test]
fn the_server_started_is_the_one_asked_for() {
    let server = RedisServer::start().expect("the server starts");
    let info: String = redis::cmd("INFO").arg("server").query(&mut server.client().expect("connect")).expect("INFO");
    match (redis_tests::server_overridden(), redis_tests::real_server().expect("REDIS_TESTS_REAL")) {
        (true, _) => assert_eq!(server.kind(), None),
        (false, redis_tests::RealServer::Valkey) => {
            assert!(info.contains("server_name:valkey") && info.contains("valkey_version:"), "{info}");
        }
        (false, redis_tests::RealServer::Redis) => {
            assert!(info.contains("redis_version:") && !info.contains("valkey_version"), "{info}");
        }
    }
}

fn limiter_on(server: &RedisServer, algorithm: Algorithm, q: Quota) -> Limiter {
    Limiter::builder(algorithm, q).redis(RedisStore::from_url(&server.url()).expect("url")).build().expect("valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_time_mode_enforces_the_limit_with_redis_clock() {
    let server = RedisServer::start().expect("redis-server");
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
    ] {
        // One request per 10 minutes: whatever the wall clock does during the test, the
        // second request is denied, and Retry-After points minutes ahead.
        let limiter = limiter_on(&server, algorithm, Quota::new(1, Duration::from_secs(600)));
        assert_eq!(limiter.time_source(), TimeSource::Server);
        let first = limiter.check("k").await.expect("decides");
        assert!(first.allowed && first.source == Source::Store, "{algorithm}: {first:?}");
        let second = limiter.check("k").await.expect("decides");
        assert!(!second.allowed, "{algorithm}: {second:?}");
        assert!(
            second.retry_after.as_millis() > 0 && second.retry_after.as_millis() <= 1_200_000,
            "{algorithm}: {second:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_gets_a_ttl_no_longer_than_its_algorithm_needs() {
    let server = RedisServer::start().expect("redis-server");
    let q = Quota::new(4, Duration::from_secs(10)).with_burst(4);
    for algorithm in Algorithm::ALL {
        let limiter = limiter_on(&server, algorithm, q);
        for _ in 0..3 {
            let _decided = limiter.check("ttl-user").await.expect("decides");
        }
    }
    let mut conn = server.client().expect("client");
    let keys: Vec<String> = conn.keys("*").expect("KEYS");
    assert!(keys.len() >= Algorithm::ALL.len(), "one key or more per algorithm: {keys:?}");
    for key in keys {
        let ttl: i64 = conn.pttl(&key).expect("PTTL");
        // The longest any algorithm needs here is two windows (sliding-window counter).
        assert!(ttl > 0 && ttl <= 20_000, "{key} has PTTL {ttl}, bound 20000");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_reloaded_after_script_flush() {
    let server = RedisServer::start().expect("redis-server");
    let limiter = limiter_on(&server, Algorithm::TokenBucket, Quota::per_second(100));
    assert!(limiter.check("k").await.expect("decides").allowed);
    let mut conn = server.client().expect("client");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).expect("SCRIPT FLUSH");
    let d = limiter.check("k").await.expect("NOSCRIPT is recovered by EVAL");
    assert_eq!((d.allowed, d.source), (true, Source::Store));
    let loaded: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(redis::Script::new(redis_ratelimit::harness::scripts::TOKEN_BUCKET.source).get_hash())
        .query(&mut conn)
        .expect("SCRIPT EXISTS");
    assert_eq!(loaded, vec![true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_keys_stay_inside_their_own_hash_tag_and_state() {
    let server = RedisServer::start().expect("redis-server");
    let limiter = limiter_on(&server, Algorithm::SlidingLog, Quota::new(1, Duration::from_secs(60)));
    let hostile = ["a", "a}", "a}:sl", "{a}", "%7D", "a\r\n*1\r\n$4\r\nPING", "ключ", "a b"];
    for key in hostile {
        let d = limiter.check(key).await.expect("decides");
        assert!(d.allowed, "{key:?} must have its own state: {d:?}");
    }
    let mut conn = server.client().expect("client");
    let keys: Vec<String> = conn.keys("*").expect("KEYS");
    assert_eq!(keys.len(), hostile.len(), "one log per key: {keys:?}");
    for key in keys {
        assert!(key.starts_with("ratelimiter:{"), "{key:?} escaped the prefix");
        assert_eq!(key.matches('{').count(), 1, "{key:?}");
        assert_eq!(key.matches('}').count(), 1, "{key:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holding_the_wrong_type_is_a_clear_error() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("client");
    let tb = limiter_on(&server, Algorithm::TokenBucket, Quota::per_second(5));
    let gcra = limiter_on(&server, Algorithm::Gcra, Quota::per_second(5));
    // The keys name the limiter's state after the user key (its quota, here).
    assert_eq!(tb.state_name(), "q=5/1000ms/b5");
    // A list: a token bucket's key is a string, or the hash it once was.
    let _: () = conn.rpush(format!("ratelimiter:{{victim}}:{}:tb", tb.state_name()), "x").expect("RPUSH");
    let _: () = conn.hset(format!("ratelimiter:{{victim}}:{}:gcra", gcra.state_name()), "f", "v").expect("HSET");
    let err = tb.check("victim").await.expect_err("WRONGTYPE");
    assert!(matches!(err, Error::WrongType { algorithm: "token-bucket", .. }), "{err}");
    let err = gcra.check("victim").await.expect_err("WRONGTYPE");
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    // The breaker does not count these: Redis answered.
    assert_eq!(tb.breaker_state(), redis_ratelimit::BreakerState::Closed { failures: 0 });
}

/// A token bucket's state was once a hash `{u, t}`; it is now one string `"u:t"` (a GET and a
/// SET instead of HMGET, HSET and PEXPIRE). A bucket written the old way is read, honoured,
/// and replaced by the first admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_written_as_a_hash_is_honoured_and_replaced() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("client");
    let tb = limiter_on(&server, Algorithm::TokenBucket, Quota::per_second(5));
    let key = format!("ratelimiter:{{old}}:{}:tb", tb.state_name());
    // The limiter decides by Redis's clock.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    let now_ms = secs * 1_000 + micros / 1_000;
    // Empty an hour from now: nothing refills before then.
    let _: () =
        conn.hset_multiple(&key, &[("u", "0".to_owned()), ("t", (now_ms + 3_600_000).to_string())]).expect("HSET");
    let d = tb.check("old").await.expect("decides");
    assert!(!d.allowed && d.retry_after.as_millis() > 3_500_000, "the old state honoured: {d:?}");
    let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).expect("TYPE");
    assert_eq!(kind, "hash", "a denial writes nothing");
    // Full (5 tokens of 1,000 units) now: admitted, and written the new way.
    let _: () = conn.hset_multiple(&key, &[("u", "5000".to_owned()), ("t", now_ms.to_string())]).expect("HSET");
    let d = tb.check("old").await.expect("decides");
    assert!(d.allowed && d.remaining == 4, "{d:?}");
    let state: String = conn.get(&key).expect("now a string");
    assert!(state.starts_with("4000:"), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_the_keys_is_read_as_absent_state_not_a_crash() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("client");
    let state = "q=5/1000ms/b5";
    let _: () = conn.hset(format!("ratelimiter:{{g}}:{state}:tb"), "u", "not-a-number").expect("HSET");
    let _: () = conn.set(format!("ratelimiter:{{g}}:{state}:gcra"), "NaN").expect("SET");
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let d = limiter_on(&server, algorithm, Quota::per_second(5)).check("g").await.expect("decides");
        assert!(d.allowed, "{algorithm}: {d:?}");
    }
    // A window counter of text reads as no count, and the window's first units replace it
    // with its window and count and the window's TTL (never counted on top of it, never a
    // TTL-less key).
    let fixed = Limiter::builder(Algorithm::FixedWindow, Quota::new(5, Duration::from_secs(1_000_000_000_000)))
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .build()
        .expect("valid");
    let window = format!("ratelimiter:{{g}}:{}:fw", fixed.state_name());
    let _: () = conn.set(&window, "inf").expect("SET");
    let d = fixed.check("g").await.expect("decides");
    assert!(d.allowed && d.remaining == 4, "{d:?}");
    let count: String = conn.get(&window).expect("GET");
    let ttl: i64 = conn.pttl(&window).expect("PTTL");
    assert_eq!(count, "0:1", "window 0, one unit");
    assert!(ttl > 0, "the replaced counter has the window's TTL: {ttl}");
    // The same for a sliding-window counter, and a key of another type read as absent too.
    // (On the instance's clock, 10 s into a minute's window 100: the window is known.)
    let sliding = Limiter::builder(Algorithm::SlidingWindow, Quota::per_minute(5))
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .time_source(TimeSource::Client)
        .clock(std::sync::Arc::new(redis_ratelimit::ManualClock::new(6_010_000)))
        .build()
        .expect("valid");
    let current = format!("ratelimiter:{{g}}:{}:sw:100", sliding.state_name());
    let _: () = conn.hset(&current, "f", "v").expect("HSET");
    let d = sliding.check_n("g", 2).await.expect("decides");
    assert!(d.allowed && d.remaining == 3, "{d:?}");
    let count: String = conn.get(&current).expect("GET");
    assert_eq!(count, "2");
    // A sliding log keeps one key, no member sequence: a request of cost 2 adds two members
    // named by its time and a count, in one sorted set.
    let log = Limiter::builder(Algorithm::SlidingLog, Quota::per_second(5))
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .build()
        .expect("valid");
    let log_key = format!("ratelimiter:{{g}}:{}:sl", log.state_name());
    let d = log.check_n("g", 2).await.expect("decides");
    assert!(d.allowed && d.remaining == 3, "{d:?}");
    let members: Vec<(String, u64)> = conn.zrange_withscores(&log_key, 0, -1).expect("ZRANGE");
    let names: Vec<&str> = members.iter().map(|(m, _)| m.as_str()).collect();
    let at = members[0].1;
    assert_eq!(names, [format!("{at}:1"), format!("{at}:2")], "{members:?}");
    let keys: Vec<String> = conn.keys("ratelimiter:{g}:*sl*").expect("KEYS");
    assert_eq!(keys, [log_key]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiters_of_different_quotas_never_share_state_unless_they_share_a_name() {
    let server = RedisServer::start().expect("redis-server");
    // 5 a minute and 1,000 a day, one prefix, one algorithm, one user key.
    let minute = limiter_on(&server, Algorithm::TokenBucket, Quota::per_minute(5));
    let day = limiter_on(&server, Algorithm::TokenBucket, Quota::new(1_000, Duration::from_secs(86_400)));
    for i in 0..5 {
        assert!(minute.check("user-1").await.expect("decides").allowed, "request {i}");
    }
    assert!(!minute.check("user-1").await.expect("decides").allowed);
    // The daily limiter has admitted nothing for this key: its state is its own.
    let first = day.check("user-1").await.expect("decides");
    assert_eq!((first.allowed, first.remaining), (true, 999), "{first:?}");
    assert!(!minute.check("user-1").await.expect("decides").allowed, "nor did the daily one refill the minute");
    let mut conn = server.client().expect("client");
    let mut keys: Vec<String> = conn.keys("*").expect("KEYS");
    keys.sort();
    assert_eq!(keys, ["ratelimiter:{user-1}:q=1000/86400000ms/b1000:tb", "ratelimiter:{user-1}:q=5/60000ms/b5:tb"]);

    // Limiters that say they share state, by one name, do: a larger limit applies to what the
    // smaller one counted, as instances rolling out a new quota need.
    let named = |limit| {
        Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(limit))
            .redis(RedisStore::from_url(&server.url()).expect("url"))
            .name("login")
            .build()
            .expect("valid")
    };
    let (old, new) = (named(3), named(4));
    assert_eq!(new.state_name(), "login");
    for _ in 0..3 {
        assert!(old.check("user-2").await.expect("decides").allowed);
    }
    assert!(new.check("user-2").await.expect("decides").allowed, "the fourth fits the new limit");
    assert!(!new.check("user-2").await.expect("decides").allowed, "and only the fourth");
    let bad = Limiter::builder(Algorithm::Gcra, Quota::per_minute(1)).name("a:b").build().unwrap_err();
    assert!(bad.to_string().contains("name") && bad.to_string().contains("\"a:b\""), "{bad}");
}

/// A quota chosen per request (`Limiter::check_with`, a client's plan) counts where a limiter
/// of that quota would: without a name in the quota's own keys, with one in the name's, but a
/// token bucket under another period in a bucket of its own. What it cannot enforce is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_per_request_keeps_the_state_a_change_of_quota_keeps() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("client");
    let (free, pro, hourly) = (Quota::per_minute(2), Quota::per_minute(5), Quota::new(100, Duration::from_secs(3600)));
    let unnamed = limiter_on(&server, Algorithm::TokenBucket, free);
    for _ in 0..2 {
        assert!(unnamed.check("u").await.expect("decides").allowed);
    }
    assert!(!unnamed.check("u").await.expect("decides").allowed);
    let d = unnamed.check_with("u", pro).await.expect("decides");
    assert_eq!((d.allowed, d.capacity, d.remaining), (true, 5, 4), "its own bucket: {d:?}");
    let mut keys: Vec<String> = conn.keys("ratelimiter:*").expect("KEYS");
    keys.sort();
    assert_eq!(keys, ["ratelimiter:{u}:q=2/60000ms/b2:tb", "ratelimiter:{u}:q=5/60000ms/b5:tb"]);

    let named = Limiter::builder(Algorithm::TokenBucket, free)
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .name("api")
        .key_prefix("named")
        .build()
        .expect("valid");
    for _ in 0..2 {
        assert!(named.check("u").await.expect("decides").allowed);
    }
    // The larger plan reads the same bucket: it is empty, whatever the burst it may refill to.
    let same_period = named.check_with("u", pro).await.expect("decides");
    assert_eq!((same_period.allowed, same_period.capacity), (false, 5), "{same_period:?}");
    let other_period = named.check_with("u", hourly).await.expect("decides");
    assert_eq!((other_period.allowed, other_period.remaining), (true, 99), "a bucket of its own: {other_period:?}");
    let mut keys: Vec<String> = conn.keys("named:*").expect("KEYS");
    keys.sort();
    assert_eq!(keys, ["named:{u}:api:p3600000:tb", "named:{u}:api:p60000:tb"]);

    let zero = named.check_with("u", Quota::new(0, Duration::from_secs(1))).await.unwrap_err();
    assert!(matches!(&zero, Error::Config(c) if c.field() == "limit"), "{zero}");
    let too_dear = named.check_n_with("u", Quota::per_minute(3), 4).await.unwrap_err();
    assert!(matches!(too_dear, Error::CostExceedsCapacity { cost: 4, capacity: 3 }), "{too_dear}");
}

/// A reset forgets one key's state for every algorithm: the key is admitted its whole quota
/// again, none of its keys is left in Redis, and another key keeps its state; `state` reads
/// it without consuming. With Redis gone
/// no failure policy can stand in: the reset is an error saying it did not happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_forgets_one_keys_state_and_says_so_when_redis_cannot_hear_it() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("client");
    // Two per ten minutes: nothing refills while the test runs.
    let q = Quota::new(2, Duration::from_secs(600));
    for algorithm in Algorithm::ALL {
        let l = limiter_on(&server, algorithm, q);
        let (reset, kept) = (format!("reset-{algorithm}"), format!("kept-{algorithm}"));
        let admitted = |key: String| {
            let l = l.clone();
            async move {
                let mut admitted = Vec::new();
                for _ in 0..3 {
                    admitted.push(l.check(&key).await.expect("decides").allowed);
                }
                admitted
            }
        };
        assert_eq!(admitted(reset.clone()).await, [true, true, false], "{algorithm}");
        assert_eq!(admitted(kept.clone()).await, [true, true, false], "{algorithm}");
        // A key's state, read without consuming: spent, then whole again after the reset.
        assert_eq!(l.state(&reset).await.expect("peeks").remaining, 0, "{algorithm}");
        l.reset(&reset).await.expect("reset");
        let left: Vec<String> = conn.keys(format!("ratelimiter:{{{reset}}}:*")).expect("KEYS");
        assert!(left.is_empty(), "{algorithm}: {left:?} left after the reset");
        assert_eq!(l.state(&reset).await.expect("peeks").remaining, 2, "{algorithm}");
        assert_eq!(admitted(reset).await, [true, true, false], "{algorithm}: the whole quota again");
        assert!(!l.check(&kept).await.expect("decides").allowed, "{algorithm}: another key keeps its state");
    }
    let gone = Limiter::builder(Algorithm::Gcra, q)
        .redis(RedisStore::from_url("redis://127.0.0.1:1/").expect("url"))
        .build()
        .expect("valid");
    let e = gone.reset("k").await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { operation: "the reset", .. }), "{e}");
    assert!(e.to_string().contains("did not happen"), "{e}");
    assert!(matches!(gone.reset("").await.unwrap_err(), Error::InvalidKey(_)));
}

/// A refund gives units back for every algorithm, never beyond the quota: a spent key admits
/// what was given back and no more, a refund of a key at its full quota gives nothing, and one
/// larger than the quota restores the quota exactly. With Redis gone it is an error saying it
/// did not happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_gives_units_back_up_to_the_quota_and_says_so_when_redis_cannot_hear_it() {
    let server = RedisServer::start().expect("redis-server");
    // Three per ten minutes: nothing refills while the test runs.
    let q = Quota::new(3, Duration::from_secs(600));
    for algorithm in Algorithm::ALL {
        let l = limiter_on(&server, algorithm, q);
        let key = format!("refund-{algorithm}");
        let admitted = |n: usize| {
            let (l, key) = (l.clone(), key.clone());
            async move {
                let mut admitted = 0;
                for _ in 0..n {
                    admitted += usize::from(l.check(&key).await.expect("decides").allowed);
                }
                admitted
            }
        };
        assert!(!l.refund(&key, 1).await.expect("refund"), "{algorithm}: an unseen key has nothing to take");
        assert_eq!(admitted(4).await, 3, "{algorithm}");
        assert!(l.refund(&key, 2).await.expect("refund"), "{algorithm}");
        assert_eq!(l.state(&key).await.expect("state").remaining, 2, "{algorithm}: two given back");
        assert_eq!(admitted(3).await, 2, "{algorithm}: what was given back, and no more");
        assert!(l.refund(&key, 1_000).await.expect("refund"), "{algorithm}");
        assert_eq!(l.state(&key).await.expect("state").remaining, 3, "{algorithm}: never above the quota");
        assert!(!l.refund(&key, 1).await.expect("refund"), "{algorithm}: a full quota has nothing to take");
        assert_eq!(admitted(4).await, 3, "{algorithm}: the whole quota, once");
    }
    let gone = Limiter::builder(Algorithm::Gcra, q)
        .redis(RedisStore::from_url("redis://127.0.0.1:1/").expect("url"))
        .build()
        .expect("valid");
    let e = gone.refund("k", 1).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { operation: "the refund", .. }), "{e}");
    assert!(matches!(gone.refund("", 1).await.unwrap_err(), Error::InvalidKey(_)));
}

/// A block refuses a blockable limiter's key for as long as it lasts, on Redis's clock, for
/// every algorithm: refused with nothing remaining and a Retry-After of the block's end, under
/// another quota too, while another key is untouched; lifted, the key decides by the state the
/// block left (nothing was consumed while refused); a reset forgets the block with the state.
/// A limiter built without `.blockable()` refuses to block (its scripts would ignore it), leases
/// cannot be combined with blocks, and with Redis gone the block is an error saying it did not
/// happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_refuses_a_key_until_lifted_and_says_so_when_redis_cannot_hear_it() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = server.client().expect("client");
    // Three per ten minutes: nothing refills while the test runs.
    let q = Quota::new(3, Duration::from_secs(600));
    for algorithm in Algorithm::ALL {
        let l = Limiter::builder(algorithm, q)
            .redis(RedisStore::from_url(&server.url()).expect("url"))
            .blockable()
            .build()
            .expect("valid");
        let (key, other) = (format!("block-{algorithm}"), format!("free-{algorithm}"));
        assert!(l.check(&key).await.expect("decides").allowed, "{algorithm}");
        l.block(&key, Duration::from_secs(60)).await.expect("blocks");
        for _ in 0..3 {
            let d = l.check(&key).await.expect("decides");
            assert!(!d.allowed && d.remaining == 0, "{algorithm}: blocked: {d:?}");
            assert!((59_000..=60_000).contains(&d.retry_after.as_millis()), "{algorithm}: until the block ends: {d:?}");
        }
        let plan = l.check_with(&key, Quota::new(30, Duration::from_secs(600))).await.expect("decides");
        assert!(!plan.allowed, "{algorithm}: blocked under another quota too: {plan:?}");
        assert!(!l.state(&key).await.expect("peeks").allowed, "{algorithm}: a peek is refused too");
        assert!(l.check(&other).await.expect("decides").allowed, "{algorithm}: another key is not blocked");
        l.block(&key, Duration::ZERO).await.expect("lifts");
        assert_eq!(l.state(&key).await.expect("peeks").remaining, 2, "{algorithm}: nothing consumed while blocked");
        l.block(&key, Duration::from_secs(60)).await.expect("blocks");
        l.reset(&key).await.expect("reset");
        let left: Vec<String> = conn.keys(format!("ratelimiter:{{{key}}}:*")).expect("KEYS");
        assert!(left.is_empty(), "{algorithm}: {left:?} left after the reset");
        assert!(l.check(&key).await.expect("decides").allowed, "{algorithm}: the reset forgot the block");
        // A short block ends by itself, on Redis's clock (long enough that a loaded machine
        // still checks within it).
        l.block(&key, Duration::from_millis(300)).await.expect("blocks");
        assert!(!l.check(&key).await.expect("decides").allowed, "{algorithm}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(l.check(&key).await.expect("decides").allowed, "{algorithm}: the block ended");
    }
    let plain = limiter_on(&server, Algorithm::Gcra, q);
    let e = plain.block("k", Duration::from_secs(1)).await.unwrap_err();
    assert!(
        matches!(&e, Error::Config(c) if c.field() == "blockable" && c.message().contains("make it blockable")),
        "{e}"
    );
    let leased = Limiter::builder(Algorithm::Gcra, q)
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .leases(redis_ratelimit::modes::Leases::default())
        .blockable()
        .build()
        .unwrap_err();
    assert_eq!(leased.field(), "leases", "{leased}");
    let gone = Limiter::builder(Algorithm::Gcra, q)
        .redis(RedisStore::from_url("redis://127.0.0.1:1/").expect("url"))
        .blockable()
        .build()
        .expect("valid");
    let e = gone.block("k", Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { operation: "the block", .. }), "{e}");
    let too_long = gone.block("k", Duration::from_secs(u64::MAX)).await.unwrap_err();
    assert!(matches!(&too_long, Error::Config(c) if c.field() == "block"), "{too_long}");
}
