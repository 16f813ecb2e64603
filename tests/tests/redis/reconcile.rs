//! Costs known after the work, on a real server: a request admitted on an estimate is
//! reconciled with its real cost. For every algorithm, on either clock, the excess is charged
//! into debt that later requests wait out, never beyond one capacity owed or the limiter's cap
//! on one request's excess; a surplus pays the debt back before it frees anything; and an
//! enforcer reconciles input and output tokens as two rules of one request.

use std::time::Duration;

use http::Request;
use redis_ratelimit::enforce::{Enforcer, Ruling};
use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};
use redis_ratelimit::{Algorithm, Error, ErrorKind, Limiter, Quota, Reconciled, RedisStore, TimeSource};
use redis_tests::RedisServer;

/// Three per ten minutes: nothing refills while a test runs.
fn quota() -> Quota {
    Quota::new(3, Duration::from_secs(600))
}

/// How many of `n` requests of one unit on `key` are admitted.
async fn admitted(l: &Limiter, key: &str, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        admitted += usize::from(l.check(key).await.expect("decides").allowed);
    }
    admitted
}

/// One key's life through reconciliations, the same for every store and clock.
async fn walk(l: &Limiter, key: &str, what: &str) {
    // Admitted on an estimate of 1, it cost 3: the key is spent.
    assert!(l.check(key).await.expect("decides").allowed, "{what}");
    let settled = l.reconcile(key, 1, 3).await.expect("reconciled");
    assert_eq!(settled, Reconciled::Charged { excess: 2, charged: 2 }, "{what}");
    assert_eq!(admitted(l, key, 1).await, 0, "{what}: spent");
    // Nothing fits, and the excess is owed; but a key owes at most one capacity (3), and one
    // request's excess is charged up to the cap (the capacity, by default).
    let settled = l.reconcile(key, 0, 5).await.expect("reconciled");
    assert_eq!(settled, Reconciled::Charged { excess: 5, charged: 3 }, "{what}");
    assert_eq!(settled.uncharged(), 2, "{what}");
    assert_eq!(l.reconcile(key, 0, 1).await.expect("reconciled"), Reconciled::Charged { excess: 1, charged: 0 });
    // A surplus pays the debt back first: 3 given back, and the key is spent, not free.
    let settled = l.reconcile(key, 3, 0).await.expect("reconciled");
    assert_eq!(settled, Reconciled::Refunded { units: 3, given: true }, "{what}");
    let peek = l.state(key).await.expect("state");
    assert_eq!(peek.remaining, 0, "{what}: {peek:?}");
    assert_eq!(admitted(l, key, 1).await, 0, "{what}: the debt was paid, nothing freed");
    assert_eq!(l.reconcile(key, 2, 2).await.expect("reconciled"), Reconciled::Exact, "{what}");
    // Paid back in full, the key admits its quota again, once.
    assert!(l.refund(key, 3).await.expect("refund"), "{what}");
    assert_eq!(admitted(l, key, 4).await, 3, "{what}: the whole quota, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excess_is_charged_into_debt_up_to_one_capacity_and_a_surplus_pays_it_back_first() {
    let server = RedisServer::start().expect("redis-server");
    for algorithm in Algorithm::ALL {
        for time_source in [TimeSource::Client, TimeSource::Server] {
            let store = RedisStore::from_url(&server.url()).expect("url");
            let l = Limiter::builder(algorithm, quota()).redis(store).time_source(time_source).build().expect("valid");
            walk(&l, &format!("tokens-{algorithm}-{time_source:?}"), &format!("{algorithm} on Redis, {time_source:?}"))
                .await;
        }
        let in_process = Limiter::builder(algorithm, quota()).build().expect("valid");
        walk(&in_process, "tokens", &format!("{algorithm} in process")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_on_one_requests_excess_is_kept_and_checked() {
    let server = RedisServer::start().expect("redis-server");
    let store = RedisStore::from_url(&server.url()).expect("url");
    let capped = Limiter::builder(Algorithm::TokenBucket, quota()).redis(store).max_excess(1).build().expect("valid");
    assert!(capped.check("k").await.expect("decides").allowed);
    let settled = capped.reconcile("k", 1, 4).await.expect("reconciled");
    assert_eq!(settled, Reconciled::Charged { excess: 3, charged: 1 });
    assert_eq!(capped.state("k").await.expect("state").remaining, 1, "two spent, one left");

    let over = Limiter::builder(Algorithm::FixedWindow, quota()).max_excess(4).build().unwrap_err();
    assert_eq!(over.field(), "max_excess", "{over}");
    assert!(over.to_string().contains("at most the quota's capacity (3)"), "{over}");

    // With Redis gone nothing happened, and the error names what did not.
    let gone = Limiter::builder(Algorithm::Gcra, quota())
        .redis(RedisStore::from_url("redis://127.0.0.1:1/").expect("url"))
        .build()
        .expect("valid");
    let e = gone.reconcile("k", 1, 2).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { operation: "the debit", .. }), "{e}");
    let e = gone.reconcile("k", 2, 1).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { operation: "the refund", .. }), "{e}");
    assert_eq!(gone.reconcile("", 1, 2).await.unwrap_err().kind(), ErrorKind::Request);
}

