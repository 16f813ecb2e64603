//! In-flight limits: the concurrency limiters the engine builds for them, and the permits a
//! request takes and the proxy gives back by their tickets.

use std::collections::HashMap;
use std::sync::Arc;

use redis_ratelimit::{Acquired, BreakerConfig, Clock, ConcurrencyLimiter, PermitTicket, RedisStore};

use super::{answer_of, identity, policy_of, Answer, AnsweredBy, DecideError, Engine, Rules};
use crate::config::InFlight;

/// One configuration entry's in-flight limit: its name (in Redis keys and in its permits'
/// tickets) and the entry's terms.
#[derive(Debug)]
pub struct InFlightRule {
    /// Its name.
    pub name: String,
    /// The entry's limit.
    pub limit: InFlight,
    /// What tells its limiter from another's among those the engine built: the name and the terms.
    id: String,
}

impl InFlightRule {
    pub(super) fn new(name: String, limit: InFlight) -> InFlightRule {
        let id = format!("{name}|{}|{:?}|{:?}", limit.permits, limit.lease, limit.policy);
        InFlightRule { name, limit, id }
    }
}

/// A permit asked for: the answer, and the ticket releasing it when one is held.
#[derive(Debug, Clone)]
pub struct Held {
    /// The answer.
    pub answer: Answer,
    /// `NAME/TICKET`: what the proxy sends back when the request's stream ends. A secret of the
    /// proxy's: it releases the permit.
    pub ticket: Option<String>,
}

/// What the engine builds the limiters of in-flight limits from, and the limiters it built: one
/// per distinct limit (its name, permits, lease and policy), so that a local budget's permits
/// are released where they were lent. Bounded: past [`MAX_IN_FLIGHT_LIMITERS`] (reloads that
/// changed the limits that many times) it starts over, and a permit lent by a forgotten local
/// budget is reclaimed by its lease.
pub(super) struct Permits {
    pub(super) store: Option<Arc<RedisStore>>,
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) key_prefix: String,
    pub(super) max_key_bytes: usize,
    pub(super) breaker: BreakerConfig,
    pub(super) built: std::sync::Mutex<HashMap<String, ConcurrencyLimiter>>,
}

/// Most in-flight limiters an engine keeps.
const MAX_IN_FLIGHT_LIMITERS: usize = 4_096;

impl Permits {
    fn limiter(&self, rule: &InFlightRule) -> Result<ConcurrencyLimiter, DecideError> {
        let f = &rule.limit;
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(limiter) = built.get(&rule.id) {
            return Ok(limiter.clone());
        }
        let mut builder = ConcurrencyLimiter::builder(f.permits, f.lease)
            .name(&rule.name)
            .key_prefix(&self.key_prefix)
            .max_key_len(self.max_key_bytes)
            .breaker(self.breaker)
            .failure_policy(policy_of(f.policy));
        if let Some(store) = &self.store {
            builder = builder.redis(store.clone());
        }
        if let Some(clock) = &self.clock {
            builder = builder.clock(clock.clone());
        }
        let limiter = builder.build().map_err(|e| DecideError::Store(format!("in-flight limit {}: {e}", rule.name)))?;
        if built.len() >= MAX_IN_FLIGHT_LIMITERS {
            built.clear();
        }
        built.insert(rule.id.clone(), limiter.clone());
        Ok(limiter)
    }
}

impl Engine {
    /// Takes one of `rule`'s permits for the descriptor's `entries`: the answer, and the
    /// ticket that releases the permit when one is held (None when refused, or admitted by
    /// fail-open, which holds nothing).
    pub async fn acquire(&self, rule: &InFlightRule, entries: &[(&str, &str)]) -> Result<Held, DecideError> {
        let limiter = self.permits.limiter(rule)?;
        let key = identity(entries).text();
        match limiter.acquire(&key).await.map_err(DecideError::from_library)? {
            Acquired::Held(permit) => {
                let answer = answer_of(permit.decision(), true);
                let ticket = (answer.by == AnsweredBy::Redis || matches!(answer.by, AnsweredBy::LocalBudget(_)))
                    .then(|| format!("{}/{}", rule.name, permit.into_ticket().encode()));
                Ok(Held { answer, ticket })
            }
            Acquired::Full(decision) => Ok(Held { answer: answer_of(&decision, false), ticket: None }),
        }
    }

    /// What an acquire of `rule`'s permits for `entries` would be answered now, taking nothing.
    pub async fn peek(&self, rule: &InFlightRule, entries: &[(&str, &str)]) -> Result<Answer, DecideError> {
        let limiter = self.permits.limiter(rule)?;
        let decision = limiter.state(&identity(entries).text()).await.map_err(DecideError::from_library)?;
        Ok(answer_of(&decision, false))
    }

    /// Releases the permit `ticket` (as [`Engine::acquire`] wrote it) stands for, under the
    /// in-flight limit of `rules` it names: whether it was still held. A ticket that names no
    /// limit in force (the configuration changed since) releases nothing; its lease reclaims it.
    pub async fn release(&self, rules: &Rules, ticket: &str) -> Result<bool, DecideError> {
        let (name, text) = ticket
            .split_once('/')
            .ok_or_else(|| DecideError::InvalidKey("not a permit ticket: it names no limit".into()))?;
        let ticket = PermitTicket::decode(text).map_err(DecideError::from_library)?;
        let Some(rule) = rules.in_flight_named.get(name) else { return Ok(false) };
        let limiter = self.permits.limiter(rule)?;
        limiter.release_ticket(&ticket).await.map_err(DecideError::from_library)
    }
}
