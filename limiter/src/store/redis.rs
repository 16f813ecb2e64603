//! The Redis store: each algorithm is one atomic script, sent by EVALSHA with EVAL as
//! fallback when Redis answers NOSCRIPT (after `SCRIPT FLUSH`, a restart or a failover; see
//! [`super::eval`]).
//!
//! A store reaches one server ([`RedisStore::from_url`], `redis://` or `rediss://`, or
//! [`RedisStore::new`] over any [`Connector`]), the primary Sentinel names
//! ([`RedisStore::sentinel`]), or a Redis Cluster ([`RedisStore::cluster`], see
//! [`super::cluster`]). The limiter holds any of them the same way.
//!
//! One server: one multiplexed connection per store, every concurrent call pipelined onto it,
//! which measured faster than a pool (see the bench). When it breaks, the next call
//! reconnects; the dial is single-flight and outlives the call that started it, and a timeout
//! drops the connection only when Redis has been silent for that long ([`super::node`]).
//! Every call is bounded by `timeout` (ADR-002's 1000 ms by default), its wait for a
//! connection included.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{ErrorKind, RedisConnectionInfo, RedisError, ServerErrorKind, Value};

use super::cluster::ClusterLink;
use super::connector::{Connector, TcpConnector};
use super::dial::{self, Dial};
use super::eval::Sent;
use super::loaded;
use super::module;
use super::node::{self, NodeLink};
use super::tls::Tls;
use super::StoreError;
use crate::algo::Outcome;
use crate::decision::Degraded;
use crate::error::{ConfigError, Error};
use crate::metrics;
use crate::rules_script::{RulesReply, RulesRequest};
use crate::scripts::{self, Invocation};

/// ADR-002's `spring.redis.timeout=1000ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// How errors of the all-or-nothing rules script are named.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
const RULES_NAME: &str = "rules";

/// Why a [`crate::harness::call_raw`] call produced no reply.
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
    pub(super) link: Link,
    pub(super) timeout: Duration,
    /// Decides with the Redis module's commands (`super::module`).
    pub(super) module: bool,
    /// Decides the charges of each hash tag in their own calls even on one server, as it must
    /// on a cluster (`super::state`): only the harness asks for it, to check what it costs.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(super) per_tag: bool,
}

/// One server (directly or through Sentinel) or a cluster.
pub(super) enum Link {
    Node(Box<NodeLink>),
    Cluster(Box<ClusterLink>),
}

impl std::fmt::Debug for RedisStore {
    // Where, never with whom: no user, no password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("redis", &self.describe()).field("timeout", &self.timeout).finish()
    }
}

impl RedisStore {
    /// A store reaching Redis through `connector`, database 0, no authentication.
    pub fn new(connector: impl Connector) -> Self {
        let dial = Dial::Stream { connector: Arc::new(connector), info: RedisConnectionInfo::default() };
        Self::node(dial)
    }

    fn node(dial: Dial) -> Self {
        RedisStore {
            link: Link::Node(Box::new(NodeLink::new(dial))),
            timeout: DEFAULT_TIMEOUT,
            module: false,
            per_tag: false,
        }
    }

