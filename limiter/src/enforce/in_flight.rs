//! The in-flight rules of a [`RuleSet`](crate::rules::RuleSet) ([`InFlightRule`]): one
//! [`ConcurrencyLimiter`] per rule, on the enforcer's store, clock, key space and breaker
//! settings, rebuilt when the rules are replaced (a rule kept with the same name, limit, lease
//! and policy keeps its limiter, and in process its holders). [`Enforcer::acquire`] takes a
//! permit of every in-flight rule a request matches, all or nothing.

use std::future::Future;
use std::sync::{Arc, RwLock};

use http::Request;

use super::{identity_for, read, Enforcer, Listed, Read};
use crate::breaker::BreakerConfig;
use crate::clock::{Clock, TimeSource};
use crate::concurrency::{Acquired, ConcurrencyLimiter, Permit};
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::rules::{InFlightRule, RuleSet};
use crate::store::RedisStore;

/// What [`Enforcer::acquire`] answers.
#[derive(Debug)]
#[non_exhaustive]
#[must_use = "held permits are held until dropped: keep them while the request's work runs"]
pub enum Acquisition {
    /// No in-flight rule applies (none matches, a rule skips a request without its key, or the
    /// allow list names it).
    Unlimited,
    /// A permit of every matching rule, held until dropped (or its lease ends): keep them
    /// while the request's work runs.
    Held(Vec<Permit>),
    /// Every permit of `rule` is held (or Redis cannot be asked and the rule fails closed):
    /// nothing is held of any rule. Answer the decision (429 with its `Retry-After`, or 503
    /// when [`Decision::source`] is fail-closed).
    Full {
        /// The rule.
        rule: String,
        /// Its decision.
        decision: Decision,
    },
    /// An in-flight rule counts by a part the request does not carry, and says to reject it.
    MissingKey {
        /// The rule.
        rule: String,
        /// The key part missing.
        part: String,
    },
    /// A header that says who the client is arrived more than once.
    RepeatedHeader {
        /// The header's name.
        header: String,
        /// How many times it arrived.
        count: usize,
    },
    /// The deny list names the request.
    Denylisted,
}

/// How the enforcer's in-flight limiters are built: its own store settings.
pub(super) struct Options {
    pub(super) redis: Option<Arc<RedisStore>>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) breaker: BreakerConfig,
    pub(super) prefix: String,
    pub(super) max_key_len: usize,
    pub(super) max_local_keys: usize,
}

/// The limiters of the rules in force; see the module docs.
pub(super) struct InFlightLimiters {
    options: Options,
    limiters: RwLock<Arc<Vec<(InFlightRule, ConcurrencyLimiter)>>>,
}

impl InFlightLimiters {
    /// The limiters of `rules`' in-flight rules.
    pub(super) fn new(options: Options, rules: &RuleSet) -> Result<Self, ConfigError> {
        let set = InFlightLimiters { options, limiters: RwLock::new(Arc::new(Vec::new())) };
        set.replace(rules)?;
        Ok(set)
    }

    /// Puts `rules`' in-flight rules in force, keeping the limiter of every rule kept as it
    /// was. On an error nothing changes.
    pub(super) fn replace(&self, rules: &RuleSet) -> Result<(), ConfigError> {
        let old = self.current();
        let mut next = Vec::with_capacity(rules.in_flight_rules().len());
        for rule in rules.in_flight_rules() {
            // What the limiter is built from; a new matcher or key keeps it.
            let same = |r: &InFlightRule| {
                (r.name(), r.limit(), r.lease(), r.policy()) == (rule.name(), rule.limit(), rule.lease(), rule.policy())
            };
            let kept = old.iter().find(|(r, _)| same(r)).map(|(_, limiter)| limiter.clone());
            let limiter = match kept {
                Some(limiter) => limiter,
                None => self.build(rule)?,
            };
            next.push((rule.clone(), limiter));
        }
        *self.limiters.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        Ok(())
    }

