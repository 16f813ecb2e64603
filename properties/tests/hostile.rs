//! What a hostile or careless input does to the enforcement point: never a panic, always a clear
//! error or a decision.
//!
//! - A rules file (`RuleSet::from_toml`), from arbitrary text, from a valid file with its lines
//!   dropped, repeated or their values replaced, and from tables of fields and values drawn from
//!   what a file can hold: either a rule set an enforcer can be built from, or a `RuleError`
//!   naming a field and saying what is wrong.
//! - A request, in every part the enforcer reads: methods, paths, hosts, any header with any
//!   bytes (repeated or not, `X-Forwarded-For` and `Forwarded` chains from trusted and untrusted
//!   peers), verified users and API keys, IPv4 and IPv6 peers. The enforcer answers a verdict,
//!   or refuses a key as too long; the rules layer answers 200, 400, 403 or 429 with a body.
//! - A permit ticket (`PermitTicket::decode`), from arbitrary text and from real tickets with
//!   their text cut, spliced or changed: refused as a request's fault, or read as a ticket that
//!   encodes back to the very text; and a ticket read releases a permit of its own or nothing.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use http::{HeaderName, HeaderValue, Request, Response};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use redis_ratelimit::enforce::{Enforcer, Ruling};
use redis_ratelimit::http::RulesLayer;
use redis_ratelimit::rules::{ApiKey, PeerAddr, RuleSet, User};
use redis_ratelimit::{Acquired, ConcurrencyLimiter, Error, ErrorKind, ManualClock, PermitTicket};
use tower::{Layer, ServiceExt};

/// The in-process enforcer never waits: its futures are ready on the first poll.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn runner(name: &str) -> TestRunner {
    let file = format!("proptest-regressions/hostile-{name}.txt");
    TestRunner::new(Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(Box::leak(file.into_boxed_str())))),
        ..Config::default()
    })
}

// ------------------------------------------------------------------------------ rules files

/// A file using every section and most fields.
const VALID: &str = r#"[client_ip]
trusted_proxies = ["10.0.0.0/8", "192.0.2.1"]
header = "forwarded"
[access]
allow_keys = ["internal"]
deny_keys = ["revoked"]
deny_ips = ["203.0.113.0/24"]
[[rule]]
name = "per-key"
match = { method = ["GET", "POST"], path = "/api/**", host = "api.example", headers = ["x-api-key"] }
key = ["api-key", "route"]
algorithm = "token-bucket"
limit = 5
period = "1s"
burst = 10
cost = 2
failure_policy = "local-budget"
local_budget = { limit = 2, period = "1m" }
time_source = "client"
shadow = false
on_missing_key = "fallback-ip"
[[rule]]
name = "login"
match = { path = "/users/*/login" }
key = ["ip"]
algorithm = "sliding-log"
limit = 10
period = "60s"
failure_policy = "fail-closed"
"#;

const FIELDS: &[&str] = &[
    "name",
    "key",
    "algorithm",
    "limit",
    "period",
    "burst",
    "cost",
    "failure_policy",
    "local_budget",
    "time_source",
    "shadow",
    "on_missing_key",
    "match",
    "trusted_proxies",
    "header",
    "allow_keys",
    "deny_keys",
    "allow_ips",
    "deny_ips",
    "key_headers",
    "method",
    "path",
    "host",
    "headers",
    "limt",
];

/// A TOML value of any kind, some of them what a field wants.
fn value() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        Just("gcra".to_owned()),
        Just("token-bucket".to_owned()),
        Just("sliding-window".to_owned()),
        Just("fail-closed".to_owned()),
        Just("local-budget".to_owned()),
        Just("header:x-api-key".to_owned()),
        Just("api-key".to_owned()),
        Just("/api/**".to_owned()),
        Just("10.0.0.0/33".to_owned()),
        Just("1.5s".to_owned()),
        Just("30d".to_owned()),
        "[ -~]{0,16}",
        ".{0,8}",
    ];
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..100).prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        word.clone().prop_map(|w| format!("{w:?}")),
        proptest::collection::vec(word.clone().prop_map(|w| format!("{w:?}")), 0..4)
            .prop_map(|items| format!("[{}]", items.join(", "))),
        (word.clone(), word).prop_map(|(a, b)| format!("{{ path = {a:?}, limit = {b:?} }}")),
        Just("1979-05-27T07:32:00Z".to_owned()),
    ]
}

