//! The service file's parsing: the documented example, and every mistake named.
use super::*;

const GATEWAY: &str = r#"
name = "gateway"
[service]
command = ["{env:GW}", "--listen", "127.0.0.1:{port}", "--redis-url", "{redis_url}"]
ready = { url = "http://127.0.0.1:{port}/health" }
[ask.http]
url = "http://127.0.0.1:{port}/api/hello"
headers = { x-tenant = "{key}" }
[answer]
degraded = [503]
retry_after_header = "Retry-After"
[failure]
policy = "fail-closed"
timeout_ms = 250
[promise]
kind = "token-bucket"
[quota]
limit = 5
period_ms = 1000
"#;

fn parse(text: &str) -> Result<ServiceFile, FileError> {
    ServiceFile::parse(Path::new("svc/x.toml"), text, &|name| (name == "GW").then(|| "/bin/gw".to_owned()))
}

#[test]
fn the_documented_example_parses_and_renders() {
    let f = parse(GATEWAY).expect("valid");
    assert_eq!(f.start.instances, 2);
    assert_eq!(f.answer.admitted, [200]);
    assert_eq!(f.answer.denied, [429]);
    assert_eq!(f.answer.retry_after_header.as_deref(), Some("retry-after"));
    assert_eq!(f.failure.map(|f| f.policy), Some(Policy::FailClosed));
    assert_eq!(f.quota.burst(), 5);
    let v = Values { port: 8080, redis_port: 7000, key: "k1", ..Values::default() };
    let argv: Vec<String> = f.start.command.iter().map(|t| t.render(&v)).collect();
    assert_eq!(argv, ["/bin/gw", "--listen", "127.0.0.1:8080", "--redis-url", "redis://127.0.0.1:7000/"]);
    let Ask::Http { headers, .. } = &f.ask else { panic!("an HTTP ask") };
    assert_eq!(headers[0].1.render(&v), "k1");
}

#[test]
fn rls_codes_are_read_by_name() {
    let text = GATEWAY
        .replace(
            "[ask.http]\nurl = \"http://127.0.0.1:{port}/api/hello\"\nheaders = { x-tenant = \"{key}\" }",
            "[ask.rls]\ndomain = \"edge\"\ndescriptors = [[{ key = \"tenant\", value = \"{key}\" }]]",
        )
        .replace("degraded = [503]", "");
    let f = parse(&text).expect("valid");
    assert_eq!((f.answer.admitted.as_slice(), f.answer.denied.as_slice()), (&[1][..], &[2][..]));
    assert_eq!(f.ask.kind(), "rls");
}

#[test]
fn every_mistake_names_the_file_the_field_and_the_value() {
    let cases = [
        (GATEWAY.replace("{env:GW}", "{env:NOPE}"), "`service.command[0]`", "NOPE is not set"),
        (GATEWAY.replace("{redis_url}", "{redis}"), "`service.command[4]`", "unknown placeholder `{redis}`"),
        (GATEWAY.replace("--redis-url\", \"{redis_url}\"", "--x\", \"y\""), "`service.command`", "{redis_url}"),
        (GATEWAY.replace("127.0.0.1:{port}\", \"--redis", "127.0.0.1:80\", \"--redis"), "`service.command`", "{port}"),
        (GATEWAY.replace("[service]", "[service]\ninstances = 9"), "`service.instances`", "9"),
        (GATEWAY.replace("{ url = ", "{ port = true, url = "), "`service.ready`", "exactly one"),
        (GATEWAY.replace("x-tenant = \"{key}\"", "x-tenant = \"k\""), "`ask`", "{key}"),
        (GATEWAY.replace("{key}", "{redis_url}"), "`ask.http.headers.x-tenant`", "unknown placeholder"),
        (GATEWAY.replace("degraded = [503]", "degraded = [429]"), "`answer.degraded`", "429"),
        (GATEWAY.replace("degraded = [503]", "degraded = [\"x\"]"), "`answer.degraded`", "\"x\""),
        (GATEWAY.replace("fail-closed", "fail-maybe"), "`failure.policy`", "fail-maybe"),
        (GATEWAY.replace("\"fail-closed\"", "\"local-budget\""), "`failure.local_budget`", "missing"),
        (GATEWAY.replace("token-bucket", "leaky"), "`promise.kind`", "leaky"),
        (GATEWAY.replace("[quota]\nlimit = 5\nperiod_ms = 1000\n", ""), "`quota`", "missing"),
        (GATEWAY.replace("limit = 5", "limit = 0"), "`quota.limit`", "0"),
        (
            GATEWAY.replace("kind = \"token-bucket\"", "kind = \"token-bucket\"\ncounts = \"admitted\""),
            "`promise.counts`",
            "script",
        ),
        (GATEWAY.replace("/api/hello", "/api/{hello"), "`ask.http.url`", "never closed"),
        (GATEWAY.replace("[ask.http]", "[ask.http]\nmethod = \"G T\""), "`ask.http.method`", "G T"),
    ];
    for (text, field, detail) in cases {
        let e = parse(&text).expect_err(field).to_string();
        assert!(e.starts_with("svc/x.toml"), "{e}");
        assert!(e.contains(field) && e.contains(detail), "expected {field} and {detail:?} in: {e}");
    }
}
