//! The library guide's gateway transcripts (`limiter/GUIDE.md`) are what the example gateway
//! answers. The test reads the `$ curl` commands of each transcript under "The example
//! gateway", sends each one to a real gateway (the example's own files, the tests'
//! partition-key secret) on a `redis-server` of its own, stopping that Redis before the second
//! transcript as the guide does, and requires every status line, header and body the guide
//! shows, and the line the gateway logs when its breaker opens. Whoever changes what the gateway
//! answers updates the guide too.
//!
//! Two things cannot be the guide's: the `date:` lines, which the guide leaves out, and the
//! `t` of a window aligned to the clock (the fixed window's, the sliding-window counter's), which
//! depends on the time of day; those are compared without their `t`.

// A real gateway and a real Redis run on real time.
#![allow(clippy::disallowed_methods)]

use crate::gateway_support;

use gateway_support::{request, Gateway, Reply};
use redis_tests::RedisServer;

const README: &str = include_str!("../../../limiter/GUIDE.md");

/// The rules of `limiter/examples/gateway.toml` whose windows are aligned to the clock.
const ALIGNED: &[&str] = &["api-daily-per-key", "hello-strict"];

/// The ```text blocks of the README's gateway section that hold `$ curl` transcripts.
fn transcripts() -> Vec<&'static str> {
    let start = README.find("### The example gateway").expect("the README has a section on the example gateway");
    let section = &README[start..];
    let section = &section[..section[4..].find("\n#").map_or(section.len(), |end| end + 4)];
    section
        .split("```text\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .filter(|block| block.starts_with("$ curl"))
        .collect()
}

/// A `curl -si` command of a transcript: its method, path and headers.
struct Curl {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

/// Reads `curl -si [-X METHOD] [-H 'Name: value']... URL`.
fn parse_curl(line: &str) -> Curl {
    let mut words = Vec::new();
    let mut rest = line.trim_start_matches("$ ").trim();
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('\'') {
            Some(quoted) => quoted.split_once('\'').unwrap_or_else(|| panic!("an unclosed quote in {line:?}")),
            None => rest.split_once(' ').unwrap_or((rest, "")),
        };
        words.push(word.to_owned());
        rest = after.trim_start();
    }
    let mut curl = Curl { method: "GET".into(), path: String::new(), headers: Vec::new() };
    let mut words = words.into_iter().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "-si" => {}
            "-X" => curl.method = words.next().expect("a method after -X"),
            "-H" => {
                let header = words.next().expect("a header after -H");
                let (name, value) = header.split_once(": ").expect("a header is 'Name: value'");
                curl.headers.push((name.to_owned(), value.to_owned()));
            }
            url => {
                let after_host = url.strip_prefix("http://").and_then(|u| u.find('/').map(|i| &u[i..]));
                curl.path = after_host.unwrap_or_else(|| panic!("not a URL: {url:?} in {line:?}")).to_owned();
            }
        }
    }
    curl
}

/// One answer as `curl -si` prints it, without its `date:` line, and without the trailing newline
/// of its body. The test's requests ask to close the connection, curl's do not, so the answer's
/// `connection: close` is not shown either.
fn shown(reply: &Reply) -> String {
    let mut out = format!("{}\n", reply.status_line);
    for (name, value) in reply.headers.iter().filter(|(name, _)| name != "date" && name != "connection") {
        out.push_str(&format!("{name}: {value}\n"));
    }
    out.push('\n');
    out.push_str(reply.body.trim_end_matches('\n'));
    out
}

/// `text` with the `t` of every aligned rule's item masked (see the module docs).
fn masked(text: &str) -> String {
    text.lines()
        .map(|line| {
            if !(line.starts_with("ratelimit: ") || line.starts_with("ratelimit-shadow: ")) {
                return line.to_owned();
            }
            let (name, items) = line.split_once(": ").unwrap_or((line, ""));
            let items: Vec<String> = items
                .split(", ")
                .map(|item| {
                    if !ALIGNED.iter().any(|rule| item.starts_with(&format!("\"{rule}\";"))) {
                        return item.to_owned();
                    }
                    item.split(';')
                        .map(|p| if p.starts_with("t=") { "t=(time of day)" } else { p })
                        .collect::<Vec<_>>()
                        .join(";")
                })
                .collect();
            format!("{name}: {}", items.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends every command of `transcript` to `gateway` and prints the transcript the answers make.
async fn replay(gateway: &Gateway, transcript: &str) -> String {
    let mut out = Vec::new();
    for line in transcript.lines().filter(|l| l.starts_with("$ curl")) {
        let curl = parse_curl(line);
        let headers: Vec<(&str, &str)> = curl.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let reply = request(gateway.addr, "127.0.0.1", &curl.method, &curl.path, &headers).await;
        out.push(format!("{line}\n{}", shown(&reply)));
    }
    out.join("\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_s_gateway_transcripts_are_what_the_gateway_answers() {
    let blocks = transcripts();
    assert_eq!(blocks.len(), 2, "the README shows the gateway with Redis up, then stopped: {blocks:#?}");
    let mut redis = RedisServer::start().expect("redis-server");
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../limiter/examples");
    let keys = examples.join("gateway-keys.txt").to_string_lossy().into_owned();
    let mut gateway = Gateway::start_with(&examples.join("gateway.toml"), &redis.url(), &["--api-keys", &keys]);
    for (i, block) in blocks.iter().enumerate() {
        if i == 1 {
            redis.kill();
        }
        let printed = replay(&gateway, block).await;
        let readme = block.trim_end_matches('\n');
        assert!(
            masked(readme) == masked(&printed),
            "README.md's gateway transcript {} is not what the gateway answers; it answers:\n{printed}",
            i + 1
        );
    }
    // The line the gateway logs once when the breaker opens (after a few failed calls), as the
    // README quotes it.
    let quoted =
        README.split('`').find(|q| q.starts_with("redis: circuit breaker open:")).expect("the README quotes it");
    let quoted = quoted.split_whitespace().collect::<Vec<_>>().join(" ");
    let opened = |g: &Gateway| g.seen.iter().find(|l| l.contains("circuit breaker open")).cloned();
    for _ in 0..50 {
        if opened(&gateway).is_some() {
            break;
        }
        gateway.get("/api/hello", &[("x-api-key", "sk-demo-bob-8Kd4")]).await;
        gateway.wait_for_quiet(std::time::Duration::from_millis(20));
    }
    let logged = opened(&gateway).expect("the gateway logs the breaker opening");
    let logged = logged.replace(&format!("127.0.0.1:{}", redis.port()), "127.0.0.1:6379");
    assert_eq!(logged, quoted, "the README quotes another line than the gateway logs");
}

#[test]
fn a_curl_command_is_read_whole() {
    let curl = parse_curl("$ curl -si -X POST -H 'X-User: internal batch' -H 'A: b' http://127.0.0.1:8080/login");
    assert_eq!((curl.method.as_str(), curl.path.as_str()), ("POST", "/login"));
    assert_eq!(curl.headers, [("X-User".to_owned(), "internal batch".to_owned()), ("A".to_owned(), "b".to_owned())]);
    let masked = masked("ratelimit: \"api-daily-per-key\";r=9;t=86611;pk=:x:, \"hello-per-key\";r=4;t=1");
    assert_eq!(masked, "ratelimit: \"api-daily-per-key\";r=9;t=(time of day);pk=:x:, \"hello-per-key\";r=4;t=1");
}