/// Rules files: arbitrary text, a mutated valid file, or tables of drawn fields.
fn rules_file() -> impl Strategy<Value = String> {
    let lines: Vec<String> = VALID.lines().map(str::to_owned).collect();
    let n = lines.len();
    let mutated = proptest::collection::vec((0..n, 0u8..4, value()), 0..6).prop_map(move |edits| {
        let mut lines = lines.clone();
        for (at, how, value) in edits {
            let at = at.min(lines.len().saturating_sub(1));
            if lines.is_empty() {
                break;
            }
            match how {
                0 => {
                    lines.remove(at);
                }
                1 => lines.insert(at, lines[at].clone()),
                2 => {
                    if let Some((field, _)) = lines[at].split_once(" = ") {
                        lines[at] = format!("{field} = {value}");
                    }
                }
                _ => {
                    // Cut at a character boundary: half the characters.
                    let half: String = lines[at].chars().take(lines[at].chars().count() / 2).collect();
                    lines[at] = half;
                }
            }
        }
        lines.join("\n")
    });
    let field = (proptest::sample::select(FIELDS), value()).prop_map(|(f, v)| format!("{f} = {v}"));
    let table = (
        proptest::sample::select(&["[[rule]]", "[access]", "[client_ip]", "[rule]", "[[access]]", ""][..]),
        proptest::collection::vec(field, 0..10),
    )
        .prop_map(|(head, fields)| format!("{head}\n{}\n", fields.join("\n")));
    prop_oneof![".{0,200}", mutated, proptest::collection::vec(table, 1..4).prop_map(|tables| tables.concat()),]
}

/// Files that loaded, of those tried (the suite prints it: both outcomes must be exercised).
static LOADED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn a_file_loads_or_names_its_fault(text: &str) -> Result<(), TestCaseError> {
    let loaded = catch_unwind(|| RuleSet::from_toml(text))
        .map_err(|_| TestCaseError::fail(format!("RuleSet::from_toml panicked on:\n{text}")))?;
    match loaded {
        Ok(rules) => {
            LOADED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // What loads can be enforced.
            Enforcer::builder(rules).build().map_err(|e| TestCaseError::fail(format!("loaded but unusable: {e}")))?;
        }
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(!e.field.is_empty() && !e.message.is_empty(), "an error without a field or a reason: {e:?}");
            prop_assert!(shown.contains(&e.field), "{shown}");
        }
    }
    Ok(())
}

#[test]
fn a_rules_file_loads_or_is_refused_by_field_never_a_panic() {
    let mut runner = runner("rules-file");
    let n = runner.config().cases;
    let result = runner.run(&rules_file(), |text| a_file_loads_or_names_its_fault(&text));
    match result {
        Ok(()) => println!(
            "properties: hostile rules files {n} cases ({} loaded, the rest refused by field)",
            LOADED.load(std::sync::atomic::Ordering::Relaxed)
        ),
        Err(e) => panic!("properties: hostile rules files FAILED\n{e}"),
    }
    // The valid file is one.
    assert!(RuleSet::from_toml(VALID).is_ok());
}

// ----------------------------------------------------------------------------------- requests

/// Rules reading every part of a request, behind trusted proxies writing `header`.
fn rules(header: &str) -> RuleSet {
    RuleSet::from_toml(&format!(
        r#"
        [client_ip]
        trusted_proxies = ["10.0.0.0/8", "::1/128"]
        header = "{header}"
        [access]
        key_headers = ["x-client"]
        deny_keys = ["revoked"]
        deny_ips = ["203.0.113.0/24"]
        [[rule]]
        name = "by-key"
        match = {{ path = "/api/**" }}
        key = ["api-key", "route", "method"]
        algorithm = "gcra"
        limit = 3
        period = "1m"
        on_missing_key = "fallback-ip"
        [[rule]]
        name = "by-client"
        match = {{ headers = ["x-client"] }}
        key = ["header:x-client", "ip"]
        algorithm = "sliding-log"
        limit = 2
        period = "1m"
        [[rule]]
        name = "by-user"
        match = {{ method = ["POST", "DELETE"], path = "/users/*/posts" }}
        key = ["user"]
        algorithm = "fixed-window"
        limit = 2
        period = "1m"
        on_missing_key = "skip"
        [[rule]]
        name = "global"
        match = {{ host = "api.example" }}
        key = ["const:all"]
        algorithm = "token-bucket"
        limit = 5
        period = "1s"
        "#
    ))
    .expect("the request suite's rules are valid")
}

