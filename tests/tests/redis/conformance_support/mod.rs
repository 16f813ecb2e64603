//! Shared by the conformance suites: a real `redis-server` and the model side by side, and a
//! tiny RESP client ([`resp`]) that returns each reply's raw bytes, so the suites compare what a
//! client would receive byte for byte rather than what some client library makes of it.

#![allow(dead_code)] // Each suite uses a different part of this module.

use std::net::SocketAddr;

pub mod resp;
pub mod valkey;

#[allow(unused_imports)] // Not every suite inspects parsed replies.
pub use resp::{Raw, RespConn, V};

use redis_model::{ModelHandle, SystemServerClock};
use redis_tests::{RealServer, RedisServer};

/// The environment variable naming what the suites compare with the real server
/// (`REDIS_TESTS_REAL`, Redis unless it says `valkey`): `model` (the default), or `redis` for
/// a real `redis-server` in the model's place. `REDIS_TESTS_REAL=valkey CONFORMANCE_SUBJECT=redis`
/// compares Redis with Valkey, so every difference between the two servers is a named finding.
pub const SUBJECT_ENV: &str = "CONFORMANCE_SUBJECT";

/// The real server [`SUBJECT_ENV`] puts in the model's place, if any. Panics on a value it
/// does not know, naming the variable: a misspelt subject must not pass as the model.
pub fn real_subject() -> Option<RealServer> {
    match std::env::var(SUBJECT_ENV) {
        Ok(v) if v.trim().is_empty() || v.trim().eq_ignore_ascii_case("model") => None,
        Ok(v) => match RealServer::parse(&v) {
            Ok(kind) => Some(kind),
            Err(e) => panic!("{SUBJECT_ENV}: {e} (or model)"),
        },
        Err(_) => None,
    }
}

/// A real server started and answering PING, tried on up to five free ports: another suite may
/// pick the same free port between our probe and the server's bind; the loser exits.
fn start_answering(start: impl Fn() -> std::io::Result<RedisServer>) -> (RespConn, RedisServer) {
    let mut last_error = None;
    for _ in 0..5 {
        let server = start().expect("the real server must be installed for conformance");
        match RespConn::connect(server.addr()).and_then(|mut c| c.call(&[b"PING"]).map(|_| c)) {
            Ok(conn) => return (conn, server),
            Err(e) => last_error = Some(e),
        }
    }
    panic!("cannot reach a server I started: {last_error:?}");
}

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

/// A real Redis and the model, one connection to each. `redis` is the real server
/// (`REDIS_TESTS_REAL`: Redis or Valkey); `model` is the model, or the real server
/// [`SUBJECT_ENV`] names in its place (`model_server` is then started but not compared).
pub struct Pair {
    pub redis: RespConn,
    pub model: RespConn,
    pub model_server: ModelServer,
    _server: RedisServer,
    _subject: Option<RedisServer>,
    /// The reference is Valkey: replies are compared in [`valkey::in_common_words`].
    valkey: bool,
}

impl Pair {
    pub fn start() -> Pair {
        let model_server = start_model();
        let (model, subject) = match real_subject() {
            Some(kind) => {
                let (conn, server) = start_answering(|| RedisServer::start_kind(kind));
                (conn, Some(server))
            }
            None => (RespConn::connect(model_server.addr).expect("connect to the model"), None),
        };
        // Redis itself, whatever `REDIS_TESTS_SERVER` says: it is what the others are held to.
        let (redis, server) = start_answering(RedisServer::start_real);
        let valkey = valkey::reference_is_valkey();
        Pair { redis, model, model_server, _server: server, _subject: subject, valkey }
    }

    /// Whether the reference is Valkey (see [`valkey`]).
    pub fn reference_is_valkey(&self) -> bool {
        self.valkey
    }

    /// A reply as compared: as it came, or in [`valkey::in_common_words`] when the reference
    /// is Valkey.
    pub fn compared(&self, raw: Vec<u8>) -> Vec<u8> {
        if !self.valkey {
            return raw;
        }
        match resp::parse(&raw) {
            Ok(v) => resp::encode(&valkey::in_common_words(&v)),
            Err(_) => raw,
        }
    }

    /// As [`Pair::compared`], for a reply with its parsed form.
    pub fn compared_raw(&self, (raw, v): Raw) -> Raw {
        if !self.valkey {
            return (raw, v);
        }
        let v = valkey::in_common_words(&v);
        (resp::encode(&v), v)
    }

    /// Where the real Redis listens.
    pub fn redis_addr(&self) -> SocketAddr {
        self._server.addr()
    }

    /// The same command to both; their raw replies.
    pub fn both(&mut self, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let r = self.redis.call(args).expect("redis-server reply");
        let m = self.model.call(args).expect("model reply");
        (self.compared(r), self.compared(m))
    }

    /// The same pipeline to both; (redis replies, model replies).
    pub fn pipeline_both(&mut self, cmds: &[Vec<Vec<u8>>]) -> (Vec<Raw>, Vec<Raw>) {
        let r = self.redis.pipeline(cmds).expect("redis-server replies");
        let m = self.model.pipeline(cmds).expect("model replies");
        (self.compare_all(r), self.compare_all(m))
    }

    /// [`Pair::compared_raw`] of every reply.
    pub fn compare_all(&self, replies: Vec<Raw>) -> Vec<Raw> {
        replies.into_iter().map(|r| self.compared_raw(r)).collect()
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
