//! Where key state lives: in this process ([`LocalStore`]; [`AtomicLimiter`] for one
//! lock-free key) or in Redis ([`RedisStore`]).

pub mod atomic;
pub mod connector;
pub mod local;
pub mod redis;

pub use atomic::AtomicLimiter;
pub use connector::{BoxedStream, ConnectFuture, Connector, Stream, TcpConnector};
pub use local::LocalStore;
pub use redis::RedisStore;

use crate::decision::Degraded;
use crate::error::Error;

/// Why a store call produced no decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// Redis could not be asked (down, slow, partitioned): the failure policy answers.
    Unavailable(Degraded),
    /// Redis answered with something the caller must know about (wrong type, bad reply).
    Fatal(Error),
}
