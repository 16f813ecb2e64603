use std::convert::Infallible;
use std::time::Duration;

use tower::ServiceExt;

use super::*;
use crate::rules::{Match, Rule, RuleSet};
use crate::{Algorithm, BreakerConfig, FailurePolicy, Quota, RedisStore};

fn rule(name: &str, policy: FailurePolicy) -> Rule {
    Rule::new(name, Algorithm::TokenBucket, Quota::per_second(100))
        .matching(Match::any().path(&format!("/{name}")))
        .failure_policy(policy)
}

async fn call(layer: &RulesLayer, path: &str) -> Response<String> {
    let svc = layer
        .layer(tower::service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(String::from("ok"))) }));
    svc.oneshot(Request::builder().uri(path).body(()).unwrap()).await.unwrap().map(HeldBody::into_inner)
}

#[tokio::test]
async fn without_redis_each_answer_describes_the_policy_actually_enforced() {
    let rules = RuleSet::builder()
        .rule(rule("closed", FailurePolicy::FailClosed))
        .rule(rule("budget", FailurePolicy::LocalBudget { limit: 2, period: Duration::from_secs(3600) }))
        .rule(rule("open", FailurePolicy::FailOpen))
        .build()
        .unwrap();
    // Nothing listens on port 1: every call fails at once, and the breaker opens for 5 s.
    let store = RedisStore::from_url("redis://127.0.0.1:1/").unwrap().with_timeout(Duration::from_secs(1)).unwrap();
    // At the start of an hour: the budget's window is whole.
    let clock = std::sync::Arc::new(crate::ManualClock::new(1_767_225_600_000));
    let enforcer = Enforcer::builder(rules)
        .redis(store)
        .clock(clock)
        .breaker(BreakerConfig::new(1, Duration::from_secs(5)))
        .build()
        .unwrap();
    let layer = RulesLayer::new(enforcer);
    for _ in 0..2 {
        let closed = call(&layer, "/closed").await;
        assert_eq!(closed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(closed.body().contains(problem::TEMPORARY_REDUCED_CAPACITY), "{}", closed.body());
        assert!(closed.body().contains("\"policies\":[\"closed\"]"), "{}", closed.body());
        // The breaker's next probe, at the earliest: the rest of its 5 s open period.
        assert_eq!(closed.headers()["retry-after"], "5");
        // No quota is enforced, so none is described.
        assert!(!closed.headers().contains_key("ratelimit-policy") && !closed.headers().contains_key("ratelimit"));
    }
    for r in [1, 0] {
        let budget = call(&layer, "/budget").await;
        assert_eq!(budget.status(), StatusCode::OK);
        // The local budget answers, and the fields say so: 2 per hour, not 100 per second.
        assert_eq!(budget.headers()["ratelimit-policy"], "\"budget\";q=2;w=3600");
        assert_eq!(budget.headers()["ratelimit"], format!("\"budget\";r={r};t=3600").as_str());
    }
    let over = call(&layer, "/budget").await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS, "the budget is a quota, and it is spent");
    assert!(over.body().contains(problem::QUOTA_EXCEEDED));
    let open = call(&layer, "/open").await;
    assert_eq!(open.status(), StatusCode::OK);
    assert!(!open.headers().contains_key("ratelimit-policy"), "fail-open enforces nothing");
}

#[tokio::test]
async fn legacy_names_describe_the_rule_that_admits_least() {
    let rules = RuleSet::builder()
        .rule(Rule::new("minute", Algorithm::FixedWindow, Quota::per_minute(3)))
        .rule(Rule::new("hour", Algorithm::FixedWindow, Quota::new(100, Duration::from_secs(3600))))
        .build()
        .unwrap();
    let enforcer = || Enforcer::builder(rules.clone()).build().unwrap();
    let plain = call(&RulesLayer::new(enforcer()), "/").await;
    assert!(!plain.headers().contains_key("x-ratelimit-remaining"), "only when asked for");
    let layer = RulesLayer::new(enforcer()).legacy_headers();
    let first = call(&layer, "/").await;
    let h = first.headers();
    assert_eq!((h["x-ratelimit-limit"].to_str().unwrap(), h["x-ratelimit-remaining"].to_str().unwrap()), ("3", "2"));
    assert!(h.contains_key("ratelimit") && h.contains_key("x-ratelimit-reset"), "{h:?}");
    call(&layer, "/").await;
    call(&layer, "/").await;
    let denied = call(&layer, "/").await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.headers()["x-ratelimit-remaining"], "0", "{:?}", denied.headers());
}

#[tokio::test]
async fn one_hook_replaces_every_refusal() {
    let rules = RuleSet::builder()
        .rule(Rule::new("once", Algorithm::SlidingLog, Quota::per_minute(1)))
        .access(crate::rules::AccessLists::new().deny(crate::rules::AccessList::new().key("banned")))
        .build()
        .unwrap();
    let layer = RulesLayer::new(Enforcer::builder(rules).build().unwrap()).on_rejection(|r| {
        let mut response = Response::new(format!("no ({})", r.status().as_u16()));
        *response.status_mut() = StatusCode::IM_A_TEAPOT;
        response
    });
    assert_eq!(call(&layer, "/").await.status(), StatusCode::OK);
    let denied = call(&layer, "/").await;
    assert_eq!((denied.status(), denied.body().as_str()), (StatusCode::IM_A_TEAPOT, "no (429)"));
    assert!(!denied.headers().contains_key("retry-after"), "the hook's response is the whole response");
}

