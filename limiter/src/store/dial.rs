//! How a one-server store opens a connection: over any byte stream a [`Connector`] gives
//! (the harness's simulated sockets and proxies), with `redis`'s own client (TCP or TLS from
//! a URL), or by asking Sentinel which server is the primary now.
//!
//! Sentinel is asked again on every reconnection, so after a failover the first call that
//! finds the old primary gone reconnects to the new one by itself.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, ErrorKind, RedisConnectionInfo, RedisError};

use super::connector::Connector;
use super::tls::Tls;
use crate::error::{ConfigError, Error};

/// See the module docs.
pub(crate) enum Dial {
    /// Plain RESP over whatever stream the connector opens.
    Stream { connector: Arc<dyn Connector>, info: RedisConnectionInfo },
    /// `redis`'s client for a URL: TCP, or TLS for `rediss://`.
    Client { info: Box<ConnectionInfo>, client: Box<redis::Client> },
    /// The current primary of `service`, as the sentinels report it.
    Sentinel(Box<SentinelDial>),
}

/// The sentinels, the service they watch, and the primary last connected to.
pub(crate) struct SentinelDial {
    sentinels: Vec<ConnectionAddr>,
    service: String,
    node: RedisConnectionInfo,
    client: tokio::sync::Mutex<SentinelClient>,
    /// The primary the last connection reached, to notice a failover.
    last_primary: std::sync::Mutex<Option<String>>,
}

/// Our own timeout bounds every call; the connection's own would race it.
fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new().set_response_timeout(None).set_connection_timeout(None)
}

/// `host:port` of an address, never with credentials.
pub(crate) fn host_port(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}"),
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => format!("{other:?}"),
    }
}

/// `redis://` or `rediss://` plus `host:port`: how messages name a server.
pub(crate) fn describe_addr(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::TcpTls { .. } => format!("rediss://{}", host_port(addr)),
        _ => format!("redis://{}", host_port(addr)),
    }
}

impl Dial {
    /// A client for `info` (TCP or TLS), with `tls`'s certificates when given.
    pub(crate) fn client(info: ConnectionInfo, tls: Option<&Tls>) -> Result<Dial, ConfigError> {
        let shown = describe_addr(info.addr());
        let client = match tls {
            Some(tls) => redis::Client::build_with_tls(info.clone(), tls.certificates()),
            None => redis::Client::open(info.clone()),
        }
        .map_err(|e| ConfigError::new("redis_url", format!("{shown}: {e}")))?;
        Ok(Dial::Client { info: Box::new(info), client: Box::new(client) })
    }

    /// The primary of `service` as `sentinels` report it, spoken to with `node`'s user,
    /// password and database, over TLS when `tls` is given.
    pub(crate) fn sentinel(
        sentinels: Vec<ConnectionAddr>,
        service: &str,
        node: RedisConnectionInfo,
        tls: Option<Tls>,
    ) -> Result<Dial, ConfigError> {
        let client = sentinel_client(&sentinels, service, &node, tls.as_ref())?;
        // The settings are kept (not the TLS ones: `with_tls` passes them again).
        Ok(Dial::Sentinel(Box::new(SentinelDial {
            sentinels,
            service: service.to_owned(),
            node,
            client: tokio::sync::Mutex::new(client),
            last_primary: std::sync::Mutex::new(None),
        })))
    }

    /// The same dial with `tls` (a `rediss://` URL, or sentinel-managed servers).
    pub(crate) fn with_tls(self, tls: &Tls) -> Result<Dial, ConfigError> {
        match self {
            Dial::Client { info, .. } => {
                if !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
                    return Err(ConfigError::new(
                        "tls",
                        format!("{} is not a rediss:// URL: TLS settings need one", describe_addr(info.addr())),
                    ));
                }
                Dial::client(*info, Some(tls))
            }
            Dial::Sentinel(s) => Dial::sentinel(s.sentinels, &s.service, s.node, Some(tls.clone())),
            Dial::Stream { connector, .. } => Err(ConfigError::new(
                "tls",
                format!(
                    "{} is not a rediss:// URL: TLS settings need one (a connector brings its own stream)",
                    connector.describe()
                ),
            )),
        }
    }

    /// Where it connects, for messages (no credentials).
    pub(crate) fn describe(&self) -> String {
        match self {
            Dial::Stream { connector, .. } => connector.describe(),
            Dial::Client { info, .. } => describe_addr(info.addr()),
            Dial::Sentinel(s) => {
                let sentinels: Vec<String> = s.sentinels.iter().map(host_port).collect();
                format!("redis+sentinel://{}/{}", sentinels.join(","), s.service)
            }
        }
    }

    /// Opens a connection. With it comes whether it reached another primary than the last one
    /// (a failover Sentinel reported).
    pub(crate) async fn connect(&self) -> Result<(MultiplexedConnection, bool), RedisError> {
        match self {
            Dial::Stream { connector, info } => {
                let stream = connector.connect().await?;
                let (conn, driver) = MultiplexedConnection::new_with_config(info, stream, config()).await?;
                tokio::spawn(driver);
                Ok((conn, false))
            }
            Dial::Client { client, .. } => {
                Ok((client.get_multiplexed_async_connection_with_config(&config()).await?, false))
            }
            Dial::Sentinel(s) => {
                let client = s.client.lock().await.async_get_client().await?;
                let primary = host_port(client.get_connection_info().addr());
                let conn = client.get_multiplexed_async_connection_with_config(&config()).await?;
                let mut last = s.last_primary.lock().unwrap_or_else(|p| p.into_inner());
                let moved = last.as_ref().is_some_and(|l| *l != primary);
                *last = Some(primary);
                Ok((conn, moved))
            }
        }
    }
}

fn sentinel_client(
    sentinels: &[ConnectionAddr],
    service: &str,
    node: &RedisConnectionInfo,
    tls: Option<&Tls>,
) -> Result<SentinelClient, ConfigError> {
    let bad =
        |e: RedisError| ConfigError::new("sentinel", format!("service {service:?} cannot be asked for")).caused_by(e);
    let mut builder = SentinelClientBuilder::new(sentinels.to_vec(), service, SentinelServerType::Master)
        .map_err(bad)?
        .set_client_to_redis_db(node.db());
    if let Some(user) = node.username() {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = node.password() {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(tls) = tls {
        builder = builder
            .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
            .set_client_to_redis_certificates(tls.certificates());
    }
    builder.build().map_err(bad)
}

/// Whether a connection error is this client being refused (credentials, permissions, TLS)
/// rather than the server being out of reach: the error to return, naming `redis`.
pub(crate) fn refusal(redis: &str, e: &RedisError) -> Option<Error> {
    if let Some(tls) = super::tls::is_tls_refusal(e) {
        let detail = "the TLS handshake failed".to_owned();
        return Some(Error::Refused { redis: redis.to_owned(), detail, cause: Arc::new(tls) });
    }
    let refused = e.kind() == ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
        || e.kind() == ErrorKind::Server(redis::ServerErrorKind::NoPerm);
    let detail = "its credentials or permissions were refused".to_owned();
    refused.then(|| Error::Refused { redis: redis.to_owned(), detail, cause: Arc::new(e.clone()) })
}