    fn current(&self) -> Arc<Vec<(InFlightRule, ConcurrencyLimiter)>> {
        self.limiters.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn build(&self, rule: &InFlightRule) -> Result<ConcurrencyLimiter, ConfigError> {
        let o = &self.options;
        let builder = ConcurrencyLimiter::builder(rule.limit(), rule.lease())
            .name(rule.name())
            .clock(o.clock.clone())
            // A permit's lease ends on Redis's clock, whatever the instances' clocks say.
            .time_source(TimeSource::Server)
            .failure_policy(rule.policy())
            .breaker(o.breaker)
            .key_prefix(&o.prefix)
            .max_key_len(o.max_key_len)
            .max_local_keys(o.max_local_keys);
        match &o.redis {
            Some(store) => builder.redis(store.clone()).build(),
            None => builder.build(),
        }
    }
}

impl Enforcer {
    /// Takes a permit of every in-flight rule ([`InFlightRule`]) `req` matches, all or
    /// nothing: when one rule's permits are all held, those taken of the others go back and
    /// the answer is [`Acquisition::Full`]. Everything read from the request is read now; the
    /// future owns what it needs. The lists apply as they do to the rate rules: the deny list
    /// refuses, the allow list admits without a permit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redis_ratelimit::enforce::{Acquisition, Enforcer};
    /// use redis_ratelimit::rules::{InFlightRule, RuleSet};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let rules = RuleSet::builder().in_flight(InFlightRule::new("one-at-a-time", 1, Duration::from_secs(30))).build()?;
    /// let enforcer = Enforcer::builder(rules).build()?;
    /// let req = http::Request::new(());
    /// let Acquisition::Held(permits) = enforcer.acquire(&req).await? else { unreachable!() };
    /// assert!(matches!(enforcer.acquire(&req).await?, Acquisition::Full { .. }));
    /// drop(permits); // the work ended
    /// assert!(matches!(enforcer.acquire(&req).await?, Acquisition::Held(_)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire<B>(&self, req: &Request<B>) -> impl Future<Output = Result<Acquisition, Error>> + Send + 'static {
        let rules = self.rules();
        acquire(self.claims(req, &read(&rules, req)))
    }

    /// The limiter and key of every in-flight rule `req` matches, as `read` found it, or the
    /// answer without them.
    pub(super) fn claims<B>(&self, req: &Request<B>, read: &Read<'_>) -> Result<Claims, Acquisition> {
        let limiters = self.shared.in_flight.current();
        if limiters.is_empty() {
            return Err(Acquisition::Unlimited);
        }
        let (reading, ip) = match read {
            Ok((reading, ip)) => (reading, *ip),
            Err(Listed::Repeated { header, count }) => {
                return Err(Acquisition::RepeatedHeader { header: header.clone(), count: *count })
            }
            Err(Listed::Denied) => return Err(Acquisition::Denylisted),
            Err(Listed::Allowed) => return Err(Acquisition::Unlimited),
        };
        let mut claims = Vec::new();
        for (rule, limiter) in limiters.iter().filter(|(r, _)| r.matcher().matches(req)) {
            match identity_for(rule.key_parts(), rule.missing_key(), reading, ip) {
                Ok(Some(identity)) => claims.push((rule.name().to_owned(), limiter.clone(), identity.text())),
                Ok(None) => {}
                Err(part) => return Err(Acquisition::MissingKey { rule: rule.name().to_owned(), part }),
            }
        }
        Ok(claims)
    }
}

/// Takes the permits of `claims`, all or nothing (or answers without them).
pub(super) async fn acquire(claims: Result<Claims, Acquisition>) -> Result<Acquisition, Error> {
    let claims = match claims {
        Ok(claims) => claims,
        Err(answer) => return Ok(answer),
    };
    let mut held = Vec::with_capacity(claims.len());
    for (name, limiter, key) in claims {
        match limiter.acquire(&key).await? {
            Acquired::Held(permit) => held.push(permit),
            // Those held so far go back as `held` is dropped.
            Acquired::Full(decision) => return Ok(Acquisition::Full { rule: name, decision }),
        }
    }
    Ok(if held.is_empty() { Acquisition::Unlimited } else { Acquisition::Held(held) })
}

/// Each matched rule's name, limiter and key.
pub(super) type Claims = Vec<(String, ConcurrencyLimiter, String)>;