/// An axum server that records each connection's peer (`ConnectInfo`) is all the client-IP
/// rules need: no middleware copies the address into the request. Over real TCP, so what is
/// tested is what axum itself puts in the request's extensions.
#[cfg(feature = "axum")]
#[tokio::test]
async fn axum_connect_info_is_the_peer_address() {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let rules = RuleSet::builder()
        .rule(Rule::new("per-ip", Algorithm::SlidingLog, Quota::per_minute(1)).key([crate::rules::KeyPart::ClientIp]))
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(RulesLayer::new(Enforcer::builder(rules).build().unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server =
        tokio::spawn(
            async move { axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await },
        );
    let get = || async move {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).await.unwrap();
        reply
    };
    let first = get().await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    // Another connection from the same address is the same client: without the peer the
    // rule would have no key and the request would be refused as keyless (400) instead.
    let second = get().await;
    assert!(second.starts_with("HTTP/1.1 429"), "{second}");
    server.abort();
}

/// An in-flight rule's permit is held while the response streams, and goes back when its
/// body ends or is dropped; a request over it is told when to retry, and a request the
/// rate rules refuse takes no permit.
#[tokio::test]
async fn in_flight_permits_are_held_until_the_body_ends_and_refusals_say_when_to_retry() {
    use crate::rules::{InFlightRule, KeyPart};
    use http_body::Body as _;
    let rules = RuleSet::builder()
        .rule(Rule::new("per-minute", Algorithm::SlidingLog, Quota::per_minute(4)).key([KeyPart::header("x-user")]))
        .in_flight(
            InFlightRule::new("one-export", 1, Duration::from_secs(30))
                .matching(Match::any().path("/export"))
                .key([KeyPart::header("x-user")]),
        )
        .build()
        .unwrap();
    let svc = RulesLayer::new(Enforcer::builder(rules).build().unwrap()).layer(tower::service_fn(
        |_req: Request<()>| async { Ok::<_, Infallible>(Response::new(String::from("rows"))) },
    ));
    let get = |path: &str, user: &str| {
        let svc = svc.clone();
        let req = Request::builder().uri(path).header("x-user", user).body(()).unwrap();
        async move { svc.oneshot(req).await.unwrap() }
    };
    let mut streaming = get("/export", "ann").await;
    assert_eq!(streaming.status(), StatusCode::OK);
    // Its body is not sent yet: ann's one permit is held, bob's is free, other paths take none.
    let over = get("/export", "ann").await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(over.headers()["retry-after"], "30", "the longest the wait can be: the lease");
    let problem = over.body().get_ref();
    assert!(problem.contains(r#""violated-policies":["one-export"]"#), "{problem}");
    assert_eq!(get("/export", "bob").await.status(), StatusCode::OK);
    assert_eq!(get("/other", "ann").await.status(), StatusCode::OK);
    // The body sent to its end: the permit goes back.
    let frame = std::future::poll_fn(|cx| std::pin::Pin::new(streaming.body_mut()).poll_frame(cx)).await;
    assert!(frame.is_some());
    assert!(std::future::poll_fn(|cx| std::pin::Pin::new(streaming.body_mut()).poll_frame(cx)).await.is_none());
    let again = get("/export", "ann").await;
    assert_eq!(again.status(), StatusCode::OK);
    // ann has used her 4 per minute: refused by the rate rule, she takes no permit.
    drop(again);
    assert_eq!(get("/export", "ann").await.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(get("/export", "carl").await.status(), StatusCode::OK);
}

/// Input and output tokens as two rules: the upstream states each real cost in a header
/// of its own, and each rule is reconciled with it; a rule without its header keeps the
/// cost it was charged.
#[tokio::test]
async fn each_rule_is_reconciled_with_the_real_cost_its_header_states() {
    let tokens = |name: &str, header: &str| {
        Rule::new(name, Algorithm::Gcra, Quota::per_minute(100)).cost(10).real_cost_header(header)
    };
    let rules = RuleSet::builder()
        .rule(tokens("input", "x-input-tokens"))
        .rule(tokens("output", "x-output-tokens"))
        .rule(tokens("cached", "x-cached-tokens"))
        .build()
        .unwrap();
    let enforcer = Enforcer::builder(rules).build().unwrap();
    let svc = RulesLayer::new(enforcer.clone()).layer(tower::service_fn(|_req: Request<()>| async {
        let mut response = Response::new(String::from("ok"));
        response.headers_mut().insert("x-input-tokens", HeaderValue::from_static("4"));
        response.headers_mut().insert("x-output-tokens", HeaderValue::from_static("55"));
        Ok::<_, Infallible>(response)
    }));
    let req = || Request::builder().uri("/v1/chat").body(()).unwrap();
    assert_eq!(svc.oneshot(req()).await.unwrap().status(), StatusCode::OK);
    let left = |rule: &'static str| {
        let enforcer = enforcer.clone();
        async move { enforcer.state(rule, &req()).await.unwrap().remaining }
    };
    for _ in 0..1_000 {
        if (left("input").await, left("output").await) == (96, 45) {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!((left("input").await, left("output").await, left("cached").await), (96, 45, 90));
}
