//! Operations on the state a request counts against under one rule, besides deciding it: a
//! support team unblocking a customer, a login rule that counts only failures giving back the
//! attempts that signed in. The request names the identity as a checked request would (its
//! client IP, verified user or API key, headers, plan), so the state is exactly the one its
//! checks count against, under the quota of its plan's tier; reading that state is one of them.
//! As for a [`crate::Limiter`], no failure policy can stand in: with Redis unreachable each is
//! [`Error::Unavailable`].

use std::time::Duration;

use http::Request;

use super::Enforcer;
use crate::clock::TimeSource;
use crate::decision::Decision;
use crate::error::Error;
use crate::health::Guarded;
use crate::quota::{Algorithm, Quota};
use crate::rules::{Identity, OnMissingKey, Reading};
use crate::scripts;
use crate::store::Store;

/// The state one rule keeps for one request's identity.
struct Target {
    rule: String,
    algorithm: Algorithm,
    quota: Quota,
    stem: String,
    clock: TimeSource,
    /// The key of the identity's block (`Shared::block_key`: under the rule's own quota, so it
    /// holds whatever the identity's tier).
    block: String,
    blockable: bool,
}

impl Enforcer {
    /// Forgets the state `req` counts against under the rule named `rule`, and its block, as if
    /// its identity had never been seen (the rule's windows within one period of this
    /// instance's clock, as [`crate::Limiter::reset`]). Errors name what is missing: no such
    /// rule, or a request without the identity the rule counts by.
    pub async fn reset<B>(&self, rule: &str, req: &Request<B>) -> Result<(), Error> {
        let target = self.target(rule, req)?;
        let shared = &*self.shared;
        let now = shared.clock.now_ms();
        let redis = match &shared.store {
            Store::Local(local) => {
                local.forget(&target.stem);
                local.block(&target.block, None);
                return Ok(());
            }
            Store::Redis(redis) => redis,
        };
        let mut keys = scripts::state_keys(target.algorithm, &target.quota, &target.stem, now);
        keys.push(target.block);
        match shared.health.guard(&*shared.clock, now, redis, || redis.reset(keys)).await? {
            Guarded::Answered(_) => Ok(()),
            Guarded::Unavailable { why, .. } => Err(Error::Unavailable { operation: "the reset", why }),
        }
    }

    /// What a request like `req` would be answered by the rule named `rule` now, without
    /// consuming anything (a peek, as [`crate::Limiter::state`]): the quota of its plan's tier,
    /// what remains of it and when it resets. A peek asks for no units, so it is admitted
    /// unless a block stands, which it reports as a refusal until the block's end. For a
    /// support team reading a customer's state before acting on it. Errors as
    /// [`Enforcer::reset`]'s.
    pub async fn state<B>(&self, rule: &str, req: &Request<B>) -> Result<Decision, Error> {
        let target = self.target(rule, req)?;
        let shared = &*self.shared;
        let capacity = target.quota.capacity(target.algorithm);
        let block = target.blockable.then_some(target.block.as_str());
        let now = shared.clock.now_ms();
        let redis = match &shared.store {
            Store::Local(local) => {
                let outcome = match block {
                    None => local.apply(target.algorithm, &target.quota, &target.stem, now, 0),
                    Some(block) => local.apply_blockable(block, target.algorithm, &target.quota, &target.stem, now, 0),
                };
                return Ok(Decision::from_store(outcome, capacity, now));
            }
            Store::Redis(redis) => redis,
        };
        let request = scripts::Request {
            algorithm: target.algorithm,
            quota: &target.quota,
            stem: &target.stem,
            now_ms: (target.clock == TimeSource::Client).then_some(now),
            cost: 0,
        };
        match shared.health.guard(&*shared.clock, now, redis, || redis.evaluate(request, block)).await? {
            Guarded::Answered((outcome, decided_at_ms)) => Ok(Decision::from_store(outcome, capacity, decided_at_ms)),
            Guarded::Unavailable { why, .. } => Err(Error::Unavailable { operation: "the state read", why }),
        }
    }

