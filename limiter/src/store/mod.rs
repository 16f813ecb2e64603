//! Where key state lives: in Redis ([`RedisStore`]: one server reached through a
//! [`Connector`] or a URL, with [`Tls`] when it asks for it, the primary Sentinel names, or a
//! Redis Cluster) or in this process ([`AtomicLimiter`] for one lock-free key; the in-process store behind
//! [`crate::LimiterBuilder::local`] for many).

mod atomic;
mod cluster;
mod connector;
mod dial;
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
pub(crate) mod eval;
mod loaded;
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
pub(crate) mod local;
mod modes;
pub(crate) mod module;
mod node;
pub(crate) mod redis;
mod refusal;
mod tls;

pub use atomic::AtomicLimiter;
pub use connector::{BoxedStream, ConnectFuture, Connector, Stream, TcpConnector};
pub use redis::{RedisStore, DEFAULT_TIMEOUT};
// The harness's own callers run their scripts on the store's connection
// (`RedisStore::call_raw`); users never see it, so redis-rs types stay out of the surface.
#[cfg(feature = "harness")]
pub use redis::StoreConnection;
pub use tls::Tls;

use std::sync::Arc;

use crate::decision::Degraded;
use crate::error::Error;

/// Where a limiter's or an enforcer's state lives: this process's store, or Redis (shared, as
/// a batching limiter's flushing task holds it too).
pub(crate) enum Store {
    Local(local::LocalStore),
    Redis(Arc<RedisStore>),
}

/// Why a store call produced no decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreError {
    /// Redis could not be asked (down, slow, partitioned): the failure policy answers.
    Unavailable(Degraded),
    /// Redis or its TLS handshake refused this client (an `Error::Refused`): an outage too, the
    /// failure policy answers, and the error says why for the store's events.
    Refused(Error),
    /// Redis answered with something the caller must know about (wrong type, bad reply).
    Fatal(Error),
}

impl StoreError {
    /// Why the failure policy answers instead of Redis, or None when Redis answered.
    pub(crate) fn degraded(&self) -> Option<Degraded> {
        match self {
            StoreError::Unavailable(why) => Some(*why),
            StoreError::Refused(_) => Some(Degraded::Refused),
            StoreError::Fatal(_) => None,
        }
    }
}