#[derive(Debug, Clone)]
struct Hostile {
    method: String,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    peer: Option<std::net::IpAddr>,
    user: Option<String>,
    api_key: Option<String>,
}

fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        "[ -~]{0,40}".prop_map(String::into_bytes),
        proptest::collection::vec(
            prop_oneof![
                Just("198.51.100.7".to_owned()),
                Just("10.1.2.3".to_owned()),
                Just("[2001:db8::1]:443".to_owned()),
                Just("for=\"[::1]\";proto=https".to_owned()),
                Just("for=_hidden".to_owned()),
                Just("unknown".to_owned()),
                Just("revoked".to_owned()),
                "[ -~]{0,12}",
            ],
            0..5
        )
        .prop_map(|hops| hops.join(", ").into_bytes()),
        (1usize..2_000).prop_map(|n| "k".repeat(n).into_bytes()),
    ]
}

fn hostile_request() -> impl Strategy<Value = Hostile> {
    let name = prop_oneof![
        Just("x-forwarded-for".to_owned()),
        Just("forwarded".to_owned()),
        Just("x-client".to_owned()),
        Just("x-api-key".to_owned()),
        Just("host".to_owned()),
        "[a-z-]{1,12}",
    ];
    let path = prop_oneof![
        Just("/api/items".to_owned()),
        Just("/users/7/posts".to_owned()),
        "(/[a-zA-Z0-9%._~:@!$&'()*+,;=-]{0,10}){0,6}",
        "/[ -~]{0,30}",
    ];
    let peer = prop_oneof![
        Just(None),
        any::<[u8; 4]>().prop_map(|b| Some(std::net::IpAddr::from(b))),
        any::<[u8; 16]>().prop_map(|b| Some(std::net::IpAddr::from(b))),
        Just(Some("10.0.0.9".parse().expect("an address"))),
        Just(Some("::ffff:10.0.0.9".parse().expect("an address"))),
    ];
    (
        proptest::sample::select(&["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "X-CUSTOM"][..]),
        path,
        proptest::collection::vec((name, header_value()), 0..8),
        peer,
        proptest::option::of(".{0,80}"),
        proptest::option::of(prop_oneof![Just("revoked".to_owned()), ".{0,600}"]),
    )
        .prop_map(|(method, path, headers, peer, user, api_key)| Hostile {
            method: method.to_owned(),
            path,
            headers,
            peer,
            user,
            api_key,
        })
}

/// The request `h` describes, with the parts `http` can carry (a path it cannot parse, or a
/// header value with line breaks, cannot reach a server as such).
fn build(h: &Hostile) -> Option<Request<()>> {
    let mut b = Request::builder().method(h.method.as_str()).uri(http::Uri::try_from(h.path.as_str()).ok()?);
    for (name, value) in &h.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::from_bytes(value)) {
            b = b.header(name, value);
        }
    }
    if let Some(peer) = h.peer {
        b = b.extension(PeerAddr(peer));
    }
    if let Some(user) = &h.user {
        b = b.extension(User(user.clone()));
    }
    if let Some(key) = &h.api_key {
        b = b.extension(ApiKey(key.clone()));
    }
    b.body(()).ok()
}

/// How many requests got each status through the layer (the suite prints it).
static STATUSES: std::sync::Mutex<std::collections::BTreeMap<u16, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn a_request_gets_a_decision_or_a_clear_refusal(enforcers: &[Enforcer], h: &Hostile) -> Result<(), TestCaseError> {
    let Some(req) = build(h) else { return Ok(()) };
    for enforcer in enforcers {
        let verdict = catch_unwind(AssertUnwindSafe(|| block_on(enforcer.check(&req))))
            .map_err(|_| TestCaseError::fail(format!("the enforcer panicked on {h:?}")))?;
        match verdict {
            Ok(Ruling::Decided(d)) => prop_assert!(!d.rules.is_empty()),
            Ok(_) => {}
            Err(Error::InvalidKey(why)) => prop_assert!(!why.is_empty()),
            Err(other) => return Err(TestCaseError::fail(format!("an error other than a refused key: {other}"))),
        }
        let layer = RulesLayer::new(enforcer.clone());
        let svc = layer.layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(String::from("ok")))
        }));
        let Some(again) = build(h) else { return Ok(()) };
        let response = catch_unwind(AssertUnwindSafe(|| block_on(svc.oneshot(again))))
            .map_err(|_| TestCaseError::fail(format!("the rules layer panicked on {h:?}")))?
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let status = response.status().as_u16();
        prop_assert!([200, 400, 403, 429].contains(&status), "status {} for {:?}", status, h);
        *STATUSES.lock().expect("counts").entry(status).or_default() += 1;
        prop_assert!(!response.body().get_ref().is_empty());
    }
    Ok(())
}