    /// Gives `units` back to the state `req` counts against under the rule named `rule`, as
    /// [`crate::Limiter::refund`] does: never beyond the quota, newest first; `false` when it
    /// was at its full quota. Errors as [`Enforcer::reset`]'s.
    pub async fn refund<B>(&self, rule: &str, req: &Request<B>, units: u64) -> Result<bool, Error> {
        let target = self.target(rule, req)?;
        let shared = &*self.shared;
        let units = units.min(target.quota.capacity(target.algorithm));
        let now = shared.clock.now_ms();
        let redis = match &shared.store {
            Store::Local(local) => return Ok(local.refund(target.algorithm, &target.quota, &target.stem, now, units)),
            Store::Redis(redis) => redis,
        };
        let request = scripts::Request {
            algorithm: target.algorithm,
            quota: &target.quota,
            stem: &target.stem,
            now_ms: (target.clock == TimeSource::Client).then_some(now),
            cost: units,
        };
        match shared.health.guard(&*shared.clock, now, redis, || redis.refund(request)).await? {
            Guarded::Answered(given) => Ok(given),
            Guarded::Unavailable { why, .. } => Err(Error::Unavailable { operation: "the refund", why }),
        }
    }

    /// Blocks the identity `req` counts as under the rule named `rule` for `duration`, as
    /// [`crate::Limiter::block`] does: its requests are refused by that rule until then, under
    /// every tier; [`Duration::ZERO`] lifts the block. The rule must be blockable
    /// ([`crate::rules::Rule::blockable`], `blockable = true` in a rules file), or this is an
    /// [`Error::Config`] naming `blockable`. Errors otherwise as [`Enforcer::reset`]'s.
    pub async fn block<B>(&self, rule: &str, req: &Request<B>, duration: Duration) -> Result<(), Error> {
        let target = self.target(rule, req)?;
        if !target.blockable {
            return Err(Error::config(
                "blockable",
                format!("rule {:?} reads no blocks, so a block would be ignored: make it blockable", target.rule),
            ));
        }
        let duration_ms = crate::duration::block_ms(duration)?;
        let shared = &*self.shared;
        let now = shared.clock.now_ms();
        let redis = match &shared.store {
            Store::Local(local) => {
                local.block(&target.block, crate::algo::block::ends(now, duration_ms));
                return Ok(());
            }
            Store::Redis(redis) => redis,
        };
        let client_now = (target.clock == TimeSource::Client).then_some(now);
        match shared
            .health
            .guard(&*shared.clock, now, redis, || redis.block(&target.block, client_now, duration_ms))
            .await?
        {
            Guarded::Answered(_) => Ok(()),
            Guarded::Unavailable { why, .. } => Err(Error::Unavailable { operation: "the block", why }),
        }
    }

    /// Where rule `name` keeps `req`'s state: its identity read as [`Enforcer::check`] reads it.
    fn target<B>(&self, name: &str, req: &Request<B>) -> Result<Target, Error> {
        let rules = self.rules();
        let rule = rules.rule(name).ok_or_else(|| Error::UnknownRule(name.to_owned()))?;
        let ip = rules.client_ip().resolve(req);
        let reading = Reading::of(req, ip, rules.identifying_headers()).map_err(|repeated| {
            Error::InvalidKey(format!(
                "the header {} arrives {} times; it must arrive once",
                repeated.header, repeated.count
            ))
        })?;
        let identity = match (Identity::of(rule.key_parts(), &reading), rule.missing_key(), ip) {
            (Ok(identity), _, _) => identity,
            (Err(_), OnMissingKey::FallbackToIp, Some(ip)) => Identity::of_ip(ip),
            (Err(part), _, _) => {
                return Err(Error::InvalidKey(format!("the request has no {} for the rule {name}", part.spec())))
            }
        };
        self.shared.keys.check(&identity.text())?;
        let quota = rule.quota_for(reading.plan);
        let stem = self.shared.stem(rule, &quota, &identity);
        let block = self.shared.block_key(rule, &identity);
        Ok(Target {
            rule: name.to_owned(),
            algorithm: rule.algorithm(),
            quota,
            stem,
            clock: rule.clock(),
            block,
            blockable: rule.is_blockable(),
        })
    }
}
