//! The command line: every flag also reads an environment variable (`RLS_...`), which is how a
//! container is usually configured, and credentials come from files or the environment, never
//! from a flag a process list would show.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::adapter::{self, EngineSettings, StoreSettings, Topology};
use crate::config::LoadOptions;
use crate::server::{self, Listen, Tls};
use crate::service::{self, Options, Service};

fn duration(text: &str) -> Result<Duration, String> {
    adapter::parse_duration(text)
}

/// How a request's descriptors are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChargeArg {
    /// All-or-nothing: one atomic decision, nothing charged when any enforced descriptor is
    /// over its limit.
    AllOrNothing,
    /// Each descriptor on its own, as envoyproxy/ratelimit does: a refused request is still
    /// charged by the descriptors that admitted it.
    Everything,
}

/// What an unknown domain gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnknownDomainArg {
    /// NOT_FOUND, naming the domain.
    Refuse,
    /// OK with no limit, as envoyproxy/ratelimit answers.
    Allow,
}

/// Where a descriptor's own `limit` is honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RequestLimitsArg {
    /// Under entries with `allow_request_limit: true`.
    Configured,
    /// Everywhere, as envoyproxy/ratelimit does.
    Anywhere,
}

/// Which response headers to add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HeadersArg {
    /// RateLimit-Policy and RateLimit (draft 11), Retry-After on a refusal.
    Draft11,
    /// X-RateLimit-Limit, -Remaining, -Reset.
    Legacy,
    /// None.
    Off,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Text.
    Text,
    /// One JSON object per line.
    Json,
}

