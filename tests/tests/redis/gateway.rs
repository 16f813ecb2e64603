//! The example gateway end to end: real gateway processes (`limiter/examples/gateway.rs`)
//! over real HTTP, against a `redis-server` each test starts. Each test writes its own rules,
//! with periods long enough that what it asserts does not depend on how fast the machine is.

// Real processes and real Redis run on real time.
#![allow(clippy::disallowed_methods)]

use crate::gateway_support;

use std::time::Duration;

use gateway_support::{pk, pk_with, request, request_with_body, start_failure, ConfigFile, Gateway};
use redis_tests::RedisServer;

const PER_KEY: &str = r#"
[[rule]]
name = "per-key"
match = { method = "GET", path = "/api/hello" }
key = ["header:x-api-key"]
algorithm = "sliding-log"
limit = 5
period = "1h"
"#;

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_gateways_share_one_limit_and_every_field_has_its_exact_value() {
    let redis = RedisServer::start().expect("redis-server starts");
    let config = ConfigFile::new(PER_KEY);
    let gateways: Vec<Gateway> = (0..3).map(|_| Gateway::start(&config.path, &redis.url())).collect();
    let key = [("x-api-key", "shared-key")];
    let pk = pk("x-api-key=shared-key");
    let policy = format!("\"per-key\";q=5;w=3600;pk={pk}");
    for i in 0..5u64 {
        let reply = gateways[i as usize % 3].get("/api/hello", &key).await;
        assert_eq!((reply.status, reply.body.as_str()), (200, "hello\n"), "request {i}: {reply:?}");
        assert_eq!(reply.header("ratelimit-policy"), Some(policy.as_str()));
        // A sliding log's key is whole again one period after its newest admission: now.
        let status = format!("\"per-key\";r={};t=3600;pk={pk}", 4 - i);
        assert_eq!(reply.header("ratelimit"), Some(status.as_str()), "request {i}");
        assert_eq!(reply.header("retry-after"), None);
    }
    for gateway in &gateways {
        let denied = gateway.get("/api/hello", &key).await;
        assert_eq!(denied.status, 429, "{denied:?}");
        assert_eq!(denied.header("retry-after"), Some("3600"));
        assert_eq!(denied.header("ratelimit-policy"), Some(policy.as_str()));
        assert_eq!(denied.header("ratelimit"), Some(format!("\"per-key\";r=0;t=3600;pk={pk}").as_str()));
        assert_eq!(denied.header("content-type"), Some("application/problem+json"));
        let body: serde_json::Value = serde_json::from_str(&denied.body).expect("a JSON problem");
        assert_eq!(body["type"], QUOTA_EXCEEDED);
        assert_eq!(body["status"], 429);
        assert_eq!(body["violated-policies"], serde_json::json!(["per-key"]));
    }
    // Another key has its own limit on every gateway.
    assert_eq!(gateways[2].get("/api/hello", &[("x-api-key", "other")]).await.status, 200);
    // A route no rule matches is not limited and gets no fields.
    let health = gateways[0].get("/health", &[]).await;
    assert_eq!((health.status, health.header("ratelimit")), (200, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_exactly_the_retry_after_is_enough() {
    let redis = RedisServer::start().expect("redis-server starts");
    let config = ConfigFile::new(
        r#"
        [[rule]]
        name = "slow"
        match = { path = "/api/hello" }
        key = ["header:x-api-key"]
        algorithm = "gcra"
        limit = 1
        period = "2s"
        "#,
    );
    let gateway = Gateway::start(&config.path, &redis.url());
    let mut waits = Vec::new();
    for round in 0..3 {
        let key = [("x-api-key", "patient")];
        let mut reply = gateway.get("/api/hello", &key).await;
        // Find the next denial: its Retry-After is the wait to test.
        while reply.status == 200 {
            reply = gateway.get("/api/hello", &key).await;
        }
        assert_eq!(reply.status, 429, "round {round}: {reply:?}");
        let secs: u64 = reply.header("retry-after").and_then(|v| v.parse().ok()).expect("Retry-After in seconds");
        assert!((1..=2).contains(&secs), "round {round}: Retry-After {secs}");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let after = gateway.get("/api/hello", &key).await;
        assert_eq!(after.status, 200, "round {round}: waited the {secs} s Retry-After said, still refused: {after:?}");
        waits.push(secs);
    }
    println!("gateway: waited {waits:?} s as Retry-After said; admitted each time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_and_deny_lists_decide_first_and_shadow_rules_never_reject() {
    let redis = RedisServer::start().expect("redis-server starts");
    let config = ConfigFile::new(&format!(
        r#"
        [access]
        allow_keys = ["vip"]
        deny_keys = ["revoked"]
        deny_ips = ["127.0.0.3"]
        {}
        [[rule]]
        name = "dark"
        match = {{ path = "/api/hello" }}
        key = ["api-key"]
        algorithm = "sliding-log"
        limit = 1
        period = "1h"
        shadow = true
        "#,
        PER_KEY.replace("header:x-api-key", "api-key")
    ));
    // The lists compare verified keys: the gateway authenticates each (here a key's secret is
    // its name).
    let keys = ConfigFile::new("vip vip\nrevoked revoked\nfine fine\nk k\n");
    let keys = keys.path.to_string_lossy().into_owned();
    let metrics = format!("127.0.0.1:{}", redis_tests::free_port().expect("a free port"));
    let gateway = Gateway::start_with(&config.path, &redis.url(), &["--metrics-listen", &metrics, "--api-keys", &keys]);
    for _ in 0..8 {
        let vip = gateway.get("/api/hello", &[("x-api-key", "vip")]).await;
        assert_eq!((vip.status, vip.header("ratelimit")), (200, None), "allow-listed: no rule applies");
        assert_eq!(gateway.get("/api/hello", &[("x-api-key", "revoked")]).await.status, 403);
        let from_denied_ip = request(gateway.addr, "127.0.0.3", "GET", "/api/hello", &[("x-api-key", "fine")]).await;
        assert_eq!(from_denied_ip.status, 403);
    }
    let pk = pk("api-key=k");
    let first = gateway.get("/api/hello", &[("x-api-key", "k")]).await;
    assert_eq!(first.header("ratelimit-shadow"), Some(format!("\"dark\";r=0;t=3600;pk={pk}").as_str()));
    for i in 1..5 {
        let reply = gateway.get("/api/hello", &[("x-api-key", "k")]).await;
        assert_eq!(reply.status, 200, "the shadow rule would deny request {i}, the enforced one admits it");
        assert_eq!(reply.header("ratelimit-shadow"), Some(format!("\"dark\";r=0;t=3600;pk={pk};denied").as_str()));
        // The shadow rule is no policy of the enforced fields.
        assert!(!reply.header("ratelimit-policy").unwrap_or("").contains("dark"));
    }
    assert_eq!(gateway.get("/api/hello", &[("x-api-key", "k")]).await.status, 429);
    // The metrics say the same: the shadow rule would have denied the last five requests, and
    // the enforced rule decided six (by Redis), five admitted.
    let exposition = request(metrics.parse().expect("an address"), "127.0.0.1", "GET", "/metrics", &[]).await.body;
    // The sum of the samples of `name` carrying every one of `labels`.
    let sample = |name: &str, labels: &[&str]| -> f64 {
        exposition
            .lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{')?.rsplit_once(' '))
            .filter(|(series, _)| labels.iter().all(|label| series.contains(label)))
            .filter_map(|(_, v)| v.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(sample("limiter_shadow_would_deny_total", &[r#"rule="dark""#]), 5.0, "{exposition}");
    let decisions = |outcome: &str| {
        let outcome = format!("outcome=\"{outcome}\"");
        sample("limiter_decisions_total", &[&outcome, r#"source="store""#])
    };
    assert_eq!((decisions("allowed"), decisions("denied")), (5.0, 1.0), "{exposition}");
    // Nothing was counted for the listed requests: the deny-listed IP's key is untouched.
    let mut conn = redis.client().expect("a client");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*fine*").query(&mut conn).expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_denied_by_one_rule_consumes_from_none() {
    let redis = RedisServer::start().expect("redis-server starts");
    let config = ConfigFile::new(
        r#"
        [[rule]]
        name = "per-key"
        match = { path = "/api/hello" }
        key = ["header:x-api-key"]
        algorithm = "sliding-log"
        limit = 2
        period = "1h"

        [[rule]]
        name = "global"
        match = { path = "/api/hello" }
        key = ["const:hello"]
        algorithm = "fixed-window"
        limit = 4
        period = "1d"
        "#,
    );
    let gateway = Gateway::start(&config.path, &redis.url());
    let a = [("x-api-key", "a")];
    assert_eq!(gateway.get("/api/hello", &a).await.status, 200);
    assert_eq!(gateway.get("/api/hello", &a).await.status, 200);
    for _ in 0..5 {
        let denied = gateway.get("/api/hello", &a).await;
        assert_eq!(denied.status, 429);
        let body: serde_json::Value = serde_json::from_str(&denied.body).expect("JSON");
        assert_eq!(body["violated-policies"], serde_json::json!(["per-key"]));
        // The global rule would admit it and says what it has left: nothing was taken.
        assert!(denied.header("ratelimit").expect("fields").contains("\"global\";r=2;"), "{denied:?}");
    }
    // The five denials took nothing from the global cap: b gets the two units it has left.
    let b = [("x-api-key", "b")];
    assert_eq!(gateway.get("/api/hello", &b).await.status, 200);
    let last = gateway.get("/api/hello", &b).await;
    assert_eq!(last.status, 200);
    assert!(last.header("ratelimit").expect("fields").contains("\"global\";r=0;"), "{last:?}");
    let full = gateway.get("/api/hello", &[("x-api-key", "c")]).await;
    assert_eq!(full.status, 429);
    let body: serde_json::Value = serde_json::from_str(&full.body).expect("JSON");
    assert_eq!(body["violated-policies"], serde_json::json!(["global"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_counts_only_from_trusted_proxies() {
    let redis = RedisServer::start().expect("redis-server starts");
    let config = ConfigFile::new(
        r#"
        [client_ip]
        trusted_proxies = ["127.0.0.2"]

        [[rule]]
        name = "per-ip"
        match = { method = "POST", path = "/login" }
        key = ["ip"]
        algorithm = "sliding-log"
        limit = 1
        period = "1h"
        "#,
    );
    let gateway = Gateway::start(&config.path, &redis.url());
    let login = |from: &'static str, claimed: &'static str| {
        let addr = gateway.addr;
        async move { request(addr, from, "POST", "/login", &[("x-forwarded-for", claimed)]).await }
    };
    // An untrusted client cannot change who it is by claiming another address.
    let first = login("127.0.0.1", "198.51.100.1").await;
    assert_eq!(first.status, 200);
    assert!(first.header("ratelimit").expect("fields").contains(&pk("ip=127.0.0.1")), "{first:?}");
    assert_eq!(login("127.0.0.1", "198.51.100.2").await.status, 429);
    assert_eq!(login("127.0.0.1", "198.51.100.3").await.status, 429);
    // Through the trusted proxy, the forwarded client counts: each its own limit.
    let via_proxy = login("127.0.0.2", "198.51.100.1").await;
    assert_eq!(via_proxy.status, 200);
    assert!(via_proxy.header("ratelimit").expect("fields").contains(&pk("ip=198.51.100.1")));
    assert_eq!(login("127.0.0.2", "198.51.100.1").await.status, 429);
    assert_eq!(login("127.0.0.2", "6.6.6.6, 198.51.100.4").await.status, 200);
    // A client left of the one the proxy saw cannot pose as someone else.
    assert_eq!(login("127.0.0.2", "6.6.6.6, 198.51.100.4").await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_rules_file_is_refused_at_start_and_at_reload_and_the_old_rules_stay() {
    let redis = RedisServer::start().expect("redis-server starts");
    let bad = PER_KEY.replace("limit = 5", "limit = 0");
    let (code, stderr) = start_failure(&ConfigFile::new(&bad).path, &redis.url());
    assert_eq!(code, Some(2), "{stderr:?}");
    assert!(
        stderr.iter().any(|l| l.contains("rule \"per-key\", field limit: must be at least 1, got 0")),
        "{stderr:?}"
    );

    let config = ConfigFile::new(PER_KEY);
    let mut gateway = Gateway::start(&config.path, &redis.url());
    let key = [("x-api-key", "k")];
    for _ in 0..3 {
        assert_eq!(gateway.get("/api/hello", &key).await.status, 200);
    }
    config.write(&PER_KEY.replace("algorithm = \"sliding-log\"", "algorithm = \"sliding-log\"\nburst = \"many\""));
    let rejected = gateway.wait_for("reload rejected").expect("the gateway reports the bad file");
    assert!(
        rejected.contains("rule \"per-key\", field burst: invalid type: string \"many\", expected u64"),
        "{rejected}"
    );
    // The old rules are in force, with their counts: two more, then 429.
    assert_eq!(gateway.get("/api/hello", &key).await.status, 200);
    assert_eq!(gateway.get("/api/hello", &key).await.status, 200);
    assert_eq!(gateway.get("/api/hello", &key).await.status, 429);
    // A good file with a larger quota: the log carries over, so exactly two more fit.
    config.write(&PER_KEY.replace("limit = 5", "limit = 7"));
    gateway.wait_for("rules reloaded").expect("the gateway reloads the good file");
    let now = gateway.get("/api/hello", &key).await;
    assert_eq!(now.status, 200, "{now:?}");
    assert!(now.header("ratelimit-policy").expect("fields").contains("q=7"));
    assert_eq!(gateway.get("/api/hello", &key).await.status, 200);
    assert_eq!(gateway.get("/api/hello", &key).await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_killed_each_rule_answers_by_its_failure_policy() {
    let mut redis = RedisServer::start().expect("redis-server starts");
    let rule = |name: &str, id: &str, policy: &str| {
        format!(
            "[[rule]]\nname = \"{name}\"\nmatch = {{ path = \"/api/items/{id}\" }}\nkey = [\"header:x-api-key\"]\n\
             algorithm = \"token-bucket\"\nlimit = 100\nperiod = \"1s\"\n{policy}\n"
        )
    };
    let config = ConfigFile::new(
        &[
            rule("open", "open", "failure_policy = \"fail-open\""),
            rule("closed", "closed", "failure_policy = \"fail-closed\""),
            rule(
                "budget",
                "budget",
                "failure_policy = \"local-budget\"\nlocal_budget = { limit = 2, period = \"1h\" }",
            ),
        ]
        .concat(),
    );
    let gateway = Gateway::start(&config.path, &redis.url());
    let key = [("x-api-key", "k")];
    for id in ["open", "closed", "budget"] {
        assert_eq!(gateway.get(&format!("/api/items/{id}"), &key).await.status, 200, "{id} with Redis up");
    }
    redis.kill();
    let pk = pk("x-api-key=k");
    for i in 0..6 {
        let open = gateway.get("/api/items/open", &key).await;
        assert_eq!(open.status, 200, "fail-open admits, request {i}");
        // Fail-open enforces no quota, so the fields describe none.
        assert_eq!((open.header("ratelimit-policy"), open.header("ratelimit")), (None, None), "{open:?}");
        // Fail-closed refuses for want of Redis, not for a quota: 503, a problem type of its
        // own, and Retry-After the breaker's next probe (its open period is 500 ms).
        let closed = gateway.get("/api/items/closed", &key).await;
        assert_eq!(closed.status, 503, "fail-closed refuses, request {i}: {closed:?}");
        assert_eq!(closed.header("retry-after"), Some("1"));
        let body: serde_json::Value = serde_json::from_str(&closed.body).expect("a JSON problem");
        assert_eq!(body["type"], "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity");
        assert_eq!((body["status"].as_u64(), body["policies"].clone()), (Some(503), serde_json::json!(["closed"])));
        assert_eq!((closed.header("ratelimit-policy"), closed.header("ratelimit")), (None, None));
        // The local budget answers, and the fields describe it: 2 per hour on this gateway.
        let budget = gateway.get("/api/items/budget", &key).await;
        assert_eq!(budget.status, if i < 2 { 200 } else { 429 }, "the local budget admits 2, request {i}");
        assert_eq!(budget.header("ratelimit-policy"), Some(format!("\"budget\";q=2;w=3600;pk={pk}").as_str()));
        let r = budget.header("ratelimit").expect("the budget's state");
        assert!(r.starts_with(&format!("\"budget\";r={};t=", 1u64.saturating_sub(i))), "{r}");
    }
    redis.restart().expect("redis-server restarts");
    // Once the breaker lets a probe through, Redis decides again.
    let mut back = false;
    for _ in 0..200 {
        let reply = gateway.get("/api/items/closed", &key).await;
        if reply.status == 200 {
            assert!(reply.header("ratelimit").expect("fields").contains("\"closed\";r=99;"), "{reply:?}");
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "Redis decided nothing after it came back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_keys_are_keyed_by_the_deployment_s_secret() {
    let redis = RedisServer::start().expect("redis-server");
    let config = ConfigFile::new(
        r#"
        [[rule]]
        name = "per-ip"
        match = { path = "/api/hello" }
        key = ["ip"]
        algorithm = "gcra"
        limit = 100
        period = "1h"
        "#,
    );
    let other = ConfigFile::new("another-deployment-secret-value\n");
    let other_path = other.path.to_string_lossy().into_owned();
    // Two gateways with the test secret, one with another, one with none.
    let one = Gateway::start(&config.path, &redis.url());
    let two = Gateway::start(&config.path, &redis.url());
    let three =
        Gateway::try_start_exactly(&config.path, &redis.url(), &["--pk-secret-file", &other_path]).expect("starts");
    let none = Gateway::try_start_exactly(&config.path, &redis.url(), &[]).expect("starts");
    let pk_of = |reply: &gateway_support::Reply| {
        let field = reply.header("ratelimit-policy").expect("fields").to_owned();
        field.split(";pk=").nth(1).map(str::to_owned)
    };
    let (a, b, c, d) = (
        pk_of(&one.get("/api/hello", &[]).await),
        pk_of(&two.get("/api/hello", &[]).await),
        pk_of(&three.get("/api/hello", &[]).await),
        pk_of(&none.get("/api/hello", &[]).await),
    );
    // The same client: one partition key under one secret, another under another, none without.
    assert_eq!(a.as_deref(), Some(pk("ip=127.0.0.1").as_str()));
    assert_eq!(a, b);
    assert_eq!(c.as_deref(), Some(pk_with("another-deployment-secret-value", "ip=127.0.0.1").as_str()));
    assert_ne!(a, c);
    assert_eq!(d, None, "no secret, no pk");
    // The unkeyed digest an attacker could compute for any address is nowhere.
    println!(
        "gateway: pk of ip=127.0.0.1 is {a:?} under one secret on two gateways, {c:?} under another, {d:?} without"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_s_own_files_load_and_authenticate_before_limiting() {
    let redis = RedisServer::start().expect("redis-server");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../limiter/examples");
    let keys = root.join("gateway-keys.txt").to_string_lossy().into_owned();
    let gateway = Gateway::start_with(&root.join("gateway.toml"), &redis.url(), &["--api-keys", &keys]);
    let alice = gateway.get("/api/hello", &[("x-api-key", "sk-demo-alice-3Fp9")]).await;
    assert_eq!(alice.status, 200, "{alice:?}");
    let fields = alice.header("ratelimit").expect("fields");
    assert!(fields.contains(&format!("\"hello-per-key\";r=4;t=1;pk={}", pk("api-key=alice"))), "{fields}");
    assert_eq!(gateway.get("/api/hello", &[("x-api-key", "sk-demo-nobody")]).await.status, 401);
    assert_eq!(gateway.get("/api/hello", &[("x-api-key", "sk-demo-revoked-1Zc6")]).await.status, 403);
    let batch = gateway.get("/api/hello", &[("x-api-key", "sk-demo-internal-batch-7Qx2")]).await;
    assert_eq!((batch.status, batch.header("ratelimit")), (200, None), "allow-listed: {batch:?}");
}

/// The admin routes read, reset, refund and block one identity's state under one rule, behind their
/// own bearer token (read from a file, never logged), and answer what is wrong with a bad call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_routes_read_reset_refund_and_block_one_identity_behind_their_own_token() {
    let redis = RedisServer::start().expect("redis-server starts");
    let config = ConfigFile::new(&format!(
        r#"
        [[rule]]
        name = "login"
        match = {{ method = "POST", path = "/login" }}
        key = ["ip"]
        algorithm = "fixed-window"
        limit = 2
        period = "1h"
        blockable = true
        {PER_KEY}"#
    ));
    const TOKEN: &str = "the-admin-token-of-these-tests";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (token_file, short_file) = (dir.path().join("admin-token"), dir.path().join("short-token"));
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write the token");
    std::fs::write(&short_file, "short").expect("write the token");
    let short = Gateway::try_start(&config.path, &redis.url(), &["--admin-token-file", short_file.to_str().unwrap()]);
    let lines = short.err().expect("a short token is refused at start");
    assert!(lines.iter().any(|l| l.contains("at least 16")), "{lines:?}");

    let mut gateway =
        Gateway::start_with(&config.path, &redis.url(), &["--admin-token-file", token_file.to_str().unwrap()]);
    let bearer = format!("Bearer {TOKEN}");
    let addr = gateway.addr;
    let admin = |path: &'static str, auth: String, body: &'static str| async move {
        request_with_body(addr, "127.0.0.1", "POST", path, &[("authorization", auth.as_str())], body).await
    };
    let login = || request(addr, "127.0.0.5", "POST", "/login", &[]);
    let state = |body: &'static str| async move {
        let read = admin("/admin/state", format!("Bearer {TOKEN}"), body).await;
        assert_eq!(read.status, 200, "{read:?}");
        let v: serde_json::Value = serde_json::from_str(&read.body).expect("JSON");
        let field = |name: &str| v[name].as_u64().unwrap_or_else(|| panic!("{name} in {v}"));
        (field("limit"), field("remaining"), field("blocked_ms"))
    };
    let of_5 = r#"{"rule": "login", "ip": "127.0.0.5"}"#;
    assert_eq!(state(of_5).await, (2, 2, 0), "a new identity's whole quota");
    assert_eq!(login().await.status, 200);
    assert_eq!(state(of_5).await, (2, 1, 0), "reading the state consumes nothing");
    assert_eq!(state(of_5).await, (2, 1, 0));
    assert_eq!((login().await.status, login().await.status), (200, 429));
    assert_eq!(state(of_5).await, (2, 0, 0));
    let reset = r#"{"rule": "login", "ip": "127.0.0.5"}"#;
    for auth in [String::new(), "Bearer the-admin-token-of-these-testz".into(), TOKEN.into()] {
        assert_eq!(admin("/admin/reset", auth, reset).await.status, 401);
    }
    assert_eq!(login().await.status, 429, "nothing was reset without the token");
    let done = admin("/admin/reset", bearer.clone(), reset).await;
    assert_eq!(done.status, 200, "{done:?}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&done.body).unwrap()["reset"], true);
    assert_eq!((login().await.status, login().await.status, login().await.status), (200, 200, 429));

    let key = [("x-api-key", "k")];
    for _ in 0..5 {
        assert_eq!(gateway.get("/api/hello", &key).await.status, 200);
    }
    assert_eq!(gateway.get("/api/hello", &key).await.status, 429);
    let refund = r#"{"rule": "per-key", "headers": {"x-api-key": "k"}, "units": 1}"#;
    let given = admin("/admin/refund", bearer.clone(), refund).await;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&given.body).unwrap()["refunded"], true, "{given:?}");
    assert_eq!(gateway.get("/api/hello", &key).await.status, 200, "the unit given back");
    assert_eq!(gateway.get("/api/hello", &key).await.status, 429, "and no more");

    // A block: the address is refused whatever its quota says, for as long as the block lasts,
    // and another address is not; lifted, the quota decides again.
    let block = r#"{"rule": "login", "ip": "127.0.0.6", "duration": "1h"}"#;
    let blocked = admin("/admin/block", bearer.clone(), block).await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&blocked.body).unwrap()["blocked_ms"],
        3_600_000,
        "{blocked:?}"
    );
    let (limit, remaining, blocked_ms) = state(r#"{"rule": "login", "ip": "127.0.0.6"}"#).await;
    assert_eq!((limit, remaining), (2, 0), "nothing remains while blocked");
    assert!((3_595_000..=3_600_000).contains(&blocked_ms), "the block's end, read: {blocked_ms}");
    let refused = request(addr, "127.0.0.6", "POST", "/login", &[]).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let retry: u64 = refused.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((3_595..=3_600).contains(&retry), "until the block ends: {refused:?}");
    assert_eq!(request(addr, "127.0.0.7", "POST", "/login", &[]).await.status, 200, "only the blocked address");
    let lift = r#"{"rule": "login", "ip": "127.0.0.6", "duration": "0ms"}"#;
    assert_eq!(admin("/admin/block", bearer.clone(), lift).await.status, 200);
    assert_eq!(request(addr, "127.0.0.6", "POST", "/login", &[]).await.status, 200, "the block lifted");
    for (body, says) in [
        (r#"{"rule": "per-key", "headers": {"x-api-key": "k"}, "duration": "1m"}"#, "reads no blocks"),
        (r#"{"rule": "login", "ip": "127.0.0.6"}"#, "duration is missing"),
        (r#"{"rule": "login", "ip": "127.0.0.6", "duration": "30"}"#, "units: ms, s, m, h, d"),
        (r#"{"rule": "login", "ip": "127.0.0.6", "units": 1}"#, "unknown field"),
    ] {
        let bad = admin("/admin/block", bearer.clone(), body).await;
        assert_eq!(bad.status, 400, "{body}: {bad:?}");
        assert!(bad.body.contains(says), "{body}: {}", bad.body);
    }

    for (body, says) in [
        (r#"{"rule": "nope", "ip": "127.0.0.5"}"#, "no rule is named"),
        (r#"{"rule": "login"}"#, "has no ip for the rule login"),
        (r#"{"rule": "login", "ip": "nowhere"}"#, "not an IP address"),
        (r#"{"rule": "login", "ip": "127.0.0.5", "bogus": 1}"#, "unknown field"),
        ("rule=login", "not JSON"),
    ] {
        let bad = admin("/admin/reset", bearer.clone(), body).await;
        assert_eq!(bad.status, 400, "{body}: {bad:?}");
        assert!(bad.body.contains(says), "{body}: {}", bad.body);
    }
    assert!(gateway.wait_for_quiet(Duration::from_millis(100)), "the gateway still runs");
    assert!(gateway.seen.iter().all(|l| !l.contains(TOKEN)), "the token is never logged");
    let plain = Gateway::start(&config.path, &redis.url());
    let none =
        request_with_body(plain.addr, "127.0.0.1", "POST", "/admin/reset", &[("authorization", &bearer)], reset).await;
    assert_eq!(none.status, 404, "no token file, no admin routes");
}
