//! Bad input gets a clear error naming what is wrong, at build or call time; never a panic.

use std::time::Duration;

use redis_ratelimit::{Algorithm, BreakerConfig, Error, FailurePolicy, Limiter, Quota, RedisStore};
use redis_tests::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn build_err(algorithm: Algorithm, q: Quota) -> String {
    Limiter::builder(algorithm, q).build().expect_err("must be refused").to_string()
}

#[test]
fn invalid_quotas_are_refused_naming_the_field() {
    for algorithm in Algorithm::ALL {
        assert!(
            build_err(algorithm, Quota::new(0, Duration::from_secs(1))).contains("limit must be at least 1, got 0"),
            "{algorithm}"
        );
        assert!(
            build_err(algorithm, Quota::new(5, Duration::ZERO)).contains("period must be at least 1 ms"),
            "{algorithm}"
        );
    }
    assert!(build_err(Algorithm::TokenBucket, Quota::new(5, Duration::from_secs(1)).with_burst(0)).contains("burst"));
    assert!(build_err(Algorithm::Gcra, Quota::new(2_000_000, Duration::from_millis(1))).contains("microsecond"));
    assert!(build_err(Algorithm::SlidingLog, Quota::new(10_000_000, Duration::from_secs(1))).contains("sliding log"));
    assert!(build_err(
        Algorithm::TokenBucket,
        Quota::new(1, Duration::from_millis(u64::MAX / 2)).with_burst(u64::MAX / 2)
    )
    .contains("2^50"));
}

#[test]
fn nan_infinite_zero_and_negative_rates_are_refused() {
    for rate in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0, 1e-9, 1e300] {
        let err = Quota::from_rate(rate, 10).expect_err("refused");
        assert_eq!(err.field(), "rate", "{rate}: {err}");
    }
    let q = Quota::from_rate(2.5, 10).expect("2.5/s is fine");
    assert_eq!((q.limit(), q.period_ms()), (2_500, 1_000_000));
}

#[test]
fn invalid_policies_breakers_and_key_settings_are_refused() {
    let b = || Limiter::builder(Algorithm::Gcra, Quota::per_second(5));
    let e = b()
        .failure_policy(FailurePolicy::LocalBudget { limit: 0, period: Duration::from_secs(1) })
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("local_budget.limit"), "{e}");
    let e = b().breaker(BreakerConfig::new(0, Duration::from_millis(10))).build().unwrap_err();
    assert!(e.to_string().contains("failure_threshold"), "{e}");
    let e = b().key_prefix("a{b").build().unwrap_err();
    assert!(e.to_string().contains("key_prefix"), "{e}");
    let e = b().max_key_len(0).build().unwrap_err();
    assert!(e.to_string().contains("max_key_len"), "{e}");
    let e = RedisStore::from_url("redis://127.0.0.1:1").expect("url").with_timeout(Duration::ZERO).unwrap_err();
    assert!(e.to_string().contains("timeout"), "{e}");
    let e = RedisStore::from_url("not a url").unwrap_err();
    assert!(e.to_string().contains("redis_url"), "{e}");
}

#[tokio::test]
async fn bad_keys_and_impossible_costs_are_refused_at_call_time() {
    let limiter =
        Limiter::builder(Algorithm::TokenBucket, Quota::per_second(5)).max_key_len(16).build().expect("valid");
    assert!(matches!(limiter.check("").await, Err(Error::InvalidKey(_))));
    let err = limiter.check(&"x".repeat(17)).await.unwrap_err();
    assert!(err.to_string().contains("17 bytes"), "{err}");
    let err = limiter.check_n("k", 6).await.unwrap_err();
    assert!(matches!(err, Error::CostExceedsCapacity { cost: 6, capacity: 5 }), "{err}");
    // Cost 0 peeks and u64::MAX is refused, not overflowed.
    assert!(limiter.check_n("k", 0).await.expect("peek").allowed);
    assert!(limiter.check_n("k", u64::MAX).await.is_err());
}

/// Redis cannot be made to send a malformed reply, so these two listeners stand in for a
/// broken proxy or a foreign service on Redis's port.
async fn fake_server(reply: &'static [u8]) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 || sock.write_all(reply).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("redis://{addr}/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_of_the_wrong_shape_is_a_clear_error() {
    let url = fake_server(b":42\r\n").await;
    let limiter = Limiter::builder(Algorithm::Gcra, Quota::per_second(5))
        .redis(RedisStore::from_url(&url).expect("url"))
        .build()
        .expect("valid");
    let err = limiter.check("k").await.expect_err("wrong shape");
    assert!(matches!(err, Error::UnexpectedReply { algorithm: "gcra", .. }), "{err}");
    assert!(err.to_string().contains("expected the script's array of integers, got int(42)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_stream_is_handled_by_the_failure_policy_without_panicking() {
    let url = fake_server(b"\x00\xffgarbage\r\n").await;
    let limiter = Limiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
        .redis(RedisStore::from_url(&url).expect("url").with_timeout(Duration::from_millis(300)).expect("timeout"))
        .failure_policy(FailurePolicy::FailClosed)
        .build()
        .expect("valid");
    for _ in 0..3 {
        match limiter.check("k").await {
            Ok(d) => assert!(!d.allowed && d.source == redis_ratelimit::Source::FailClosed, "{d:?}"),
            Err(e) => assert!(matches!(e, Error::UnexpectedReply { .. }), "{e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_answers_after_bad_input_was_refused() {
    let server = RedisServer::start().expect("redis-server");
    let limiter = Limiter::builder(Algorithm::SlidingWindow, Quota::per_second(3))
        .redis(RedisStore::from_url(&server.url()).expect("url"))
        .build()
        .expect("valid");
    assert!(limiter.check("").await.is_err());
    assert!(limiter.check_n("k", 4).await.is_err());
    assert!(limiter.check_n("k", 3).await.expect("decides").allowed);
}
