//! A primary and its replica under three Sentinels (Debian's `redis-sentinel`), all started by
//! the test on free loopback ports: the primary is killed, the Sentinels promote the replica,
//! and the limiter, which asks Sentinel for the primary whenever it reconnects, carries on by
//! itself; its failure policy answers the gap, saying why.

use std::ffi::OsStr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis_ratelimit::{Algorithm, FailurePolicy, Limiter, Quota, RedisStore, Source};
use sim_real::process::{free_port, ServerProcess};
use tokio::time::Instant;

const SERVICE: &str = "limiter-primary";

/// A `redis-sentinel` process, killed on drop.
struct Sentinel {
    child: Child,
    port: u16,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sentinel(dir: &std::path::Path, primary: u16) -> Sentinel {
    let port = free_port().expect("port");
    let conf = dir.join(format!("sentinel-{port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\nsentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {SERVICE} 1000\nsentinel failover-timeout {SERVICE} 10000\n\
             sentinel parallel-syncs {SERVICE} 1\n",
            dir = dir.display()
        ),
    )
    .expect("sentinel config");
    let child = Command::new("redis-sentinel")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-sentinel starts (cargo xtask test installs Debian's `redis-sentinel`)");
    let s = Sentinel { child, port };
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("redis-sentinel on port {port} never listened");
}

/// What a Sentinel says the primary is.
fn reported_primary(sentinel: u16) -> Option<u16> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{sentinel}/")).ok()?;
    let mut conn = client.get_connection_with_timeout(Duration::from_millis(500)).ok()?;
    let addr: Vec<String> = redis::cmd("SENTINEL").arg("GET-MASTER-ADDR-BY-NAME").arg(SERVICE).query(&mut conn).ok()?;
    addr.get(1)?.parse().ok()
}

#[test]
fn a_sentinel_managed_primary_fails_over_and_the_limiter_carries_on() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    sim_real::process::require_for_tests("redis-sentinel", "redis-sentinel");
    let dir = tempfile::tempdir().expect("temp dir");
    let hint = "Debian's `redis-server`";
    let mut primary = ServerProcess::start("redis-server", free_port().expect("port"), &[], hint).expect("primary");
    let replica_of = ["--replicaof", "127.0.0.1", &primary.port().to_string()].map(String::from);
    let args: Vec<&OsStr> = replica_of.iter().map(OsStr::new).collect();
    let replica = ServerProcess::start("redis-server", free_port().expect("port"), &args, hint).expect("replica");
    let sentinels: Vec<Sentinel> = (0..3).map(|_| sentinel(dir.path(), primary.port())).collect();
    let urls: Vec<String> = sentinels.iter().map(|s| format!("redis://127.0.0.1:{}/", s.port)).collect();

    let store = RedisStore::sentinel(&urls, SERVICE, None).expect("sentinel store");
    assert!(format!("{store:?}").contains(SERVICE));
    let limiter = Limiter::builder(Algorithm::SlidingWindow, Quota::per_second(1_000))
        .redis(store.with_timeout(Duration::from_millis(300)).expect("timeout"))
        .failure_policy(FailurePolicy::LocalBudget { limit: 1_000, period: Duration::from_secs(1) })
        .build()
        .expect("limiter");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        // The replica has caught up and the Sentinels know it before the primary dies.
        for _ in 0..5 {
            let d = limiter.check("sentinel-user").await.expect("decision");
            assert_eq!(d.source, Source::Store, "{d:?}");
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let info: String = {
                let client = redis::Client::open(primary.url()).expect("url");
                let mut conn = client.get_multiplexed_async_connection().await.expect("primary");
                redis::cmd("INFO").arg("replication").query_async(&mut conn).await.expect("INFO")
            };
            if info.contains("connected_slaves:1") && info.contains("state=online") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let old = primary.port();
    primary.kill();
    let start = Instant::now();
    let seen = rt.block_on(async {
        let mut seen = Vec::new();
        while start.elapsed() < Duration::from_secs(60) {
            let d = limiter.check("sentinel-user").await.expect("a decision, not an error");
            seen.push((start.elapsed(), d));
            let recovered = seen.iter().any(|(_, d)| d.source != Source::Store) && d.source == Source::Store;
            if recovered {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        seen
    });
    let gap: Vec<_> = seen.iter().filter(|(_, d)| d.source != Source::Store).collect();
    assert!(!gap.is_empty(), "nothing fell to the failure policy while no primary was reachable");
    for (_, d) in &gap {
        assert_eq!(d.source, Source::LocalBudget, "{d:?}");
        assert!(d.degraded.is_some(), "{d:?}");
    }
    let (resumed, last) = seen.last().expect("decisions");
    assert_eq!(last.source, Source::Store, "the limiter found the new primary within 60 s");
    assert_eq!(reported_primary(sentinels[0].port), Some(replica.port()), "the Sentinels promoted the replica");
    println!(
        "sentinel: primary {old} killed, replica {} promoted; {} decisions by the local budget, the store again after \
         {resumed:?}",
        replica.port(),
        gap.len()
    );
}
