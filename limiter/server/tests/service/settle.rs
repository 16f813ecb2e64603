//! Costs known at a stream's end over real gRPC against a real `redis-server`: a request is
//! admitted at what it reserves, and the proxy's call when the stream ends settles its real
//! cost (a descriptor whose last entry is `ratelimit.reserved`, its hits the real cost). For
//! every algorithm an excess is charged into debt that refuses the key's next requests, up to
//! one request's capacity; a surplus goes back; a settlement that cannot be made is refused
//! by what is wrong, or as unavailable when Redis is gone.

use crate::support::*;

const TOKENS: &str = r#"
domain: llm
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 1000, algorithm: gcra }
  - key: team
    rate_limit: { unit: hour, requests_per_unit: 100, algorithm: token-bucket }
  - key: model
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: log
    rate_limit: { unit: hour, requests_per_unit: 100, algorithm: sliding-log }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 100, algorithm: sliding-window }
"#;

/// The request-phase call: `key=value` at `hits`.
fn reserve(key: &str, value: &str, hits: u64) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    one(costing(descriptor(&[(key, value)]), hits))
}

/// The stream-done call: `key=value` reserved `reserved` and cost `actual`.
fn settle(
    key: &str,
    value: &str,
    reserved: &str,
    actual: u64,
) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    one(costing(descriptor(&[(key, value), ("ratelimit.reserved", reserved)]), actual))
}

fn one(
    d: envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor,
) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
        domain: "llm".into(),
        descriptors: vec![d],
        hits_addend: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excess_settled_at_the_streams_end_is_owed_by_every_algorithm() {
    let redis = redis();
    let rls = Rls::start(TOKENS, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    for (key, capacity) in [("tenant", 1000), ("team", 100), ("model", 100), ("log", 100), ("user", 100)] {
        // Admitted at 1; it cost a whole capacity more: the key owes what did not fit.
        assert_eq!(overall(&c.call(reserve(key, "acme", 1)).await.expect("answered")), RlsCode::Ok, "{key}");
        let settled = c.call(settle(key, "acme", "1", capacity + 1)).await.expect("answered");
        assert_eq!(overall(&settled), RlsCode::Ok, "{key}");
        let limit = settled.statuses[0].current_limit.as_ref().expect("the limit settled");
        assert_eq!(limit.requests_per_unit as u64, capacity, "{key}");
        let refused = c.call(reserve(key, "acme", 1)).await.expect("answered");
        assert_eq!(overall(&refused), RlsCode::OverLimit, "{key}: in debt");
        let wait: u64 = response_header(&refused, "retry-after").expect("a wait").parse().expect("seconds");
        assert!(wait > 0, "{key}");
        // Another tenant owes nothing.
        assert_eq!(overall(&c.call(reserve(key, "globex", 1)).await.expect("answered")), RlsCode::Ok, "{key}");
    }

    // A surplus goes back: reserved 600, it cost 100.
    assert_eq!(overall(&c.call(reserve("tenant", "initech", 600)).await.expect("answered")), RlsCode::Ok);
    assert_eq!(overall(&c.call(settle("tenant", "initech", "600", 100)).await.expect("answered")), RlsCode::Ok);
    let next = c.call(reserve("tenant", "initech", 800)).await.expect("answered");
    assert_eq!(overall(&next), RlsCode::Ok, "500 given back, 900 left");
    assert_eq!(next.statuses[0].limit_remaining, 100);

    // What a settlement says wrong is named; a key no limit counts has nothing to settle.
    for (entries, says) in [
        (vec![("tenant", "acme"), ("ratelimit.reserved", "ten")], "ratelimit.reserved is the units"),
        (vec![("tenant", "acme"), ("ratelimit.reserved", "-1")], "not \"-1\""),
        (vec![("ratelimit.reserved", "1")], "has none"),
    ] {
        let err = c.call(one(costing(descriptor(&entries), 5))).await.expect_err("refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{entries:?}");
        assert!(err.message().contains(says), "{entries:?}: {}", err.message());
    }
    assert_eq!(overall(&c.call(settle("nobody", "x", "1", 5)).await.expect("answered")), RlsCode::Ok);

    // Redis gone: nothing is settled, and the proxy hears why.
    drop(redis);
    let err = c.call(settle("tenant", "acme", "1", 5)).await.expect_err("not settled");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{}", err.message());
    assert!(err.message().contains("the debit"), "{}", err.message());
    rls.stop().await.expect("stops");
}