/// A rate limit service for Envoy and any proxy that speaks Envoy's rate limit service
/// protocol (v3, gRPC), keeping its counts in Redis.
#[derive(Parser, Debug, Clone)]
#[command(name = "redis-ratelimit-server", version)]
pub struct Args {
    /// A configuration file (envoyproxy/ratelimit's YAML), or a directory whose *.yaml and
    /// *.yml files are read; repeat for several. Reloaded when they change.
    #[arg(long, env = "RLS_CONFIG", value_delimiter = ',', required = true)]
    pub config: Vec<PathBuf>,
    /// Check the configuration, print what it holds and exit.
    #[arg(long)]
    pub check: bool,
    /// Several files may hold one domain (their entries are merged).
    #[arg(long, env = "RLS_MERGE_DOMAINS")]
    pub merge_domains: bool,
    /// How often the configuration's files are checked for changes.
    #[arg(long, env = "RLS_RELOAD_INTERVAL", default_value = "1s", value_parser = duration)]
    pub reload_interval: Duration,
    /// The gRPC listener.
    #[arg(long, env = "RLS_LISTEN", default_value = "0.0.0.0:8081")]
    pub listen: SocketAddr,
    /// Serve the metrics as a Prometheus exposition on this address (`/metrics`).
    #[arg(long, env = "RLS_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// The gRPC listener's certificate chain (PEM): TLS.
    #[arg(long, env = "RLS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The gRPC listener's private key (PEM).
    #[arg(long, env = "RLS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Clients must present a certificate this CA signed (mutual TLS).
    #[arg(long, env = "RLS_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// One Redis: `redis://host:port/db` or `rediss://` for TLS. A URL with a password belongs
    /// in the environment or in --redis-url-file, not on the command line.
    #[arg(long, env = "RLS_REDIS_URL", conflicts_with_all = ["redis_url_file", "redis_cluster", "redis_sentinel"])]
    pub redis_url: Option<String>,
    /// A file holding the Redis URL (so its password never shows in a process list).
    #[arg(long, env = "RLS_REDIS_URL_FILE", conflicts_with_all = ["redis_cluster", "redis_sentinel"])]
    pub redis_url_file: Option<PathBuf>,
    /// A Redis Cluster: any of its nodes' URLs, comma-separated (the first one's user and
    /// password are used for every node).
    #[arg(long, env = "RLS_REDIS_CLUSTER", value_delimiter = ',', conflicts_with = "redis_sentinel")]
    pub redis_cluster: Vec<String>,
    /// Sentinels' URLs, comma-separated: the primary they name for --redis-sentinel-service.
    #[arg(long, env = "RLS_REDIS_SENTINEL", value_delimiter = ',', requires = "redis_sentinel_service")]
    pub redis_sentinel: Vec<String>,
    /// The service (master) name the Sentinels know.
    #[arg(long, env = "RLS_REDIS_SENTINEL_SERVICE")]
    pub redis_sentinel_service: Option<String>,
    /// A file holding `redis://user:password@/db` for the servers behind Sentinel.
    #[arg(long, env = "RLS_REDIS_NODE_URL_FILE")]
    pub redis_node_url_file: Option<PathBuf>,
    /// A CA to trust for `rediss://` (else the system's roots).
    #[arg(long, env = "RLS_REDIS_TLS_CA")]
    pub redis_tls_ca: Option<PathBuf>,
    /// A client certificate for `rediss://` (PEM).
    #[arg(long, env = "RLS_REDIS_TLS_CERT", requires = "redis_tls_key")]
    pub redis_tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, env = "RLS_REDIS_TLS_KEY", requires = "redis_tls_cert")]
    pub redis_tls_key: Option<PathBuf>,
    /// How long one Redis call may take before the limits' failure policies answer.
    #[arg(long, env = "RLS_REDIS_TIMEOUT", default_value = "250ms", value_parser = duration)]
    pub redis_timeout: Duration,
    /// Decide with the Redis module's commands (the server must have loaded it).
    #[arg(long, env = "RLS_REDIS_MODULE")]
    pub redis_module: bool,
    /// Prefix of every Redis key.
    #[arg(long, env = "RLS_KEY_PREFIX", default_value = "ratelimit")]
    pub key_prefix: String,
    /// Failed Redis calls in a row that open the circuit breaker.
    #[arg(long, env = "RLS_BREAKER_FAILURES", default_value_t = 3)]
    pub breaker_failures: u32,
    /// How long the breaker stays open before one call probes Redis again.
    #[arg(long, env = "RLS_BREAKER_OPEN", default_value = "500ms", value_parser = duration)]
    pub breaker_open: Duration,

    /// How a request's descriptors are charged.
    #[arg(long, env = "RLS_CHARGE", value_enum, default_value = "all-or-nothing")]
    pub charge: ChargeArg,
    /// What a request for a domain the configuration does not name gets.
    #[arg(long, env = "RLS_UNKNOWN_DOMAIN", value_enum, default_value = "refuse")]
    pub unknown_domain: UnknownDomainArg,
    /// Where a descriptor's own `limit` is honoured.
    #[arg(long, env = "RLS_REQUEST_LIMITS", value_enum, default_value = "configured")]
    pub request_limits: RequestLimitsArg,
    /// Which response headers to add through response_headers_to_add.
    #[arg(long, env = "RLS_RESPONSE_HEADERS", value_enum, default_value = "draft11")]
    pub response_headers: HeadersArg,
    /// Every limit in shadow mode: decided and counted, never refusing.
    #[arg(long, env = "RLS_SHADOW_MODE")]
    pub shadow_mode: bool,
    /// Share of a limit at which an admitted request counts as near it.
    #[arg(long, env = "RLS_NEAR_LIMIT_RATIO", default_value_t = 0.8)]
    pub near_limit_ratio: f64,
    /// How much earlier than its lease a quota grant's valid_until ends: room for a proxy's
    /// clock to run behind Redis's.
    #[arg(long, env = "RLS_GRANT_CLOCK_ALLOWANCE", default_value = "25ms", value_parser = duration)]
    pub grant_clock_allowance: Duration,
    /// A file holding the secret the RateLimit fields' partition keys (`pk`) are keyed with
    /// (at least 16 bytes), the same on every instance.
    #[arg(long, env = "RLS_PARTITION_KEY_SECRET_FILE")]
    pub partition_key_secret_file: Option<PathBuf>,

    /// Most descriptors in one request.
    #[arg(long, env = "RLS_MAX_DESCRIPTORS", default_value_t = 64)]
    pub max_descriptors: usize,
    /// Most entries in one descriptor.
    #[arg(long, env = "RLS_MAX_ENTRIES", default_value_t = 32)]
    pub max_entries: usize,
    /// Longest key or value of an entry, in bytes.
    #[arg(long, env = "RLS_MAX_ENTRY_BYTES", default_value_t = 4096)]
    pub max_entry_bytes: usize,
    /// Longest identity of a descriptor (its entries, escaped), in bytes.
    #[arg(long, env = "RLS_MAX_KEY_BYTES", default_value_t = 2048)]
    pub max_key_bytes: usize,
    /// Largest request accepted, in bytes.
    #[arg(long, env = "RLS_MAX_MESSAGE_BYTES", default_value_t = 1 << 20)]
    pub max_message_bytes: usize,
    /// How long the health service says NOT_SERVING on shutdown before the listener closes.
    #[arg(long, env = "RLS_DRAIN", default_value = "0s", value_parser = duration)]
    pub drain: Duration,
    /// How long calls and connections still open when the listener closes may take to finish.
    #[arg(long, env = "RLS_SHUTDOWN_GRACE", default_value = "10s", value_parser = duration)]
    pub shutdown_grace: Duration,
    /// Log format.
    #[arg(long, env = "RLS_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter (`info`, `debug`, `redis_ratelimit_server=debug`).
    #[arg(long, env = "RLS_LOG", default_value = "info")]
    pub log: String,
    /// Also serve `redis_ratelimit.server.Floor/ShouldRateLimit`, which answers OK without
    /// deciding: the reference the benchmark measures gRPC by.
    #[arg(long, hide = true)]
    pub bench_floor: bool,
}

