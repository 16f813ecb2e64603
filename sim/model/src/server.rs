//! Serving the model over byte streams: any tokio `AsyncRead + AsyncWrite`, so the same code
//! answers turmoil sockets in a simulation and real TCP in the `redis-model` binary.
//!
//! One task per connection. Each request is executed under the model's lock and the lock is
//! released before the task awaits anything, so connections interleave only between commands,
//! exactly as clients of a single-threaded Redis observe.

use std::io;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::resp::{Request, RequestParser};
use super::ModelHandle;

/// Reads are done into at least this much free buffer space.
const READ_CHUNK: usize = 16 * 1024;
/// Replies are flushed once this many bytes are pending, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;

/// Decrements the open-connection gauge when a connection ends, however it ends.
struct ConnectionGuard<'a>(&'a ModelHandle);

impl Drop for ConnectionGuard<'_> {
    fn drop(&mut self) {
        self.0.net().connected_clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one client connection until it closes, sends garbage, or the model crashes.
///
/// A crashed or refusing model closes the stream at once. A protocol error gets Redis's
/// `-ERR Protocol error: ...` reply and then the connection is closed, as Redis does.
pub async fn serve_connection<S>(model: &ModelHandle, mut stream: S) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let net = model.net();
    if !model.faults().accepts_connections() {
        net.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    net.connections_received.fetch_add(1, Ordering::Relaxed);
    net.connected_clients.fetch_add(1, Ordering::Relaxed);
    let _guard = ConnectionGuard(model);
    let mut crashes = model.faults().subscribe_crashes();
    let mut session = model.new_session();
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);

    loop {
        loop {
            let request = match parser.next(&mut buf) {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(protocol_error) => {
                    protocol_error.reply().write_resp2(&mut out);
                    write_out(model, &mut stream, &mut out).await?;
                    return Ok(());
                }
            };
            let Request::Command(args) = request else { continue };
            // A paused Redis accepts bytes but runs nothing until the pause ends.
            while let Some(until) = model.faults().paused_until() {
                tokio::select! {
                    biased;
                    _ = crashes.changed() => return Ok(()),
                    _ = tokio::time::sleep_until(until) => {}
                }
            }
            if model.faults().is_crashed() {
                return Ok(());
            }
            let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            let reply = model.execute(&mut session, &argv);
            let latency = model.faults().latency();
            if !latency.is_zero() {
                write_out(model, &mut stream, &mut out).await?;
                tokio::select! {
                    biased;
                    _ = crashes.changed() => return Ok(()),
                    _ = tokio::time::sleep(latency) => {}
                }
            }
            reply.write_resp2(&mut out);
            if out.len() >= FLUSH_AT {
                write_out(model, &mut stream, &mut out).await?;
            }
        }
        write_out(model, &mut stream, &mut out).await?;
        if buf.capacity() - buf.len() < READ_CHUNK {
            buf.reserve(READ_CHUNK);
        }
        let n = tokio::select! {
            biased;
            _ = crashes.changed() => return Ok(()),
            read = stream.read_buf(&mut buf) => read?,
        };
        if n == 0 {
            return Ok(());
        }
        net.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
    }
}

async fn write_out<S: AsyncWrite + Unpin>(model: &ModelHandle, stream: &mut S, out: &mut Vec<u8>) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(out).await?;
    stream.flush().await?;
    model.net().bytes_out.fetch_add(out.len() as u64, Ordering::Relaxed);
    out.clear();
    Ok(())
}

/// Accepts connections on a tokio listener forever, one task per connection, all sharing the
/// one keyspace. Runs until the future is dropped.
pub async fn serve_tcp(model: ModelHandle, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let model = model.clone();
                tokio::spawn(async move {
                    let _ = serve_connection(&model, stream).await;
                });
            }
            // Running out of descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

