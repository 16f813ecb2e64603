//! The application side of an adopter: one limiter per plan, built from the library's public
//! API alone.

use redis_ratelimit::{Algorithm, FailurePolicy, Limiter, Quota, RedisStore};

/// The login limiter: 5 attempts a minute per account, on Redis when given a URL, failing
/// closed when Redis cannot be asked (a login limit that fails open is no limit).
pub fn login_limiter(redis_url: Option<&str>) -> Result<Limiter, redis_ratelimit::ConfigError> {
    let builder =
        Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(5)).failure_policy(FailurePolicy::FailClosed);
    match redis_url {
        Some(url) => builder.redis(RedisStore::from_url(url)?).build(),
        None => builder.build(),
    }
}
