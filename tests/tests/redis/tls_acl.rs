//! Production connections: a `redis-server --tls-port` with certificates this test generates
//! (a CA, a server certificate for 127.0.0.1, a client certificate: nothing committed), and a
//! second server with an ACL user. The limiter decides through each. An untrusted certificate,
//! a missing client certificate and a wrong password are outages like any other: the breaker
//! opens, the failure policy answers (`degraded` says `Refused`), the store backs off before
//! dialing again, and one store event says why, naming the server and never the password. The
//! example gateway shows the same over HTTP.

// The gateway tests wait on real processes, in real time.
#![allow(clippy::disallowed_methods)]

use crate::gateway_support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway_support::{request, ConfigFile, Gateway};
use redis_ratelimit::store::Tls;
use redis_ratelimit::{
    Algorithm, BreakerConfig, Degraded, FailurePolicy, Limiter, Quota, RedisStore, Source, StoreEvent,
};
use sim_real::process::{free_port, ServerProcess};

const PASSWORD: &str = "s3cret-Pa55word";

struct Certs {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a PEM file");
    path
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, all
/// signed by the CA.
fn certificates() -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "limiter test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issue = |names: Vec<String>, cn: &str| {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(names).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &ca, &ca_key).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_pem, server_key) = issue(vec!["127.0.0.1".into(), "localhost".into()], "redis");
    let (client_pem, client_key) = issue(vec!["client".into()], "limiter");
    Certs {
        ca: write(dir.path(), "ca.pem", &ca.pem()),
        server_cert: write(dir.path(), "server.pem", &server_pem),
        server_key: write(dir.path(), "server.key", &server_key),
        client_cert: write(dir.path(), "client.pem", &client_pem),
        client_key: write(dir.path(), "client.key", &client_key),
        _dir: dir,
    }
}

/// `redis-server` on a TLS port only, requiring a client certificate signed by the CA.
fn tls_server(certs: &Certs) -> ServerProcess {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let port = free_port().expect("port").to_string();
    let extra: Vec<&OsStr> = vec![
        OsStr::new("--port"),
        OsStr::new("0"),
        OsStr::new("--tls-port"),
        OsStr::new(&port),
        OsStr::new("--tls-cert-file"),
        certs.server_cert.as_os_str(),
        OsStr::new("--tls-key-file"),
        certs.server_key.as_os_str(),
        OsStr::new("--tls-ca-cert-file"),
        certs.ca.as_os_str(),
        OsStr::new("--tls-auth-clients"),
        OsStr::new("yes"),
    ];
    let port: u16 = port.parse().expect("port");
    ServerProcess::start("redis-server", port, &extra, "Debian's `redis-server`, built with TLS").expect("TLS server")
}

/// `redis-server` whose default user is off and whose user `limiter` has a password.
fn acl_server() -> ServerProcess {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let password = format!(">{PASSWORD}");
    let args = ["--user", "default", "off", "--user", "limiter", "on", password.as_str(), "~*", "+@all"];
    let extra: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    ServerProcess::start("redis-server", free_port().expect("port"), &extra, "Debian's `redis-server`").expect("server")
}

fn limiter(store: RedisStore) -> Limiter {
    limiter_with_events(store).0
}

/// A fail-open limiter whose store events are collected; its breaker opens after 2 failures.
fn limiter_with_events(store: RedisStore) -> (Limiter, Arc<Mutex<Vec<StoreEvent>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let heard = events.clone();
    let limiter = Limiter::builder(Algorithm::TokenBucket, Quota::per_second(2))
        .redis(store)
        // Fail-open is the policy that would hide a broken connection best: the decision and
        // the store's event must say what happened.
        .failure_policy(FailurePolicy::FailOpen)
        .breaker(BreakerConfig::new(2, Duration::from_secs(60)))
        .on_store_event(move |e| heard.lock().expect("events").push(e.clone()))
        .build()
        .expect("valid limiter");
    (limiter, events)
}

/// Checks `l` `n` times; every decision must be the failure policy's.
fn refused_decisions(rt: &tokio::runtime::Runtime, l: &Limiter, n: usize) -> Vec<Option<Degraded>> {
    (0..n)
        .map(|_| {
            let d = rt.block_on(l.check("k")).expect("a refusal is an outage, not an error");
            assert_eq!((d.allowed, d.source), (true, Source::FailOpen), "{d:?}");
            d.degraded
        })
        .collect()
}

