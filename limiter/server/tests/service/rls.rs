//! The service over real gRPC (a tonic client on a loopback port) against a real
//! `redis-server` each test starts: every field of the response, costs, per-request limits,
//! shadow, unlimited, all-or-nothing against charge-everything, reload under traffic, the
//! failure policies through an outage and a pause, quota grants within their bound, malformed
//! requests, TLS and mutual TLS, health and a graceful shutdown.

use std::time::{Duration, Instant};

use crate::support::*;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use redis_ratelimit_server::service::{Charge, RequestLimits};

const MINUTE: i32 = 2;

const BASIC: &str = r#"
domain: shop
descriptors:
  - key: user
    rate_limit:
      name: per-user
      unit: minute
      requests_per_unit: 3
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 10
      algorithm: gcra
      allow_request_limit: true
  - key: path
    descriptors:
      - key: method
        value: POST
        rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: free
    rate_limit: { unlimited: true }
  - key: trial
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_field_of_the_response_is_answered() {
    let redis = redis();
    let rls = Rls::start(BASIC, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    for left in [2u32, 1, 0] {
        let r = c.call(request("shop", &[&[("user", "alice")], &[("nothing", "here")]])).await.unwrap();
        assert_eq!(overall(&r), RlsCode::Ok);
        let s = &r.statuses[0];
        assert_eq!(code_of(s), RlsCode::Ok);
        let limit = s.current_limit.as_ref().expect("a current limit");
        assert_eq!((limit.name.as_str(), limit.requests_per_unit, limit.unit), ("per-user", 3, MINUTE));
        assert_eq!(s.limit_remaining, left);
        let reset = s.duration_until_reset.as_ref().expect("a reset");
        assert!(reset.seconds <= 60 && (reset.seconds, reset.nanos) > (0, 0), "{reset:?}");
        // A descriptor no entry matches: OK, and nothing else.
        assert_eq!(r.statuses[1], DescriptorStatus { code: RlsCode::Ok as i32, ..Default::default() });
        assert_eq!(response_header(&r, "ratelimit-policy"), Some("\"shop.user\";q=3;w=60"));
        let field = response_header(&r, "ratelimit").expect("a RateLimit field");
        assert!(field.starts_with(&format!("\"shop.user\";r={left};t=")), "{field}");
        assert_eq!(response_header(&r, "retry-after"), None);
    }
    let r = c.call(request("shop", &[&[("user", "alice")]])).await.unwrap();
    assert_eq!(
        (overall(&r), code_of(&r.statuses[0]), r.statuses[0].limit_remaining),
        (RlsCode::OverLimit, RlsCode::OverLimit, 0)
    );
    let retry: u64 = response_header(&r, "retry-after").expect("Retry-After on a refusal").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Another user has a count of their own.
    assert_eq!(c.code("shop", &[&[("user", "bob")]]).await, RlsCode::Ok);
    // A nested entry applies only at its depth.
    assert_eq!(c.code("shop", &[&[("path", "/a"), ("method", "POST")]]).await, RlsCode::Ok);
    assert_eq!(c.code("shop", &[&[("path", "/a"), ("method", "POST")]]).await, RlsCode::OverLimit);
    assert_eq!(c.code("shop", &[&[("path", "/a")]]).await, RlsCode::Ok);
    assert_eq!(c.code("shop", &[&[("path", "/a"), ("method", "GET")]]).await, RlsCode::Ok);
    // Unlimited: OK with the most remaining a status can say.
    let r = c.call(request("shop", &[&[("free", "x")]])).await.unwrap();
    assert_eq!((code_of(&r.statuses[0]), r.statuses[0].limit_remaining), (RlsCode::Ok, u32::MAX));
    assert!(r.statuses[0].current_limit.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_add_per_descriptor_and_zero_peeks() {
    let redis = redis();
    let rls = Rls::start(BASIC, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    let tenant = || descriptor(&[("tenant", "t1")]);
    // The request's hits_addend: 4 of 10.
    let mut req = RateLimitRequest { domain: "shop".into(), descriptors: vec![tenant()], hits_addend: 4 };
    assert_eq!(c.call(req.clone()).await.unwrap().statuses[0].limit_remaining, 6);
    // A descriptor's own hits_addend wins over the request's; 0 only looks.
    req.descriptors = vec![costing(tenant(), 0)];
    assert_eq!(c.call(req.clone()).await.unwrap().statuses[0].limit_remaining, 6);
    req.descriptors = vec![costing(tenant(), 5)];
    assert_eq!(c.call(req.clone()).await.unwrap().statuses[0].limit_remaining, 1);
    // More than is left: refused, nothing taken.
    req.descriptors = vec![costing(tenant(), 2)];
    let r = c.call(req.clone()).await.unwrap();
    assert_eq!((overall(&r), r.statuses[0].limit_remaining), (RlsCode::OverLimit, 1));
    // More than the limit could ever admit: refused without charging the others.
    req.descriptors = vec![costing(descriptor(&[("user", "carol")]), 1), costing(tenant(), 11)];
    let r = c.call(req.clone()).await.unwrap();
    assert_eq!((overall(&r), code_of(&r.statuses[1])), (RlsCode::OverLimit, RlsCode::OverLimit));
    assert_eq!((code_of(&r.statuses[0]), r.statuses[0].limit_remaining), (RlsCode::Ok, 3), "carol was not charged");
    // Two descriptors counting one state are one limit of their summed cost.
    req.descriptors = vec![costing(descriptor(&[("user", "dave")]), 2), costing(descriptor(&[("user", "dave")]), 2)];
    let r = c.call(req.clone()).await.unwrap();
    assert_eq!(overall(&r), RlsCode::OverLimit);
    req.hits_addend = 0;
    req.descriptors = vec![descriptor(&[("user", "dave")]), descriptor(&[("user", "dave")])];
    let r = c.call(req.clone()).await.unwrap();
    assert_eq!((overall(&r), r.statuses[0].limit_remaining, r.statuses[1].limit_remaining), (RlsCode::Ok, 1, 1));
    // A cost no limit can represent is refused, naming it.
    req.descriptors = vec![costing(tenant(), u64::MAX)];
    let e = c.call(req).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("descriptors[0].hits_addend is 18446744073709551615"), "{}", e.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_s_own_limit_applies_where_the_configuration_allows_it() {
    let redis = redis();
    let rls = Rls::start(BASIC, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    let plan = |n| RateLimitRequest {
        domain: "shop".into(),
        descriptors: vec![limited(descriptor(&[("tenant", "t9")]), n, MINUTE)],
        hits_addend: 0,
    };
    let r = c.call(plan(2)).await.unwrap();
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit, r.statuses[0].limit_remaining), (2, 1));
    assert_eq!(overall(&c.call(plan(2)).await.unwrap()), RlsCode::Ok);
    assert_eq!(overall(&c.call(plan(2)).await.unwrap()), RlsCode::OverLimit);
    // A larger plan counts against the same state (GCRA's is a time: what the tenant used
    // is 60 s of queue under either plan, so the larger one has nothing left either yet).
    let r = c.call(plan(5)).await.unwrap();
    assert_eq!(
        (r.statuses[0].current_limit.as_ref().unwrap().requests_per_unit, r.statuses[0].limit_remaining),
        (5, 0)
    );
    // A limit of 0 refuses.
    assert_eq!(overall(&c.call(plan(0)).await.unwrap()), RlsCode::OverLimit);
    // Where the entry does not allow it, the configured limit stands.
    let user = RateLimitRequest {
        domain: "shop".into(),
        descriptors: vec![limited(descriptor(&[("user", "u1")]), 100, MINUTE)],
        hits_addend: 0,
    };
    let r = c.call(user).await.unwrap();
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().requests_per_unit, 3);

    // Honoured anywhere, as the reference does: a descriptor no entry matches is limited too.
    let mut setup = Setup::on(Some(&redis.url()));
    setup.options.request_limits = RequestLimits::Anywhere;
    let anywhere = Rls::start(BASIC, setup).await;
    let mut c = anywhere.client().await;
    let other = || RateLimitRequest {
        domain: "shop".into(),
        descriptors: vec![limited(descriptor(&[("ip", "10.0.0.1")]), 1, MINUTE)],
        hits_addend: 0,
    };
    assert_eq!(overall(&c.call(other()).await.unwrap()), RlsCode::Ok);
    assert_eq!(overall(&c.call(other()).await.unwrap()), RlsCode::OverLimit);
    let r = c.call(user_limited(100)).await.unwrap();
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().requests_per_unit, 100);
}

fn user_limited(n: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: "shop".into(),
        descriptors: vec![limited(descriptor(&[("user", "u2")]), n, MINUTE)],
        hits_addend: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_limit_reports_to_the_upstream_and_never_refuses() {
    let redis = redis();
    let rls = Rls::start(BASIC, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    assert_eq!(c.code("shop", &[&[("trial", "x")]]).await, RlsCode::Ok);
    let r = c.call(request("shop", &[&[("trial", "x")], &[("user", "erin")]])).await.unwrap();
    assert_eq!((overall(&r), code_of(&r.statuses[0])), (RlsCode::Ok, RlsCode::Ok));
    let shadow = request_header(&r, "ratelimit-shadow").expect("the upstream hears of the shadow limit");
    assert!(shadow.contains("\"shop.trial\"") && shadow.contains("denied"), "{shadow}");
    assert!(response_header(&r, "ratelimit-shadow").is_none(), "not the client");
    // The enforced limit beside it was charged: a shadow limit never refuses a request.
    assert_eq!(r.statuses[1].limit_remaining, 2);
}

const TWO: &str = r#"
domain: api
descriptors:
  - key: client
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: route
    rate_limit: { unit: minute, requests_per_unit: 1 }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_charges_a_refused_request_nothing_and_charge_everything_does() {
    let redis = redis();
    let all = Rls::start(TWO, Setup::on(Some(&redis.url()))).await;
    let mut setup = Setup::on(Some(&redis.url()));
    setup.engine.key_prefix = "rls-everything".into();
    setup.options.charge = Charge::Everything;
    let every = Rls::start(TWO, setup).await;
    for (rls, after_refusals) in [(&all, [4, 4, 4]), (&every, [3, 2, 1])] {
        let mut c = rls.client().await;
        let req = || request("api", &[&[("client", "c1")], &[("route", "/pay")]]);
        let first = c.call(req()).await.unwrap();
        assert_eq!((overall(&first), first.statuses[0].limit_remaining), (RlsCode::Ok, 4));
        for left in after_refusals {
            let r = c.call(req()).await.unwrap();
            assert_eq!(overall(&r), RlsCode::OverLimit);
            assert_eq!(code_of(&r.statuses[0]), RlsCode::Ok, "the client limit alone admits it");
            assert_eq!(r.statuses[0].limit_remaining, left);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_is_reloaded_under_traffic_and_a_bad_one_refused() {
    let redis = redis();
    let rls = Rls::start(TWO, Setup::on(Some(&redis.url()))).await;
    let client = rls.client().await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = {
        let (mut c, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut answered, mut failed) = (0u64, Vec::new());
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                match c.call(request("api", &[&[("client", &format!("k{n}"))]])).await {
                    Ok(_) => answered += 1,
                    Err(e) => failed.push(e.to_string()),
                }
            }
            (answered, failed)
        })
    };
    let mut c = client.clone();
    for limit in [7, 9, 11] {
        rls.rewrite(&TWO.replace("requests_per_unit: 5", &format!("requests_per_unit: {limit}")));
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = c.call(request("api", &[&[("client", "probe")]])).await.unwrap();
            if r.statuses[0].current_limit.as_ref().unwrap().requests_per_unit == limit {
                break;
            }
            assert!(Instant::now() < deadline, "the limit {limit} was never put in force");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // A bad file: the configuration in force stays.
    rls.rewrite(
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = c.call(request("api", &[&[("client", "probe2")]])).await.unwrap();
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().requests_per_unit, 11);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (answered, failed) = traffic.await.unwrap();
    assert!(failed.is_empty(), "calls failed during reloads: {failed:?}");
    assert!(answered > 10, "{answered}");
}

const POLICIES: &str = r#"
domain: degraded
descriptors:
  - key: open
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: closed
    rate_limit: { unit: minute, requests_per_unit: 100, failure_policy: fail-closed }
  - key: budget
    rate_limit:
      unit: minute
      requests_per_unit: 100
      failure_policy: local-budget
      local_budget: { requests_per_unit: 2, unit: minute }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_policy_answers_honestly_through_an_outage_and_a_pause() {
    let mut redis = redis();
    let rls = Rls::start(POLICIES, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    assert_eq!(c.code("degraded", &[&[("closed", "a")]]).await, RlsCode::Ok);

    for fault in ["outage", "pause"] {
        match fault {
            "outage" => redis.kill(),
            _ => redis.pause().expect("SIGSTOP"),
        }
        let started = Instant::now();
        for _ in 0..8 {
            let r = c.call(request("degraded", &[&[("open", fault)]])).await.unwrap();
            assert_eq!(overall(&r), RlsCode::Ok, "fail-open admits ({fault})");
            let said = request_header(&r, "ratelimit-degraded").expect("the upstream hears it was not checked");
            assert!(said.starts_with("fail-open;reason="), "{said}");
        }
        let r = c.call(request("degraded", &[&[("closed", fault)]])).await.unwrap();
        assert_eq!(overall(&r), RlsCode::OverLimit, "fail-closed refuses ({fault})");
        let body = String::from_utf8(r.raw_body.clone()).unwrap();
        assert!(body.contains("cannot reach its store") && body.contains("fails closed"), "{body}");
        assert!(response_header(&r, "ratelimit-degraded").unwrap().starts_with("fail-closed"));
        let budget: Vec<RlsCode> = {
            let mut v = Vec::new();
            for _ in 0..3 {
                v.push(c.code("degraded", &[&[("budget", fault)]]).await);
            }
            v
        };
        assert_eq!(budget, [RlsCode::Ok, RlsCode::Ok, RlsCode::OverLimit], "the local budget ({fault})");
        // The breaker opened: nothing waits on a stalled Redis for long.
        assert!(started.elapsed() < Duration::from_secs(3), "{fault}: {:?}", started.elapsed());
        assert!(!rls.service.engine().store_available(), "the breaker is open ({fault})");
        match fault {
            "outage" => redis.restart().expect("restarts"),
            _ => redis.resume().expect("SIGCONT"),
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = c.call(request("degraded", &[&[("open", "after")]])).await.unwrap();
            if request_header(&r, "ratelimit-degraded").is_none() {
                break;
            }
            assert!(Instant::now() < deadline, "Redis never decided again after the {fault}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

const GRANTS: &str = r#"
domain: hot
descriptors:
  - key: api
    rate_limit:
      unit: second
      requests_per_unit: 200
      algorithm: gcra
      quota_grants: { lifetime: 200ms, max_requests: 40 }
  - key: region
    rate_limit:
      unit: second
      requests_per_unit: 1000
      algorithm: token-bucket
      quota_grants: { lifetime: 200ms, max_requests: 40 }
  - key: plain
    rate_limit: { unit: second, requests_per_unit: 1000 }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_grants_let_a_proxy_decide_within_the_bound() {
    let redis = redis();
    let rls = Rls::start(GRANTS, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    // Without asking, no quota.
    let r = c.call(request("hot", &[&[("api", "k")]])).await.unwrap();
    assert!(r.statuses[0].quota.is_none());
    // Asked for, on a limit that allows grants: a quota valid for less than its lifetime.
    let r = c.call_with_grants(request("hot", &[&[("api", "k")], &[("unknown", "x")]])).await.unwrap();
    assert_eq!(overall(&r), RlsCode::Ok);
    let q = r.statuses[0].quota.as_ref().expect("a quota");
    assert!((1..=40).contains(&q.requests), "{q:?}");
    let Some(ExpirationSpecifier::ValidUntil(until)) = &q.expiration_specifier else { panic!("valid_until") };
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let until_ms = until.seconds * 1000 + i64::from(until.nanos) / 1_000_000;
    assert!(until_ms > now_ms - 50 && until_ms <= now_ms + 200, "valid until {until_ms}, now {now_ms}");
    assert_eq!(r.statuses[1].quota.as_ref().map(|q| q.requests), Some(u32::MAX), "the set's other descriptor");
    // A limit that does not allow grants takes the whole set out of them.
    let r = c.call_with_grants(request("hot", &[&[("api", "k")], &[("plain", "x")]])).await.unwrap();
    assert!(r.statuses.iter().all(|s| s.quota.is_none()));
    // Two limits that allow grants: one quota each.
    let r = c.call_with_grants(request("hot", &[&[("api", "k2")], &[("region", "eu")]])).await.unwrap();
    assert!(r.statuses.iter().all(|s| s.quota.as_ref().is_some_and(|q| q.requests > 0)), "{r:?}");

    // A proxy that honours its quotas as the protocol describes (a cached quota admits until it
    // runs out, then refuses until it expires; only then is the service asked again), at four
    // times the limit for a second: what it and the service admit together stays within
    // GCRA's bound, B + L * d / T, and the service is asked for a small share of the decisions.
    let started = Instant::now();
    let (mut admitted, mut decisions, mut calls) = (0u64, 0u64, 0u64);
    let mut held: Option<(u32, Instant)> = None;
    while started.elapsed() < Duration::from_secs(1) {
        let now = Instant::now();
        decisions += 1;
        match &mut held {
            Some((n, until)) if now < *until => {
                if *n > 0 {
                    *n -= 1;
                    admitted += 1;
                }
            }
            _ => {
                calls += 1;
                let r = c.call_with_grants(request("hot", &[&[("api", "bound")]])).await.unwrap();
                admitted += u64::from(overall(&r) == RlsCode::Ok);
                held = r.statuses[0].quota.as_ref().map(|q| {
                    let Some(ExpirationSpecifier::ValidUntil(u)) = &q.expiration_specifier else {
                        panic!("valid_until")
                    };
                    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
                    let until_ms = u.seconds as u64 * 1000 + u.nanos as u64 / 1_000_000;
                    (
                        q.requests,
                        Instant::now() + Duration::from_millis(until_ms.saturating_sub(wall.as_millis() as u64)),
                    )
                });
            }
        }
        tokio::time::sleep(Duration::from_micros(1250)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let bound = 200.0 + 200.0 * elapsed;
    assert!((admitted as f64) <= bound, "admitted {admitted} in {elapsed:.2} s, bound {bound:.0}");
    assert!(admitted >= 100, "the grants admitted too little: {admitted}");
    assert!(calls * 10 <= decisions, "{calls} calls for {decisions} decisions: grants saved little");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_a_status_naming_what_is_wrong() {
    let redis = redis();
    let rls = Rls::start(BASIC, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    let cases: Vec<(RateLimitRequest, tonic::Code, &str)> = vec![
        (request("", &[&[("user", "a")]]), tonic::Code::InvalidArgument, "domain is empty"),
        (request("shop", &[]), tonic::Code::InvalidArgument, "descriptors is empty"),
        (request("shop", &[&[]]), tonic::Code::InvalidArgument, "descriptors[0] has no entries"),
        (
            request("shop", &[&[("user", "a")], &[("", "x")]]),
            tonic::Code::InvalidArgument,
            "descriptors[1].entries[0].key is empty",
        ),
        (request("nowhere", &[&[("user", "a")]]), tonic::Code::NotFound, "unknown domain \"nowhere\""),
        (request("shop", &[&[("user", &"v".repeat(5_000))]]), tonic::Code::InvalidArgument, "value is 5000 bytes long"),
        (
            RateLimitRequest {
                domain: "shop".into(),
                descriptors: vec![limited(descriptor(&[("tenant", "t")]), 5, 99)],
                hits_addend: 0,
            },
            tonic::Code::InvalidArgument,
            "descriptors[0].limit.unit is 99",
        ),
    ];
    for (req, code, says) in cases {
        let e = c.call(req).await.unwrap_err();
        assert_eq!(e.code(), code, "{}", e.message());
        assert!(e.message().contains(says), "{:?} does not say {says:?}", e.message());
    }
    let many =
        RateLimitRequest { domain: "shop".into(), descriptors: vec![descriptor(&[("user", "a")]); 65], hits_addend: 0 };
    assert!(c.call(many).await.unwrap_err().message().contains("above the bound of 64"));
    // Text that is not UTF-8 cannot be a protobuf string: refused as it is decoded, naming the field.
    let e = send_raw(rls.channel().await, b"shop", b"user", &[0xff, 0xfe]).await.unwrap_err();
    assert!(e.message().contains("not UTF-8") || e.message().contains("invalid string"), "{}", e.message());
    // The service still answers.
    assert_eq!(c.code("shop", &[&[("user", "after")]]).await, RlsCode::Ok);
}

/// Sends a request whose domain, key and value are the bytes given, UTF-8 or not (protobuf's
/// strings and bytes share a wire type, so a message of bytes fields encodes what a client of
/// strings cannot).
async fn send_raw(
    channel: tonic::transport::Channel,
    domain: &[u8],
    key: &[u8],
    value: &[u8],
) -> Result<(), tonic::Status> {
    #[derive(Clone, PartialEq, prost::Message)]
    struct RawEntry {
        #[prost(bytes = "vec", tag = "1")]
        key: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        value: Vec<u8>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct RawDescriptor {
        #[prost(message, repeated, tag = "1")]
        entries: Vec<RawEntry>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct RawRequest {
        #[prost(bytes = "vec", tag = "1")]
        domain: Vec<u8>,
        #[prost(message, repeated, tag = "2")]
        descriptors: Vec<RawDescriptor>,
    }
    let raw = RawRequest {
        domain: domain.to_vec(),
        descriptors: vec![RawDescriptor { entries: vec![RawEntry { key: key.to_vec(), value: value.to_vec() }] }],
    };
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let codec = tonic_prost::ProstCodec::<RawRequest, envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse>::default();
    let path = http::uri::PathAndQuery::from_static("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit");
    grpc.unary(tonic::Request::new(raw), path, codec).await.map(drop)
}
