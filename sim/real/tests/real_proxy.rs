//! The real lane's fault-injecting proxy, against a loopback echo server: each fault breaks
//! the link the way the simulated network does, and healing restores it.

use std::net::SocketAddr;
use std::time::Duration;

use sim_real::proxy::{LinkFault, Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An echo server standing in for Redis: every byte comes back.
async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// What comes back within `ms`: `Some(bytes)`, `Some(empty)` for a closed connection, or
/// `None` for silence.
async fn read_within(conn: &mut TcpStream, ms: u64) -> Option<Vec<u8>> {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_millis(ms), conn.read(&mut buf)).await {
        Ok(Ok(n)) => Some(buf[..n].to_vec()),
        Ok(Err(_)) => Some(Vec::new()),
        Err(_) => None,
    }
}

async fn roundtrip(conn: &mut TcpStream, msg: &[u8]) -> Option<Vec<u8>> {
    conn.write_all(msg).await.ok()?;
    read_within(conn, 300).await
}

#[tokio::test]
async fn the_proxy_forwards_both_ways_with_its_latency() {
    let proxy = Proxy::start(echo().await, (20, 20), 1).await.expect("proxy");
    let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
    let started = tokio::time::Instant::now();
    assert_eq!(roundtrip(&mut conn, b"ping").await.as_deref(), Some(&b"ping"[..]));
    // 20 ms each way.
    assert!(started.elapsed() >= Duration::from_millis(40), "{:?}", started.elapsed());
    // The reply's count is bumped just after its write: give it a moment.
    for _ in 0..50 {
        if proxy.bytes() == (4, 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(proxy.bytes(), (4, 4));
}

#[tokio::test]
async fn a_hold_delivers_everything_in_order_on_release() {
    let proxy = Proxy::start(echo().await, (0, 0), 2).await.expect("proxy");
    let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(roundtrip(&mut conn, b"a").await.as_deref(), Some(&b"a"[..]));
    proxy.set(LinkFault::Hold, true);
    conn.write_all(b"b").await.expect("write");
    conn.write_all(b"c").await.expect("write");
    assert_eq!(read_within(&mut conn, 150).await, None, "nothing crosses a held link");
    proxy.set(LinkFault::Hold, false);
    let mut got = Vec::new();
    while got.len() < 2 {
        got.extend(read_within(&mut conn, 300).await.expect("released"));
    }
    assert_eq!(got, b"bc");
}

#[tokio::test]
async fn one_way_partitions_drop_that_direction_and_keep_the_connection() {
    let proxy = Proxy::start(echo().await, (0, 0), 3).await.expect("proxy");
    let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
    proxy.set(LinkFault::ToRedis, true);
    assert_eq!(roundtrip(&mut conn, b"lost").await, None);
    proxy.set(LinkFault::ToRedis, false);
    assert_eq!(roundtrip(&mut conn, b"x").await.as_deref(), Some(&b"x"[..]), "the request was dropped, not held");

    proxy.set(LinkFault::FromRedis, true);
    assert_eq!(roundtrip(&mut conn, b"gone").await, None);
    proxy.set(LinkFault::FromRedis, false);
    assert_eq!(roundtrip(&mut conn, b"y").await.as_deref(), Some(&b"y"[..]), "the reply was dropped, not held");
}

#[tokio::test]
async fn a_partition_drops_connections_refuses_new_ones_and_needs_as_many_heals() {
    let proxy = Proxy::start(echo().await, (0, 0), 4).await.expect("proxy");
    let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(roundtrip(&mut conn, b"a").await.as_deref(), Some(&b"a"[..]));
    // Two overlapping partitions: the first heal must not end the second.
    proxy.set(LinkFault::Partition, true);
    proxy.set(LinkFault::Partition, true);
    assert_eq!(read_within(&mut conn, 300).await, Some(Vec::new()), "the open connection is dropped");
    let mut refused = TcpStream::connect(proxy.addr()).await.expect("the listener still accepts");
    assert_eq!(read_within(&mut refused, 300).await, Some(Vec::new()), "and closes at once");
    proxy.set(LinkFault::Partition, false);
    let mut still = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(read_within(&mut still, 300).await, Some(Vec::new()), "one heal of two");
    proxy.set(LinkFault::Partition, false);
    let mut healed = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(roundtrip(&mut healed, b"b").await.as_deref(), Some(&b"b"[..]));
}

#[tokio::test]
async fn a_dead_redis_behind_the_proxy_is_a_refused_connection() {
    let proxy = Proxy::start(echo().await, (0, 0), 5).await.expect("proxy");
    proxy.set_redis_down(true);
    let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(read_within(&mut conn, 300).await, Some(Vec::new()));
    proxy.set_redis_down(false);
    let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(roundtrip(&mut conn, b"up").await.as_deref(), Some(&b"up"[..]));
}
