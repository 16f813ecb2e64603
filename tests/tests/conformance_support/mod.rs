//! Shared by the conformance suites: a real `redis-server` and the model side by side, and a
//! tiny RESP client that returns each reply's raw bytes, so the suites compare what a client
//! would receive byte for byte rather than what some client library makes of it.

#![allow(dead_code)] // Each suite uses a different part of this module.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use redis_tests::RedisServer;
use sim::model::{ModelHandle, SystemServerClock};

/// A blocking RESP2 connection that hands back raw reply bytes.
pub struct RawConn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RawConn {
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(RawConn { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Sends one command and returns its complete reply, as bytes.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out)?;
        let mut reply = Vec::new();
        read_reply(&mut self.reader, &mut reply)?;
        Ok(reply)
    }
}

fn read_line(r: &mut BufReader<TcpStream>, into: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    into.extend_from_slice(&line);
    Ok(line)
}

fn read_reply(r: &mut BufReader<TcpStream>, into: &mut Vec<u8>) -> io::Result<()> {
    let line = read_line(r, into)?;
    let body = std::str::from_utf8(&line[1..]).unwrap_or("").trim_end();
    match line[0] {
        b'+' | b'-' | b':' => Ok(()),
        b'$' => {
            let n: i64 = body.parse().map_err(|_| io::Error::other("bad bulk length"))?;
            if n >= 0 {
                let mut data = vec![0u8; n as usize + 2];
                r.read_exact(&mut data)?;
                into.extend_from_slice(&data);
            }
            Ok(())
        }
        b'*' => {
            let n: i64 = body.parse().map_err(|_| io::Error::other("bad array length"))?;
            for _ in 0..n.max(0) {
                read_reply(r, into)?;
            }
            Ok(())
        }
        other => Err(io::Error::other(format!("unexpected reply type byte {other:#x}"))),
    }
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

/// A real Redis and the model, one connection to each.
pub struct Pair {
    pub redis: RawConn,
    pub model: RawConn,
    pub model_server: ModelServer,
    _server: RedisServer,
}

impl Pair {
    pub fn start() -> Pair {
        let model_server = start_model();
        let model = RawConn::connect(model_server.addr).expect("connect to the model");
        // Another suite may pick the same free port between our probe and redis-server's bind;
        // the loser exits, so try again on a new port rather than fail the run.
        let mut last_error = None;
        for _ in 0..5 {
            let server = RedisServer::start().expect("redis-server must be installed for conformance");
            match RawConn::connect(server.addr()).and_then(|mut c| c.call(&[b"PING"]).map(|_| c)) {
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
