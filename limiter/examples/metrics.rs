//! A limiter whose metrics Prometheus can scrape.
//!
//! ```text
//! cargo run -p redis-ratelimit --features metrics --example metrics -- redis://127.0.0.1:6379/ 127.0.0.1:9898
//! ```
//!
//! Each line read on standard input is one request for that key (`user:42`); the decision is
//! printed, and `http://127.0.0.1:9898/metrics` serves the Prometheus text exposition of
//! every metric the limiter records (`redis_ratelimit::metrics`). Stop Redis meanwhile and watch
//! `limiter_decisions_total{source="fail-open"}` and the breaker's gauge move.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use redis_ratelimit::{Algorithm, FailurePolicy, Limiter, Quota, RedisStore};

/// Installs the Prometheus recorder globally and serves its exposition on `addr` (any path).
/// Must be called from within a tokio runtime; once per process.
pub fn serve_metrics(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    PrometheusBuilder::new().with_http_listener(addr).install()?;
    redis_ratelimit::metrics::describe();
    Ok(())
}

/// The example's limiter: GCRA, 5 per second with a burst of 5, failing open behind the breaker.
pub fn limiter(redis_url: &str) -> Result<Limiter, redis_ratelimit::ConfigError> {
    Limiter::builder(Algorithm::Gcra, Quota::per_second(5))
        .redis(RedisStore::from_url(redis_url)?.with_timeout(Duration::from_millis(200))?)
        .failure_policy(FailurePolicy::FailOpen)
        .build()
}

/// One request for `key`, as a line to print.
pub async fn request(limiter: &Limiter, key: &str) -> String {
    match limiter.check(key).await {
        Ok(d) if d.allowed => format!("{key}: allowed ({} left, by {})", d.remaining, d.source.name()),
        Ok(d) => format!("{key}: denied, retry after {:?} (by {})", d.retry_after, d.source.name()),
        Err(e) => format!("{key}: error: {e}"),
    }
}

#[allow(dead_code)] // a test includes this file for the functions above and never calls main
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let addr: SocketAddr = args.next().unwrap_or_else(|| "127.0.0.1:9898".into()).parse()?;
    let limiter = limiter(&url)?;
    serve_metrics(addr)?;
    eprintln!("metrics on http://{addr}/metrics; one key per line on stdin");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    while let Some(line) = lines.next_line().await? {
        let key = line.trim();
        if !key.is_empty() {
            println!("{}", request(&limiter, key).await);
        }
    }
    Ok(())
}
