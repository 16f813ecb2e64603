//! The library's enforcement point (`redis_ratelimit::enforce`) as a subject: each request of the
//! run becomes an HTTP request (the arrival's key as the user, its route as the path) decided
//! against the multi-rule scenario's rules ([`crate::multi_rule`]) over the instance's connection.

use std::sync::Arc;

use redis_ratelimit::enforce::{Enforcer, Ruling};
use redis_ratelimit::rules::{Plan, User};
use redis_ratelimit::{BreakerConfig, Clock, FailurePolicy, Quota, RedisStore, Source};

use super::{Answer, DecidedBy};
use crate::multi_rule::{is_pro, route_of, RulesSubject};
use crate::subject::RuleMark;

/// See the module docs.
pub struct RulesCaller {
    enforcer: Enforcer,
    subject: RulesSubject,
}

impl RulesCaller {
    /// An enforcer of the scenario's rules for `quota`, each failing over to `policy`.
    pub fn new(
        subject: RulesSubject,
        store: RedisStore,
        quota: Quota,
        policy: FailurePolicy,
        clock: Arc<dyn Clock>,
        breaker: BreakerConfig,
        key_prefix: Option<&str>,
    ) -> anyhow::Result<RulesCaller> {
        let store = match subject {
            RulesSubject::OneCallModule => store.with_module()?,
            RulesSubject::PerSlot => redis_ratelimit::harness::split_by_tag(store),
            _ => store,
        };
        let mut builder =
            Enforcer::builder(RulesSubject::rule_set(quota, policy)?).redis(store).clock(clock).breaker(breaker);
        if let Some(prefix) = key_prefix {
            builder = builder.key_prefix(prefix);
        }
        Ok(RulesCaller { enforcer: builder.build()?, subject })
    }

    /// Decides one request on `key` (`key-N`).
    pub async fn check(&self, key: &str, cost: u64) -> Answer {
        let n: u32 = key.rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let mut request = http::Request::builder()
            .uri(format!("/r/{}", route_of(n)))
            .extension(User(key.to_owned()))
            .body(())
            .expect("a request from a valid path");
        // What an authentication layer would know of the user.
        if is_pro(n) {
            request.extensions_mut().insert(Plan("pro".into()));
        }
        let failed = |error: String| Answer {
            allowed: false,
            cost,
            source: Source::Store,
            retry_after_ms: 0,
            decided_by: DecidedBy::Unknown,
            error: Some(error),
            rules: Vec::new(),
        };
        let d = match self.enforcer.check(&request).await {
            Ok(Ruling::Decided(d)) => d,
            Ok(other) => return failed(format!("the rules did not decide: {other:?}")),
            Err(e) => return failed(e.to_string()),
        };
        // Every rule was decided the same way (all by Redis, or all by the failure policy).
        let source = d.rules.first().map_or(Source::Store, |r| r.decision.source);
        let decided_by = match self.subject {
            // One script call: one reading of Redis's clock for every rule.
            RulesSubject::OneCall | RulesSubject::OneCallModule => {
                DecidedBy::Server(d.rules.first().map_or(0, |r| r.decision.decided_at_ms))
            }
            // Several calls: the request was decided over their span.
            RulesSubject::PerSlot => DecidedBy::Unknown,
        };
        Answer {
            allowed: d.allowed,
            cost,
            source,
            retry_after_ms: d.retry_after().as_millis() as u64,
            decided_by,
            error: None,
            rules: d.rules.iter().map(|r| RuleMark { allowed: r.decision.allowed, consumed: r.consumed }).collect(),
        }
    }
}
