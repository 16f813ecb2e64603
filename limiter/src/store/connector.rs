//! How the Redis store gets a byte stream. `redis`'s own `Client` always dials tokio's
//! network; going through this trait lets the very same store run over simulated sockets
//! (turmoil), a fault-injecting proxy, or anything else that reads and writes bytes.

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A bidirectional byte stream the Redis client can run over.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// A boxed [`Stream`].
pub type BoxedStream = Box<dyn Stream>;

/// The future a connector returns.
pub type ConnectFuture<'a> = Pin<Box<dyn Future<Output = io::Result<BoxedStream>> + Send + 'a>>;

/// Opens a new connection to Redis each time it is called.
pub trait Connector: Send + Sync + 'static {
    /// Opens a stream.
    fn connect(&self) -> ConnectFuture<'_>;
    /// Where it connects, for messages.
    fn describe(&self) -> String;
}

/// Plain TCP through tokio, with `TCP_NODELAY` (a rate-limit check is one small request
/// waiting for one small reply; Nagle's algorithm would only add latency).
#[derive(Debug, Clone)]
pub struct TcpConnector {
    addr: String,
}

impl TcpConnector {
    /// Connects to `host:port`.
    pub fn new(addr: impl Into<String>) -> Self {
        TcpConnector { addr: addr.into() }
    }
}

impl Connector for TcpConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(&self.addr).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as BoxedStream)
        })
    }

    fn describe(&self) -> String {
        format!("tcp://{}", self.addr)
    }
}
