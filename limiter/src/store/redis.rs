//! The Redis store: each algorithm is one atomic script, sent by EVALSHA with EVAL as
//! fallback when Redis answers NOSCRIPT (after `SCRIPT FLUSH`, a restart or a failover).
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
use super::StoreError;
use crate::algo::{fixed_window, Outcome};
use crate::decision::Degraded;
use crate::error::Error;
use crate::quota::Algorithm;
use crate::scripts;

/// ADR-002's `spring.redis.timeout=1000ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

static SCRIPTS: LazyLock<Vec<(Algorithm, redis::Script)>> =
    LazyLock::new(|| scripts::ALL.iter().map(|s| (s.algorithm, redis::Script::new(s.source))).collect());

fn script(algorithm: Algorithm) -> Option<&'static redis::Script> {
    SCRIPTS.iter().find(|(a, _)| *a == algorithm).map(|(_, s)| s)
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
        let result = match req.algorithm {
            Algorithm::NaiveGetSet => naive_get_set(&mut conn, &req).await,
            algorithm => run_script(&mut conn, algorithm, &req).await,
        };
        result.map_err(|e| {
            let error = classify(req.algorithm, e);
            if matches!(error, StoreError::Unavailable(_)) {
                self.invalidate(Some(generation));
            }
            error
        })
    }

    async fn connection(&self) -> Result<(u64, MultiplexedConnection), StoreError> {
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
    fn invalidate(&self, generation: Option<u64>) {
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
    let (Some(script), Some(call)) = (script(algorithm), req.invocation()) else {
        return Err(RedisError::from((ErrorKind::Client, "no script for algorithm")));
    };
    let mut inv = script.prepare_invoke();
    for key in &call.keys {
        inv.key(key);
    }
    for arg in &call.args {
        inv.arg(arg);
    }
    let reply: Value = inv.invoke_async(conn).await?;
    integers(&reply).and_then(|ints| req.read_reply(&ints)).ok_or_else(|| bad_reply(&reply))
}

/// The naive subject: read, decide in the client, write back. Between the GET and the SET
/// any other instance can do the same, and the last SET wins: that is the race.
async fn naive_get_set(
    conn: &mut MultiplexedConnection,
    req: &scripts::Request<'_>,
) -> Result<(Outcome, u64), RedisError> {
    let q = req.quota;
    let now = req.client_now_ms;
    let window = now / q.period_ms();
    let key = format!("{}{}:{window}", req.stem, scripts::key_suffix(Algorithm::NaiveGetSet));
    let reply: Value = redis::cmd("GET").arg(&key).query_async(conn).await?;
    let count = match &reply {
        Value::Nil => 0,
        Value::BulkString(bytes) => {
            std::str::from_utf8(bytes).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| bad_reply(&reply))?
        }
        other => return Err(bad_reply(other)),
    };
    let mut state = (count > 0).then_some(fixed_window::WindowState { window, count });
    let outcome = fixed_window::step(q, &mut state, now, req.cost);
    if outcome.allowed && req.cost > 0 {
        let to_end = q.period_ms() - now % q.period_ms();
        let _: Value =
            redis::cmd("SET").arg(&key).arg(count + req.cost).arg("PX").arg(to_end).query_async(conn).await?;
    }
    Ok((outcome, now))
}

fn integers(v: &Value) -> Option<Vec<i64>> {
    match v {
        Value::Array(items) => items.iter().map(|i| if let Value::Int(n) = i { Some(*n) } else { None }).collect(),
        _ => None,
    }
}

fn bad_reply(v: &Value) -> RedisError {
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

/// Sorts a Redis error into "ask the failure policy" and "tell the caller".
fn classify(algorithm: Algorithm, e: RedisError) -> StoreError {
    let name = algorithm.name();
    match e.kind() {
        ErrorKind::UnexpectedReturnType | ErrorKind::Parse => {
            StoreError::Fatal(Error::UnexpectedReply { algorithm: name, detail: e.detail().unwrap_or("").to_owned() })
        }
        // Redis is there but cannot serve right now: treat as an outage.
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly,
        ) => StoreError::Unavailable(Degraded::Unavailable),
        ErrorKind::Server(_) | ErrorKind::Extension => {
            let detail = e.to_string();
            if e.code() == Some("WRONGTYPE") || detail.contains("WRONGTYPE") {
                StoreError::Fatal(Error::WrongType { algorithm: name, detail })
            } else if e.code() == Some("BUSY") {
                StoreError::Unavailable(Degraded::Unavailable)
            } else {
                StoreError::Fatal(Error::Server { algorithm: name, detail })
            }
        }
        _ => StoreError::Unavailable(Degraded::Unavailable),
    }
}
