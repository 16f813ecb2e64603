//! One server's connection: dialled on demand, shared by every call, replaced when it dies.
//!
//! Two things make this more than a cached connection, and both are about a Redis that is far
//! away rather than down:
//!
//! - **A dial outlives the call that started it.** A handshake takes round trips (TCP, TLS,
//!   `AUTH`, `SELECT`): at 40 ms to Redis it can take longer than a call's whole timeout. If a
//!   timed-out call cancelled its dial, the next call would start from nothing and time out the
//!   same way, forever: every decision would go to the failure policy although Redis answers in
//!   40 ms. So the dial is one shared future ([`futures::future::Shared`]): callers wait on it
//!   within their own timeouts, a caller that gives up leaves it to the others (or to the next
//!   caller, who resumes it), and it is bounded on its own by [`dial_bound`]. It is also
//!   single-flight: an outage never turns into a connection storm.
//! - **A timeout kills a connection only when the connection is silent.** A partition drops
//!   packets without a word, so a connection whose replies stopped must be thrown away. But a
//!   call can also time out on a healthy connection that is merely slow (a reply takes 40 ms
//!   and the connection came up 80 ms into a 100 ms call). So a timed-out call drops the
//!   connection only if nothing has arrived on it (no reply, not even its handshake) for a whole
//!   timeout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::dial::{self, Dial};
use super::refusal::Backoff;
use super::StoreError;
use crate::decision::Degraded;
use crate::error::ConfigError;
use crate::metrics;

/// How long a dial may take at most, for a store whose calls time out after `timeout`: a few
/// round trips more than one call needs, so a handshake that a call's timeout cannot hold
/// still completes, and a dial into a partition still gives up.
pub(super) fn dial_bound(timeout: Duration) -> Duration {
    timeout.saturating_mul(3)
}

/// A connection and its generation (each dial that succeeds is the next one).
pub(super) type Current = (u64, MultiplexedConnection);

type Dialling = Shared<BoxFuture<'static, Result<Current, StoreError>>>;

/// See the module docs.
pub(super) struct NodeLink {
    state: Arc<DialState>,
    dialling: Mutex<Option<Dialling>>,
}

/// What the dial future shares with the link (it outlives any one call, so it owns its part).
struct DialState {
    dial: Dial,
    current: Mutex<Option<Current>>,
    generation: AtomicU64,
    /// Every new connection checks that the Redis module is loaded (`super::module`).
    module: bool,
    /// After a refused handshake, how long not to dial again (`super::refusal`).
    refused: Backoff,
    /// When anything last arrived from Redis (a connection made, a reply), in µs since `epoch`.
    heard_us: AtomicU64,
    epoch: Instant,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl DialState {
    fn heard(&self) {
        let us = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.heard_us.fetch_max(us, Ordering::Relaxed);
    }

    async fn dial(self: Arc<Self>, bound: Duration) -> Result<Current, StoreError> {
        let dialled = match tokio::time::timeout(bound, self.dial.connect()).await {
            Ok(dialled) => dialled,
            Err(_elapsed) => return Err(StoreError::Unavailable(Degraded::Timeout)),
        };
        let (conn, new_primary) = dialled.map_err(|e| match dial::refusal(&self.dial.describe(), &e) {
            Some(refused) => {
                self.refused.refused(refused.clone());
                StoreError::Refused(refused)
            }
            None => StoreError::Unavailable(Degraded::Unavailable),
        })?;
        if self.module {
            // Before the connection is handed to anyone: a primary without the module (a
            // failover's, a restart's) never sees a decision sent to it.
            super::module::check(&mut conn.clone(), &self.dial.describe()).await?;
        }
        self.refused.connected();
        self.heard();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        metrics::connected(generation > 1, new_primary);
        *lock(&self.current) = Some((generation, conn.clone()));
        Ok((generation, conn))
    }
}

impl NodeLink {
    pub(super) fn new(dial: Dial) -> Self {
        Self::with_state(dial, false)
    }

    fn with_state(dial: Dial, module: bool) -> Self {
        let state = DialState {
            dial,
            module,
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            refused: Backoff::default(),
            heard_us: AtomicU64::new(0),
            epoch: Instant::now(),
        };
        NodeLink { state: Arc::new(state), dialling: Mutex::new(None) }
    }

    pub(super) fn dial(&self) -> &Dial {
        &self.state.dial
    }

    /// The same link speaking TLS (before any call: nothing is connected yet to keep).
    pub(super) fn with_tls(self, tls: &super::tls::Tls) -> Result<Self, ConfigError> {
        let state = Arc::try_unwrap(self.state).map_err(|_| ConfigError::new("tls", "the store is in use".into()))?;
        Ok(NodeLink::with_state(state.dial.with_tls(tls)?, state.module))
    }

    /// The same link checking every new connection for the Redis module (before any call).
    pub(super) fn requiring_module(self) -> Result<Self, ConfigError> {
        let state =
            Arc::try_unwrap(self.state).map_err(|_| ConfigError::new("with_module", "the store is in use".into()))?;
        Ok(NodeLink::with_state(state.dial, true))
    }

    /// The current connection, or one dialled now (joining a dial already under way). A
    /// caller's own timeout bounds its wait; `bound` bounds the dial.
    pub(super) async fn connection(&self, bound: Duration) -> Result<Current, StoreError> {
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let dialling = {
            let mut dialling = lock(&self.dialling);
            if let Some(found) = self.cached() {
                return Ok(found);
            }
            match &*dialling {
                Some(under_way) => under_way.clone(),
                None => {
                    if let Some(refused) = self.state.refused.pending() {
                        return Err(StoreError::Refused(refused));
                    }
                    let started = self.state.clone().dial(bound).boxed().shared();
                    *dialling = Some(started.clone());
                    started
                }
            }
        };
        let result = dialling.clone().await;
        // The first caller to see the dial end clears it, so a failed one is tried afresh.
        let mut under_way = lock(&self.dialling);
        if under_way.as_ref().is_some_and(|d| d.ptr_eq(&dialling)) {
            *under_way = None;
        }
        result
    }

    fn cached(&self) -> Option<Current> {
        lock(&self.state.current).clone()
    }

    /// A reply arrived.
    pub(super) fn heard(&self) {
        self.state.heard();
    }

    /// A call waited `timeout` for its answer: if nothing at all has arrived for as long,
    /// the connection is taken for dead (see the module docs).
    pub(super) fn timed_out(&self, timeout: Duration) {
        let now = u64::try_from(self.state.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let heard = self.state.heard_us.load(Ordering::Relaxed);
        let silent = Duration::from_micros(now.saturating_sub(heard));
        if silent >= timeout {
            self.invalidate(None);
        }
    }

    /// Drops the cached connection if it is still `generation` (or whatever it is, for None),
    /// so a failure seen on an old connection never throws away a fresh one.
    pub(super) fn invalidate(&self, generation: Option<u64>) {
        let mut current = lock(&self.state.current);
        if generation.is_none() || current.as_ref().map(|(g, _)| *g) == generation {
            *current = None;
        }
    }
}
