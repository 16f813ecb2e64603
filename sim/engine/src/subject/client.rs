//! Subjects whose calling library makes several round trips, so no subject file can describe
//! them: each is Rust code here, driving Redis command by command as its library does.
//!
//! - `naive`: a fixed window done as GET, compare, SET from the client. Between the GET and
//!   the SET any other instance can do the same, and the last SET wins: concurrent instances
//!   over-admit.
//! - `incr-expire`: the HLD card's counter (`docs/ORIGINS.md`) sent as two commands, INCR and
//!   then, on the first hit, EXPIRE. A client that dies between the two leaves a counter with
//!   no TTL: once it reaches the limit, that key is limited forever.

use std::sync::Arc;

use redis::Value;
use redis_ratelimit::harness::algo::fixed_window::{self, WindowState};
use redis_ratelimit::harness::RawCallError;
use redis_ratelimit::{Clock, Quota, RedisStore, Source};

use super::{Answer, DecidedBy};
use crate::promise::Promise;

/// Which client-side subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientSubject {
    /// GET, decide, SET.
    NaiveGetSet,
    /// INCR, then EXPIRE on the first hit.
    IncrThenExpire,
}

impl ClientSubject {
    /// Both, in the order tables show them.
    pub const ALL: [ClientSubject; 2] = [ClientSubject::NaiveGetSet, ClientSubject::IncrThenExpire];

    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            ClientSubject::NaiveGetSet => "naive",
            ClientSubject::IncrThenExpire => "incr-expire",
        }
    }

    /// What it means to be.
    pub const fn promise(self) -> Promise {
        match self {
            ClientSubject::NaiveGetSet => Promise::FixedWindow { first_hit: false },
            ClientSubject::IncrThenExpire => Promise::FixedWindow { first_hit: true },
        }
    }

    /// Whether it decides by the instance's clock (the naive counter names its window).
    pub const fn reads_client_clock(self) -> bool {
        matches!(self, ClientSubject::NaiveGetSet)
    }
}

/// See the module docs.
pub struct ClientCaller {
    kind: ClientSubject,
    store: RedisStore,
    quota: Quota,
    clock: Arc<dyn Clock>,
    key_prefix: String,
}

impl ClientCaller {
    /// A caller of `kind` through `store`.
    pub fn new(
        kind: ClientSubject,
        store: RedisStore,
        quota: Quota,
        clock: Arc<dyn Clock>,
        key_prefix: String,
    ) -> Self {
        ClientCaller { kind, store, quota, clock, key_prefix }
    }

    /// Asks about one request (cost 1: these subjects count requests).
    pub async fn check(&self, key: &str, cost: u64) -> Answer {
        let result = match self.kind {
            ClientSubject::NaiveGetSet => self.naive(key, cost).await,
            ClientSubject::IncrThenExpire => self.incr_expire(key, cost).await,
        };
        // Their libraries let errors through to the application, which (as ADR-002's
        // caller does) lets the request pass.
        result.unwrap_or_else(|failure| match failure {
            RawCallError::Unavailable(_) => Answer::failed(true, cost, None),
            RawCallError::Refused(e) => Answer::failed(true, cost, Some(e.to_string())),
        })
    }

    async fn naive(&self, key: &str, cost: u64) -> Result<Answer, RawCallError> {
        let q = self.quota;
        let now = self.clock.now_ms();
        let window = now / q.period_ms();
        let redis_key = format!("{}naive:{{{key}}}:{window}", self.key_prefix);
        let get = redis::cmd("GET").arg(&redis_key).clone();
        let reply: Value =
            redis_ratelimit::harness::call_raw(&self.store, |mut conn| async move { get.query_async(&mut conn).await })
                .await?;
        let count = match &reply {
            Value::Nil => 0,
            Value::BulkString(bytes) => {
                std::str::from_utf8(bytes).ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
            }
            _ => 0,
        };
        let mut state = (count > 0).then_some(WindowState { window, count });
        let outcome = fixed_window::step(&q, &mut state, now, cost);
        if outcome.allowed && cost > 0 {
            let to_end = q.period_ms() - now % q.period_ms();
            let set = redis::cmd("SET").arg(&redis_key).arg(count + cost).arg("PX").arg(to_end).clone();
            redis_ratelimit::harness::call_raw(&self.store, |mut conn| async move {
                set.query_async::<Value>(&mut conn).await
            })
            .await?;
        }
        Ok(Answer {
            allowed: outcome.allowed,
            cost,
            source: Source::Store,
            retry_after_ms: outcome.retry_after_ms,
            decided_by: DecidedBy::Client,
            error: None,
            rules: Vec::new(),
        })
    }

    async fn incr_expire(&self, key: &str, cost: u64) -> Result<Answer, RawCallError> {
        let redis_key = format!("{}rl:{{{key}}}", self.key_prefix);
        let incr = redis::cmd("INCRBY").arg(&redis_key).arg(cost).clone();
        let count: i64 =
            redis_ratelimit::harness::call_raw(
                &self.store,
                |mut conn| async move { incr.query_async(&mut conn).await },
            )
            .await?;
        if count == cost as i64 {
            // The first hit of a window starts its clock. Whole seconds, rounded up, as the
            // HLD card's `EXPIRE key ttl` takes them.
            let ttl_s = self.quota.period_ms().div_ceil(1000);
            let expire = redis::cmd("EXPIRE").arg(&redis_key).arg(ttl_s).clone();
            redis_ratelimit::harness::call_raw(&self.store, |mut conn| async move {
                expire.query_async::<Value>(&mut conn).await
            })
            .await?;
        }
        Ok(Answer {
            allowed: count <= self.quota.limit() as i64,
            cost,
            source: Source::Store,
            retry_after_ms: 0,
            decided_by: DecidedBy::Unknown,
            error: None,
            rules: Vec::new(),
        })
    }
}
