//! EVALSHA of a token-bucket script: the model called in process, and (when `redis-benchmark`
//! and `redis-server` are installed) the same script against a real Redis and against the model
//! served on loopback TCP, with the ratios.
//!
//! `cargo bench -p sim --bench model_eval` (set MODEL_BENCH_OPS to change the 100 000 calls).

// A benchmark measures wall time by definition; the simulation clock rule does not apply.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sim::model::{ManualClock, ModelHandle, Reply};

const SCRIPT: &str = r#"
local key = KEYS[1]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
local elapsed = math.max(0, now - ts)
tokens = math.min(burst, tokens + elapsed * rate / 1000)
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', key, 60000)
return {allowed, tostring(tokens)}
"#;

fn ops() -> usize {
    std::env::var("MODEL_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

/// In process: no sockets, no parsing, just the model's EVALSHA path.
fn bench_in_process(n: usize) -> f64 {
    let clock = ManualClock::from_millis(1_700_000_000_000);
    let model = ModelHandle::new(clock.clone());
    let sha = match model.call(&[b"SCRIPT", b"LOAD", SCRIPT.as_bytes()]) {
        Reply::Bulk(sha) => sha,
        other => panic!("SCRIPT LOAD failed: {other:?}"),
    };
    // Warm up, and check the script does what it should.
    let first = model.call(&[b"EVALSHA", &sha, b"1", b"bench", b"10", b"100", b"1700000000000", b"1"]);
    assert!(matches!(first, Reply::Array(_)), "unexpected reply {first:?}");
    let start = Instant::now();
    for i in 0..n {
        let now = (1_700_000_000_000u64 + i as u64).to_string();
        let reply = model.call(&[b"EVALSHA", &sha, b"1", b"bench", b"10", b"100", now.as_bytes(), b"1"]);
        if reply.is_error() {
            panic!("EVALSHA failed: {reply:?}");
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn on_path(program: &str) -> bool {
    Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn free_port() -> Option<u16> {
    TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok().map(|a| a.port())
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis(port: u16) -> Option<Server> {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server = Server(child);
    wait_ready(SocketAddr::from(([127, 0, 0, 1], port)))?;
    Some(server)
}

fn wait_ready(addr: SocketAddr) -> Option<()> {
    for _ in 0..300 {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// SCRIPT LOAD over a raw connection; returns the SHA.
fn script_load(addr: SocketAddr) -> Option<String> {
    let mut conn = TcpStream::connect(addr).ok()?;
    let cmd = format!("*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n${}\r\n{}\r\n", SCRIPT.len(), SCRIPT);
    conn.write_all(cmd.as_bytes()).ok()?;
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    line.clear();
    reader.read_line(&mut line).ok()?;
    Some(line.trim().to_string())
}

/// `redis-benchmark -n N` with EVALSHA of the script; requests per second.
fn redis_benchmark(port: u16, sha: &str, n: usize) -> Option<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-n", &n.to_string(), "--csv"])
        .args(["EVALSHA", sha, "1", "bench", "10", "100", "1700000000000", "1"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // CSV: a header line, then "command","rps",...
    let line = text.lines().rfind(|l| l.starts_with("\"EVALSHA"))?;
    line.split(',').nth(1)?.trim_matches('"').parse().ok()
}

fn main() {
    let n = ops();
    let in_process = bench_in_process(n);
    println!("model in process: {n} EVALSHA token-bucket calls, {in_process:.0} ops/s");

    if !on_path("redis-benchmark") || !on_path("redis-server") {
        println!("redis-benchmark or redis-server not on PATH: no comparison with real Redis");
        return;
    }
    let Some(redis_port) = free_port() else { return };
    let Some(_redis) = start_redis(redis_port) else {
        println!("could not start redis-server: no comparison");
        return;
    };
    let redis_addr = SocketAddr::from(([127, 0, 0, 1], redis_port));
    let Some(sha) = script_load(redis_addr) else { return };
    let redis_rps = redis_benchmark(redis_port, &sha, n);

    // The model on loopback TCP, served like the redis-model binary (one thread, as Redis).
    let model = ModelHandle::new(ManualClock::from_millis(1_700_000_000_000));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let _ = addr_tx.send(listener.local_addr().expect("addr"));
            model.serve_tcp(listener).await;
        });
    });
    let Ok(model_addr) = addr_rx.recv() else { return };
    let model_sha = script_load(model_addr);
    let model_rps = model_sha.and_then(|s| redis_benchmark(model_addr.port(), &s, n));

    match redis_rps {
        Some(r) => {
            println!("redis-server 7 via redis-benchmark (50 clients, loopback): {r:.0} ops/s");
            println!("ratio model in process / redis-server: {:.2}", in_process / r);
            if let Some(m) = model_rps {
                println!("model on loopback TCP via redis-benchmark (50 clients): {m:.0} ops/s");
                println!("ratio model over TCP / redis-server: {:.2}", m / r);
            }
        }
        None => println!("redis-benchmark gave no result"),
    }
}
