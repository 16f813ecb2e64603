//! An example gateway: an axum server whose routes are limited by the rules of a TOML file,
//! against a Redis shared by every gateway process.
//!
//! ```text
//! cargo run --release -p redis-ratelimit --features config --example gateway -- --config limiter/examples/gateway.toml \
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
//!
//! With `--admin-token-file FILE` (the file holds the token, so it never shows in a process
//! list), `POST /admin/state` reads, and `/admin/reset`, `/admin/refund` and `/admin/block` act
//! on, the state one identity counts against under one rule, for a support team: `Authorization: Bearer TOKEN` and a JSON
//! body naming the rule and the identity as a request would carry it,
//! `{"rule": "login", "ip": "192.0.2.7"}`, `{"rule": "per-user", "user": "alice", "plan":
//! "pro", "units": 1}` or `{"rule": "login", "ip": "192.0.2.7", "duration": "15m"}` (also
//! `api_key` and `headers`, an object of header values; a block's `duration` of `"0ms"` lifts
//! it, and only a rule with `blockable = true` can be blocked). They answer 200 with what was
//! done (for a state, the quota's `limit`, what `remaining` of it, `reset_after_ms` until all
//! of it is back, and `blocked_ms`, how long a block still stands, 0 without one), 401 without the token, 400 naming what is wrong with the body, and 503 when Redis
//! could not be asked (nothing was done). The admin routes sit outside the rules and the
//! API-key layer: the token is their own credential.

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
    /// Decide with the Redis module's commands instead of the scripts
    /// (`RedisStore::with_module`): the Redis at --redis-url must have loaded it
    /// (`redis-server --loadmodule libredis_ratelimit_module.so`), which is checked on connect.
    #[arg(long)]
    module: bool,
    /// A file holding the secret the RateLimit fields' partition keys (`pk`) are keyed with,
    /// the same for every gateway of the deployment (at least 16 bytes; surrounding whitespace
    /// is ignored). Without it the fields carry no `pk`.
    #[arg(long)]
    pk_secret_file: Option<PathBuf>,
    /// The API keys the gateway accepts: one `SECRET NAME` per line (`#` starts a comment).
    /// Without it nothing is authenticated: no request has an API key or a user.
    #[arg(long)]
    api_keys: Option<PathBuf>,
    /// A file holding the bearer token of the admin routes (at least 16 bytes; surrounding
    /// whitespace is ignored). Without it there are no admin routes.
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
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
        .and_then(|s| if args.module { s.with_module() } else { Ok(s) })
        .map_err(|e| e.to_string())?;
    let mut builder = Enforcer::builder(rules)
        .redis(store)
        .key_prefix(&args.key_prefix)
        .breaker(BreakerConfig::new(3, Duration::from_millis(500)))
        // One line per change of Redis's health (never one per request), with the cause.
        .on_store_event(|event| eprintln!("redis: {event}"));
    if let Some(path) = &args.pk_secret_file {
        let secret = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the partition-key secret {}: {e}", path.display()))?;
        builder = builder.partition_key_secret(secret.trim());
    }
    let enforcer = builder.build().map_err(|e| e.to_string())?;
    let admin = match &args.admin_token_file {
        Some(path) => Some(AdminToken::load(path)?),
        None => None,
    };
    let config = args.config.display().to_string();
    let _watch =
        enforcer.watch(&args.config, Duration::from_millis(args.reload_interval), move |outcome| match outcome {
            Ok(rules) => eprintln!("rules reloaded from {config}: {} rules", rules.rules().len()),
            Err(e) => eprintln!("reload rejected, the rules in force stay: {e}"),
        });

    let mut app = Router::new()
        .route("/api/hello", get(|| async { "hello\n" }))
        .route("/api/items/{id}", get(|Path(id): Path<String>| async move { format!("item {id}\n") }))
        .route("/login", post(|| async { "logged in\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .layer(RulesLayer::new(enforcer.clone()))
        // Outermost, so it runs first: the rules read what it puts in the extensions.
        .layer(middleware::from_fn_with_state(Arc::new(keys), identify));
    if let Some(token) = admin {
        let admin = Arc::new(Admin { token, enforcer });
        app = app.merge(
            Router::new()
                .route("/admin/state", post(|s, h, b| admin_call(s, h, b, Op::State)))
                .route("/admin/reset", post(|s, h, b| admin_call(s, h, b, Op::Reset)))
                .route("/admin/refund", post(|s, h, b| admin_call(s, h, b, Op::Refund)))
                .route("/admin/block", post(|s, h, b| admin_call(s, h, b, Op::Block)))
                .with_state(admin),
        );
    }
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

/// The admin routes' bearer token, from `--admin-token-file`.
struct AdminToken(Vec<u8>);

impl AdminToken {
    fn load(path: &std::path::Path) -> Result<AdminToken, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the admin token file {}: {e}", path.display()))?;
        let token = text.trim();
        if token.len() < 16 {
            return Err(format!(
                "the admin token in {} is {} bytes; it must be at least 16",
                path.display(),
                token.len()
            ));
        }
        Ok(AdminToken(token.as_bytes().to_vec()))
    }

    /// Whether `header` is `Bearer TOKEN`, compared in time that does not depend on where the
    /// first wrong byte is.
    fn accepts(&self, header: Option<&header::HeaderValue>) -> bool {
        let Some(sent) = header.and_then(|h| h.as_bytes().strip_prefix(b"Bearer ")) else { return false };
        sent.len() == self.0.len() && sent.iter().zip(&self.0).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

struct Admin {
    token: AdminToken,
    enforcer: Enforcer,
}

#[derive(Clone, Copy)]
enum Op {
    State,
    Reset,
    Refund,
    Block,
}

/// `POST /admin/state`, `/admin/reset`, `/admin/refund` and `/admin/block`: see the module
/// docs.
async fn admin_call(
    State(admin): State<Arc<Admin>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
    op: Op,
) -> Response {
    if !admin.token.accepts(headers.get(header::AUTHORIZATION)) {
        return refused(StatusCode::UNAUTHORIZED, "Unauthorized", "The admin routes need their own bearer token.");
    }
    let AdminRequest { rule, req, units, duration_ms } = match admin_request(&body, op) {
        Ok(parsed) => parsed,
        Err(detail) => return refused(StatusCode::BAD_REQUEST, "Bad admin request", &detail),
    };
    let done = match op {
        Op::State => admin.enforcer.state(&rule, &req).await.map(|d| {
            serde_json::json!({
                "rule": rule,
                "limit": d.capacity,
                "remaining": d.remaining,
                "reset_after_ms": d.reset_after.as_millis(),
                // A peek asks for no units: only a block refuses it, until the block's end.
                "blocked_ms": if d.allowed { 0 } else { d.retry_after.as_millis() },
            })
        }),
        Op::Reset => admin.enforcer.reset(&rule, &req).await.map(|()| serde_json::json!({"rule": rule, "reset": true})),
        Op::Refund => admin
            .enforcer
            .refund(&rule, &req, units)
            .await
            .map(|given| serde_json::json!({"rule": rule, "refunded": given})),
        Op::Block => admin
            .enforcer
            .block(&rule, &req, Duration::from_millis(duration_ms))
            .await
            .map(|()| serde_json::json!({"rule": rule, "blocked_ms": duration_ms})),
    };
    match done {
        Ok(answer) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response()
        }
        Err(e @ redis_ratelimit::Error::Unavailable { .. }) => {
            refused(StatusCode::SERVICE_UNAVAILABLE, "Redis unavailable", &e.to_string())
        }
        Err(e) => refused(StatusCode::BAD_REQUEST, "Bad admin request", &e.to_string()),
    }
}

/// What an admin call's body names.
struct AdminRequest {
    rule: String,
    /// A request carrying the identity the body names, as the authentication layer would have
    /// put it there.
    req: axum::http::Request<()>,
    /// A refund's units (1 unless given).
    units: u64,
    /// How long a block lasts (0 lifts it).
    duration_ms: u64,
}

fn admin_request(body: &[u8], op: Op) -> Result<AdminRequest, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let fields = value.as_object().ok_or("the body must be a JSON object")?;
    let text = |name: &str| -> Result<Option<String>, String> {
        match fields.get(name) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("{name} must be a string, got {other}")),
        }
    };
    for name in fields.keys() {
        let own = match op {
            Op::State | Op::Reset => None,
            Op::Refund => Some("units"),
            Op::Block => Some("duration"),
        };
        if !["rule", "ip", "user", "api_key", "plan", "headers"].contains(&name.as_str()) && own != Some(name) {
            return Err(format!("unknown field {name:?}"));
        }
    }
    let rule = text("rule")?.ok_or("rule is missing: name the rule whose state to read or change")?;
    let mut req = axum::http::Request::builder();
    if let Some(ip) = text("ip")? {
        let ip: std::net::IpAddr = ip.parse().map_err(|_| format!("ip {ip:?} is not an IP address"))?;
        req = req.extension(PeerAddr(ip));
    }
    if let Some(user) = text("user")? {
        req = req.extension(User(user));
    }
    if let Some(key) = text("api_key")? {
        req = req.extension(ApiKey(key));
    }
    if let Some(plan) = text("plan")? {
        req = req.extension(redis_ratelimit::rules::Plan(plan));
    }
    match fields.get("headers") {
        None => {}
        Some(serde_json::Value::Object(headers)) => {
            for (name, value) in headers {
                let value = value.as_str().ok_or_else(|| format!("headers.{name} must be a string"))?;
                req = req.header(name.as_str(), value);
            }
        }
        Some(other) => return Err(format!("headers must be an object of header values, got {other}")),
    }
    let units = match fields.get("units") {
        None => 1,
        Some(n) => n.as_u64().ok_or_else(|| format!("units must be a whole number of at least 0, got {n}"))?,
    };
    let duration_ms = match (op, text("duration")?) {
        (Op::Block, None) => {
            return Err("duration is missing: say how long the block lasts (\"15m\"; \"0ms\" lifts it)".into())
        }
        (_, None) => 0,
        (_, Some(d)) => redis_ratelimit::duration::parse_ms(&d).map_err(|e| format!("duration: {e}"))?,
    };
    let req = req.body(()).map_err(|e| format!("headers: {e}"))?;
    Ok(AdminRequest { rule, req, units, duration_ms })
}
