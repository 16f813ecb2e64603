//! A fault-injecting TCP proxy between one limiter instance and Redis.
//!
//! It forwards bytes both ways, each chunk delayed by the scenario's one-way latency (order
//! kept, as TCP keeps it), and on command breaks the link the way the simulated network
//! does:
//!
//! - **partition**: existing connections are dropped, new ones are accepted and closed at once;
//! - **one-way partition** (to Redis, or from Redis): that direction's bytes are silently
//!   dropped, connections stay open;
//! - **hold**: nothing is forwarded either way; everything is buffered and delivered, in
//!   order, on release (a latency spike);
//! - **heal**: the fault is lifted.
//!
//! Faults are counted, not toggled: two overlapping partitions of one link need two heals,
//! so a short fault ending inside a longer one cannot heal the longer one early.
//!
//! The fault state is checked when a chunk is due to be delivered, so once a fault is set
//! not one more byte crosses in the faulted direction, even bytes already "on the wire".

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// A way to break the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    /// Both ways cut: connections dropped, new ones refused.
    Partition,
    /// The instance's requests are lost (Redis's replies would still flow).
    ToRedis,
    /// Redis's replies are lost.
    FromRedis,
    /// Everything held until release, then delivered.
    Hold,
}

/// Active faults on the link, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LinkState {
    partition: u32,
    to_redis: u32,
    from_redis: u32,
    hold: u32,
    /// The Redis process is dead: refuse connections without dialling (its port is held by
    /// a placeholder that never answers).
    redis_down: bool,
}

impl LinkState {
    fn count(&mut self, fault: LinkFault) -> &mut u32 {
        match fault {
            LinkFault::Partition => &mut self.partition,
            LinkFault::ToRedis => &mut self.to_redis,
            LinkFault::FromRedis => &mut self.from_redis,
            LinkFault::Hold => &mut self.hold,
        }
    }

    fn drops(&self, dir: Direction) -> bool {
        match dir {
            Direction::ToRedis => self.to_redis > 0,
            Direction::FromRedis => self.from_redis > 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToRedis,
    FromRedis,
}

/// Bytes forwarded (delivered, not dropped) each way.
#[derive(Debug, Default)]
struct ForwardCounters {
    to_redis: AtomicU64,
    from_redis: AtomicU64,
}

/// A running proxy. Dropping it stops it and closes every connection through it.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    link: watch::Sender<LinkState>,
    counters: Arc<ForwardCounters>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`, dialled
    /// afresh per connection (so a restarted Redis on the same port is reached again),
    /// delaying each chunk by a one-way latency drawn uniformly from `latency_ms` with a
    /// generator seeded from `seed`. Must be called inside a tokio runtime.
    pub async fn start(upstream: SocketAddr, latency_ms: (u64, u64), seed: u64) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (link, _) = watch::channel(LinkState::default());
        let counters = Arc::new(ForwardCounters::default());
        let latency_us = (latency_ms.0 * 1000, latency_ms.1.max(latency_ms.0) * 1000);
        let task = tokio::spawn(accept_loop(listener, upstream, link.clone(), counters.clone(), latency_us, seed));
        Ok(Proxy { addr, link, counters, task })
    }

    /// Where instances dial.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts (`on`) or heals one fault.
    pub fn set(&self, fault: LinkFault, on: bool) {
        self.link.send_modify(|s| {
            let n = s.count(fault);
            *n = if on { n.saturating_add(1) } else { n.saturating_sub(1) };
        });
    }

    /// Marks the Redis process dead (connections refused, as by a closed port) or back.
    pub fn set_redis_down(&self, down: bool) {
        self.link.send_modify(|s| s.redis_down = down);
    }

    /// Bytes delivered to Redis and from Redis so far.
    pub fn bytes(&self) -> (u64, u64) {
        (self.counters.to_redis.load(Ordering::Relaxed), self.counters.from_redis.load(Ordering::Relaxed))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept loop owns every connection task (a JoinSet): aborting it closes them all.
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    link: watch::Sender<LinkState>,
    counters: Arc<ForwardCounters>,
    latency_us: (u64, u64),
    seed: u64,
) {
    let mut connections = JoinSet::new();
    let mut n: u64 = 0;
    loop {
        while connections.try_join_next().is_some() {}
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // Out of descriptors or similar: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let refused = {
            let s = link.borrow();
            s.partition > 0 || s.redis_down
        };
        if refused {
            // Refused: the instance sees its new connection close at once.
            drop(client);
            continue;
        }
        n += 1;
        let seed = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        connections.spawn(connection(client, upstream, link.subscribe(), counters.clone(), latency_us, seed));
    }
}

async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    link: watch::Receiver<LinkState>,
    counters: Arc<ForwardCounters>,
    latency_us: (u64, u64),
    seed: u64,
) {
    // Redis down: the instance sees its connection close, as with a refused dial.
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_rd, client_wr) = client.into_split();
    let (server_rd, server_wr) = server.into_split();
    let up = pump(client_rd, server_wr, Direction::ToRedis, link.clone(), counters.clone(), latency_us, seed);
    let down = pump(server_rd, client_wr, Direction::FromRedis, link.clone(), counters, latency_us, seed ^ 1);
    let mut link = link;
    let partitioned = async move {
        loop {
            let cut = link.borrow_and_update().partition > 0;
            if cut || link.changed().await.is_err() {
                return;
            }
        }
    };
    // Either side closing, or a partition, ends the connection: dropping the halves closes
    // both sockets.
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = partitioned => {}
    }
}

/// Forwards one direction: a reader stamps each chunk with its delivery time, a writer
/// delivers it then, unless the link drops that direction (discarded) or is held (waits).
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    dir: Direction,
    mut link: watch::Receiver<LinkState>,
    counters: Arc<ForwardCounters>,
    latency_us: (u64, u64),
    seed: u64,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut buf = vec![0u8; 16 * 1024];
        let mut last = Instant::now();
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let delay = Duration::from_micros(rng.random_range(latency_us.0..=latency_us.1));
            // A stream never reorders: a chunk is due no earlier than the one before it.
            last = last.max(Instant::now() + delay);
            if tx.send((last, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            loop {
                let (held, dropped) = {
                    let s = link.borrow_and_update();
                    (s.hold > 0, s.drops(dir))
                };
                if held {
                    if link.changed().await.is_err() {
                        return;
                    }
                    continue;
                }
                if !dropped {
                    if to.write_all(&chunk).await.is_err() {
                        return;
                    }
                    let counter = match dir {
                        Direction::ToRedis => &counters.to_redis,
                        Direction::FromRedis => &counters.from_redis,
                    };
                    counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                break;
            }
        }
    };
    tokio::pin!(write);
    tokio::select! {
        // The destination is gone: stop.
        _ = &mut write => return,
        // The source closed: deliver what is still in flight, then stop.
        _ = read => {}
    }
    write.await;
}