    /// A store for `redis://[user:password@]host[:port][/db]` (TCP) or `rediss://...` (TLS,
    /// trusting the system's roots; see [`RedisStore::with_tls`] for a CA or client
    /// certificate). The user and password are an ACL user's, as managed services hand out.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let info = parse_url(url)?;
        // The library-name handshake (CLIENT SETINFO) costs two round trips per connection
        // and tells the limiter nothing.
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => {
                let dial =
                    Dial::Stream { connector: Arc::new(TcpConnector::new(format!("{host}:{port}"))), info: settings };
                Ok(Self::node(dial))
            }
            redis::ConnectionAddr::TcpTls { .. } => {
                Ok(Self::node(Dial::client(info.clone().set_redis_settings(settings), None)?))
            }
            other => Err(ConfigError::new(
                "redis_url",
                format!("{}: only redis:// (TCP) and rediss:// (TLS) are supported, got {other:?}", redacted(url)),
            )),
        }
    }

    /// A store for a Redis Cluster, found from any of `urls` (`redis://` or `rediss://`, each
    /// a node of it; the first URL's user and password are used for every node). Every key
    /// of one limit lives in one slot (the key layout's hash tag), so no script meets
    /// CROSSSLOT; MOVED and ASK are followed, and a primary that never saw a script gets it
    /// by EVAL (the `store::cluster` module explains how).
    pub fn cluster<S: AsRef<str>>(urls: impl IntoIterator<Item = S>) -> Result<Self, ConfigError> {
        let infos = urls.into_iter().map(|u| parse_url(u.as_ref())).collect::<Result<Vec<_>, _>>()?;
        let link = Link::Cluster(Box::new(ClusterLink::new(infos, None)?));
        Ok(RedisStore { link, timeout: DEFAULT_TIMEOUT, module: false, per_tag: false })
    }

    /// A store for the primary that the Sentinels at `sentinel_urls` report for `service`,
    /// asked again after every lost connection, so a failover is followed by itself.
    /// `node_url` gives the user, password and database of the data servers (its host is not
    /// used): `redis://user:password@/0`, or `None` for none.
    pub fn sentinel<S: AsRef<str>>(
        sentinel_urls: impl IntoIterator<Item = S>,
        service: &str,
        node_url: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let sentinels = sentinel_urls
            .into_iter()
            .map(|u| parse_url(u.as_ref()).map(|i| i.addr().clone()))
            .collect::<Result<Vec<_>, _>>()?;
        if sentinels.is_empty() {
            return Err(ConfigError::new("sentinel", "needs at least one Sentinel URL, got none".into()));
        }
        let node = match node_url {
            Some(url) => parse_url(url)?.redis_settings().clone(),
            None => RedisConnectionInfo::default(),
        };
        Ok(Self::node(Dial::sentinel(sentinels, service, node.set_skip_set_lib_name(), None)?))
    }

    /// Speaks TLS with `tls`'s trust and client certificate: for a `rediss://` URL, a cluster
    /// of `rediss://` nodes, or Sentinel-managed servers. Certificates are read now, so a bad
    /// one is an error here, not on the first call.
    pub fn with_tls(self, tls: &Tls) -> Result<Self, ConfigError> {
        let link = match self.link {
            Link::Node(node) => Link::Node(Box::new(node.with_tls(tls)?)),
            Link::Cluster(cluster) => Link::Cluster(Box::new(cluster.with_tls(tls)?)),
        };
        Ok(RedisStore { link, ..self })
    }

    /// A cluster store that dials every node somewhere else than the cluster names it:
    /// `(host, port)` as CLUSTER SLOTS, MOVED and ASK name a node, to where to dial it (NAT,
    /// a proxy per node). The slot map keeps the cluster's own names. Refused for one server.
    pub fn with_node_addresses(
        self,
        map: impl IntoIterator<Item = ((String, u16), (String, u16))>,
    ) -> Result<Self, ConfigError> {
        match self.link {
            Link::Cluster(cluster) => Ok(RedisStore {
                link: Link::Cluster(Box::new(cluster.with_address_map(map.into_iter().collect())?)),
                ..self
            }),
            Link::Node(node) => Err(ConfigError::new(
                "node_addresses",
                format!("{} is one server, not a cluster: there are no nodes to map", node.dial().describe()),
            )),
        }
    }

    /// Where the store connects (no credentials), for messages.
    pub fn describe(&self) -> String {
        match &self.link {
            Link::Node(node) => node.dial().describe(),
            Link::Cluster(cluster) => cluster.describe(),
        }
    }

    /// Bounds every call (connecting included). Zero is refused.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        if timeout.is_zero() {
            return Err(ConfigError::new("timeout", "must be above 0 ms, got 0".into()));
        }
        self.timeout = timeout;
        Ok(self)
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether keys with different hash tags may live on different nodes, so one script call
    /// may only touch the keys of one tag.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    /// Runs one request. Transport trouble comes back as [`StoreError::Unavailable`] and a
    /// refused client as [`StoreError::Refused`], both for the failure policy; a wrong-type key
    /// or a garbled reply as [`StoreError::Fatal`]. With the outcome comes the clock reading the store decided by (ms).
    /// A blockable limiter names the key's `block` ([`scripts::block_key`]): the request then
    /// runs behind it.
    pub(crate) async fn evaluate(
        &self,
        req: scripts::Request<'_>,
        block: Option<&str>,
    ) -> Result<(Outcome, u64), StoreError> {
        // The limiter's stem names its state whole (`prefix:{key}:STATE:`).
        let scripts = loaded::of(req.algorithm);
        let (sent, call) = match (block, self.module) {
            (None, true) => (Sent::Command(scripts::module_command(req.algorithm)), req.invocation_of_stem()),
            (Some(block), true) => return self.evaluate_behind_block_with_module(req, block).await,
            (Some(block), false) => (Sent::Script(&scripts.blockable), req.blockable_invocation(block)),
            (None, false) => (Sent::Script(&scripts.own), req.invocation_of_stem()),
        };
        self.run(req.algorithm.name(), sent, &call, |reply| read_integers(reply, |ints| req.read_reply(ints))).await
    }

    /// Deletes `keys` (one key's state, in one slot) with `lua/reset.lua`: how many existed.
    pub(crate) async fn reset_keys(&self, keys: Vec<String>) -> Result<u64, StoreError> {
        let call = Invocation { keys, args: Vec::new() };
        self.run("reset", Sent::Script(loaded::reset()), &call, |reply| match reply {
            Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(bad_reply(&other)),
        })
        .await
    }

    /// Gives `req.cost` units back to `req`'s state with `lua/refund.lua`: whether anything
    /// was given back.
    pub(crate) async fn refund_units(&self, req: scripts::Request<'_>) -> Result<bool, StoreError> {
        self.run("refund", Sent::Script(loaded::refund()), &req.units_invocation(), |reply| match reply {
            Value::Int(n @ (0 | 1)) => Ok(n == 1),
            other => Err(bad_reply(&other)),
        })
        .await
    }

    /// Blocks for `duration_ms` (0 lifts it) the key whose block is `block`, with
    /// `lua/block.lua` on the clock `now_ms` (None: Redis's): the instant the block ends, 0
    /// when lifted.
    pub(crate) async fn block_key(
        &self,
        block: &str,
        now_ms: Option<u64>,
        duration_ms: u64,
    ) -> Result<u64, StoreError> {
        let call = scripts::block_invocation(block, now_ms, duration_ms);
        self.run("block", Sent::Script(loaded::block()), &call, |reply| match reply {
            Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(bad_reply(&other)),
        })
        .await
    }

    /// Runs `call`, of `lua/concurrency.lua` ([`scripts::permit_invocation`]), or with the
    /// module its command, which takes the same KEYS and ARGV.
    pub(crate) async fn permit_call(&self, call: &Invocation) -> Result<(Outcome, u64), StoreError> {
        let read = |reply| read_integers(reply, scripts::read_outcome);
        let sent = match self.module {
            true => Sent::Command(scripts::CONCURRENCY_MODULE_COMMAND),
            false => Sent::Script(loaded::concurrency()),
        };
        self.run("concurrency", sent, call, read).await
    }

    /// The one way the store sends a script (or a module's command): `sent` with `call` on the store's connection,
    /// its reply read by `read`, bounded by the timeout, measured as a call of the script
    /// `name` (`metrics::StoreCall`), with errors sorted for the failure policy (see
    /// [`RedisStore::evaluate`]). Transport trouble drops the connection; an answer tells a
    /// cluster store that it is through again.
    pub(super) async fn run<T>(
        &self,
        name: &'static str,
        sent: Sent<'_>,
        call: &Invocation,
        read: impl FnOnce(Value) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        let untimed = async {
            let mut conn = self.connection().await?;
            let reply = sent.run(&mut conn.conn, &call.keys, &call.args).await;
            reply.and_then(read).map_err(|e| {
                let error = self.classify(name, e);
                if matches!(error, StoreError::Unavailable(_)) {
                    self.drop_connection(&conn);
                }
                error
            })
        };
        let timing = metrics::StoreCall::of_script(name, || self.describe());
        let result =
            timing.instrument(self.bounded(untimed)).await.unwrap_or(Err(StoreError::Unavailable(Degraded::Timeout)));
        timing.finish(&result);
        self.note_success(&result);
        result
    }

    /// Sorts an error of a call of `name` for the failure policy ([`classify`]); on a store
    /// deciding with the module, a server that knows no such command lacks the module.
    pub(super) fn classify(&self, name: &'static str, e: RedisError) -> StoreError {
        if self.module && module::unknown_command(&e) {
            return module::not_loaded(&self.describe(), e.to_string());
        }
        classify(name, &self.describe(), e)
    }

    /// `call`, given the store's timeout: None when it waited the whole of it (and the store
    /// has been told, see [`RedisStore::timed_out`]).
    async fn bounded<T>(&self, call: impl std::future::Future<Output = T>) -> Option<T> {
        let result = tokio::time::timeout(self.timeout, call).await.ok();
        if result.is_none() {
            self.timed_out();
        }
        result
    }

    /// A call waited the whole timeout: a connection whose replies stopped may be dead without
    /// knowing it (a partition drops packets silently), so a one-server store starts afresh if
    /// nothing has arrived for that long (`super::node`); a cluster store is told.
    pub(super) fn timed_out(&self) {
        match &self.link {
            Link::Node(node) => node.timed_out(self.timeout),
            Link::Cluster(cluster) => cluster.note_unavailable(),
        }
    }

    /// After a call: a cluster store that had lost a primary learns it is through again.
    pub(super) fn note_success<T>(&self, result: &Result<T, StoreError>) {
        match (result, &self.link) {
            (Ok(_), Link::Cluster(cluster)) => cluster.note_ok(),
            (Ok(_), Link::Node(node)) => node.heard(),
            (Err(_), _) => {}
        }
    }

    pub(super) async fn connection(&self) -> Result<Connected, StoreError> {
        match &self.link {
            Link::Node(node) => {
                let (generation, conn) = node.connection(node::dial_bound(self.timeout)).await?;
                Ok(Connected { conn: StoreConnection::Node(conn), generation })
            }
            Link::Cluster(cluster) => {
                Ok(Connected { conn: StoreConnection::Cluster(cluster.connection().await?), generation: 0 })
            }
        }
    }

    /// After a failure on `conn`: a one-server store drops it if it is still the current one
    /// (so a failure seen on an old connection never throws away a fresh one); a cluster
    /// connection reconnects its nodes by itself and is only told.
    pub(super) fn drop_connection(&self, conn: &Connected) {
        match &self.link {
            Link::Node(node) => node.invalidate(Some(conn.generation)),
            Link::Cluster(cluster) => cluster.note_unavailable(),
        }
    }

    /// Runs several rules in one call of the all-or-nothing script (or the module's rules
    /// command), bounded by the timeout;
    /// errors come back as from [`RedisStore::evaluate`].
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) async fn evaluate_rules(&self, req: &RulesRequest<'_>) -> Result<RulesReply, StoreError> {
        let (sent, call) = match self.module {
            true => (Sent::Command(crate::rules_script::MODULE_COMMAND), req.module_invocation()),
            false => (Sent::Script(loaded::rules()), req.invocation()),
        };
        self.run(RULES_NAME, sent, &call, |reply| read_integers(reply, |ints| req.read_reply(ints))).await
    }

    /// For the harness's own callers (subjects that are not one of the library's scripts):
    /// runs `call` on the store's connection with the store's timeout, connecting and
    /// reconnecting exactly as the store's own calls do. A failure comes back as
    /// [`RawCallError::Unavailable`] when the failure policy would answer (the connection is
    /// then dropped, as after the store's own calls), or as [`RawCallError::Refused`] with
    /// Redis's error when Redis answered with one (a script error, WRONGTYPE...).
    #[cfg(feature = "harness")]
    pub(crate) async fn call_raw<T, F, Fut>(&self, call: F) -> Result<T, RawCallError>
    where
        F: FnOnce(StoreConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let untimed = async {
            let leased = self.connection().await.map_err(|_| RawCallError::Unavailable(Degraded::Unavailable))?;
            let result = call(leased.conn.clone()).await.map_err(|e| {
                if unavailable(&e) {
                    self.drop_connection(&leased);
                    RawCallError::Unavailable(Degraded::Unavailable)
                } else {
                    RawCallError::Refused(e)
                }
            });
            // Redis's own error is an answer too: the connection is alive.
            if !matches!(result, Err(RawCallError::Unavailable(_))) {
                self.note_success(&Ok::<(), StoreError>(()));
            }
            result
        };
        self.bounded(untimed).await.unwrap_or(Err(RawCallError::Unavailable(Degraded::Timeout)))
    }
}