fn read_secret(path: &PathBuf, what: &str) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read the {what} {}: {e}", path.display()))?;
    Ok(text.trim().to_owned())
}

impl Args {
    /// The store these flags name (None: no Redis was named; the service then counts in
    /// process, for one instance and for trying it out).
    pub fn store(&self) -> anyhow::Result<Option<StoreSettings>> {
        let topology = if let Some(url) = &self.redis_url {
            Topology::Single(url.clone())
        } else if let Some(file) = &self.redis_url_file {
            Topology::Single(read_secret(file, "Redis URL file")?)
        } else if !self.redis_cluster.is_empty() {
            Topology::Cluster(self.redis_cluster.clone())
        } else if !self.redis_sentinel.is_empty() {
            let node_url =
                self.redis_node_url_file.as_ref().map(|f| read_secret(f, "Redis node URL file")).transpose()?;
            Topology::Sentinel {
                sentinels: self.redis_sentinel.clone(),
                service: self.redis_sentinel_service.clone().unwrap_or_default(),
                node_url,
            }
        } else {
            return Ok(None);
        };
        Ok(Some(StoreSettings {
            topology,
            tls_ca: self.redis_tls_ca.clone(),
            tls_client: self.redis_tls_cert.clone().zip(self.redis_tls_key.clone()),
            timeout: self.redis_timeout,
            module: self.redis_module,
        }))
    }

    /// The engine's settings.
    pub fn engine_settings(&self) -> anyhow::Result<EngineSettings> {
        let secret =
            self.partition_key_secret_file.as_ref().map(|f| read_secret(f, "partition-key secret")).transpose()?;
        Ok(EngineSettings {
            key_prefix: self.key_prefix.clone(),
            max_key_bytes: self.max_key_bytes,
            breaker_failures: self.breaker_failures,
            breaker_open: self.breaker_open,
            near_limit_ratio: self.near_limit_ratio,
            partition_key_secret: secret.map(String::into_bytes),
        })
    }

