//! The enforcement point attacked as a client would attack it: real example gateways over real
//! HTTP on one `redis-server`, sending what a client controls (headers, repeated headers,
//! claimed identities). Each test is one way around the limits that must stay closed; the
//! counts it prints are what the attack got.

// Real processes and real Redis run on real time.
#![allow(clippy::disallowed_methods)]

use crate::gateway_support;

use gateway_support::{request, start_failure, ConfigFile, Gateway};
use redis_tests::RedisServer;

/// The API keys the gateways accept: a secret and the name of its holder, per line.
const KEYS: &str = "\
# secret              holder
sk-test-batch-0001    internal-batch
sk-test-alice-0001    alice
";

/// An allow-listed holder, a fail-closed login limit and a global cap, as the example's file has.
const RULES: &str = r#"
[access]
allow_keys = ["internal-batch"]

[[rule]]
name = "login-per-ip"
match = { method = "POST", path = "/login" }
key = ["ip"]
algorithm = "sliding-log"
limit = 10
period = "1h"
failure_policy = "fail-closed"

[[rule]]
name = "api-global"
match = { path = "/api/**" }
key = ["const:api"]
algorithm = "sliding-log"
limit = 10
period = "1h"
"#;

fn authenticating(config: &ConfigFile, keys: &ConfigFile, redis: &RedisServer) -> Gateway {
    let keys = keys.path.to_string_lossy().into_owned();
    Gateway::start_with(&config.path, &redis.url(), &["--api-keys", &keys])
}

/// How many of `n` requests, sent to the gateways in turn, got each status.
async fn statuses(
    gateways: &[&Gateway],
    n: usize,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Vec<(u16, usize)> {
    let mut counts: Vec<(u16, usize)> = Vec::new();
    for i in 0..n {
        let status = request(gateways[i % gateways.len()].addr, "127.0.0.1", method, path, headers).await.status;
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some((_, c)) => *c += 1,
            None => counts.push((status, 1)),
        }
    }
    counts.sort();
    counts
}

/// Finding 1: an allow list matched a name the client sent, so anyone could skip every rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_lists_match_only_identities_the_gateway_authenticated() {
    let redis = RedisServer::start().expect("redis-server");
    let (config, keys) = (ConfigFile::new(RULES), ConfigFile::new(KEYS));
    // Two gateways on one Redis, as a deployment runs them.
    let (one, two) = (authenticating(&config, &keys, &redis), authenticating(&config, &keys, &redis));
    let gateway = [&one, &two];
    // Claiming the allow-listed name, as a header the gateway once read as the user: counted
    // by the client's address like anyone, 10 of 30 logins and 10 of 30 calls of the API.
    let claimed = [("x-user", "internal-batch")];
    let started = std::time::Instant::now();
    let logins = statuses(&gateway, 30, "POST", "/login", &claimed).await;
    let took = started.elapsed();
    assert_eq!(logins, [(200, 10), (429, 20)], "logins claiming the allow-listed name");
    let api = statuses(&gateway, 30, "GET", "/api/hello", &claimed).await;
    assert_eq!(api, [(200, 10), (429, 20)], "API calls claiming the allow-listed name");
    // The name where the key goes is no key: refused before any rule.
    let named = statuses(&gateway, 30, "POST", "/login", &[("x-api-key", "internal-batch")]).await;
    assert_eq!(named, [(401, 30)], "the allow-listed name sent as an API key");
    // The holder's real key is allow-listed: every one of its requests goes through.
    let real = statuses(&gateway, 30, "POST", "/login", &[("x-api-key", "sk-test-batch-0001")]).await;
    assert_eq!(real, [(200, 30)], "the allow-listed holder's own key");
    println!(
        "attacks: claimed allow-listed name: logins {logins:?} in {took:?}, API {api:?}; name as key {named:?}; \
         real key {real:?}"
    );

    // An allow list compared with a header any client can send is refused when the file loads.
    let raw = RULES.replace("[access]\n", "[access]\nkey_headers = [\"x-api-key\"]\n");
    let (code, stderr) = start_failure(&ConfigFile::new(&raw).path, &redis.url());
    assert_eq!(code, Some(2), "{stderr:?}");
    let line = stderr.iter().find(|l| l.contains("access.allow_keys")).expect("names the field");
    assert!(line.contains("x-api-key") && line.contains("any client"), "{line}");
}

/// Finding 2: with the key header sent twice, the lists read every value and the rules the
/// first, so an attacker's key beside an allow-listed one went through unlimited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_that_identifies_the_client_must_arrive_once() {
    let redis = RedisServer::start().expect("redis-server");
    let (config, keys) = (ConfigFile::new(RULES), ConfigFile::new(KEYS));
    let gateway = authenticating(&config, &keys, &redis);
    let twice = [("x-api-key", "sk-attacker-0000"), ("x-api-key", "sk-test-batch-0001")];
    let reply = request(gateway.addr, "127.0.0.1", "GET", "/api/hello", &twice).await;
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(reply.body.contains("x-api-key"), "names the header: {}", reply.body);
    assert_eq!(reply.header("ratelimit"), None);
    let same_twice = [("x-api-key", "sk-test-alice-0001"), ("x-api-key", "sk-test-alice-0001")];
    assert_eq!(request(gateway.addr, "127.0.0.1", "GET", "/api/hello", &same_twice).await.status, 400);

    // The same holds where the rules count by a raw header and the deny list reads it.
    let config = ConfigFile::new(
        r#"
        [access]
        key_headers = ["x-client"]
        deny_keys = ["banned"]

        [[rule]]
        name = "per-client"
        match = { path = "/api/hello" }
        key = ["header:x-client"]
        algorithm = "sliding-log"
        limit = 1
        period = "1h"
        "#,
    );
    let plain = Gateway::start(&config.path, &redis.url());
    let get = |headers: &'static [(&'static str, &'static str)]| {
        let addr = plain.addr;
        async move { request(addr, "127.0.0.1", "GET", "/api/hello", headers).await }
    };
    let both = get(&[("x-client", "fresh"), ("x-client", "banned")]).await;
    assert_eq!(both.status, 400, "{both:?}");
    assert!(both.body.contains("x-client"), "{}", both.body);
    assert_eq!(get(&[("x-client", "banned")]).await.status, 403);
    assert_eq!(get(&[("x-client", "fresh")]).await.status, 200);
    assert_eq!(get(&[("x-client", "fresh")]).await.status, 429);
    // Sending it twice is no way around the limit either.
    assert_eq!(get(&[("x-client", "fresh"), ("x-client", "other")]).await.status, 400);
    println!("attacks: a client header sent twice: {} and {}", reply.status, both.status);
}