/// The one event of a limiter refused: the breaker opened, with the cause.
fn opened_once(events: &Mutex<Vec<StoreEvent>>) -> String {
    let events = events.lock().expect("events").clone();
    match events.as_slice() {
        [StoreEvent::Opened { cause, .. }] => cause.clone(),
        other => panic!("expected one event, the breaker opening: {other:?}"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

#[test]
fn the_limiter_decides_over_tls_with_the_ca_and_a_client_certificate() {
    let certs = certificates();
    let server = tls_server(&certs);
    let url = format!("rediss://127.0.0.1:{}/", server.port());
    let tls = Tls::system_roots()
        .with_ca_file(&certs.ca)
        .expect("CA")
        .with_client_files(&certs.client_cert, &certs.client_key)
        .expect("client cert");
    let l = limiter(RedisStore::from_url(&url).expect("URL").with_tls(&tls).expect("TLS"));
    let rt = runtime();
    let decisions: Vec<_> = (0..3).map(|_| rt.block_on(l.check("tls-user")).expect("a decision")).collect();
    assert!(decisions.iter().all(|d| d.source == Source::Store), "{decisions:?}");
    assert_eq!(decisions.iter().map(|d| d.allowed).collect::<Vec<_>>(), [true, true, false]);
}

#[test]
fn an_untrusted_certificate_is_an_outage_the_failure_policy_answers_and_one_event_names() {
    let certs = certificates();
    let server = tls_server(&certs);
    let url = format!("rediss://127.0.0.1:{}/", server.port());
    let rt = runtime();

    // The system's roots do not know the test's CA.
    let (untrusted, events) = limiter_with_events(RedisStore::from_url(&url).expect("URL"));
    let degraded = refused_decisions(&rt, &untrusted, 6);
    // Refused twice (the threshold), then the open breaker answers without trying.
    assert_eq!(degraded[..2], [Some(Degraded::Refused); 2], "{degraded:?}");
    assert!(degraded[2..].iter().all(|d| *d == Some(Degraded::BreakerOpen)), "{degraded:?}");
    let cause = opened_once(&events);
    assert!(cause.contains("TLS") && cause.contains(&format!("127.0.0.1:{}", server.port())), "{cause}");
    assert!(cause.contains("certificate") || cause.contains("UnknownIssuer"), "{cause}");

    // Trusted, but without the client certificate the server requires: an outage too (the
    // server fails the handshake, or closes the connection right after it).
    let tls = Tls::system_roots().with_ca_file(&certs.ca).expect("CA");
    let anonymous = limiter(RedisStore::from_url(&url).expect("URL").with_tls(&tls).expect("TLS"));
    let d = rt.block_on(anonymous.check("k")).expect("an outage, not an error");
    assert!(d.source == Source::FailOpen && d.degraded.is_some(), "{d:?}");

    // TLS settings on a plain URL are refused when the store is built.
    let e = RedisStore::from_url("redis://127.0.0.1:1/").expect("URL").with_tls(&tls).expect_err("plain URL");
    assert!(e.to_string().contains("rediss://"), "{e}");
}

#[test]
fn an_acl_user_decides_and_a_wrong_password_is_an_error_that_never_shows_it() {
    let server = acl_server();
    let rt = runtime();
    let good = format!("redis://limiter:{PASSWORD}@127.0.0.1:{}/", server.port());
    let store = RedisStore::from_url(&good).expect("URL");
    let shown = format!("{store:?}");
    assert!(!shown.contains(PASSWORD) && shown.contains(&server.port().to_string()), "{shown}");
    let l = limiter(store);
    assert!(!format!("{l:?}").contains(PASSWORD));
    let d = rt.block_on(l.check("acl-user")).expect("a decision");
    assert_eq!((d.source, d.allowed), (Source::Store, true), "{d:?}");

    let wrong = "wrong-Pa55word-xyz";
    let bad = RedisStore::from_url(&format!("redis://limiter:{wrong}@127.0.0.1:{}/", server.port())).expect("URL");
    assert!(!format!("{bad:?}").contains(wrong));
    let (l, events) = limiter_with_events(bad);
    let degraded = refused_decisions(&rt, &l, 5);
    assert_eq!(degraded[..2], [Some(Degraded::Refused); 2], "{degraded:?}");
    let cause = opened_once(&events);
    for shown in [cause.clone(), format!("{:?}", events.lock().expect("events"))] {
        assert!(!shown.contains(wrong) && !shown.contains(PASSWORD), "{shown}");
        assert!(shown.contains(&server.port().to_string()), "names the server: {shown}");
    }
    assert!(cause.contains("refused this client") && cause.contains("authentication failed"), "{cause}");
    // No user at all: the default user is off.
    let (anonymous, events) = limiter_with_events(RedisStore::from_url(&server.url()).expect("URL"));
    assert_eq!(refused_decisions(&rt, &anonymous, 3)[0], Some(Degraded::Refused));
    assert!(opened_once(&events).contains("NOAUTH"), "{:?}", events.lock().expect("events"));

    // A URL that cannot be used is refused by name, with the password masked.
    let e = RedisStore::from_url(&format!("redis://limiter:{PASSWORD}@127.0.0.1:notaport/")).expect_err("bad port");
    assert!(!e.to_string().contains(PASSWORD) && e.to_string().contains("redis_url"), "{e}");
    let e = RedisStore::cluster([format!("redis://limiter:{PASSWORD}@[::1/")]).expect_err("bad URL");
    assert!(!e.to_string().contains(PASSWORD), "{e}");
}

/// Rules with one route per failure policy, as an operator would configure them.
const POLICIES: &str = r#"
[[rule]]
name = "open"
match = { path = "/api/items/open" }
key = ["ip"]
algorithm = "token-bucket"
limit = 100
period = "1s"

[[rule]]
name = "closed"
match = { path = "/api/items/closed" }
key = ["ip"]
algorithm = "token-bucket"
limit = 100
period = "1s"
failure_policy = "fail-closed"

[[rule]]
name = "budget"
match = { path = "/api/items/budget" }
key = ["ip"]
algorithm = "token-bucket"
limit = 100
period = "1s"
failure_policy = "local-budget"
local_budget = { limit = 2, period = "1h" }
"#;

/// 21 requests, 7 per route, against a gateway Redis refuses: each route answers by its policy
/// (never a 500). The statuses per route, in order.
async fn probe_refused(gateway: &Gateway) -> Vec<(&'static str, Vec<u16>)> {
    let mut seen: Vec<(&'static str, Vec<u16>)> = ["open", "closed", "budget"].map(|r| (r, Vec::new())).to_vec();
    for _ in 0..7 {
        for (route, statuses) in &mut seen {
            let reply = request(gateway.addr, "127.0.0.1", "GET", &format!("/api/items/{route}"), &[]).await;
            statuses.push(reply.status);
        }
    }
    assert_eq!(seen[0].1, [200; 7], "fail-open admits: {seen:?}");
    assert_eq!(seen[1].1, [503; 7], "fail-closed refuses for want of Redis: {seen:?}");
    assert_eq!(seen[2].1, [200, 200, 429, 429, 429, 429, 429], "the local budget admits its 2: {seen:?}");
    seen
}

/// The gateway's lines about Redis's health.
fn health_lines(gateway: &mut Gateway) -> Vec<String> {
    // The stderr reader is a thread; give it the lines written so far.
    let _ = gateway.wait_for_quiet(std::time::Duration::from_millis(300));
    gateway.seen.iter().filter(|l| l.starts_with("redis: ")).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_wrong_password_is_an_outage_with_one_line_and_few_connections() {
    let server = acl_server();
    let config = ConfigFile::new(POLICIES);
    let wrong = "wrong-Pa55word-xyz";
    let url = format!("redis://limiter:{wrong}@127.0.0.1:{}/", server.port());
    let metrics = format!("127.0.0.1:{}", free_port().expect("a port"));
    let mut gateway = Gateway::start_with(&config.path, &url, &["--metrics-listen", &metrics]);
    let mut admin = redis::Client::open(format!("redis://limiter:{PASSWORD}@127.0.0.1:{}/", server.port()))
        .and_then(|c| c.get_connection())
        .expect("the test's own connection");
    let connections = |admin: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(admin).expect("INFO");
        info.lines().find_map(|l| l.strip_prefix("total_connections_received:")?.trim().parse().ok()).expect("a count")
    };
    let before = connections(&mut admin);
    let seen = probe_refused(&gateway).await;
    // The test's own INFO connection is the one already counted; the gateway's dials are the rest.
    let dialed = connections(&mut admin) - before;
    assert!(dialed <= 4, "the gateway dialed {dialed} times for 21 requests: reconnections must back off");
    let lines = health_lines(&mut gateway);
    assert_eq!(lines.len(), 1, "one line for the one change of state: {lines:?}");
    assert!(lines[0].contains("circuit breaker open") && lines[0].contains("authentication failed"), "{lines:?}");
    assert!(gateway.seen.iter().all(|l| !l.contains(wrong) && !l.contains(PASSWORD)), "{:?}", gateway.seen);
    let exposition = request(metrics.parse().expect("an address"), "127.0.0.1", "GET", "/metrics", &[]).await.body;
    let refused = exposition
        .lines()
        .filter(|l| l.starts_with("limiter_store_errors_total{") && l.contains("kind=\"refused\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>();
    assert!(refused >= 1.0, "the metrics count the refusals: {exposition}");
    assert!(!exposition.contains(wrong), "{exposition}");
    println!("tls_acl: a wrong password over HTTP: {seen:?}; {dialed} connections for 21 requests; lines {lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_an_untrusted_certificate_is_an_outage_with_one_line() {
    let certs = certificates();
    let server = tls_server(&certs);
    let config = ConfigFile::new(POLICIES);
    // The gateway trusts the system's roots only: the test's CA is not among them.
    let mut gateway = Gateway::start(&config.path, &format!("rediss://127.0.0.1:{}/", server.port()));
    let seen = probe_refused(&gateway).await;
    let lines = health_lines(&mut gateway);
    assert_eq!(lines.len(), 1, "one line for the one change of state: {lines:?}");
    assert!(lines[0].contains("TLS") && lines[0].contains(&server.port().to_string()), "{lines:?}");
    println!("tls_acl: an untrusted certificate over HTTP: {seen:?}; lines {lines:?}");
}