#[test]
fn any_request_gets_a_decision_or_a_clear_refusal_never_a_panic() {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let enforcers: Vec<Enforcer> = ["x-forwarded-for", "forwarded"]
        .iter()
        .map(|header| {
            Enforcer::builder(rules(header)).clock(clock.clone()).max_key_len(256).build().expect("an enforcer")
        })
        .collect();
    let mut runner = runner("requests");
    let n = runner.config().cases;
    let result = runner.run(&hostile_request(), |h| {
        clock.advance(250);
        a_request_gets_a_decision_or_a_clear_refusal(&enforcers, &h)
    });
    match result {
        Ok(()) => println!(
            "properties: hostile requests {n} cases (statuses through the layer: {:?})",
            STATUSES.lock().expect("counts")
        ),
        Err(e) => panic!("properties: hostile requests FAILED\n{e}"),
    }
}

// ------------------------------------------------------------------------------ permit tickets

/// Text a ticket could be mistaken for: arbitrary text, and real tickets cut, spliced or with a
/// character changed.
fn ticket_text(real: Vec<String>) -> impl Strategy<Value = String> {
    let real = proptest::sample::select(real);
    prop_oneof![
        2 => any::<String>(),
        2 => (real.clone(), any::<prop::sample::Index>()).prop_map(|(t, at)| {
            let mut cut = at.index(t.len() + 1);
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            t[..cut].to_owned()
        }),
        2 => (real.clone(), any::<prop::sample::Index>(), any::<char>()).prop_map(|(t, at, c)| {
            let mut chars: Vec<char> = t.chars().collect();
            let i = at.index(chars.len());
            chars[i] = c;
            chars.into_iter().collect()
        }),
        1 => (real.clone(), real, "[: .a-f0-9]{0,3}").prop_map(|(a, b, glue)| format!("{a}{glue}{b}")),
    ]
}

#[test]
fn any_text_is_a_ticket_that_reads_back_as_itself_or_a_clear_refusal_never_a_panic() {
    let limiter = ConcurrencyLimiter::builder(3, std::time::Duration::from_secs(60)).build().expect("a limiter");
    let held: Vec<_> = ["k", "a:{b} c", "\u{e9}t\u{e9}"]
        .iter()
        .map(|key| match block_on(limiter.acquire(key)).expect("decides") {
            Acquired::Held(permit) => permit.into_ticket(),
            Acquired::Full(d) => panic!("refused: {d:?}"),
        })
        .collect();
    let real: Vec<String> = held.iter().map(PermitTicket::encode).collect();
    // The limiter's random part of every token (`p1:s:TOKEN.N:KEY`).
    let token: String = real[0].split(':').nth(2).expect("a token").chars().take(32).collect();
    let mut runner = runner("tickets");
    let n = runner.config().cases;
    let released = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&ticket_text(real.clone()), |text| {
        let read = catch_unwind(AssertUnwindSafe(|| PermitTicket::decode(&text)))
            .map_err(|_| TestCaseError::fail(format!("decode panicked on {text:?}")))?;
        match read {
            Ok(ticket) => {
                prop_assert_eq!(ticket.encode(), text.clone());
                let freed = catch_unwind(AssertUnwindSafe(|| block_on(limiter.release_ticket(&ticket))))
                    .map_err(|_| TestCaseError::fail(format!("release panicked on {text:?}")))?;
                match freed {
                    // Only a real ticket frees a permit.
                    Ok(true) => {
                        prop_assert!(real.contains(&text), "{:?} freed a permit", text);
                        released.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(false) => {}
                    Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Request),
                }
            }
            Err(e) => {
                prop_assert_eq!(e.kind(), ErrorKind::Request);
                // The token is the secret a ticket carries: no refusal repeats it.
                prop_assert!(!e.to_string().contains(token.as_str()), "{} echoes the token of {:?}", e, text);
            }
        }
        Ok(())
    });
    match result {
        Ok(()) => {
            println!(
                "properties: hostile permit tickets {n} cases (real tickets among them released: {})",
                released.into_inner()
            )
        }
        Err(e) => panic!("properties: hostile permit tickets FAILED\n{e}"),
    }
}
