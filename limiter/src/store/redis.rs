//! The Redis store: each algorithm is one atomic script, sent by EVALSHA with EVAL as
//! fallback when Redis answers NOSCRIPT (after `SCRIPT FLUSH`, a restart or a failover; see
//! [`super::eval`]).
//!
//! One multiplexed connection per store: every concurrent call is pipelined onto it, which
//! measured faster than a pool (see the bench). When it breaks, the next call reconnects;
//! reconnection is single-flight, so an outage does not turn into a connection storm.
//! Every call is bounded by `timeout` (ADR-002's 1000 ms by default), connection included.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ErrorKind, RedisConnectionInfo, RedisError, ServerErrorKind, Value};

use super::connector::{Connector, TcpConnector};
use super::eval::EvalScript;
use super::StoreError;
use crate::algo::Outcome;
use crate::decision::Degraded;
use crate::error::Error;
use crate::quota::Algorithm;
use crate::scripts;

/// ADR-002's `spring.redis.timeout=1000ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

static SCRIPTS: LazyLock<Vec<(Algorithm, EvalScript)>> =
    LazyLock::new(|| scripts::ALL.iter().map(|s| (s.algorithm, EvalScript::new(s.source))).collect());

fn script(algorithm: Algorithm) -> Option<&'static EvalScript> {
    SCRIPTS.iter().find(|(a, _)| *a == algorithm).map(|(_, s)| s)
}

/// Why a [`RedisStore::call_raw`] call produced no reply.
#[cfg(feature = "harness")]
#[derive(Debug, Clone)]
pub enum RawCallError {
    /// Redis could not be asked (down, slow, partitioned, loading): a failure policy's case.
    Unavailable(Degraded),
    /// Redis answered with an error.
    Refused(RedisError),
}

/// See the module docs.
pub struct RedisStore {
    connector: Arc<dyn Connector>,
    info: RedisConnectionInfo,
    timeout: Duration,
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    generation: AtomicU64,
    connecting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("redis", &self.connector.describe()).field("timeout", &self.timeout).finish()
    }
}

impl RedisStore {
    /// A store reaching Redis through `connector`, database 0, no authentication.
    pub fn new(connector: impl Connector) -> Self {
        Self::with_info(Arc::new(connector), RedisConnectionInfo::default())
    }

    fn with_info(connector: Arc<dyn Connector>, info: RedisConnectionInfo) -> Self {
        RedisStore {
            connector,
            // The library-name handshake (CLIENT SETINFO) costs two round trips per
            // connection and tells the limiter nothing.
            info: info.set_skip_set_lib_name(),
            timeout: DEFAULT_TIMEOUT,
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// A store for a `redis://[user:password@]host[:port][/db]` URL over TCP.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        use redis::IntoConnectionInfo;
        let info = url
            .into_connection_info()
            .map_err(|e| Error::config("redis_url", format!("{url:?} is not a usable Redis URL: {e}")))?;
        let addr = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            other => {
                return Err(Error::config("redis_url", format!("{url:?}: only plain TCP is supported, got {other:?}")))
            }
        };
        Ok(Self::with_info(Arc::new(TcpConnector::new(addr)), info.redis_settings().clone()))
    }

    /// Bounds every call (connecting included). Zero is refused.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, Error> {
        if timeout.is_zero() {
            return Err(Error::config("timeout", "must be above 0 ms, got 0".into()));
        }
        self.timeout = timeout;
        Ok(self)
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs one request. Transport trouble comes back as [`StoreError::Unavailable`] for the
    /// failure policy; a wrong-type key or a garbled reply as [`StoreError::Fatal`].
    /// With the outcome comes the clock reading the store decided by (ms).
    pub(crate) async fn evaluate(&self, req: scripts::Request<'_>) -> Result<(Outcome, u64), StoreError> {
        match tokio::time::timeout(self.timeout, self.evaluate_untimed(req)).await {
            Ok(result) => result,
            Err(_elapsed) => {
                // A connection whose reply never came may be dead without knowing it (a
                // partition drops packets silently); start afresh next time.
                self.invalidate(None);
                Err(StoreError::Unavailable(Degraded::Timeout))
            }
        }
    }

    async fn evaluate_untimed(&self, req: scripts::Request<'_>) -> Result<(Outcome, u64), StoreError> {
        let (generation, mut conn) = self.connection().await?;
        let result = run_script(&mut conn, req.algorithm, &req).await;
        result.map_err(|e| {
            let error = classify(req.algorithm, e);
            if matches!(error, StoreError::Unavailable(_)) {
                self.invalidate(Some(generation));
            }
            error
        })
    }

