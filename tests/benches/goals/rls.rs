//! Goal 10: the rate limit service (`limiter/server`, built in release) over gRPC on the
//! bench's `redis-server`. The reference is the same server answering the floor RPC (the same
//! request and response, answered without deciding: what gRPC itself costs), measured in the
//! same rounds. A tonic client in this process sends from 32 tasks over 4 connections:
//!
//! - distinct keys (every request a descriptor of its own, a fixed window) and one hot key
//!   (GCRA): throughput at least 0.5x the floor's, p99 at most 2x; p50 reported beside;
//! - quota grants on a hot key (GCRA, grants of up to 200 for 250 ms), each task a proxy that
//!   honours them as the protocol describes: Redis calls (`INFO commandstats`) per decision,
//!   the proxies' own included, at most 1/20.
//!
//! The quotas are large enough that every request is admitted: what is measured is what
//! deciding costs.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;

use super::support::{commandstats, flush};
use super::*;

const CONFIG: &str = r#"
domain: bench
descriptors:
  - key: client
    rate_limit: { unit: second, requests_per_unit: 1000000 }
  - key: hot
    rate_limit: { unit: second, requests_per_unit: 1000000, algorithm: gcra }
  - key: granted
    rate_limit:
      unit: second
      requests_per_unit: 1000000
      algorithm: gcra
      quota_grants: { lifetime: 250ms, max_requests: 200 }
"#;

const RLS_PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const FLOOR_PATH: &str = "/redis_ratelimit.server.Floor/ShouldRateLimit";
const TASKS: usize = 32;
const CHANNELS: usize = 4;

struct Service {
    child: Child,
    addr: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(exe: &Path, config: &Path, redis: &RedisServer) -> Service {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(exe)
        .arg("--config")
        .arg(config)
        .args(["--redis-url", &redis.url(), "--listen", "127.0.0.1:0", "--bench-floor", "--log", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the service starts");
    let mut lines = BufReader::new(child.stderr.take().expect("its stderr")).lines();
    let addr = loop {
        let Some(Ok(line)) = lines.next() else { panic!("the service stopped before it listened") };
        if let Some(rest) = line.strip_prefix("redis-ratelimit-server listening on ") {
            break rest.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    Service { child, addr }
}

fn request(key: &str, value: String) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry { key: key.into(), value }],
            limit: None,
            hits_addend: None,
        }],
        hits_addend: 0,
    }
}

async fn unary(channel: Channel, path: &'static str, req: RateLimitRequest, grants: bool) -> RateLimitResponse {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<RateLimitRequest, RateLimitResponse>::default();
    let mut r = tonic::Request::new(req);
    if grants {
        r.metadata_mut().insert("ratelimit-quota-grants", "true".parse().expect("ascii"));
    }
    grpc.unary(r, http::uri::PathAndQuery::from_static(path), codec).await.expect("answered").into_inner()
}

/// What one load measured: calls per second and their p50 and p99 (ms).
#[derive(Debug, Clone, Copy)]
struct Load {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Floor,
    Distinct,
    Hot,
}

/// `secs` seconds of calls of `kind` from [`TASKS`] tasks.
async fn load(channels: &[Channel], kind: Kind, secs: f64, round: usize) -> Load {
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let channel = channels[t % channels.len()].clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = 0u64;
                while Instant::now() < until {
                    n += 1;
                    let (path, req) = match kind {
                        Kind::Floor => (FLOOR_PATH, request("client", format!("r{round}t{t}n{n}"))),
                        Kind::Distinct => (RLS_PATH, request("client", format!("r{round}t{t}n{n}"))),
                        Kind::Hot => (RLS_PATH, request("hot", "one".into())),
                    };
                    let sent = Instant::now();
                    let r = unary(channel.clone(), path, req, false).await;
                    assert_eq!(r.overall_code, 1, "every request is admitted");
                    latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("a task"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Load { per_second: all.len() as f64 / elapsed, p50_ms: at(0.5), p99_ms: at(0.99) }
}

/// Proxies honouring grants on the hot key: decisions made, and Redis calls they cost.
async fn grants(channels: &[Channel], redis: &mut redis::Connection, secs: f64) -> (u64, f64) {
    let calls_before = script_calls(redis);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let channel = channels[t % channels.len()].clone();
            tokio::spawn(async move {
                let mut decisions = 0u64;
                let mut held: Option<(u32, std::time::SystemTime)> = None;
                while Instant::now() < until {
                    decisions += 1;
                    if let Some((left, valid_until)) = &mut held {
                        if std::time::SystemTime::now() < *valid_until {
                            *left = left.saturating_sub(1);
                            // A real proxy would admit or refuse here; a pause stands for its work.
                            tokio::time::sleep(Duration::from_micros(50)).await;
                            continue;
                        }
                    }
                    let r = unary(channel.clone(), RLS_PATH, request("granted", "one".into()), true).await;
                    held = r.statuses[0].quota.as_ref().and_then(|q| {
                        let Some(ExpirationSpecifier::ValidUntil(u)) = &q.expiration_specifier else { return None };
                        Some((q.requests, std::time::UNIX_EPOCH + Duration::new(u.seconds as u64, u.nanos as u32)))
                    });
                }
                decisions
            })
        })
        .collect();
    let mut decisions = 0;
    for t in tasks {
        decisions += t.await.expect("a task");
    }
    (decisions, script_calls(redis) - calls_before)
}

