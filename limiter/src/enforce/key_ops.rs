//! Operations on the state a request counts against under one rule, besides deciding it: a
//! support team unblocking a customer, a login rule that counts only failures giving back the
//! attempts that signed in. The request names the identity as a checked request would (its
//! client IP, verified user or API key, headers, plan), so the state is exactly the one its
//! checks count against, under the quota of its plan's tier; reading that state is one of them.
//! As for a [`crate::Limiter`], no failure policy can stand in: with Redis unreachable each is
//! [`Error::Unavailable`].

use std::time::Duration;

use http::Request;

use super::{charge_of, Enforcer};
use crate::charge::Charge;
use crate::decision::Decision;
use crate::error::Error;
use crate::reconcile::Reconciled;
use crate::rules::{Identity, OnMissingKey, Reading};

impl Enforcer {
    /// Forgets the state `req` counts against under the rule named `rule`, and its block, as if
    /// its identity had never been seen (the rule's windows within one period of this
    /// instance's clock, as [`crate::Limiter::reset`]). Errors name what is missing: no such
    /// rule, or a request without the identity the rule counts by.
    pub async fn reset<B>(&self, rule: &str, req: &Request<B>) -> Result<(), Error> {
        self.shared.gate.reset(&self.target(rule, req)?).await
    }

    /// What a request like `req` would be answered by the rule named `rule` now, without
    /// consuming anything (a peek, as [`crate::Limiter::state`]): the quota of its plan's tier,
    /// what remains of it and when it resets. A peek asks for no units, so it is admitted
    /// unless a block stands, which it reports as a refusal until the block's end. For a
    /// support team reading a customer's state before acting on it. Errors as
    /// [`Enforcer::reset`]'s.
    pub async fn state<B>(&self, rule: &str, req: &Request<B>) -> Result<Decision, Error> {
        let peek = Charge { cost: 0, ..self.target(rule, req)? };
        self.shared.gate.peek(&peek).await
    }

    /// Gives `units` back to the state `req` counts against under the rule named `rule`, as
    /// [`crate::Limiter::refund`] does: never beyond the quota, newest first; `false` when it
    /// was at its full quota. Errors as [`Enforcer::reset`]'s.
    pub async fn refund<B>(&self, rule: &str, req: &Request<B>, units: u64) -> Result<bool, Error> {
        self.shared.gate.refund(&self.target(rule, req)?, units).await
    }

    /// Settles a request like `req` that reserved `reserved` units under the rule named `rule`
    /// once its real cost, `actual`, is known, as [`crate::Limiter::reconcile`] does: the
    /// surplus goes back, the excess is charged whether it fits or not, up to the capacity of
    /// its plan's tier for one request and one capacity owed. Input and output tokens are two
    /// rules of one request, each reconciled with its own count. Errors as
    /// [`Enforcer::reset`]'s.
    pub async fn reconcile<B>(
        &self,
        rule: &str,
        req: &Request<B>,
        reserved: u64,
        actual: u64,
    ) -> Result<Reconciled, Error> {
        let target = self.target(rule, req)?;
        self.shared.gate.reconcile(&target, reserved, actual, target.capacity()).await
    }

    /// Blocks the identity `req` counts as under the rule named `rule` for `duration`, as
    /// [`crate::Limiter::block`] does: its requests are refused by that rule until then, under
    /// every tier; [`Duration::ZERO`] lifts the block. The rule must be blockable
    /// ([`crate::rules::Rule::blockable`], `blockable = true` in a rules file), or this is an
    /// [`Error::Config`] naming `blockable`. Errors otherwise as [`Enforcer::reset`]'s.
    pub async fn block<B>(&self, rule: &str, req: &Request<B>, duration: Duration) -> Result<(), Error> {
        self.shared.gate.block(&self.target(rule, req)?, duration).await
    }

    /// The charge rule `name` makes of `req`, its identity read as [`Enforcer::check`] reads it.
    fn target<B>(&self, name: &str, req: &Request<B>) -> Result<Charge<'static>, Error> {
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
        self.shared.gate.keys().check(&identity.text())?;
        Ok(charge_of(rule, &identity, rule.quota_for(reading.plan)))
    }
}
