//! Serving: the gRPC listener (TLS and mutual TLS when asked), the standard health service,
//! reloading the configuration when its files change, and a graceful shutdown.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;

use crate::adapter::{self, Engine};
use crate::config::{self, ConfigError, LoadOptions};
use crate::grpc;
use crate::metrics;
use crate::service::{Loaded, Service};

/// The health service's name for the rate limit service (the empty name means the server).
pub const RLS_SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
/// The health service's name for Redis: `NOT_SERVING` while the breaker is open (the service
/// itself still answers, by each limit's failure policy).
pub const STORE_SERVICE: &str = "redis_ratelimit.server.Store";

/// The gRPC listener's TLS.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// With a CA (PEM), clients must present a certificate it signed (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// How the listener serves.
#[derive(Debug, Clone)]
pub struct Listen {
    /// TLS, if any.
    pub tls: Option<Tls>,
    /// Largest request accepted, in bytes.
    pub max_message_bytes: usize,
    /// Serve the floor RPC too (`--bench-floor`).
    pub floor: bool,
    /// How long the health service says NOT_SERVING before the listener closes, so proxies
    /// stop sending first.
    pub drain: Duration,
    /// How long calls and connections still open after the listener closed may take to
    /// finish before they are closed (a peer that never reads must not hold the exit up).
    pub grace: Duration,
}

/// Loads and compiles the configuration `paths` name.
pub fn load(paths: &[PathBuf], options: LoadOptions) -> Result<Loaded, ConfigError> {
    let config = config::load(paths, options)?;
    let rules = adapter::compile(&config)?;
    Ok(Loaded { config, rules })
}

/// Reloads the configuration every `interval` when its files changed: a good one is put in
/// force for the next request (requests deciding finish under theirs), a bad one is logged
/// once and counted, and the one in force stays. Runs until dropped.
pub fn watch(
    service: Arc<Service>,
    paths: Vec<PathBuf>,
    options: LoadOptions,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = fingerprint(&paths);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now = fingerprint(&paths);
            if now == seen {
                continue;
            }
            seen = now;
            match load(&paths, options) {
                Ok(loaded) => {
                    let domains = loaded.config.domains.len();
                    for w in &loaded.config.warnings {
                        tracing::warn!(warning = %w, "configuration");
                    }
                    service.replace(loaded);
                    tracing::info!(domains, "configuration reloaded");
                }
                Err(e) => {
                    metrics::config_refused();
                    tracing::error!(error = %e, "configuration refused; the one in force stays");
                }
            }
        }
    })
}

/// What the configuration's files hold now (names and contents), to tell a change.
fn fingerprint(paths: &[PathBuf]) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    match config::files(paths) {
        Ok(files) => files
            .into_iter()
            .map(|f| {
                let text = std::fs::read(&f).ok();
                (f, text)
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// What hears the engine's health reports: a log line and a gauge per change, and the
/// receiver the health service follows.
pub fn store_health() -> (impl Fn(adapter::StoreHealth) + Send + Sync + 'static, tokio::sync::watch::Receiver<bool>) {
    let (tx, rx) = tokio::sync::watch::channel(true);
    let on_health = move |h: adapter::StoreHealth| {
        metrics::store_available(h.available);
        if h.available {
            tracing::info!(store = %h.message, "redis");
        } else {
            tracing::warn!(store = %h.message, "redis");
        }
        let _ = tx.send(h.available);
    };
    (on_health, rx)
}

/// Serves `service` on `listener` until `shutdown` completes, then says NOT_SERVING, waits
/// `listen.drain`, stops accepting and lets the calls in flight finish.
pub async fn serve(
    service: Arc<Service>,
    listener: TcpListener,
    listen: Listen,
    mut store_health: tokio::sync::watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("", ServingStatus::Serving).await;
    reporter.set_service_status(RLS_SERVICE, ServingStatus::Serving).await;
    let status = |up: bool| if up { ServingStatus::Serving } else { ServingStatus::NotServing };
    let up = *store_health.borrow();
    reporter.set_service_status(STORE_SERVICE, status(up)).await;
    let store_reporter = reporter.clone();
    let store_watch = tokio::spawn(async move {
        while store_health.changed().await.is_ok() {
            let up = *store_health.borrow();
            store_reporter.set_service_status(STORE_SERVICE, status(up)).await;
        }
    });

    let mut builder = Server::builder();
    if let Some(tls) = &listen.tls {
        builder = builder.tls_config(tls_config(tls)?)?;
    }
    let mut router =
        builder.add_service(health).add_service(grpc::rls_server(service.clone(), listen.max_message_bytes));
    if listen.floor {
        router = router.add_service(grpc::Floor::new(listen.max_message_bytes));
    }
    let (drain, grace) = (listen.drain, listen.grace);
    let (fired, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = fired.send(());
        tracing::info!(drain_ms = drain.as_millis() as u64, "shutting down: NOT_SERVING, then closing the listener");
        reporter.set_service_status("", ServingStatus::NotServing).await;
        reporter.set_service_status(RLS_SERVICE, ServingStatus::NotServing).await;
        tokio::time::sleep(drain).await;
    };
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let serving = router.serve_with_incoming_shutdown(incoming, signal);
    let forced = async move {
        match fired_rx.await {
            Ok(()) => tokio::time::sleep(drain + grace).await,
            Err(_) => std::future::pending().await,
        }
    };
    let served = tokio::select! {
        served = serving => served,
        () = forced => {
            tracing::warn!(grace_ms = grace.as_millis() as u64, "connections still open after the grace period: closed");
            Ok(())
        }
    };
    store_watch.abort();
    served.map_err(|e| anyhow::anyhow!("the gRPC server failed: {e}"))
}

fn tls_config(tls: &Tls) -> anyhow::Result<ServerTlsConfig> {
    let read = |p: &PathBuf, what: &str| {
        std::fs::read(p).map_err(|e| anyhow::anyhow!("cannot read the {what} {}: {e}", p.display()))
    };
    let mut config = ServerTlsConfig::new()
        .identity(Identity::from_pem(read(&tls.cert, "TLS certificate")?, read(&tls.key, "TLS key")?));
    if let Some(ca) = &tls.client_ca {
        config = config.client_ca_root(Certificate::from_pem(read(ca, "client CA")?));
    }
    Ok(config)
}

/// An engine over `store` (None: in process), reporting Redis's health to `on_health`.
pub fn engine(
    store: Option<adapter::StoreSettings>,
    settings: &adapter::EngineSettings,
    on_health: impl Fn(adapter::StoreHealth) + Send + Sync + 'static,
) -> anyhow::Result<Engine> {
    let store = store.map(|s| adapter::store(&s)).transpose().map_err(|e| anyhow::anyhow!("redis: {e}"))?;
    if let Some(s) = &store {
        tracing::info!(redis = %adapter::describe(s), "store");
    }
    Engine::new(store, None, settings, on_health).map_err(|e| anyhow::anyhow!("{e}"))
}
