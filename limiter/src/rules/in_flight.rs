//! [`InFlightRule`]: at most N requests in flight per identity, where a [`super::Rule`] counts
//! requests over time. It matches and keys requests as a rule does; the enforcement point
//! holds one of the identity's permits ([`crate::ConcurrencyLimiter`]) from the moment the
//! request is admitted until its response has been sent to the end (or abandoned), and a
//! permit whose holder died comes back when its lease ends.

use std::time::Duration;

use super::{KeyPart, Match, OnMissingKey, RuleError};
use crate::policy::FailurePolicy;

/// The longest lease a rule may give a permit: a year, as the concurrency limiter allows.
const MAX_LEASE_MS: u64 = crate::algo::concurrency::MAX_LEASE_MS;

/// A limit on the requests of an identity in flight at once; see the module docs.
///
/// ```
/// use std::time::Duration;
/// use redis_ratelimit::rules::{InFlightRule, KeyPart, Match, RuleSet};
///
/// let rules = RuleSet::builder()
///     .in_flight(
///         InFlightRule::new("exports-per-key", 2, Duration::from_secs(60))
///             .matching(Match::any().path("/api/export"))
///             .key([KeyPart::header("x-api-key")]),
///     )
///     .build()?;
/// assert_eq!(rules.in_flight_rules()[0].limit(), 2);
/// # Ok::<(), redis_ratelimit::rules::RuleError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a rule limits nothing until it is in a rule set"]
pub struct InFlightRule {
    pub(crate) name: String,
    pub(crate) matcher: Match,
    pub(crate) key: Vec<KeyPart>,
    pub(crate) limit: u64,
    pub(crate) lease: Duration,
    pub(crate) policy: FailurePolicy,
    pub(crate) on_missing_key: OnMissingKey,
}

impl InFlightRule {
    /// A rule named `name` (letters, digits, `.`, `_`, `-`; it names the rule's Redis keys, and
    /// no other rule of the set may have it) letting at most `limit` requests of an identity be
    /// in flight at once, each permit lasting `lease` unless released sooner. By default it
    /// matches every request, counts them all under one constant key, fails open, and rejects
    /// requests without a key.
    pub fn new(name: &str, limit: u64, lease: Duration) -> Self {
        InFlightRule {
            name: name.to_owned(),
            matcher: Match::any(),
            key: vec![KeyPart::Const("all".into())],
            limit,
            lease,
            policy: FailurePolicy::FailOpen,
            on_missing_key: OnMissingKey::Reject,
        }
    }

    /// Which requests it applies to.
    pub fn matching(mut self, matcher: Match) -> Self {
        self.matcher = matcher;
        self
    }

    /// What it counts by: the identity whose requests share the permits.
    pub fn key(mut self, parts: impl IntoIterator<Item = KeyPart>) -> Self {
        self.key = parts.into_iter().collect();
        self
    }

    /// What to do when Redis cannot be asked: fail-open admits and holds nothing, fail-closed
    /// refuses, a local budget lends one of this instance's own `limit` permits (its period is
    /// not used).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// What to do with a request that carries no usable key.
    pub fn on_missing_key(mut self, treatment: OnMissingKey) -> Self {
        self.on_missing_key = treatment;
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The most requests of an identity in flight at once.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How long a permit lasts unless released.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Which requests it applies to.
    pub fn matcher(&self) -> &Match {
        &self.matcher
    }

    /// What it counts by.
    pub fn key_parts(&self) -> &[KeyPart] {
        &self.key
    }

    /// Its failure policy.
    pub fn policy(&self) -> FailurePolicy {
        self.policy
    }

    /// What it does with a request that carries no usable key.
    pub fn missing_key(&self) -> OnMissingKey {
        self.on_missing_key
    }

    pub(super) fn validate(&self) -> Result<(), RuleError> {
        let name = self.name.as_str();
        let at = |field: &str, message: String| RuleError::in_rule(name, field, message);
        crate::key::check_name(name).map_err(|m| at("name", m))?;
        if !(1..=1_000_000_000).contains(&self.limit) {
            return Err(at("limit", format!("must be from 1 to 1000000000 requests in flight, got {}", self.limit)));
        }
        let lease_ms = crate::duration::whole_ms(self.lease);
        if !(1..=MAX_LEASE_MS).contains(&lease_ms) {
            return Err(at("lease", format!("must be from 1 ms to a year, got {lease_ms} ms")));
        }
        self.policy.validate().map_err(|e| at(e.field(), e.message().to_owned()))?;
        super::validate_key_and_match(name, &self.key, &self.matcher)
    }
}
