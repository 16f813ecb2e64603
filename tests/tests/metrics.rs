//! The metrics example (`limiter/examples/metrics.rs`, feature `metrics`) serves a Prometheus
//! exposition; this test sends it requests against a real `redis-server` it starts, breaks
//! Redis in known ways, scrapes the exposition over HTTP, and checks that every counter moved
//! exactly as the requests it sent say. An executable of its own: the recorder it installs is
//! the process's, and would count the other suites' limiters too.

#[allow(dead_code)] // the example's `main` is not used here
#[path = "../../limiter/examples/metrics.rs"]
mod example;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use http::Request;
use redis_ratelimit::enforce::{Enforcer, Ruling};
use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};
use redis_ratelimit::{Acquired, Algorithm, ConcurrencyLimiter, Limiter, Quota, RedisStore};
use redis_tests::RedisServer;

/// GET /metrics, the body.
fn scrape(addr: SocketAddr) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("the exposition listens");
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
}

/// The sum of the samples of `name` whose labels include every one of `labels`.
fn value(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|(k, val)| rest.contains(&format!("{k}=\"{val}\"")))).then_some(v)
        })
        .filter_map(|v| v.parse::<f64>().ok())
        .sum()
}

#[test]
fn the_exposition_counts_what_the_requests_did() {
    let mut server = RedisServer::start().expect("redis-server");
    let metrics_addr: SocketAddr =
        format!("127.0.0.1:{}", redis_tests::free_port().expect("port")).parse().expect("addr");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let limiter = example::limiter(&server.url()).expect("limiter");
    rt.block_on(async { example::serve_metrics(metrics_addr) }).expect("exposition");
    let ask = |key: &str, n: usize| {
        rt.block_on(async {
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(example::request(&limiter, key).await);
            }
            out
        })
    };

    // 7 requests on one key, 5 per second with a burst of 5: 5 admitted, 2 denied, by Redis.
    let lines = ask("metrics-user", 7);
    assert_eq!(lines.iter().filter(|l| l.contains("allowed")).count(), 5, "{lines:?}");
    let body = scrape(metrics_addr);
    let store = |outcome| value(&body, "limiter_decisions_total", &[("outcome", outcome), ("source", "store")]);
    assert_eq!((store("allowed"), store("denied")), (5.0, 2.0), "{body}");
    // Each decision is labelled by its limiter's state name; the 4th and 5th admissions left at
    // most a fifth of the burst of 5, near the limit at the default ratio of 0.8.
    let name = limiter.state_name().to_owned();
    assert_eq!(value(&body, "limiter_decisions_total", &[("limiter", &name)]), 7.0, "{body}");
    assert_eq!(value(&body, "limiter_near_limit_total", &[("limiter", &name)]), 2.0, "{body}");
    assert_eq!(value(&body, "limiter_store_call_seconds_count", &[("result", "ok")]), 7.0, "{body}");
    // The first call found no script in Redis: one NOSCRIPT, one EVAL.
    assert_eq!(value(&body, "limiter_noscript_reloads_total", &[]), 1.0, "{body}");
    assert!(body.contains("# HELP limiter_decisions_total"), "descriptions are registered: {body}");

    // Redis dies: 8 requests fail open. The first 5 fail (refused connections) and open the
    // breaker; the other 3 are answered by the open breaker without trying.
    server.kill();
    let lines = ask("metrics-user", 8);
    assert!(lines.iter().all(|l| l.contains("allowed") && l.contains("fail-open")), "{lines:?}");
    let body = scrape(metrics_addr);
    let open = |degraded| {
        value(
            &body,
            "limiter_decisions_total",
            &[("source", "fail-open"), ("outcome", "allowed"), ("degraded", degraded)],
        )
    };
    assert_eq!((open("unavailable"), open("breaker-open")), (5.0, 3.0), "{body}");
    assert_eq!(value(&body, "limiter_store_errors_total", &[("kind", "unavailable")]), 5.0, "{body}");
    assert_eq!(value(&body, "limiter_breaker_transitions_total", &[("to", "open")]), 1.0, "{body}");
    assert_eq!(value(&body, "limiter_breaker_state", &[("limiter", &name)]), 2.0, "{body}");
    // Fail-open answers are near no limit.
    assert_eq!(value(&body, "limiter_near_limit_total", &[]), 2.0, "{body}");

    // Redis comes back empty: once the breaker lets a probe through, the store reconnects,
    // reloads its script (a new process has none) and decides again.
    server.restart().expect("restart");
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let lines = ask("metrics-user", 1);
    assert!(lines[0].contains("by store"), "{lines:?}");
    let body = scrape(metrics_addr);
    assert_eq!(value(&body, "limiter_breaker_transitions_total", &[("to", "half-open")]), 1.0, "{body}");
    assert_eq!(value(&body, "limiter_breaker_transitions_total", &[("to", "closed")]), 1.0, "{body}");
    assert_eq!(value(&body, "limiter_breaker_state", &[]), 0.0, "{body}");
    assert_eq!(value(&body, "limiter_reconnects_total", &[]), 1.0, "{body}");
    assert_eq!(value(&body, "limiter_noscript_reloads_total", &[]), 2.0, "{body}");
    assert_eq!(value(&body, "limiter_decisions_total", &[("source", "store")]), 8.0, "{body}");

    // The rules enforcer's calls go through the same timed store call: each request is one call
    // of the all-or-nothing script, measured under `rules`, and its failures are counted too.
    let rules = RuleSet::builder()
        .rule(
            Rule::new("per-key", Algorithm::Gcra, Quota::new(5, Duration::from_secs(1)))
                .key([KeyPart::header("x-api-key")]),
        )
        .rule(Rule::new("global", Algorithm::FixedWindow, Quota::new(100, Duration::from_secs(1))))
        .build()
        .expect("rules");
    let store = RedisStore::from_url(&server.url()).expect("store");
    let enforcer = Enforcer::builder(rules).redis(store).build().expect("enforcer");
    let req = || Request::builder().uri("/").header("x-api-key", "metrics-key").body(()).expect("request");
    let verdicts: Vec<Ruling> = rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..3 {
            out.push(enforcer.check(&req()).await.expect("decided"));
        }
        out
    });
    assert!(verdicts.iter().all(|v| matches!(v, Ruling::Decided(d) if d.allowed)), "{verdicts:?}");
    let rules_calls = |body: &str, result| {
        value(body, "limiter_store_call_seconds_count", &[("algorithm", "rules"), ("result", result)])
    };
    let body = scrape(metrics_addr);
    assert_eq!(rules_calls(&body, "ok"), 3.0);
    for rule in ["per-key", "global"] {
        assert_eq!(value(&body, "limiter_decisions_total", &[("limiter", rule), ("source", "store")]), 3.0, "{body}");
    }
    // A concurrency limiter's gauge: the permits this process holds, up as they are taken, down
    // as they are released or dropped; a refused acquire holds nothing.
    let permits = ConcurrencyLimiter::builder(2, Duration::from_secs(30))
        .redis(RedisStore::from_url(&server.url()).expect("store"))
        .name("metrics-permits")
        .build()
        .expect("limiter");
    let held = || value(&scrape(metrics_addr), "limiter_permits_held", &[("limiter", "metrics-permits")]);
    let acquire = || match rt.block_on(permits.acquire("metrics-user")).expect("decided") {
        Acquired::Held(permit) => Some(permit),
        Acquired::Full(_) => None,
    };
    let first = acquire().expect("a permit");
    let second = acquire().expect("a second permit");
    assert!(acquire().is_none(), "two are held");
    assert_eq!(held(), 2.0);
    assert!(rt.block_on(first.release()).expect("released"));
    assert_eq!(held(), 1.0);
    rt.block_on(async { drop(second) });
    assert_eq!(held(), 0.0);
    // A dropped permit is released in a task of its own: wait for that call (three acquires,
    // one release, then this one) before Redis dies, or it would be one more failure.
    let concurrency_calls = || {
        value(
            &scrape(metrics_addr),
            "limiter_store_call_seconds_count",
            &[("algorithm", "concurrency"), ("result", "ok")],
        )
    };
    for waited in 0.. {
        if concurrency_calls() >= 5.0 {
            break;
        }
        assert!(waited < 1_000, "the dropped permit was not released within 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Reconciled costs, in units: 3 charged over an estimate of 1; of an excess of 12, one
    // request's most (the capacity, 10) is charged and 2 are not; a surplus of 2 given back.
    let costs =
        Limiter::builder(Algorithm::Gcra, Quota::per_minute(10)).name("metrics-costs").build().expect("limiter");
    rt.block_on(async {
        assert!(costs.check("k").await.expect("decided").allowed);
        let _charged = costs.reconcile("k", 1, 4).await.expect("reconciled");
        let _capped = costs.reconcile("k", 0, 12).await.expect("reconciled");
        let _refunded = costs.reconcile("k", 2, 0).await.expect("reconciled");
    });
    let body = scrape(metrics_addr);
    let units =
        |result| value(&body, "limiter_reconciled_units_total", &[("limiter", "metrics-costs"), ("result", result)]);
    assert_eq!((units("charged"), units("uncharged"), units("refunded")), (13.0, 2.0, 2.0), "{body}");
    server.kill();
    let _answered = rt.block_on(enforcer.check(&req())).expect("the failure policy answers");
    let body = scrape(metrics_addr);
    assert_eq!(rules_calls(&body, "unavailable"), 1.0, "{body}");
    assert_eq!(value(&body, "limiter_store_errors_total", &[("kind", "unavailable")]), 6.0, "{body}");
    println!(
        "metrics: decisions, latency, errors, breaker, reconnects and NOSCRIPT reloads counted as sent, the rules \
         enforcer's calls too, and the permits held"
    );
}