fn script_calls(redis: &mut redis::Connection) -> f64 {
    commandstats(redis).iter().filter(|(name, ..)| name == "evalsha" || name == "eval").map(|(_, calls, _)| calls).sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn rls(server: &RedisServer) -> Vec<Goal> {
    let exe = support::release_executable("redis-ratelimit-server", "bin", "redis-ratelimit-server", &[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("bench.yaml");
    std::fs::write(&config, CONFIG).expect("the configuration is written");
    let mut conn = server.client().expect("a connection");
    flush(&mut conn);
    let service = start(&exe, &config, server);
    let secs = (3.0 * scale()).max(0.5);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (loads, granted) = rt.block_on(async {
        let mut channels = Vec::new();
        for _ in 0..CHANNELS {
            channels.push(
                Channel::from_shared(format!("http://{}", service.addr)).unwrap().connect().await.expect("connects"),
            );
        }
        let channels = Arc::new(channels);
        // Warm the connections, the scripts' cache and the service.
        load(&channels, Kind::Distinct, 0.5, 99).await;
        let kinds = [Kind::Floor, Kind::Distinct, Kind::Hot];
        let mut loads: Vec<Vec<Load>> = vec![Vec::new(); kinds.len()];
        for round in 0..3 {
            for i in 0..kinds.len() {
                let i = if round % 2 == 0 { i } else { kinds.len() - 1 - i };
                loads[i].push(load(&channels, kinds[i], secs, round).await);
            }
        }
        let granted = grants(&channels, &mut conn, secs).await;
        (loads, granted)
    });
    drop(service);
    let rate = |i: usize| median(loads[i].iter().map(|l| l.per_second).collect());
    let p50 = |i: usize| median(loads[i].iter().map(|l| l.p50_ms).collect());
    let p99 = |i: usize| median(loads[i].iter().map(|l| l.p99_ms).collect());
    let mut goals = Vec::new();
    for (i, what) in [(1, "distinct keys (fixed window)"), (2, "one hot key (GCRA)")] {
        let throughput = rate(i) / rate(0);
        goals.push(Goal {
            what: format!("rate limit service over gRPC, {what}: throughput"),
            measured: format!("{:.0} decisions/s", rate(i)),
            reference: format!("its floor RPC (no decision): {:.0}/s", rate(0)),
            ratio: throughput,
            goal: ">= 0.5x",
            met: throughput >= 0.5,
            note: if throughput >= 0.5 {
                String::new()
            } else {
                format!(
                    "{:.0}% short: each decision is one script call on one Redis core, which the service and the \
                     client share the machine's two cores with",
                    (1.0 - throughput / 0.5) * 100.0
                )
            },
        });
        let latency = p99(i) / p99(0);
        goals.push(Goal {
            what: format!("rate limit service over gRPC, {what}: p99 latency"),
            measured: format!("p99 {:.2} ms, p50 {:.2} ms", p99(i), p50(i)),
            reference: format!("floor: p99 {:.2} ms, p50 {:.2} ms", p99(0), p50(0)),
            ratio: latency,
            goal: "<= 2x",
            met: latency <= 2.0,
            note: if latency <= 2.0 {
                String::new()
            } else {
                format!(
                    "{:.0}% over: a call waits for its script behind the others on the service's one Redis connection",
                    (latency / 2.0 - 1.0) * 100.0
                )
            },
        });
    }
    let (decisions, calls) = granted;
    let per_decision = calls / decisions.max(1) as f64;
    goals.push(Goal {
        what: "rate limit service, quota grants on a hot key: Redis calls per decision".into(),
        measured: format!("{calls:.0} calls for {decisions} decisions (proxies' own included)"),
        reference: "one call per decision without grants".into(),
        ratio: per_decision,
        goal: "<= 0.05 (1/20)",
        met: per_decision <= 0.05,
        note: if per_decision <= 0.05 {
            String::new()
        } else {
            "grants too small or too short for the proxies' demand: each runs out before it ends".into()
        },
    });
    goals
}