    /// For the harness's own callers (subjects that are not one of the library's scripts):
    /// runs `call` on the store's connection with the store's timeout, connecting and
    /// reconnecting exactly as the store's own calls do. A failure comes back as
    /// [`RawCallError::Unavailable`] when the failure policy would answer (the connection is
    /// then dropped, as after the store's own calls), or as [`RawCallError::Refused`] with
    /// Redis's error when Redis answered with one (a script error, WRONGTYPE...).
    #[cfg(feature = "harness")]
    pub async fn call_raw<T, F, Fut>(&self, call: F) -> Result<T, RawCallError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let untimed = async {
            let (generation, conn) =
                self.connection().await.map_err(|_| RawCallError::Unavailable(Degraded::Unavailable))?;
            call(conn).await.map_err(|e| {
                if unavailable(&e) {
                    self.invalidate(Some(generation));
                    RawCallError::Unavailable(Degraded::Unavailable)
                } else {
                    RawCallError::Refused(e)
                }
            })
        };
        match tokio::time::timeout(self.timeout, untimed).await {
            Ok(result) => result,
            Err(_elapsed) => {
                self.invalidate(None);
                Err(RawCallError::Unavailable(Degraded::Timeout))
            }
        }
    }

    pub(super) async fn connection(&self) -> Result<(u64, MultiplexedConnection), StoreError> {
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let _single_flight = self.connecting.lock().await;
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let stream = self.connector.connect().await.map_err(|_| StoreError::Unavailable(Degraded::Unavailable))?;
        // Our own timeout bounds every call; the connection's own would race it.
        let config = AsyncConnectionConfig::new().set_response_timeout(None).set_connection_timeout(None);
        let (conn, driver) = MultiplexedConnection::new_with_config(&self.info, stream, config)
            .await
            .map_err(|_| StoreError::Unavailable(Degraded::Unavailable))?;
        tokio::spawn(driver);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some((generation, conn.clone()));
        Ok((generation, conn))
    }

    fn cached(&self) -> Option<(u64, MultiplexedConnection)> {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Drops the cached connection if it is still `generation` (or whatever it is, for None),
    /// so a failure seen on an old connection never throws away a fresh one.
    pub(super) fn invalidate(&self, generation: Option<u64>) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if generation.is_none() || current.as_ref().map(|(g, _)| *g) == generation {
            *current = None;
        }
    }
}

async fn run_script(
    conn: &mut MultiplexedConnection,
    algorithm: Algorithm,
    req: &scripts::Request<'_>,
) -> Result<(Outcome, u64), RedisError> {
    let Some(script) = script(algorithm) else {
        return Err(RedisError::from((ErrorKind::Client, "no script for algorithm")));
    };
    let call = req.invocation();
    let reply = script.run(conn, &call.keys, &call.args).await?;
    integers(&reply).and_then(|ints| req.read_reply(&ints)).ok_or_else(|| bad_reply(&reply))
}

pub(super) fn integers(v: &Value) -> Option<Vec<i64>> {
    match v {
        Value::Array(items) => items.iter().map(|i| if let Value::Int(n) = i { Some(*n) } else { None }).collect(),
        _ => None,
    }
}

pub(super) fn bad_reply(v: &Value) -> RedisError {
    let mut shown = format!("{v:?}");
    if shown.len() > 200 {
        let mut cut = 200;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "reply of the wrong shape",
        format!("expected the script's array of integers, got {shown}"),
    ))
}

/// Whether a Redis error means Redis could not be asked (the failure policy's case) rather
/// than an answer the caller must hear about.
fn unavailable(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::UnexpectedReturnType | ErrorKind::Parse => false,
        // Redis is there but cannot serve right now: treat as an outage.
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly,
        ) => true,
        // A script running too long blocks every client: also an outage.
        ErrorKind::Server(_) | ErrorKind::Extension => e.code() == Some("BUSY"),
        _ => true,
    }
}

/// Sorts a Redis error into "ask the failure policy" and "tell the caller".
pub(super) fn classify(algorithm: Algorithm, e: RedisError) -> StoreError {
    if unavailable(&e) {
        return StoreError::Unavailable(Degraded::Unavailable);
    }
    let name = algorithm.name();
    match e.kind() {
        ErrorKind::UnexpectedReturnType | ErrorKind::Parse => {
            StoreError::Fatal(Error::UnexpectedReply { algorithm: name, detail: e.detail().unwrap_or("").to_owned() })
        }
        _ => {
            let detail = e.to_string();
            if e.code() == Some("WRONGTYPE") || detail.contains("WRONGTYPE") {
                StoreError::Fatal(Error::WrongType { algorithm: name, detail })
            } else {
                StoreError::Fatal(Error::Server { algorithm: name, detail })
            }
        }
    }
}