    /// The service's options.
    pub fn options(&self) -> Options {
        Options {
            charge: match self.charge {
                ChargeArg::AllOrNothing => service::Charge::AllOrNothing,
                ChargeArg::Everything => service::Charge::Everything,
            },
            unknown_domain: match self.unknown_domain {
                UnknownDomainArg::Refuse => service::UnknownDomain::Refuse,
                UnknownDomainArg::Allow => service::UnknownDomain::Allow,
            },
            request_limits: match self.request_limits {
                RequestLimitsArg::Configured => service::RequestLimits::Configured,
                RequestLimitsArg::Anywhere => service::RequestLimits::Anywhere,
            },
            headers: match self.response_headers {
                HeadersArg::Draft11 => service::Headers::Draft11,
                HeadersArg::Legacy => service::Headers::Legacy,
                HeadersArg::Off => service::Headers::Off,
            },
            shadow: self.shadow_mode,
            max_descriptors: self.max_descriptors,
            max_entries: self.max_entries,
            max_entry_bytes: self.max_entry_bytes,
            max_hits: u64::from(u32::MAX),
            grant_clock_allowance: self.grant_clock_allowance,
            near_limit_ratio: self.near_limit_ratio,
        }
    }

    /// The listener's settings.
    pub fn listen(&self) -> Listen {
        Listen {
            tls: self.tls_cert.clone().zip(self.tls_key.clone()).map(|(cert, key)| Tls {
                cert,
                key,
                client_ca: self.tls_client_ca.clone(),
            }),
            max_message_bytes: self.max_message_bytes,
            floor: self.bench_floor,
            drain: self.drain,
            grace: self.shutdown_grace,
        }
    }

    fn load_options(&self) -> LoadOptions {
        LoadOptions { merge_domains: self.merge_domains }
    }
}

/// Runs the service these arguments describe until SIGTERM or SIGINT (or `stop`).
pub async fn run(args: Args, stop: impl std::future::Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    let loaded =
        server::load(&args.config, args.load_options()).map_err(|e| anyhow::anyhow!("configuration refused: {e}"))?;
    for w in &loaded.config.warnings {
        tracing::warn!(warning = %w, "configuration");
    }
    if args.check {
        for (name, domain) in &loaded.config.domains {
            let limits = loaded.config.limits().iter().filter(|n| n.stat.starts_with(&format!("{name}."))).count();
            println!("domain {name}: {limits} limits, {} top-level entries", domain.root.iter().count());
        }
        println!("configuration ok");
        return Ok(());
    }
    if let Some(addr) = args.metrics_listen {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()
            .map_err(|e| anyhow::anyhow!("cannot serve metrics on {addr}: {e}"))?;
        crate::metrics::describe();
        redis_ratelimit_describe();
        tracing::info!(%addr, "metrics on /metrics");
    }
    let (on_health, store_health) = server::store_health();
    let store = args.store()?;
    if store.is_none() {
        tracing::warn!(
            "no Redis named (--redis-url, --redis-cluster, --redis-sentinel): counting in this process only"
        );
    }
    let engine = server::engine(store, &args.engine_settings()?, on_health)?;
    let service = Arc::new(Service::new(loaded, engine, args.options()));
    let _watch = server::watch(service.clone(), args.config.clone(), args.load_options(), args.reload_interval);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    let local = listener.local_addr()?;
    tracing::info!(addr = %local, tls = args.tls_cert.is_some(), mutual_tls = args.tls_client_ca.is_some(), "listening for gRPC");
    // The line tests and scripts wait for.
    eprintln!("redis-ratelimit-server listening on {local}");
    server::serve(service, listener, args.listen(), store_health, stop).await
}

/// The library's own metrics (store call latency, breaker), described once.
fn redis_ratelimit_describe() {
    adapter::describe_library_metrics();
}

/// SIGTERM or SIGINT.
pub async fn signalled() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Sets up the log lines.
pub fn init_logs(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).map_err(|e| anyhow::anyhow!("--log {filter:?}: {e}"))?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}