/// An LLM gateway's two budgets: input tokens known when the request arrives, output tokens
/// when its response ends, each a rule of its own keyed by the API key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforcer_reconciles_input_and_output_tokens_as_two_rules_of_one_request() {
    let server = RedisServer::start().expect("redis-server");
    let per_key = || [KeyPart::header("x-api-key")];
    let rules = RuleSet::builder()
        .rule(Rule::new("input", Algorithm::Gcra, Quota::new(1_000, Duration::from_secs(600))).key(per_key()))
        .rule(Rule::new("output", Algorithm::SlidingLog, Quota::new(500, Duration::from_secs(600))).key(per_key()))
        .build()
        .expect("rules");
    let store = RedisStore::from_url(&server.url()).expect("url");
    let enforcer = Enforcer::builder(rules).redis(store).build().expect("enforcer");
    let req = Request::builder().uri("/v1/chat").header("x-api-key", "team-a").body(()).expect("request");

    // Admitted at one token of each; it read 40 tokens and wrote 450.
    let admitted = enforcer.check(&req).await.expect("decided");
    assert!(matches!(admitted, Ruling::Decided(ref d) if d.allowed), "{admitted:?}");
    let input = enforcer.reconcile("input", &req, 1, 40).await.expect("input");
    assert_eq!(input, Reconciled::Charged { excess: 39, charged: 39 });
    let output = enforcer.reconcile("output", &req, 1, 450).await.expect("output");
    assert_eq!(output, Reconciled::Charged { excess: 449, charged: 449 });
    assert_eq!(enforcer.state("input", &req).await.expect("state").remaining, 960);
    assert_eq!(enforcer.state("output", &req).await.expect("state").remaining, 50);
    // A retry of the same prompt that the cache answered: its input tokens go back.
    let input = enforcer.reconcile("input", &req, 40, 10).await.expect("input");
    assert_eq!(input, Reconciled::Refunded { units: 30, given: true });
    assert_eq!(enforcer.state("input", &req).await.expect("state").remaining, 990);
    let other = Request::builder().uri("/v1/chat").header("x-api-key", "team-b").body(()).expect("request");
    assert_eq!(enforcer.state("output", &other).await.expect("state").remaining, 500, "another key is untouched");
    let e = enforcer.reconcile("nope", &req, 1, 2).await.unwrap_err();
    assert!(matches!(e, Error::UnknownRule(ref name) if name == "nope"), "{e}");
}

/// The cost layer over Redis: a streamed answer's tokens, counted by the handler, are settled
/// when its body is dropped, and the key's next request waits out what they went over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_layer_settles_a_streamed_answer_in_redis() {
    use redis_ratelimit::http::{CostLimitLayer, CostMeter};
    use tower::{Layer, ServiceExt};

    let server = RedisServer::start().expect("redis-server");
    let store = RedisStore::from_url(&server.url()).expect("url");
    let tokens = Limiter::builder(Algorithm::TokenBucket, Quota::new(100, Duration::from_secs(600)))
        .redis(store)
        .build()
        .expect("valid");
    let layer =
        CostLimitLayer::new(tokens.clone(), |_: &Request<()>| Some("team-a".to_owned())).estimate(|_: &Request<()>| 10);
    let answer = |used: u64| {
        tower::service_fn(move |req: Request<()>| {
            req.extensions().get::<CostMeter>().expect("a meter").add(used);
            std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(String::new())))
        })
    };
    let req = || Request::builder().uri("/v1/chat").body(()).expect("request");
    let first = layer.clone().layer(answer(150)).oneshot(req()).await.expect("infallible");
    assert_eq!(first.status(), 200);
    assert_eq!(tokens.state("team-a").await.expect("state").remaining, 90, "checked at the estimate");
    drop(first);
    // 150 used of 10 reserved: 100 charged (one request's most), and the bucket owes 10.
    let mut waited = 0;
    while tokens.state("team-a").await.expect("reads").remaining > 0 {
        assert!(waited < 1_000, "the settlement never reached Redis");
        waited += 1;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let refused = layer.layer(answer(0)).oneshot(req()).await.expect("infallible");
    assert_eq!(refused.status(), 429);
}
