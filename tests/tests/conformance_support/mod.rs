//! Shared by the conformance suites: a real `redis-server` and the model side by side, and a
//! tiny RESP client ([`resp`]) that returns each reply's raw bytes, so the suites compare what a
//! client would receive byte for byte rather than what some client library makes of it.

#![allow(dead_code)] // Each suite uses a different part of this module.

use std::net::SocketAddr;

pub mod resp;

#[allow(unused_imports)] // Not every suite inspects parsed replies.
pub use resp::{Raw, RespConn, V};

use redis_model::{ModelHandle, SystemServerClock};
use redis_tests::RedisServer;

/// The model served on a loopback port by a runtime of its own.
pub struct ModelServer {
    pub addr: SocketAddr,
    pub handle: ModelHandle,
    _runtime: tokio::runtime::Runtime,
}

pub fn start_model() -> ModelServer {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime for the model");
    let handle = ModelHandle::new(SystemServerClock);
    let served = handle.clone();
    let addr = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(served.serve_tcp(listener));
        addr
    });
    ModelServer { addr, handle, _runtime: runtime }
}

/// A real Redis and the model, one connection to each.
pub struct Pair {
    pub redis: RespConn,
    pub model: RespConn,
    pub model_server: ModelServer,
    _server: RedisServer,
}

impl Pair {
    pub fn start() -> Pair {
        let model_server = start_model();
        let model = RespConn::connect(model_server.addr).expect("connect to the model");
        // Another suite may pick the same free port between our probe and redis-server's bind;
        // the loser exits, so try again on a new port rather than fail the run.
        let mut last_error = None;
        for _ in 0..5 {
            let server = RedisServer::start().expect("redis-server must be installed for conformance");
            match RespConn::connect(server.addr()).and_then(|mut c| c.call(&[b"PING"]).map(|_| c)) {
                Ok(redis) => return Pair { redis, model, model_server, _server: server },
                Err(e) => last_error = Some(e),
            }
        }
        panic!("cannot reach a redis-server I started: {last_error:?}");
    }

    /// Where the real Redis listens.
    pub fn redis_addr(&self) -> SocketAddr {
        self._server.addr()
    }

    /// The same command to both; their raw replies.
    pub fn both(&mut self, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let r = self.redis.call(args).expect("redis-server reply");
        let m = self.model.call(args).expect("model reply");
        (r, m)
    }

    /// The same pipeline to both; (redis replies, model replies).
    pub fn pipeline_both(&mut self, cmds: &[Vec<Vec<u8>>]) -> (Vec<Raw>, Vec<Raw>) {
        let r = self.redis.pipeline(cmds).expect("redis-server replies");
        let m = self.model.pipeline(cmds).expect("model replies");
        (r, m)
    }

    /// Empties both servers (keys and scripts).
    pub fn reset(&mut self) {
        for cmd in [&[&b"FLUSHALL"[..]][..], &[b"SCRIPT", b"FLUSH"]] {
            let (r, m) = self.both(cmd);
            assert_eq!(r, b"+OK\r\n");
            assert_eq!(m, b"+OK\r\n");
        }
    }
}

/// Printable form of raw bytes (CR/LF shown as escapes) for failure messages.
pub fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Printable form of a command.
pub fn show_cmd(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| format!("'{}'", a.escape_ascii())).collect::<Vec<_>>().join(" ")
}
