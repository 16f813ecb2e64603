//! mini-redis on loopback: a real, install-free RESP server for GET and SET.
//!
//! mini-redis 0.4 serves GET, SET (EX/PX), PUBLISH and SUBSCRIBE over tokio TCP. It knows no
//! EVAL, so it cannot run the limiter's scripts; it is the cheapest way to point the naive
//! GET-then-SET subject at a server that is not the model.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running mini-redis. Dropping it (or calling [`MiniRedis::shutdown`]) stops the server.
pub struct MiniRedis {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl MiniRedis {
    /// The loopback address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, tells open connections to finish, and waits for the server task.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for MiniRedis {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts `mini_redis::server::run` on 127.0.0.1 with an OS-chosen port, inside the current
/// tokio runtime.
pub async fn start() -> io::Result<MiniRedis> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = mini_redis::server::run(listener, stopped).await;
    });
    Ok(MiniRedis { addr, stop: Some(stop), task: Some(task) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn mini_redis_answers_set_and_get_on_loopback() -> io::Result<()> {
        let server = start().await?;
        let mut conn = tokio::net::TcpStream::connect(server.addr()).await?;
        conn.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").await?;
        let mut got = Vec::new();
        while got.len() < b"+OK\r\n$1\r\nv\r\n".len() {
            let mut buf = [0u8; 64];
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"+OK\r\n$1\r\nv\r\n");
        server.shutdown().await;
        Ok(())
    }
}