/// A connection and the generation it belongs to (one server; 0 for a cluster).
pub(super) struct Connected {
    pub(super) conn: StoreConnection,
    generation: u64,
}

/// A store's connection: to one server, or to a cluster, which routes every command to the
/// primary of its first key's slot. Cheap to clone (both multiplex over shared sockets).
#[derive(Clone)]
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
pub enum StoreConnection {
    /// One server.
    Node(MultiplexedConnection),
    /// A Redis Cluster.
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ConnectionLike for StoreConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        match self {
            StoreConnection::Node(c) => c.req_packed_command(cmd),
            StoreConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        match self {
            StoreConnection::Node(c) => c.req_packed_commands(pipeline, offset, count),
            StoreConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            StoreConnection::Node(c) => c.get_db(),
            StoreConnection::Cluster(c) => c.get_db(),
        }
    }
}

/// Parses a Redis URL; the message never repeats the password.
fn parse_url(url: &str) -> Result<redis::ConnectionInfo, ConfigError> {
    use redis::IntoConnectionInfo;
    url.into_connection_info()
        .map_err(|e| ConfigError::new("redis_url", format!("{} is not a usable Redis URL: {e}", redacted(url))))
}

/// `url` with any password replaced by `***`, for messages.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return format!("{url:?}") };
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let shown = match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
            None => format!("{scheme}://***@{host}"),
        },
        None => format!("{scheme}://{authority}"),
    };
    let slash = if rest.contains('/') { "/" } else { "" };
    format!("{:?}", format!("{shown}{slash}{path}"))
}

