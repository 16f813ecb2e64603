//! An example gateway: an axum server whose routes are limited by the rules of a TOML file,
//! against a Redis shared by every gateway process.
//!
//! ```text
//! cargo run --release -p redis-ratelimit --example gateway -- --config limiter/examples/gateway.toml \
//!     --redis-url redis://127.0.0.1:6379/ --listen 127.0.0.1:8080
//! ```
//!
//! The routes answer 200 with a short body when the rules admit the request; the rules
//! layer answers 429, 403 or 400 otherwise (see the README). The file is polled and reloaded
//! when it changes; a bad file is reported on stderr and the rules in force stay.
//!
//! Built with `--features metrics`, `--metrics-listen 127.0.0.1:9898` serves the limiter's
//! metrics (`redis_ratelimit::metrics`) as a Prometheus exposition. Each change of Redis's
//! health (the breaker opening, with why: down, slow, a refused password or certificate; and
//! closing again) is one line on stderr, `redis: ...`.
//!
//! It authenticates before it limits. With `--api-keys FILE` (one `SECRET NAME` per line, `#`
//! comments; `gateway-keys.txt` beside this file is a demo), a request's `x-api-key` is looked
//! up there: a known key becomes the request's verified `redis_ratelimit::rules::ApiKey` and
//! `User` (its holder's name), which `api-key` and `user` key parts count by and the allow
//! list trusts; an unknown key is refused with 401, and a key header sent twice with 400. A
//! request without the header goes on anonymous. Why it matters: the allow list lets a request
//! skip every rule, so it must only ever see identities this layer checked, never a value the
//! client merely sent.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clap::Parser;
use redis_ratelimit::enforce::Enforcer;
use redis_ratelimit::http::{problem, RulesLayer};
use redis_ratelimit::rules::{ApiKey, PeerAddr, RuleSet, User};
use redis_ratelimit::{BreakerConfig, RedisStore};

/// A gateway limiting its routes by the rules of a file, state in Redis.
#[derive(Parser, Debug)]
#[command(name = "gateway")]
struct Args {
    /// The rules file (TOML; see redis_ratelimit::rules).
    #[arg(long)]
    config: PathBuf,
    /// The Redis every gateway process shares.
    #[arg(long, default_value = "redis://127.0.0.1:6379/")]
    redis_url: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// How often the rules file is checked for changes (`1s`, `500ms`: a whole number and its
    /// unit, as in the rules file).
    #[arg(long, default_value = "1s", value_parser = redis_ratelimit::duration::parse_ms)]
    reload_interval: u64,
    /// How long one Redis call may take before the rules' failure policies answer (`250ms`).
    #[arg(long, default_value = "250ms", value_parser = redis_ratelimit::duration::parse_ms)]
    redis_timeout: u64,
    /// Prefix of every Redis key.
    #[arg(long, default_value = "gateway")]
    key_prefix: String,
    /// A file holding the secret the RateLimit fields' partition keys (`pk`) are keyed with,
    /// the same for every gateway of the deployment (at least 16 bytes; surrounding whitespace
    /// is ignored). Without it the fields carry no `pk`.
    #[arg(long)]
    pk_secret_file: Option<PathBuf>,
    /// The API keys the gateway accepts: one `SECRET NAME` per line (`#` starts a comment).
    /// Without it nothing is authenticated: no request has an API key or a user.
    #[arg(long)]
    api_keys: Option<PathBuf>,
    /// Serve the limiter's metrics as a Prometheus exposition on this address (built with
    /// `--features metrics`).
    #[cfg(feature = "metrics")]
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    #[cfg(feature = "metrics")]
    if let Some(addr) = args.metrics_listen {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()
            .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        redis_ratelimit::metrics::describe();
        eprintln!("metrics on http://{addr}/metrics");
    }
    let keys = match &args.api_keys {
        Some(path) => Some(ApiKeys::load(path)?),
        None => None,
    };
    let text = std::fs::read_to_string(&args.config)
        .map_err(|e| format!("cannot read the rules file {}: {e}", args.config.display()))?;
    let rules = RuleSet::from_toml(&text).map_err(|e| format!("rules file {}: {e}", args.config.display()))?;
    let count = rules.rules().len();
    let store = RedisStore::from_url(&args.redis_url)
        .and_then(|s| s.with_timeout(Duration::from_millis(args.redis_timeout)))
        .map_err(|e| e.to_string())?;
    let mut builder = Enforcer::builder(rules)
        .redis(store)
        .key_prefix(&args.key_prefix)
        .breaker(BreakerConfig::new(3, 500))
        // One line per change of Redis's health (never one per request), with the cause.
        .on_store_event(|event| eprintln!("redis: {event}"));
    if let Some(path) = &args.pk_secret_file {
        let secret = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the partition-key secret {}: {e}", path.display()))?;
        builder = builder.partition_key_secret(secret.trim());
    }
    let enforcer = builder.build().map_err(|e| e.to_string())?;
    let config = args.config.display().to_string();
    let _watch =
        enforcer.watch(&args.config, Duration::from_millis(args.reload_interval), move |outcome| match outcome {
            Ok(rules) => eprintln!("rules reloaded from {config}: {} rules", rules.rules().len()),
            Err(e) => eprintln!("reload rejected, the rules in force stay: {e}"),
        });

