//! In-flight limits over real gRPC against a real `redis-server`: a request's permit is held
//! from its call until the proxy's call at the stream's end sends its ticket back; permits and
//! rate limits of one request are all-or-nothing; a bad ticket is refused without being
//! echoed; with Redis dead each failure policy answers and says so; and without Redis the
//! instance counts them itself.

use crate::support::*;

const IN_FLIGHT: &str = r#"
domain: llm
descriptors:
  - key: tenant
    rate_limit:
      name: streams
      in_flight: 2
      lease: 30s
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: closed
    rate_limit: { in_flight: 5, failure_policy: fail-closed }
  - key: open
    rate_limit: { in_flight: 5 }
"#;

/// The call Envoy makes when the stream ends (`apply_on_stream_done`), reading the metadata.
fn release(tickets: &str) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    request("llm", &[&[("ratelimit.permits", tickets)]])
}

/// Holders Redis keeps for a tenant's permits.
fn holders(redis: &redis_tests::RedisServer, tenant: &str) -> u64 {
    let mut conn = redis.client().expect("connect");
    let key = format!("rls-test:{{tenant={tenant}}}:llm.tenant:permits");
    redis::cmd("ZCARD").arg(key).query(&mut conn).expect("ZCARD")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_is_held_until_the_stream_end_call_gives_its_ticket_back() {
    let redis = redis();
    let rls = Rls::start(IN_FLIGHT, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    let acme = || request("llm", &[&[("tenant", "acme")]]);

    let first = c.call(acme()).await.expect("answered");
    let second = c.call(acme()).await.expect("answered");
    assert_eq!((overall(&first), overall(&second)), (RlsCode::Ok, RlsCode::Ok));
    let limit = first.statuses[0].current_limit.as_ref().expect("a current limit");
    assert_eq!((limit.name.as_str(), limit.requests_per_unit, limit.unit), ("streams", 2, 0));
    assert_eq!((first.statuses[0].limit_remaining, second.statuses[0].limit_remaining), (1, 0));
    let (t1, t2) = (permit_tickets(&first).expect("a ticket"), permit_tickets(&second).expect("a ticket"));
    assert_ne!(t1, t2);
    assert_eq!(holders(&redis, "acme"), 2);

    // Full: refused with the wait, holding nothing, carrying no ticket.
    let full = c.call(acme()).await.expect("answered");
    assert_eq!((overall(&full), code_of(&full.statuses[0])), (RlsCode::OverLimit, RlsCode::OverLimit));
    let wait: u64 = response_header(&full, "retry-after").expect("a wait").parse().expect("seconds");
    assert!((29..=30).contains(&wait), "{wait}");
    assert!(permit_tickets(&full).is_none());
    // Another tenant has its own permits.
    assert_eq!(c.code("llm", &[&[("tenant", "globex")]]).await, RlsCode::Ok);

    // The stream ended: its ticket comes back, and the permit is free once.
    assert_eq!(overall(&c.call(release(&t1)).await.expect("answered")), RlsCode::Ok);
    assert_eq!(holders(&redis, "acme"), 1);
    assert_eq!(overall(&c.call(release(&t1)).await.expect("answered")), RlsCode::Ok);
    assert_eq!(holders(&redis, "acme"), 1, "a ticket released twice frees nothing of another's");
    let third = c.call(acme()).await.expect("answered");
    assert_eq!(overall(&third), RlsCode::Ok);
    // One call gives back several tickets.
    let both = format!("{t2} {}", permit_tickets(&third).expect("a ticket"));
    assert_eq!(overall(&c.call(release(&both)).await.expect("answered")), RlsCode::Ok);
    assert_eq!(holders(&redis, "acme"), 0);

    // A ticket that is not one is refused by what is wrong, never echoed.
    let err = c.call(release("llm.tenant/p1:s:secret-guess:tenant=acme")).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("token") && !err.message().contains("secret"), "{}", err.message());
    let err = c.call(release("no-limit-named")).await.expect_err("refused");
    assert!(err.message().contains("names no limit"), "{}", err.message());
    // A well-formed ticket nobody holds releases nothing.
    let forged = format!("llm.tenant/p1:s:{}.1:tenant=acme", "0".repeat(32));
    let _held = c.call(acme()).await.expect("answered");
    assert_eq!(overall(&c.call(release(&forged)).await.expect("answered")), RlsCode::Ok);
    assert_eq!(holders(&redis, "acme"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_by_anything_holds_no_permit_and_a_full_one_is_charged_nothing() {
    let redis = redis();
    let rls = Rls::start(IN_FLIGHT, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    let both = || request("llm", &[&[("tenant", "acme")], &[("user", "bob")]]);

    // The user's rate limit of 2 a minute refuses the third: its permit is given back.
    for _ in 0..2 {
        let r = c.call(both()).await.expect("answered");
        assert_eq!(overall(&r), RlsCode::Ok);
        c.call(release(&permit_tickets(&r).expect("a ticket"))).await.expect("released");
    }
    let r = c.call(both()).await.expect("answered");
    assert_eq!((overall(&r), code_of(&r.statuses[1])), (RlsCode::OverLimit, RlsCode::OverLimit));
    assert!(permit_tickets(&r).is_none());
    assert_eq!(holders(&redis, "acme"), 0, "the refused request's permit was given back");

    // With the tenant's permits full, the request is refused and its user is charged nothing.
    let held: Vec<_> = [
        c.call(request("llm", &[&[("tenant", "acme")]])).await,
        c.call(request("llm", &[&[("tenant", "acme")]])).await,
    ]
    .into_iter()
    .map(|r| permit_tickets(&r.expect("answered")).expect("a ticket"))
    .collect();
    let carol = || request("llm", &[&[("tenant", "acme")], &[("user", "carol")]]);
    let r = c.call(carol()).await.expect("answered");
    assert_eq!((code_of(&r.statuses[0]), code_of(&r.statuses[1])), (RlsCode::OverLimit, RlsCode::Ok));
    assert_eq!(r.statuses[1].limit_remaining, 2, "carol was not charged");
    c.call(release(&held.join(" "))).await.expect("released");
    let r = c.call(carol()).await.expect("answered");
    assert_eq!((overall(&r), r.statuses[1].limit_remaining), (RlsCode::Ok, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_dead_each_policy_answers_in_flight_limits_and_says_so() {
    let mut redis = redis();
    let rls = Rls::start(IN_FLIGHT, Setup::on(Some(&redis.url()))).await;
    let mut c = rls.client().await;
    redis.kill();
    let r = c.call(request("llm", &[&[("closed", "x")]])).await.expect("answered");
    assert_eq!(overall(&r), RlsCode::OverLimit);
    assert_eq!(response_header(&r, "ratelimit-degraded"), Some("fail-closed;reason=unavailable"));
    assert!(String::from_utf8_lossy(&r.raw_body).contains("cannot reach its store"));
    let r = c.call(request("llm", &[&[("open", "x")]])).await.expect("answered");
    assert_eq!(overall(&r), RlsCode::Ok);
    assert!(response_header(&r, "ratelimit-degraded").is_some_and(|h| h.starts_with("fail-open")), "{r:?}");
    assert!(permit_tickets(&r).is_none(), "a fail-open permit is held nowhere: nothing to give back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_permits_are_counted_in_the_instance() {
    let rls = Rls::start(IN_FLIGHT, Setup::on(None)).await;
    let mut c = rls.client().await;
    let acme = || request("llm", &[&[("tenant", "acme")]]);
    let held: Vec<String> = [c.call(acme()).await, c.call(acme()).await]
        .into_iter()
        .map(|r| permit_tickets(&r.expect("answered")).expect("a ticket"))
        .collect();
    assert_eq!(overall(&c.call(acme()).await.expect("answered")), RlsCode::OverLimit);
    assert_eq!(overall(&c.call(release(&held[0])).await.expect("answered")), RlsCode::Ok);
    let r = c.call(acme()).await.expect("answered");
    assert_eq!((overall(&r), response_header(&r, "ratelimit-degraded")), (RlsCode::Ok, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_bounded_by_the_descriptors_a_request_may_hold_and_not_by_one_entry() {
    let redis = redis();
    let mut setup = Setup::on(Some(&redis.url()));
    setup.options.max_descriptors = 4;
    setup.options.max_entry_bytes = 256;
    let rls = Rls::start(IN_FLIGHT, setup).await;
    let mut c = rls.client().await;
    // Three tenants of long names: their tickets together are longer than one entry may be.
    let long = |n: usize| format!("{n}{}", "x".repeat(150));
    let mut tickets = Vec::new();
    for n in 0..3 {
        let r = c.call(request("llm", &[&[("tenant", &long(n))]])).await.expect("answered");
        tickets.push(permit_tickets(&r).expect("a ticket"));
    }
    let all = tickets.join(" ");
    assert!(all.len() > 256, "{}", all.len());
    assert_eq!(overall(&c.call(release(&all)).await.expect("answered")), RlsCode::Ok);
    for n in 0..3 {
        assert_eq!(holders(&redis, &long(n)), 0);
    }
    // More tickets than a request may hold descriptors: refused by the bound, none echoed.
    let r = c.call(request("llm", &[&[("tenant", "s")]])).await.expect("answered");
    let short = permit_tickets(&r).expect("a ticket");
    let five = [short.as_str(); 5].join(" ");
    let err = c.call(release(&five)).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("above the bound of 4") && !err.message().contains("p1:"), "{}", err.message());
}