/// The same for a turmoil listener, to serve the model as a simulated host.
pub async fn serve_turmoil(model: ModelHandle, listener: turmoil::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let model = model.clone();
                tokio::spawn(async move {
                    let _ = serve_connection(&model, stream).await;
                });
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::time::Instant;

    use super::super::{ManualServerClock, ModelHandle, Reply};
    use super::serve_connection;

    fn model() -> (ModelHandle, ManualServerClock) {
        let clock = ManualServerClock::from_millis(1_700_000_000_000);
        (ModelHandle::new(clock.clone()), clock)
    }

    /// A client end of an in-memory stream whose other end the model serves.
    fn connect(model: &ModelHandle) -> DuplexStream {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let model = model.clone();
        tokio::spawn(async move {
            let _ = serve_connection(&model, server).await;
        });
        client
    }

    /// Sends raw bytes and reads until `expected` bytes arrived or the stream closed.
    async fn roundtrip(conn: &mut DuplexStream, input: &[u8], expected: usize) -> Vec<u8> {
        conn.write_all(input).await.expect("write");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < expected {
            let n = conn.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    async fn closed(conn: &mut DuplexStream) -> bool {
        let mut buf = [0u8; 64];
        matches!(conn.read(&mut buf).await, Ok(0) | Err(_))
    }

    #[tokio::test]
    async fn redis_rs_client_runs_commands_and_scripts_over_a_stream() -> redis::RedisResult<()> {
        let (model, _) = model();
        let info = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        let (mut conn, driver) = redis::aio::MultiplexedConnection::new_with_config(
            &info,
            connect(&model),
            redis::AsyncConnectionConfig::new(),
        )
        .await?;
        tokio::spawn(driver);
        let _: () = redis::cmd("SET").arg("k").arg("41").query_async(&mut conn).await?;
        let n: i64 = redis::cmd("INCR").arg("k").query_async(&mut conn).await?;
        assert_eq!(n, 42);
        // invoke_async tries EVALSHA, gets NOSCRIPT, and falls back to EVAL.
        let script = redis::Script::new("return {KEYS[1], tonumber(ARGV[1]) * 2}");
        let (k, doubled): (String, i64) = script.key("k").arg(21).invoke_async(&mut conn).await?;
        assert_eq!((k.as_str(), doubled), ("k", 42));
        Ok(())
    }

    #[tokio::test]
    async fn garbage_gets_redis_protocol_errors_and_a_closed_connection() {
        let (model, _) = model();
        for (input, reply) in [
            (&b"*1\r\n$999999999999\r\n"[..], &b"-ERR Protocol error: invalid bulk length\r\n"[..]),
            (b"*1\r\n*1\r\n*1\r\n", b"-ERR Protocol error: expected '$', got '*'\r\n"),
            (b"*9999999999\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
            (b"GET \"unbalanced\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
        ] {
            let mut conn = connect(&model);
            assert_eq!(roundtrip(&mut conn, input, reply.len()).await, reply);
            assert!(closed(&mut conn).await, "connection closed after {input:?}");
        }
        let mut conn = connect(&model);
        assert_eq!(roundtrip(&mut conn, b"PING\r\n", 7).await, b"+PONG\r\n");
    }

    #[tokio::test]
    async fn crash_drops_connections_and_restart_decides_what_survives() {
        let (model, _) = model();
        let mut conn = connect(&model);
        roundtrip(&mut conn, b"SET k v\r\nSCRIPT LOAD \"return 1\"\r\n", 5 + 47).await;
        model.crash();
        assert!(closed(&mut conn).await);
        let mut refused = connect(&model);
        assert!(closed(&mut refused).await, "a crashed model closes new connections");
        assert!(!model.is_up());

        model.restart(true);
        assert_eq!(model.call(&[b"GET", b"k"]), Reply::bulk(b"v"), "data kept as persistence would");
        let sha = b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
        assert_eq!(
            model.call(&[b"EVALSHA", sha, b"0"]),
            Reply::err("NOSCRIPT No matching script. Please use EVAL."),
            "the script cache never survives a restart"
        );
        model.restart(false);
        assert_eq!(model.call(&[b"GET", b"k"]), Reply::Nil);
        let mut conn = connect(&model);
        assert_eq!(roundtrip(&mut conn, b"PING\r\n", 7).await, b"+PONG\r\n");
        assert_eq!(model.stats().rejected_connections, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn pause_holds_replies_in_virtual_time() {
        let (model, _) = model();
        let mut conn = connect(&model);
        model.pause(Duration::from_secs(2));
        let start = Instant::now();
        assert_eq!(roundtrip(&mut conn, b"PING\r\n", 7).await, b"+PONG\r\n");
        assert!(start.elapsed() >= Duration::from_secs(2), "answered after {:?}", start.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn latency_is_added_before_each_reply() {
        let (model, _) = model();
        let mut conn = connect(&model);
        model.set_latency(Duration::from_millis(30));
        let start = Instant::now();
        let replies = roundtrip(&mut conn, b"PING\r\nPING\r\n", 14).await;
        assert_eq!(replies, b"+PONG\r\n+PONG\r\n");
        assert!(start.elapsed() >= Duration::from_millis(60));
        model.set_latency(Duration::ZERO);
    }

    #[tokio::test]
    async fn rejecting_refuses_new_connections_but_keeps_open_ones() {
        let (model, _) = model();
        let mut open = connect(&model);
        assert_eq!(roundtrip(&mut open, b"PING\r\n", 7).await, b"+PONG\r\n");
        model.reject_connections(true);
        let mut refused = connect(&model);
        assert!(closed(&mut refused).await);
        assert_eq!(roundtrip(&mut open, b"PING\r\n", 7).await, b"+PONG\r\n");
        model.reject_connections(false);
        let mut again = connect(&model);
        assert_eq!(roundtrip(&mut again, b"PING\r\n", 7).await, b"+PONG\r\n");
    }

    #[tokio::test]
    async fn clock_drives_time_and_expiry_including_steps_backwards() {
        let (model, clock) = model();
        assert_eq!(model.call(&[b"TIME"]), Reply::Array(vec![Reply::bulk(b"1700000000"), Reply::bulk(b"0")]));
        model.call(&[b"SET", b"a", b"1", b"PX", b"100"]);
        model.call(&[b"SET", b"b", b"1", b"PX", b"500"]);
        clock.advance_millis(200);
        assert_eq!(model.stats().keys, 2, "nothing removed until touched or swept");
        assert_eq!(model.active_expire(), 1);
        assert_eq!(model.call(&[b"PTTL", b"b"]), Reply::Integer(300));
        clock.set_micros(1_699_999_999_000_000);
        assert_eq!(model.call(&[b"PTTL", b"b"]), Reply::Integer(1500), "a clock step back extends TTLs");
        let counted = model.stats();
        assert_eq!(counted.calls.get("set"), Some(&2));
        assert_eq!(counted.keys_with_expiry, 1);
        assert!(model.memory_usage(b"b").is_some_and(|bytes| bytes > 0));
    }

    #[tokio::test]
    async fn a_runaway_script_is_killed_and_the_model_goes_on() {
        let clock = ManualServerClock::from_millis(0);
        let config = super::super::ModelConfig { script_instruction_budget: 2_000_000, ..Default::default() };
        let model = ModelHandle::try_with_config(std::sync::Arc::new(clock), config).expect("model");
        for body in [&b"while true do end"[..], b"while true do pcall(function() while true do end end) end"] {
            let reply = model.call(&[b"EVAL", body, b"0"]);
            assert!(matches!(&reply, Reply::Error(e) if e.starts_with(b"ERR Script killed")), "{reply:?}");
        }
        assert_eq!(model.call(&[b"EVAL", b"return 1", b"0"]), Reply::Integer(1));
    }

    #[tokio::test]
    async fn hostile_scripts_get_errors_not_crashes() {
        let (model, _) = model();
        let cases: [(&[u8], &[u8]); 5] = [
            (b"local t = {} t[1] = t return t", b"*1\r\n*1\r\n"),
            (b"return string.rep('x', 2^30)", b"-ERR Error running script"),
            (b"local function f() return f() + 1 end return f()", b"-ERR user_script:1: stack overflow"),
            (b"error({})", b"-ERR script raised an error table without an 'err' field"),
            (b"return redis.call('eval', 'return 1', 0)", b"-ERR This Redis command is not allowed from script"),
        ];
        for (body, expected_start) in cases {
            let reply = model.call(&[b"EVAL", body, b"0"]).to_resp2();
            assert!(
                reply.starts_with(expected_start),
                "{}: {}",
                String::from_utf8_lossy(body),
                String::from_utf8_lossy(&reply[..reply.len().min(120)])
            );
        }
        assert_eq!(model.call(&[b"EVAL", b"return 'still fine'", b"0"]), Reply::bulk(b"still fine"));
    }
}
