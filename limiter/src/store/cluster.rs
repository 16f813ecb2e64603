//! A Redis Cluster behind [`super::RedisStore`], through `redis`'s own cluster client
//! (`redis::cluster_async`): it learns the slot map from any node, sends each command to the
//! primary of its first key's slot, follows MOVED (a slot now lives elsewhere) and ASK (a slot
//! is migrating, ask the target once), and refreshes the map and reconnects when a primary
//! dies and a replica takes over.
//!
//! Why no script can meet CROSSSLOT: every key of one limit starts with the same stem,
//! `prefix:{user key}:`, and Redis Cluster hashes only what is between the first braces (a
//! hash tag), so all keys of a limit share one slot (`KeySpace::stem`).
//!
//! Scripts: each node has its own script cache, and a primary promoted by a failover has an
//! empty one (Redis replicates a script's effects, not the script). EVALSHA then answers
//! NOSCRIPT on that node and [`super::eval::EvalScript`] sends EVAL to the same slot, which
//! loads it there: NOSCRIPT is handled per node with no extra round trip on the others.
//!
//! The client is built at once (so a bad URL is an error when the store is built) and
//! connects on the first call, single-flight; after that it keeps its own connections.

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionAddr, ConnectionInfo};

use super::dial::host_port;
use super::tls::Tls;
use super::StoreError;
use crate::decision::Degraded;
use crate::error::ConfigError;
use crate::metrics;

/// See the module docs.
pub(crate) struct ClusterLink {
    nodes: Vec<ConnectionInfo>,
    address_map: Vec<((String, u16), (String, u16))>,
    client: ClusterClient,
    conn: tokio::sync::OnceCell<ClusterConnection>,
    /// Set by a call that found no primary; the next success counts a failover seen.
    troubled: std::sync::atomic::AtomicBool,
    /// After a refused handshake, how long not to dial again (`super::refusal`).
    refused: super::refusal::Backoff,
}

impl ClusterLink {
    /// A client for the cluster `nodes` belong to, over TLS with `tls` when given.
    pub(crate) fn new(nodes: Vec<ConnectionInfo>, tls: Option<&Tls>) -> Result<Self, ConfigError> {
        Self::build(nodes, Vec::new(), tls)
    }

    fn build(
        nodes: Vec<ConnectionInfo>,
        address_map: Vec<((String, u16), (String, u16))>,
        tls: Option<&Tls>,
    ) -> Result<Self, ConfigError> {
        let Some(first) = nodes.first() else {
            return Err(ConfigError::new("cluster", "needs at least one node URL, got none".into()));
        };
        let secure = matches!(first.addr(), ConnectionAddr::TcpTls { .. });
        if nodes.iter().any(|n| matches!(n.addr(), ConnectionAddr::TcpTls { .. }) != secure) {
            return Err(ConfigError::new(
                "cluster",
                "mixes redis:// and rediss:// nodes: use one scheme for all".into(),
            ));
        }
        if tls.is_some() && !secure {
            return Err(ConfigError::new("tls", "the cluster's URLs are redis://: TLS settings need rediss://".into()));
        }
        let settings = first.redis_settings();
        let mut builder = ClusterClientBuilder::new(nodes.clone())
            // Our own timeout bounds every call; retries within it ride out a failover or a
            // TRYAGAIN during a slot migration. Few of them: redis 1.8 computes each backoff
            // as factor x base^retry before clamping it, which overflows (a panic in a debug
            // build) once base^retry passes u64, so the retry count must stay small.
            .retries(12)
            .retry_wait_formula(10, 2)
            .min_retry_wait(10)
            .max_retry_wait(200);
        if let Some(user) = settings.username() {
            builder = builder.username(user);
        }
        if let Some(password) = settings.password() {
            builder = builder.password(password);
        }
        if let Some(tls) = tls {
            builder = builder.certs(tls.certificates());
        }
        if !address_map.is_empty() {
            let map = address_map
                .iter()
                .map(|((h, p), (th, tp))| {
                    (
                        redis::cluster::NodeAddress::new(h.as_str(), *p),
                        redis::cluster::NodeAddress::new(th.as_str(), *tp),
                    )
                })
                .collect();
            builder = builder.node_address_map(map);
        }
        let client = builder
            .build()
            .map_err(|e| ConfigError::new("cluster", "the cluster client refused its settings".into()).caused_by(e))?;
        Ok(ClusterLink {
            nodes,
            address_map,
            client,
            conn: tokio::sync::OnceCell::new(),
            troubled: std::sync::atomic::AtomicBool::new(false),
            refused: super::refusal::Backoff::default(),
        })
    }

    /// The same cluster over TLS.
    pub(crate) fn with_tls(self, tls: &Tls) -> Result<Self, ConfigError> {
        Self::build(self.nodes, self.address_map, Some(tls))
    }

    /// The same cluster, every node reached at another address: `(host, port)` as the
    /// cluster names it (CLUSTER SLOTS, MOVED, ASK) to where to dial it. For address
    /// translation (NAT, a proxy per node); the slot map keeps the cluster's own names.
    pub(crate) fn with_address_map(self, map: Vec<((String, u16), (String, u16))>) -> Result<Self, ConfigError> {
        Self::build(self.nodes, map, None)
    }

    /// `redis+cluster://` and the seed nodes, for messages.
    pub(crate) fn describe(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|n| host_port(n.addr())).collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// The cluster connection, made on first use (single-flight).
    pub(crate) async fn connection(&self) -> Result<ClusterConnection, StoreError> {
        let conn = self
            .conn
            .get_or_try_init(|| async {
                if let Some(refused) = self.refused.pending() {
                    return Err(StoreError::Refused(refused));
                }
                let conn = self.client.get_async_connection().await.map_err(|e| {
                    match super::dial::refusal(&self.describe(), &e) {
                        Some(refused) => {
                            self.refused.refused(refused.clone());
                            StoreError::Refused(refused)
                        }
                        None => StoreError::Unavailable(Degraded::Unavailable),
                    }
                })?;
                self.refused.connected();
                metrics::connected(false, false);
                Ok(conn)
            })
            .await?;
        Ok(conn.clone())
    }

    /// A call found no primary for its slot (a failover under way) or timed out: the cluster
    /// client reconnects and refreshes its slot map by itself.
    pub(crate) fn note_unavailable(&self) {
        self.troubled.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A call got through. After trouble, that is the cluster client having reconnected to
    /// the slot's primary, a promoted replica after a failover: counted as both.
    pub(crate) fn note_ok(&self) {
        if self.troubled.swap(false, std::sync::atomic::Ordering::Relaxed) {
            metrics::connected(true, true);
        }
    }
}
