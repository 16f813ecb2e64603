//! Goal 9: the example gateway under load. `wrk` (Debian's package) drives the gateway
//! (`limiter/examples/gateway.rs`, built in release) on the bench's `redis-server`: its route
//! without a rule (`/health`) is the reference, and two limited routes are measured against it,
//! each request with a key of its own (a header the rules count by, so no key is ever reused
//! and every decision writes a fresh key): one rule (GCRA), and the example's mix of four rules
//! on one route (a token bucket and a sliding-window counter per client, a GCRA cap on
//! everyone, a fixed window in shadow mode), decided all-or-nothing in one script call. The
//! quotas are large enough that every request is admitted: what is measured is what deciding
//! costs, not what refusing saves. The gateway, Redis and `wrk` share the machine's cores, as
//! they would on a small host.
//!
//! The three are measured in interleaved rounds, and each figure is the median of its rounds'.
//! Then the same gateway decides with the Redis module's commands (`--module`, on a server that
//! loaded the module built in release), measured against its own `/health` the same way.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::*;

const RULES: &str = r#"
[[rule]]
name = "per-client"
match = { method = "GET", path = "/api/hello" }
key = ["header:x-client"]
algorithm = "gcra"
limit = 1000000
period = "1s"

[[rule]]
name = "items-per-client"
match = { path = "/api/items/**" }
key = ["header:x-client"]
algorithm = "token-bucket"
limit = 1000000
period = "1s"

[[rule]]
name = "items-daily-per-client"
match = { path = "/api/items/**" }
key = ["header:x-client"]
algorithm = "sliding-window"
limit = 1000000
period = "1h"

[[rule]]
name = "items-global"
match = { path = "/api/items/**" }
key = ["const:api"]
algorithm = "gcra"
limit = 1000000
period = "1s"

[[rule]]
name = "items-shadow"
match = { path = "/api/items/**" }
key = ["header:x-client"]
algorithm = "fixed-window"
limit = 1000000
period = "10s"
shadow = true
"#;

/// A key of its own for every request: the thread's number and a counter.
const DISTINCT_KEYS: &str = r#"
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end
function init(args)
  n = 0
end
function request()
  n = n + 1
  return wrk.format(nil, nil, {["x-client"] = "t" .. id .. "-" .. n})
end
"#;

/// What one `wrk` run measured.
#[derive(Debug, Clone, Copy)]
struct Load {
    per_second: f64,
    p99_ms: f64,
    /// Responses other than 2xx and 3xx.
    refused: u64,
}

