//! The reference service's (envoyproxy/ratelimit's) documented configuration examples, each
//! loaded as that service loads it and asked the requests its documentation walks through,
//! with the answers it documents; where this service answers otherwise on purpose (nothing is
//! charged for a refused request; an unknown domain is an error unless asked otherwise), the
//! difference is what is asserted.

use crate::support::*;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use redis_ratelimit_server::service::UnknownDomain;

const SECOND: i32 = 1;
const MINUTE: i32 = 2;
const HOUR: i32 = 3;
const DAY: i32 = 4;

async fn start(yaml: &str) -> (redis_tests::RedisServer, Rls) {
    let redis = redis();
    let rls = Rls::start(yaml, Setup::on(Some(&redis.url()))).await;
    (redis, rls)
}

/// The limit a status reports: requests per unit, and the unit.
fn limit_of(r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse, i: usize) -> Option<(u32, i32)> {
    r.statuses[i].current_limit.as_ref().map(|l| (l.requests_per_unit, l.unit))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_1_two_values_of_one_key() {
    let (_redis, rls) = start(
        "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n  - key: database\n    value: default\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n",
    )
    .await;
    let mut c = rls.client().await;
    let r = c
        .call(request("mongo_cps", &[&[("database", "users")], &[("database", "default")], &[("database", "other")]]))
        .await
        .unwrap();
    assert_eq!((limit_of(&r, 0), limit_of(&r, 1), limit_of(&r, 2)), (Some((500, SECOND)), Some((500, SECOND)), None));
    assert_eq!((r.statuses[0].limit_remaining, r.statuses[1].limit_remaining), (499, 499), "each value its own count");
}

const MESSAGING: &str = r#"
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_2_nested_descriptors_and_a_request_of_two_answered_all_or_nothing() {
    let (_redis, rls) = start(MESSAGING).await;
    let mut c = rls.client().await;
    let both = |number| {
        request("messaging", &[&[("message_type", "marketing"), ("to_number", number)], &[("to_number", number)]])
    };
    for sent in 1..=5u32 {
        let r = c.call(both("2061111111")).await.unwrap();
        assert_eq!(overall(&r), RlsCode::Ok);
        assert_eq!((limit_of(&r, 0), limit_of(&r, 1)), (Some((5, DAY)), Some((100, DAY))));
        assert_eq!((r.statuses[0].limit_remaining, r.statuses[1].limit_remaining), (5 - sent, 100 - sent));
    }
    // The sixth: the marketing limit refuses, and the request is over the limit, as the
    // reference answers (the OR of the two).
    let r = c.call(both("2061111111")).await.unwrap();
    assert_eq!(
        (overall(&r), code_of(&r.statuses[0]), code_of(&r.statuses[1])),
        (RlsCode::OverLimit, RlsCode::OverLimit, RlsCode::Ok)
    );
    // The difference: the reference has already charged the per-number limit for it (94 left);
    // here a refused request is charged nothing, so 95 are left.
    assert_eq!(r.statuses[1].limit_remaining, 95);
    // Another number has counts of its own.
    assert_eq!(overall(&c.call(both("2062222222")).await.unwrap()), RlsCode::Ok);
    // The per-number limit alone, as a descriptor of its own.
    let r = c.call(request("messaging", &[&[("to_number", "2061111111")]])).await.unwrap();
    assert_eq!((overall(&r), r.statuses[0].limit_remaining), (RlsCode::Ok, 94));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_3_the_most_specific_entry_wins_and_a_zero_limit_refuses() {
    let (_redis, rls) = start(
        "domain: edge_proxy_per_ip\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n  # Black list IP\n  - key: remote_address\n    value: 50.0.0.5\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n",
    )
    .await;
    let mut c = rls.client().await;
    let r = c.call(request("edge_proxy_per_ip", &[&[("remote_address", "50.0.0.1")]])).await.unwrap();
    assert_eq!((overall(&r), limit_of(&r, 0), r.statuses[0].limit_remaining), (RlsCode::Ok, Some((10, SECOND)), 9));
    let r = c.call(request("edge_proxy_per_ip", &[&[("remote_address", "50.0.0.5")]])).await.unwrap();
    assert_eq!(
        (overall(&r), limit_of(&r, 0), r.statuses[0].limit_remaining),
        (RlsCode::OverLimit, Some((0, SECOND)), 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_4_a_descriptor_matches_only_at_its_own_depth() {
    let one_level = "domain: example4\ndescriptors:\n  - key: key\n    value: value\n    rate_limit:\n      requests_per_unit: 300\n      unit: second\n";
    let (_redis, rls) = start(one_level).await;
    let mut c = rls.client().await;
    let deep = request("example4", &[&[("key", "value"), ("subkey", "subvalue")]]);
    assert_eq!(limit_of(&c.call(deep.clone()).await.unwrap(), 0), None);
    let nested = "domain: example4\ndescriptors:\n  - key: key\n    value: value\n    descriptors:\n      - key: subkey\n        rate_limit:\n          requests_per_unit: 300\n          unit: second\n";
    rls.rewrite(nested);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while limit_of(&c.call(deep.clone()).await.unwrap(), 0).is_none() {
        assert!(std::time::Instant::now() < deadline, "the nested configuration was never loaded");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(limit_of(&c.call(deep).await.unwrap(), 0), Some((300, SECOND)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_5_unlimited_is_ok_with_the_most_remaining() {
    let (_redis, rls) = start(
        "domain: internal\ndescriptors:\n  - key: ldap\n    rate_limit:\n      unlimited: true\n  - key: azure\n    rate_limit:\n      unit: minute\n      requests_per_unit: 100\n",
    )
    .await;
    let mut c = rls.client().await;
    let r = c.call(request("internal", &[&[("ldap", "x")], &[("azure", "y")]])).await.unwrap();
    assert_eq!(
        (code_of(&r.statuses[0]), r.statuses[0].limit_remaining, limit_of(&r, 0)),
        (RlsCode::Ok, u32::MAX, None)
    );
    assert_eq!((limit_of(&r, 1), r.statuses[1].limit_remaining), (Some((100, MINUTE)), 99));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_6_a_shadow_entry_never_refuses_its_sibling_does() {
    let (_redis, rls) = start(
        "domain: example6\ndescriptors:\n  - key: service\n    descriptors:\n      - key: user\n        value: user-a\n        rate_limit:\n          requests_per_unit: 10\n          unit: second\n        shadow_mode: true\n      - key: user\n        value: user-b\n        rate_limit:\n          requests_per_unit: 20\n          unit: second\n",
    )
    .await;
    let mut c = rls.client().await;
    for _ in 0..12 {
        assert_eq!(c.code("example6", &[&[("service", "auth-service"), ("user", "user-a")]]).await, RlsCode::Ok);
    }
    let mut codes = Vec::new();
    for _ in 0..21 {
        codes.push(c.code("example6", &[&[("service", "auth-service"), ("user", "user-b")]]).await);
    }
    assert_eq!(codes.iter().filter(|c| **c == RlsCode::OverLimit).count(), 1, "{codes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_7_a_replacing_limit_drops_the_one_it_names() {
    let (_redis, rls) = start(
        "domain: example7\ndescriptors:\n  - key: key_1\n    value: value_1\n    descriptors:\n      - key: user\n        value: bkthomps\n        rate_limit:\n          name: specific_limit\n          requests_per_unit: 5\n          unit: second\n  - key: key_2\n    value: value_2\n    descriptors:\n      - key: user\n        value: bkthomps\n        rate_limit:\n          replaces:\n            - name: specific_limit\n          requests_per_unit: 10\n          unit: second\n",
    )
    .await;
    let mut c = rls.client().await;
    let first = [("key_1", "value_1"), ("user", "bkthomps")];
    let second = [("key_2", "value_2"), ("user", "bkthomps")];
    let r = c.call(request("example7", &[&first])).await.unwrap();
    assert_eq!((limit_of(&r, 0), r.statuses[0].limit_remaining), (Some((5, SECOND)), 4));
    let r = c.call(request("example7", &[&second])).await.unwrap();
    assert_eq!(limit_of(&r, 0), Some((10, SECOND)));
    // Both: only the replacing limit applies, and the replaced one is not charged.
    let r = c.call(request("example7", &[&first, &second])).await.unwrap();
    assert_eq!((limit_of(&r, 0), limit_of(&r, 1)), (None, Some((10, SECOND))));
    let r = c.call(request("example7", &[&first])).await.unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 3, "the 5/s limit was not changed by the request of both");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_8_and_10_metric_options_leave_the_limits_as_they_are() {
    let (_redis, rls) = start(
        "domain: example8\ndescriptors:\n  - key: key1\n    detailed_metric: true\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n  - key: route\n    value_to_metric: true\n    descriptors:\n      - key: http_method\n        value_to_metric: true\n        descriptors:\n          - key: subject_id\n            rate_limit:\n              unit: minute\n              requests_per_unit: 60\n",
    )
    .await;
    let mut c = rls.client().await;
    let r = c
        .call(request(
            "example8",
            &[&[("key1", "unspecified_value")], &[("key1", "unspecified_value2")], &[("key1", "value1")]],
        ))
        .await
        .unwrap();
    assert_eq!(
        (limit_of(&r, 0), limit_of(&r, 1), limit_of(&r, 2)),
        (Some((10, MINUTE)), Some((10, MINUTE)), Some((20, MINUTE)))
    );
    assert_eq!((r.statuses[0].limit_remaining, r.statuses[1].limit_remaining), (9, 9));
    let r = c
        .call(request("example8", &[&[("route", "api"), ("http_method", "GET"), ("subject_id", "123")]]))
        .await
        .unwrap();
    assert_eq!(limit_of(&r, 0), Some((60, MINUTE)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_9_wildcards_trailing_in_the_middle_and_several() {
    let (_redis, rls) = start(
        "domain: example9\ndescriptors:\n  - key: key1\n    value: value*\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n  - key: path\n    value: /api/*/action\n    rate_limit:\n      unit: minute\n      requests_per_unit: 21\n  - key: route\n    value: /api/*/resource/*/action\n    rate_limit:\n      unit: minute\n      requests_per_unit: 22\n",
    )
    .await;
    let mut c = rls.client().await;
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<(u32, i32)>);
    let cases: [Case<'_>; 8] = [
        (&[("key1", "value1")], Some((20, MINUTE))),
        (&[("key1", "valueXYZ")], Some((20, MINUTE))),
        (&[("key1", "other")], None),
        (&[("path", "/api/123/action")], Some((21, MINUTE))),
        (&[("path", "/api/user-id/action")], Some((21, MINUTE))),
        (&[("path", "/api/123/other")], None),
        (&[("route", "/api/v1/resource/123/action")], Some((22, MINUTE))),
        (&[("route", "/api/v2/resource/456/other")], None),
    ];
    for (entries, limit) in cases {
        let r = c.call(request("example9", &[entries])).await.unwrap();
        assert_eq!(limit_of(&r, 0), limit, "{entries:?}");
    }
    // Each value a wildcard matches has a count of its own.
    let r = c.call(request("example9", &[&[("key1", "value1")]])).await.unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 18);
    let r = c.call(request("example9", &[&[("key1", "value2")]])).await.unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 19);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_11_shared_and_isolated_thresholds_of_a_wildcard() {
    let (_redis, rls) = start(
        "domain: example11\ndescriptors:\n  - key: files\n    value: files/*\n    share_threshold: true\n    rate_limit:\n      unit: hour\n      requests_per_unit: 10\n  - key: files_no_share\n    value: files_no_share/*\n    share_threshold: false\n    rate_limit:\n      unit: hour\n      requests_per_unit: 10\n",
    )
    .await;
    let mut c = rls.client().await;
    for (file, n) in [("files/a.pdf", 5), ("files/b.csv", 5)] {
        for _ in 0..n {
            assert_eq!(c.code("example11", &[&[("files", file)]]).await, RlsCode::Ok);
        }
    }
    let r = c.call(request("example11", &[&[("files", "files/c.txt")]])).await.unwrap();
    assert_eq!((overall(&r), limit_of(&r, 0)), (RlsCode::OverLimit, Some((10, HOUR))));
    for _ in 0..10 {
        assert_eq!(c.code("example11", &[&[("files_no_share", "files_no_share/a.pdf")]]).await, RlsCode::Ok);
    }
    assert_eq!(c.code("example11", &[&[("files_no_share", "files_no_share/a.pdf")]]).await, RlsCode::OverLimit);
    assert_eq!(c.code("example11", &[&[("files_no_share", "files_no_share/b.csv")]]).await, RlsCode::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_domain_is_refused_here_and_answered_ok_as_the_reference_on_request() {
    let (redis, rls) = start(MESSAGING).await;
    let mut c = rls.client().await;
    let e = c.call(request("mesaging", &[&[("to_number", "1")]])).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert!(
        e.message().contains("unknown domain \"mesaging\"") && e.message().contains("messaging"),
        "{}",
        e.message()
    );
    let mut setup = Setup::on(Some(&redis.url()));
    setup.options.unknown_domain = UnknownDomain::Allow;
    let lenient = Rls::start(MESSAGING, setup).await;
    let r = lenient.client().await.call(request("mesaging", &[&[("to_number", "1")]])).await.unwrap();
    assert_eq!((overall(&r), limit_of(&r, 0)), (RlsCode::Ok, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_shadow_mode_answers_ok_and_still_counts() {
    let redis = redis();
    let mut setup = Setup::on(Some(&redis.url()));
    setup.options.shadow = true;
    let rls = Rls::start(MESSAGING, setup).await;
    let mut c = rls.client().await;
    let one = || request("messaging", &[&[("message_type", "marketing"), ("to_number", "1")]]);
    for _ in 0..5 {
        assert_eq!(overall(&c.call(one()).await.unwrap()), RlsCode::Ok);
    }
    let r = c.call(one()).await.unwrap();
    assert_eq!((overall(&r), code_of(&r.statuses[0]), r.statuses[0].limit_remaining), (RlsCode::Ok, RlsCode::Ok, 0));
    let _: RateLimitRequest = one();
}
