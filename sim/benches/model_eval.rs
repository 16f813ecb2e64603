//! EVALSHA of every algorithm script in `lua/`, with the arguments the limiter sends: the model
//! called in process, and (when `redis-benchmark` and `redis-server` are installed) the same
//! script against a real Redis and against the model served on loopback TCP, with the ratios.
//!
//! `cargo bench -p sim --bench model_eval` (set MODEL_BENCH_OPS to change the 100 000 calls).

// A benchmark measures wall time by definition; the simulation clock rule does not apply.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis_model::{ManualServerClock, ModelHandle};
use redis_ratelimit::harness::scripts;
use redis_ratelimit::Algorithm;

mod support;
use support::call_args;

fn ops() -> usize {
    std::env::var("MODEL_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
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
fn script_load(addr: SocketAddr, source: &str) -> Option<String> {
    let mut conn = TcpStream::connect(addr).ok()?;
    let cmd = format!("*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n${}\r\n{}\r\n", source.len(), source);
    conn.write_all(cmd.as_bytes()).ok()?;
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    line.clear();
    reader.read_line(&mut line).ok()?;
    Some(line.trim().to_string())
}

/// `redis-benchmark -n N` with EVALSHA of the script; requests per second.
fn redis_benchmark(port: u16, sha: &str, algorithm: Algorithm, n: usize) -> Option<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-n", &n.to_string(), "--csv"])
        .args(["EVALSHA", sha])
        .args(call_args(algorithm, 1_700_000_000_000))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // CSV: a header line, then "command","rps",...
    let line = text.lines().rfind(|l| l.starts_with("\"EVALSHA"))?;
    line.split(',').nth(1)?.trim_matches('"').parse().ok()
}

fn main() {
    let n = ops();
    let real = on_path("redis-benchmark") && on_path("redis-server");
    if !real {
        println!("redis-benchmark or redis-server not on PATH: no comparison with real Redis");
    }
    let redis_port = free_port();
    let _redis = if real { redis_port.and_then(start_redis) } else { None };
    // The model on loopback TCP, served like the redis-model binary (one thread, as Redis).
    let model = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let _ = addr_tx.send(listener.local_addr().expect("addr"));
            model.serve_tcp(listener).await;
        });
    });
    let model_addr = addr_rx.recv().ok();

    println!(
        "{:<16} {:>14} {:>14} {:>9} {:>14} {:>9}",
        "script", "model in proc", "redis-server", "ratio", "model on TCP", "ratio"
    );
    for script in scripts::ALL.iter() {
        let in_process = support::in_process(script, n);
        let (mut redis_rps, mut model_rps) = (None, None);
        if let (Some(port), Some(_)) = (redis_port, _redis.as_ref()) {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            redis_rps =
                script_load(addr, script.source).and_then(|sha| redis_benchmark(port, &sha, script.algorithm, n));
            model_rps = model_addr
                .and_then(|a| script_load(a, script.source).map(|sha| (a, sha)))
                .and_then(|(a, sha)| redis_benchmark(a.port(), &sha, script.algorithm, n));
        }
        let show = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        let ratio = |a: f64, b: Option<f64>| b.map_or("-".to_owned(), |b| format!("{:.2}", a / b));
        println!(
            "{:<16} {:>14.0} {:>14} {:>9} {:>14} {:>9}",
            script.algorithm.name(),
            in_process,
            show(redis_rps),
            ratio(in_process, redis_rps),
            show(model_rps),
            model_rps.map_or("-".to_owned(), |m| ratio(m, redis_rps)),
        );
    }
    println!("ops/s; ratios are against redis-server driven by redis-benchmark (50 clients, loopback) in the same run");
}