/// The example gateway, running on `redis`, killed when dropped.
struct Gateway {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gateway on `redis`, deciding with the Redis module's commands when `module`.
fn start_gateway(exe: &Path, rules: &Path, redis: &RedisServer, module: bool) -> Gateway {
    let mut child = Command::new(exe)
        .args(["--config"])
        .arg(rules)
        .args(["--redis-url", &redis.url(), "--listen", "127.0.0.1:0", "--key-prefix", "bench"])
        .args(if module { &["--module"][..] } else { &[] })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let stderr = child.stderr.take().expect("its stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    let addr = loop {
        let Some(Ok(line)) = lines.next() else { panic!("the gateway stopped before it listened: {said:?}") };
        said.push(line.clone());
        if let Some(rest) = line.strip_prefix("gateway listening on http://") {
            break rest.split_whitespace().next().expect("an address").parse().expect("a socket address");
        }
    };
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Gateway { child, addr }
}

/// One `wrk` run: two threads, 32 connections, `secs` seconds, on `path`.
fn wrk(addr: SocketAddr, path: &str, secs: u64, script: &Path) -> Load {
    let out = Command::new("wrk")
        .args(["-t2", "-c32", &format!("-d{secs}s"), "--latency", "-s"])
        .arg(script)
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("wrk runs (Debian's wrk)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let field = |prefix: &str| text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(|r| r.trim().to_owned()));
    let per_second = field("Requests/sec:").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{text}"));
    let p99_ms = field("99%").map(|v| duration_ms(&v)).unwrap_or_else(|| panic!("{text}"));
    let refused = field("Non-2xx or 3xx responses:").and_then(|v| v.parse().ok()).unwrap_or(0);
    Load { per_second, p99_ms, refused }
}

/// `wrk`'s durations: `850.00us`, `1.25ms`, `2.01s`.
fn duration_ms(text: &str) -> f64 {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len()));
    let n: f64 = number.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        _ => f64::NAN,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The routes measured: the reference without a rule, one rule, the example's four.
const ROUTES: [&str; 3] = ["/health", "/api/hello", "/api/items/7"];

/// Each route's median throughput and p99 over interleaved rounds of `secs` seconds.
fn measure(gateway: &Gateway, secs: u64, script: &Path) -> ([f64; 3], [f64; 3]) {
    let mut loads: Vec<Vec<Load>> = vec![Vec::new(); ROUTES.len()];
    // Warm the connections, the scripts' cache and the gateway.
    wrk(gateway.addr, ROUTES[2], 1, script);
    for round in 0..3 {
        for i in 0..ROUTES.len() {
            let i = if round % 2 == 0 { i } else { ROUTES.len() - 1 - i };
            loads[i].push(wrk(gateway.addr, ROUTES[i], secs, script));
        }
    }
    let refused: u64 = loads.iter().flatten().map(|l| l.refused).sum();
    assert_eq!(refused, 0, "every request is admitted (the quotas are large): {loads:?}");
    let rate = |i: usize| median(loads[i].iter().map(|l| l.per_second).collect());
    let p99 = |i: usize| median(loads[i].iter().map(|l| l.p99_ms).collect());
    ([rate(0), rate(1), rate(2)], [p99(0), p99(1), p99(2)])
}

pub(crate) fn gateway(server: &RedisServer) -> Vec<Goal> {
    let exe = support::release_executable("redis-ratelimit", "example", "gateway", &["config"]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (rules, script) = (dir.path().join("rules.toml"), dir.path().join("keys.lua"));
    std::fs::write(&rules, RULES).expect("write the rules");
    std::fs::write(&script, DISTINCT_KEYS).expect("write the wrk script");
    let secs = ((4.0 * scale()).round() as u64).max(1);
    let mut goals = goals_of("", measure(&start_gateway(&exe, &rules, server, false), secs, &script));
    // The same gateway deciding with the Redis module, on a server that loaded it.
    match redis_tests::build_module("release") {
        Ok(module) => {
            let with_module = RedisServer::start_real_with_module(&module).expect("redis-server loads the module");
            let gateway = start_gateway(&exe, &rules, &with_module, true);
            goals.extend(goals_of(", on the Redis module", measure(&gateway, secs, &script)));
        }
        Err(e) => println!("  gateway: no module rows ({e})"),
    }
    goals
}

/// The goals of one gateway's measurements (`on` says what it decided with).
fn goals_of(on: &str, (rate, p99): ([f64; 3], [f64; 3])) -> Vec<Goal> {
    let (base_rate, base_p99) = (rate[0], p99[0]);
    let calls = if on.is_empty() { "one script call" } else { "one command" };
    let mut goals = Vec::new();
    for (i, what) in [(1, "one rule (GCRA)"), (2, "four rules all-or-nothing (the example's mix)")] {
        let throughput = rate[i] / base_rate;
        goals.push(Goal {
            what: format!("example gateway, distinct keys, {what}{on}: throughput"),
            measured: format!("{:.0} requests/s", rate[i]),
            reference: format!("its /health (no rule): {base_rate:.0}/s"),
            ratio: throughput,
            goal: ">= 0.35x",
            met: throughput >= 0.35,
            note: if throughput >= 0.35 {
                String::new()
            } else {
                format!(
                    "{:.0}% short: each request is {calls} on one Redis core, which the gateway and wrk \
                     share the machine's two cores with; what a call costs Redis is goal 8's",
                    (1.0 - throughput / 0.35) * 100.0
                )
            },
        });
        let latency = p99[i] / base_p99;
        goals.push(Goal {
            what: format!("example gateway, distinct keys, {what}{on}: p99 latency"),
            measured: format!("{:.2} ms", p99[i]),
            reference: format!("its /health (no rule): {base_p99:.2} ms"),
            ratio: latency,
            goal: "<= 2x",
            met: latency <= 2.0,
            note: if latency <= 2.0 {
                String::new()
            } else {
                format!(
                    "{:.0}% over: a request waits for its {calls} behind the others queued on the gateway's \
                     one Redis connection",
                    (latency / 2.0 - 1.0) * 100.0
                )
            },
        });
    }
    goals
}