    let app = Router::new()
        .route("/api/hello", get(|| async { "hello\n" }))
        .route("/api/items/{id}", get(|Path(id): Path<String>| async move { format!("item {id}\n") }))
        .route("/login", post(|| async { "logged in\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .layer(RulesLayer::new(enforcer))
        // Outermost, so it runs first: the rules read what it puts in the extensions.
        .layer(middleware::from_fn_with_state(Arc::new(keys), identify));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("gateway listening on http://{local} ({count} rules from {})", args.config.display());
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await.map_err(|e| e.to_string())
}

/// The API keys of `--api-keys`: each secret and its holder's name.
struct ApiKeys(HashMap<String, String>);

impl ApiKeys {
    fn load(path: &std::path::Path) -> Result<ApiKeys, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the API keys file {}: {e}", path.display()))?;
        let mut keys = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            match line.split_whitespace().collect::<Vec<_>>()[..] {
                [secret, name] => {
                    keys.insert(secret.to_owned(), name.to_owned());
                }
                _ => {
                    return Err(format!(
                        "API keys file {}, line {}: expected `SECRET NAME`, got {} words",
                        path.display(),
                        i + 1,
                        line.split_whitespace().count()
                    ))
                }
            }
        }
        Ok(ApiKeys(keys))
    }
}

/// A problem response (RFC 9457) from the authentication layer.
fn refused(status: StatusCode, title: &str, detail: &str) -> Response {
    let body = problem::body("about:blank", title, status.as_u16(), detail, &[]);
    (status, [(header::CONTENT_TYPE, problem::CONTENT_TYPE)], body).into_response()
}

/// The peer address for the client-IP logic, and the verified API key and its holder.
async fn identify(
    State(keys): State<Arc<Option<ApiKeys>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    req.extensions_mut().insert(PeerAddr(peer.ip()));
    if let Some(keys) = keys.as_ref() {
        let mut sent = req.headers().get_all("x-api-key").iter();
        let holder =
            match (sent.next(), sent.next()) {
                (None, _) => None,
                (Some(_), Some(_)) => return refused(
                    StatusCode::BAD_REQUEST,
                    "Repeated identifying header",
                    "The header x-api-key arrives more than once; it says who the client is, so it must arrive once.",
                ),
                (Some(value), None) => match value.to_str().ok().and_then(|k| keys.0.get(k)) {
                    Some(holder) => Some(holder.clone()),
                    None => {
                        return refused(
                            StatusCode::UNAUTHORIZED,
                            "Unauthorized",
                            "The API key is not one this gateway knows.",
                        )
                    }
                },
            };
        if let Some(holder) = holder {
            // The holder's name, never the secret: it goes into Redis keys and partition keys.
            req.extensions_mut().insert(ApiKey(holder.clone()));
            req.extensions_mut().insert(User(holder));
        }
    }
    next.run(req).await
}
