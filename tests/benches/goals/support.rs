//! What the goals share: Redis's own accounting (`INFO`), `redis-benchmark`, a limiter on the
//! bench's Redis, and a driver of checks.

use super::*;

pub(crate) fn info(conn: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(conn).unwrap_or_default()
}

pub(crate) fn field(info: &str, name: &str) -> Option<f64> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
}

/// Redis's CPU seconds (user + system).
pub(crate) fn cpu_s(conn: &mut redis::Connection) -> f64 {
    let i = info(conn, "cpu");
    field(&i, "used_cpu_user").unwrap_or(0.0) + field(&i, "used_cpu_sys").unwrap_or(0.0)
}

pub(crate) fn used_memory(conn: &mut redis::Connection) -> f64 {
    field(&info(conn, "memory"), "used_memory").unwrap_or(0.0)
}

/// Per-command calls and µs from `INFO commandstats`, for where Redis's time went.
pub(crate) fn commandstats(conn: &mut redis::Connection) -> Vec<(String, f64, f64)> {
    info(conn, "commandstats")
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let get = |k: &str| rest.split(',').find_map(|kv| kv.strip_prefix(k)?.parse::<f64>().ok());
            Some((name.to_owned(), get("calls=")?, get("usec=")?))
        })
        .collect()
}

pub(crate) fn flush(conn: &mut redis::Connection) {
    let _: redis::RedisResult<()> = redis::cmd("FLUSHALL").query(conn);
    let _: redis::RedisResult<()> = redis::cmd("CONFIG").arg("RESETSTAT").query(conn);
}

/// `redis-benchmark` with `args`; requests per second.
pub(crate) fn redis_benchmark(port: u16, args: &[&str]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "--csv"])
        .args(args)
        .output()
        .expect("redis-benchmark runs (Debian's redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().rev().find_map(|l| l.split(',').nth(1)?.trim_matches('"').parse().ok()).unwrap_or(0.0)
}

pub(crate) fn limiter(server: &RedisServer, algorithm: Algorithm, quota: Quota, batching: bool) -> Limiter {
    let mut b = Limiter::builder(algorithm, quota).redis(RedisStore::from_url(&server.url()).expect("url"));
    if batching {
        b = b.batching(Batching::default());
    }
    b.build().expect("valid")
}

/// `n` checks from `tasks` tasks over `keys`; checks per second.
pub(crate) async fn drive(l: &Limiter, keys: &Arc<Vec<String>>, tasks: usize, n: usize) -> f64 {
    let _decided = l.check("warm").await.expect("decides");
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (l, keys, next) = (l.clone(), keys.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let _decided = l.check(&keys[i.wrapping_mul(7_919) % keys.len()]).await.expect("decides");
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Builds `name` (a `bin` or an `example`, its `kind`) of `package` in release, alone, with
/// `features` (besides the defaults), and returns its executable. Built alone, the package gets
/// only the features named here: the library as its users build it, not with the features this
/// test crate turns on.
pub(crate) fn release_executable(package: &str, kind: &str, name: &str, features: &[&str]) -> std::path::PathBuf {
    let mut cmd = redis_tests::cargo();
    cmd.args(["build", "--release", "-p", package, "--message-format=json"]);
    if kind == "example" {
        cmd.args(["--example", name]);
    }
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd.stderr(std::process::Stdio::inherit()).output().expect("cargo runs");
    assert!(out.status.success(), "building {package}'s {kind} {name} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == name && m["target"]["kind"][0] == kind)
        .find_map(|m| m["executable"].as_str().map(std::path::PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reports the executable of {package}'s {kind} {name}"))
}

pub(crate) fn key_names(n: usize) -> Arc<Vec<String>> {
    Arc::new((0..n).map(|i| format!("k{i:012}")).collect())
}

// ---------------------------------------------------------------------------------- goal 1