/// A reply of integers, read by `read`; anything else is a garbled reply, named as it came.
pub(super) fn read_integers<T>(reply: Value, read: impl FnOnce(&[i64]) -> Option<T>) -> Result<T, RedisError> {
    integers(&reply).and_then(|ints| read(&ints)).ok_or_else(|| bad_reply(&reply))
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
        // Redis is there but cannot serve right now: treat as an outage. A MOVED or ASK that
        // reaches us is a cluster client that ran out of redirections while slots move or a
        // replica is promoted: also passing.
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask
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

/// Sorts a Redis error of the script `name` from the server `redis` into "ask the failure
/// policy" and "tell the caller".
pub(super) fn classify(name: &'static str, redis: &str, e: RedisError) -> StoreError {
    if let Some(refused) = dial::refusal(redis, &e) {
        return StoreError::Refused(refused);
    }
    if unavailable(&e) {
        return StoreError::Unavailable(Degraded::Unavailable);
    }
    match e.kind() {
        ErrorKind::UnexpectedReturnType | ErrorKind::Parse => StoreError::Fatal(Error::UnexpectedReply {
            algorithm: name,
            detail: e.detail().unwrap_or("").to_owned(),
            cause: Arc::new(e),
        }),
        _ => {
            let detail = e.to_string();
            if e.code() == Some("WRONGTYPE") || detail.contains("WRONGTYPE") {
                StoreError::Fatal(Error::WrongType { algorithm: name, detail, cause: Arc::new(e) })
            } else {
                StoreError::Fatal(Error::Server { algorithm: name, detail, cause: Arc::new(e) })
            }
        }
    }
}

/// The error of a script call of `algorithm` that Redis refused with `detail` (an entry of a
/// batch's reply, which carries the text of the error its own call would have met).
pub(super) fn script_error(algorithm: &'static str, detail: String) -> Error {
    let cause = Arc::new(RedisError::from((ErrorKind::Extension, "script error", detail.clone())));
    if detail.contains("WRONGTYPE") {
        Error::WrongType { algorithm, detail, cause }
    } else {
        Error::Server { algorithm, detail, cause }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn server_error(kind: ServerErrorKind, detail: &str) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), "server", detail.to_owned()))
    }

    #[test]
    fn passing_cluster_states_ask_the_failure_policy_and_script_errors_tell_the_caller() {
        for kind in
            [ServerErrorKind::Moved, ServerErrorKind::Ask, ServerErrorKind::TryAgain, ServerErrorKind::ClusterDown]
        {
            let e = classify("gcra", "redis://127.0.0.1:7000/", server_error(kind, "6175 127.0.0.1:7001"));
            assert!(matches!(e, StoreError::Unavailable(Degraded::Unavailable)), "{kind:?}: {e:?}");
        }
        let e = classify("gcra", "redis://127.0.0.1:7000/", server_error(ServerErrorKind::ResponseError, "bad arg"));
        assert!(matches!(e, StoreError::Fatal(Error::Server { algorithm: "gcra", .. })), "{e:?}");
    }
}
