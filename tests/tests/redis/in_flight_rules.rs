//! In-flight rules from a rules file, enforced by the rules layer on a real `redis-server`:
//! instances with their own connections share a key's permits; a request holds its permit
//! while its response streams and gives it back when the body is dropped; the state lives
//! under the rule's name, so a reload that changes the limit keeps the holders; a refusal says
//! when to retry.

// Real Redis keeps real time: background releases land in it.
#![allow(clippy::disallowed_methods)]

use std::convert::Infallible;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use redis_ratelimit::enforce::Enforcer;
use redis_ratelimit::http::{HeldBody, RulesLayer};
use redis_ratelimit::rules::RuleSet;
use redis_ratelimit::{Permit, RedisStore};
use redis_tests::RedisServer;
use tower::{Layer, ServiceExt};

fn rules(limit: u64) -> RuleSet {
    RuleSet::from_toml(&format!(
        "[[rule]]\nname = \"per-user\"\nkey = [\"header:x-user\"]\nalgorithm = \"gcra\"\nlimit = 100\nperiod = \"1s\"\n\n\
         [[in_flight]]\nname = \"exports\"\nmatch = {{ path = \"/export\" }}\nkey = [\"header:x-user\"]\nlimit = {limit}\n\
         lease = \"30s\"\nfailure_policy = \"fail-closed\"\n"
    ))
    .expect("a valid rules file")
}

fn instance(server: &RedisServer) -> Enforcer {
    let store = RedisStore::from_url(&server.url()).expect("url").with_timeout(Duration::from_millis(500)).expect("ok");
    Enforcer::builder(rules(2)).redis(store).build().expect("valid")
}

async fn get(enforcer: &Enforcer, user: &str) -> Response<HeldBody<String, Vec<Permit>>> {
    let svc = RulesLayer::new(enforcer.clone()).layer(tower::service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::from("rows")))
    }));
    svc.oneshot(Request::builder().uri("/export").header("x-user", user).body(()).expect("a request"))
        .await
        .expect("answers")
}

#[tokio::test]
async fn instances_share_a_users_permits_which_streaming_bodies_hold_and_a_reload_keeps() {
    let server = RedisServer::start().expect("redis-server");
    let (a, b) = (instance(&server), instance(&server));
    let first = get(&a, "ann").await;
    let second = get(&b, "ann").await;
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    let over = get(&a, "ann").await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS, "two held, on two instances");
    assert_eq!(over.headers()["retry-after"], "30");
    assert!(over.body().get_ref().contains(r#""violated-policies":["exports"]"#), "{}", over.body().get_ref());
    assert_eq!(get(&b, "bob").await.status(), StatusCode::OK, "each user has their own permits");
    // A third permit, by a reload on one instance: the two holders still count, under the rule's name.
    a.replace_rules(rules(3));
    let third = get(&a, "ann").await;
    assert_eq!(third.status(), StatusCode::OK);
    assert_eq!(get(&a, "ann").await.status(), StatusCode::TOO_MANY_REQUESTS, "three held of three");
    // A response dropped unsent (the client went away): its permit goes back, in the background.
    drop(second);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let again = get(&a, "ann").await;
        if again.status() == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "the dropped body's permit never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((first, third));
}

#[tokio::test]
async fn with_redis_dead_a_fail_closed_in_flight_rule_answers_503_naming_itself() {
    let server = RedisServer::start().expect("redis-server");
    let enforcer = instance(&server);
    assert_eq!(get(&enforcer, "ann").await.status(), StatusCode::OK);
    drop(server);
    // The rate rule fails open; the in-flight rule fails closed, and says so.
    let refused = get(&enforcer, "ann").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let problem = refused.body().get_ref();
    assert!(
        problem.contains("temporary-reduced-capacity") && problem.contains(r#""policies":["exports"]"#),
        "{problem}"
    );
    assert!(refused.headers().contains_key("retry-after"));
}
