//! What the enforcement point answers about one request.

use std::time::Duration;

use crate::decision::{Decision, Source};
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};
use crate::rules::Identity;

/// The answer about one request: a value, never an exception (errors are for a key the
/// limiter refuses or a Redis reply the caller must hear about).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use = "a ruling says whether the request may proceed: dropped unread, every request is admitted"]
pub enum Ruling {
    /// No rule matches the request (and no list names it): nothing to enforce.
    Unmatched,
    /// The allow list names the request: no rule applies, Redis is not asked.
    Allowlisted,
    /// The deny list names the request: refused before any rule, Redis is not asked.
    Denylisted,
    /// A rule counts requests by a part this request does not carry, and the rule says to
    /// reject such requests.
    MissingKey {
        /// The rule.
        rule: String,
        /// The key part missing (`header:x-api-key`, `user`, `ip`).
        part: String,
    },
    /// A header that says who the client is (a rule's key header, a header the lists compare)
    /// arrived more than once: which one would count is ambiguous, so the request is refused.
    RepeatedHeader {
        /// The header's name.
        header: String,
        /// How many times it arrived.
        count: usize,
    },
    /// The matched rules decided, all-or-nothing.
    Decided(RulesDecision),
}

/// The rules a request matched and what each decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use = "a decision says whether the request may proceed: dropped unread, every request is admitted"]
pub struct RulesDecision {
    /// Whether the request may proceed: every enforced rule admits it. Shadow rules never
    /// deny.
    pub allowed: bool,
    /// One per matched rule, in rule order.
    pub rules: Vec<RuleDecision>,
}

impl RulesDecision {
    /// The enforced rules that deny the request (the violated policies).
    pub fn violated(&self) -> impl Iterator<Item = &RuleDecision> {
        self.rules.iter().filter(|r| !r.shadow && !r.decision.allowed)
    }

    /// When denied: how long until every violated rule admits the request, the longest of
    /// their waits. Honest: each rule's own Retry-After is, and a rule that admits keeps
    /// admitting as time passes with no other traffic. Zero when allowed; at least a
    /// millisecond when denied.
    pub fn retry_after(&self) -> Duration {
        if self.allowed {
            return Duration::ZERO;
        }
        let one = Duration::from_millis(1);
        self.violated().map(|r| r.decision.retry_after.max(one)).max().unwrap_or(one)
    }

    /// [`RulesDecision::retry_after`] in whole seconds, rounded up, for `Retry-After`.
    pub fn retry_after_secs(&self) -> u64 {
        crate::duration::whole_ms(self.retry_after()).div_ceil(1000)
    }

    /// Whether the request is refused because Redis could not be asked and a fail-closed rule
    /// refuses everything until it can: reduced capacity, not a quota the client exceeded.
    pub fn refused_without_redis(&self) -> bool {
        !self.allowed && self.violated().any(|r| r.decision.source == Source::FailClosed)
    }
}

/// One rule's part of a decision.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RuleDecision {
    /// The rule's name (the policy's name in the headers).
    pub rule: String,
    /// The key the request was counted under.
    pub identity: Identity,
    /// The `pk` of the RateLimit fields: the identity's keyed digest (`crate::http::headers`),
    /// None for a constant key or when the enforcer has no partition-key secret.
    pub partition_key: Option<[u8; 8]>,
    /// The rule's algorithm.
    pub algorithm: Algorithm,
    /// The rule's quota.
    pub quota: Quota,
    /// The rule's failure policy.
    pub policy: FailurePolicy,
    /// Whether the rule only observes.
    pub shadow: bool,
    /// What the request cost under this rule.
    pub cost: u64,
    /// This rule's own answer: `allowed` is whether it alone admits the request; `remaining`
    /// what it still admits after this request; `source` who decided (Redis, or the rule's
    /// failure policy).
    pub decision: Decision,
    /// Whether the request's cost was taken from this rule.
    pub consumed: bool,
}

impl RuleDecision {
    /// The policy this decision actually enforced, as the RateLimit fields describe it: the
    /// rule's quota when Redis (or a lease of it, or the denial cache) decided; the local budget
    /// (its limit per its period) when that answered; None when fail-open or fail-closed
    /// answered, which enforce no quota at all.
    pub fn enforced_quota(&self) -> Option<Quota> {
        self.policy.enforced_quota(self.decision.source, self.quota)
    }
}
