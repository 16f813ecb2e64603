//! Rules: which requests a limit applies to, what it counts by, and how much.
//!
//! A [`Rule`] matches requests by method, path pattern, host and header presence ([`Match`]),
//! names the key it counts by ([`KeyPart`]s: the verified [`User`] or [`ApiKey`] an
//! authentication layer put in the request, a raw header, the client IP, the route, a constant,
//! or several of these), and says which [`Algorithm`] and [`Quota`]
//! it enforces, what one request costs, what to do when Redis cannot be asked
//! ([`FailurePolicy`]), whose clock decides ([`TimeSource`]), whether it only observes
//! (`shadow`), whether its keys can be blocked (`blockable`, see [`crate::enforce::Enforcer::block`]),
//! and what to do with a request that carries no usable key ([`OnMissingKey`]).
//! A request may match several rules: the enforcement point decides them all-or-nothing
//! (`crate::enforce`).
//!
//! A [`RuleSet`] is the rules plus what applies before any of them: the allow and deny lists
//! ([`AccessLists`]) and the proxies trusted to say who the client is ([`ClientIp`]). Rules
//! come from code or, with the `config` feature (on by default), from a TOML file
//! ([`RuleSet::from_toml`]); both are validated the same way, and a bad rule is refused with
//! a [`RuleError`] naming the rule and the field.
//!
//! ```
//! use redis_ratelimit::rules::{KeyPart, Match, Rule, RuleSet};
//! use redis_ratelimit::{Algorithm, Quota};
//!
//! let rules = RuleSet::builder()
//!     .rule(
//!         Rule::new("hello-per-key", Algorithm::TokenBucket, Quota::per_second(5))
//!             .matching(Match::any().method("GET").path("/api/hello"))
//!             .key([KeyPart::header("x-api-key")]),
//!     )
//!     .rule(
//!         Rule::new("login-per-ip", Algorithm::SlidingLog, Quota::per_minute(10))
//!             .matching(Match::any().method("POST").path("/login"))
//!             .key([KeyPart::ClientIp]),
//!     )
//!     .build()?;
//! assert_eq!(rules.rules().len(), 2);
//!
//! // A rule that could never be enforced is refused by name and field.
//! let bad = RuleSet::builder().rule(Rule::new("zero", Algorithm::Gcra, Quota::per_second(0))).build();
//! assert_eq!(bad.unwrap_err().to_string(), "rule \"zero\", field limit: must be at least 1, got 0");
//! # Ok::<(), redis_ratelimit::rules::RuleError>(())
//! ```

mod access;
mod client_ip;
#[cfg(feature = "config")]
mod config;
mod in_flight;
mod key;
mod matcher;
mod reading;

use std::collections::BTreeSet;
use std::fmt;

pub use access::{Access, AccessList, AccessLists};
pub use client_ip::{ClientIp, ForwardedHeader, PeerAddr};
pub use in_flight::InFlightRule;
#[cfg(test)]
pub(crate) use key::identity_of;
pub use key::{ApiKey, Identity, KeyPart, Plan, User};
pub use matcher::{Match, PathPattern};
pub(crate) use reading::Reading;

use crate::clock::TimeSource;
use crate::error::ConfigError;
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};

/// A rule refused: which rule (when the problem is inside one), which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct RuleError {
    /// The rule's name (or `#N` for the N-th rule of a file when it has no usable name);
    /// None for a field outside the rules (the lists, the trusted proxies, the file itself).
    pub rule: Option<String>,
    /// The field at fault, as the file spells it (`limit`, `match.path`, `access.deny_ips`).
    pub field: String,
    /// What is wrong with it, including the value given.
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(rule) => write!(f, "rule {rule:?}, field {}: {}", self.field, self.message),
            None => write!(f, "field {}: {}", self.field, self.message),
        }
    }
}

impl RuleError {
    pub(crate) fn new(rule: Option<&str>, field: impl Into<String>, message: impl Into<String>) -> Self {
        RuleError { rule: rule.map(str::to_owned), field: field.into(), message: message.into() }
    }

    pub(crate) fn in_rule(rule: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Some(rule), field, message)
    }
}

/// What to do with a request a rule matches but that carries no usable key (no API key
/// header, no user, no client IP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnMissingKey {
    /// Answer `400 Bad Request` naming the rule and the missing part (the default).
    #[default]
    Reject,
    /// Count the request by its client IP instead; with no usable IP either, reject.
    FallbackToIp,
    /// The rule does not apply to such a request.
    Skip,
}

impl OnMissingKey {
    /// The name the rules file uses.
    pub const fn name(self) -> &'static str {
        match self {
            OnMissingKey::Reject => "reject",
            OnMissingKey::FallbackToIp => "fallback-ip",
            OnMissingKey::Skip => "skip",
        }
    }
}

/// The longest rule name accepted.
pub const MAX_RULE_NAME: usize = crate::key::MAX_NAME;

/// One rate limit: see the module docs. Built with [`Rule::new`] and its setters; checked
/// when a [`RuleSet`] is built.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a rule applies only once a rule set holds it"]
pub struct Rule {
    pub(crate) name: String,
    pub(crate) matcher: Match,
    pub(crate) key: Vec<KeyPart>,
    pub(crate) algorithm: Algorithm,
    pub(crate) quota: Quota,
    pub(crate) cost: u64,
    pub(crate) policy: FailurePolicy,
    pub(crate) time_source: TimeSource,
    pub(crate) shadow: bool,
    pub(crate) blockable: bool,
    pub(crate) on_missing_key: OnMissingKey,
    /// Other quotas by plan, in the order given ([`Rule::tier`]).
    pub(crate) tiers: Vec<(String, Quota)>,
    /// The response header that states a request's real cost ([`Rule::real_cost_header`]).
    pub(crate) real_cost_header: Option<String>,
}

impl Rule {
    /// A rule named `name` (letters, digits, `.`, `_`, `-`; it names the policy in the
    /// RateLimit headers and the rule's Redis keys) enforcing `quota` with `algorithm`. By
    /// default it matches every request, counts them all under one constant key, costs 1,
    /// fails open, reads Redis's clock, enforces, cannot be blocked, and rejects requests
    /// without a key.
    pub fn new(name: &str, algorithm: Algorithm, quota: Quota) -> Self {
        Rule {
            name: name.to_owned(),
            matcher: Match::any(),
            key: vec![KeyPart::Const("all".into())],
            algorithm,
            quota,
            cost: 1,
            policy: FailurePolicy::FailOpen,
            time_source: TimeSource::Server,
            shadow: false,
            blockable: false,
            on_missing_key: OnMissingKey::Reject,
            tiers: Vec::new(),
            real_cost_header: None,
        }
    }

    /// Which requests it applies to.
    pub fn matching(mut self, matcher: Match) -> Self {
        self.matcher = matcher;
        self
    }

    /// What it counts by: the parts of the key, the first of which is the Redis Cluster hash
    /// tag (rules whose first parts agree keep their keys in one slot).
    pub fn key(mut self, parts: impl IntoIterator<Item = KeyPart>) -> Self {
        self.key = parts.into_iter().collect();
        self
    }

    /// What one request costs (0: the request only peeks at this rule).
    pub fn cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }

    /// What to do when Redis cannot be asked.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whose clock decides.
    pub fn time_source(mut self, source: TimeSource) -> Self {
        self.time_source = source;
        self
    }

    /// Shadow mode: decided, counted and reported, never rejects.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// Blockable: its decisions read the block on their key ([`crate::enforce::Enforcer::block`]), so a
    /// support team or a sign-in flow can stop one identity for a while. It costs Redis one
    /// more read per decision of this rule, which is why it is off unless asked for.
    pub fn blockable(mut self, blockable: bool) -> Self {
        self.blockable = blockable;
        self
    }

    /// The response header in which the upstream states what a request really cost (a whole
    /// number: the tokens an answer used). A request is charged the rule's cost when it is
    /// admitted; when its response carries the header, [`crate::http::RulesLayer`] reconciles
    /// it with that cost, in a task of its own ([`crate::Limiter::reconcile`]: the surplus
    /// refunded, the excess charged as a debt up to the rule's capacity). The header is read
    /// when the response's headers arrive; a cost known only at the body's end needs
    /// [`crate::http::CostLimitLayer`].
    pub fn real_cost_header(mut self, name: &str) -> Self {
        self.real_cost_header = Some(name.to_owned());
        self
    }

    /// What to do with a request that has no usable key.
    pub fn on_missing_key(mut self, treatment: OnMissingKey) -> Self {
        self.on_missing_key = treatment;
        self
    }

    /// Enforces `quota` instead of the rule's own for a request whose client is on `plan`
    /// ([`Plan`], which only an authentication layer sets; a request without one, or on a plan
    /// the rule does not name, gets the rule's own quota). The tiers share the rule's state per
    /// key as a reload of its quota would: a client moving to a larger plan keeps what it used,
    /// and a token bucket or window under another period counts apart.
    ///
    /// ```
    /// use redis_ratelimit::rules::{KeyPart, Rule};
    /// use redis_ratelimit::{Algorithm, Quota};
    /// let rule = Rule::new("api", Algorithm::Gcra, Quota::per_minute(60))
    ///     .key([KeyPart::User])
    ///     .tier("pro", Quota::per_minute(600))
    ///     .tier("enterprise", Quota::per_minute(6_000).with_burst(500));
    /// assert_eq!(rule.quota_for(Some("pro")).limit(), 600);
    /// assert_eq!(rule.quota_for(Some("unknown")).limit(), 60);
    /// ```
    pub fn tier(mut self, plan: &str, quota: Quota) -> Self {
        self.tiers.push((plan.to_owned(), quota));
        self
    }

    /// The quota a request on `plan` gets: its tier's, else the rule's own.
    pub fn quota_for(&self, plan: Option<&str>) -> Quota {
        plan.and_then(|plan| self.tiers.iter().find(|(p, _)| p == plan)).map_or(self.quota, |&(_, q)| q)
    }

    /// The tiers: each plan and its quota.
    pub fn tiers(&self) -> impl Iterator<Item = (&str, Quota)> {
        self.tiers.iter().map(|(p, q)| (p.as_str(), *q))
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The matcher.
    pub fn matcher(&self) -> &Match {
        &self.matcher
    }

    /// The key parts.
    pub fn key_parts(&self) -> &[KeyPart] {
        &self.key
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The cost of one request.
    pub fn request_cost(&self) -> u64 {
        self.cost
    }

    /// The failure policy.
    pub fn policy(&self) -> FailurePolicy {
        self.policy
    }

    /// The time source.
    pub fn clock(&self) -> TimeSource {
        self.time_source
    }

    /// Whether it only observes.
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// Whether its keys can be blocked.
    pub fn is_blockable(&self) -> bool {
        self.blockable
    }

    /// The response header that states a request's real cost, if the rule reads one.
    pub fn real_cost_header_name(&self) -> Option<&str> {
        self.real_cost_header.as_deref()
    }

    /// The treatment of requests without a key.
    pub fn missing_key(&self) -> OnMissingKey {
        self.on_missing_key
    }

    /// The window the RateLimit-Policy field names: the field counts whole seconds, so a
    /// period that is not one (`250ms`, `1500ms`) is named by the whole seconds that hold it.
    /// A client that keeps to `q` per that many seconds is never refused for it.
    pub fn window_secs(&self) -> u64 {
        self.quota.window_secs()
    }

    /// Refuses anything the enforcement point could not enforce exactly, naming the field.
    fn validate(&self) -> Result<(), RuleError> {
        let name = self.name.as_str();
        crate::key::check_name(name).map_err(|message| RuleError::in_rule(name, "name", message))?;
        // The library's fields are the rules file's (`period`, `local_budget.period`).
        let from_library = |e: ConfigError| RuleError::in_rule(name, e.field(), e.message().to_owned());
        self.quota.validate(self.algorithm).map_err(from_library)?;
        self.policy.validate().map_err(from_library)?;
        let capacity = self.quota.capacity(self.algorithm);
        if self.cost > capacity {
            return Err(RuleError::in_rule(
                name,
                "cost",
                format!("{} exceeds the rule's capacity {capacity}: no request could ever be admitted", self.cost),
            ));
        }
        if let Some(header) = &self.real_cost_header {
            if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(RuleError::in_rule(name, "real_cost_header", format!("{header:?} is no header name")));
            }
        }
        for (i, (plan, quota)) in self.tiers.iter().enumerate() {
            let at = |field: &str| format!("tiers.{plan}.{field}");
            crate::key::check_name(plan).map_err(|m| RuleError::in_rule(name, "tiers", format!("plan {m}")))?;
            if self.tiers[..i].iter().any(|(p, _)| p == plan) {
                return Err(RuleError::in_rule(name, "tiers", format!("names the plan {plan:?} twice")));
            }
            quota.validate(self.algorithm).map_err(|e| {
                let e = from_library(e);
                RuleError::in_rule(name, at(&e.field), e.message)
            })?;
            let capacity = quota.capacity(self.algorithm);
            if self.cost > capacity {
                // A bucket's capacity is its burst (which defaults to the tier's limit).
                let field = if self.algorithm.is_bucket() { "burst" } else { "limit" };
                return Err(RuleError::in_rule(
                    name,
                    at(field),
                    format!("the plan's capacity {capacity} is below the rule's cost {}: no request on it could ever be admitted", self.cost),
                ));
            }
        }
        validate_key_and_match(name, &self.key, &self.matcher)
    }
}

/// What every kind of rule checks alike: it counts by a key of valid parts, and matches by a
/// valid matcher.
fn validate_key_and_match(name: &str, key: &[KeyPart], matcher: &Match) -> Result<(), RuleError> {
    if key.is_empty() {
        return Err(RuleError::in_rule(
            name,
            "key",
            "names no key part; use a constant to count every request together",
        ));
    }
    for part in key {
        part.validate().map_err(|message| RuleError::in_rule(name, "key", message))?;
    }
    matcher.validate().map_err(|(field, message)| RuleError::in_rule(name, field, message))
}

/// Validated rules and what applies before them; see the module docs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    in_flight: Vec<InFlightRule>,
    access: AccessLists,
    client_ip: ClientIp,
    /// The headers that say who the client is (the lists' and the rules' key headers), sorted:
    /// each must arrive once (`reading`).
    identifying: Vec<String>,
}

/// Builds a [`RuleSet`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until it is built"]
pub struct RuleSetBuilder {
    rules: Vec<Rule>,
    in_flight: Vec<InFlightRule>,
    access: AccessLists,
    client_ip: ClientIp,
}

impl RuleSetBuilder {
    /// Adds a rule.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Adds a limit on requests in flight.
    pub fn in_flight(mut self, rule: InFlightRule) -> Self {
        self.in_flight.push(rule);
        self
    }

    /// The allow and deny lists.
    pub fn access(mut self, access: AccessLists) -> Self {
        self.access = access;
        self
    }

    /// How the client IP is found (which proxies are trusted).
    pub fn client_ip(mut self, client_ip: ClientIp) -> Self {
        self.client_ip = client_ip;
        self
    }

    /// Checks every rule and builds the set; the first problem is named.
    pub fn build(self) -> Result<RuleSet, RuleError> {
        let mut names = BTreeSet::new();
        let checked = self.rules.iter().map(|r| (r.name.as_str(), r.validate()));
        for (name, valid) in checked.chain(self.in_flight.iter().map(|r| (r.name.as_str(), r.validate()))) {
            valid?;
            // A rule's name names its state in Redis: two rules of one name would share it.
            if !names.insert(name) {
                return Err(RuleError::in_rule(name, "name", "is used by an earlier rule; names must be unique"));
            }
        }
        self.access.validate()?;
        let rules: Vec<Rule> = self
            .rules
            .into_iter()
            .map(|mut r| {
                r.matcher = r.matcher.prepared();
                r
            })
            .collect();
        let in_flight: Vec<InFlightRule> = self
            .in_flight
            .into_iter()
            .map(|mut r| {
                r.matcher = r.matcher.prepared();
                r
            })
            .collect();
        let mut identifying: Vec<String> = self.access.key_headers().to_vec();
        let keys = rules.iter().map(|r| &r.key).chain(in_flight.iter().map(|r| &r.key));
        identifying.extend(keys.flat_map(|key| key.iter().filter_map(KeyPart::header_name).map(str::to_owned)));
        identifying.sort();
        identifying.dedup();
        Ok(RuleSet { rules, in_flight, access: self.access, client_ip: self.client_ip, identifying })
    }
}

impl RuleSet {
    /// Starts building a rule set.
    pub fn builder() -> RuleSetBuilder {
        RuleSetBuilder::default()
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// A rule by name.
    pub fn rule(&self, name: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.name == name)
    }

    /// The limits on requests in flight, in order.
    pub fn in_flight_rules(&self) -> &[InFlightRule] {
        &self.in_flight
    }

    /// The allow and deny lists.
    pub fn access(&self) -> &AccessLists {
        &self.access
    }

    /// How the client IP is found.
    pub fn client_ip(&self) -> &ClientIp {
        &self.client_ip
    }

    /// The headers that say who the client is: the lists' key headers and every header a
    /// rule's key reads. A request carrying one of them more than once is refused (400).
    pub fn identifying_headers(&self) -> &[String] {
        &self.identifying
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(rule: Rule) -> Result<RuleSet, RuleError> {
        RuleSet::builder().rule(rule).build()
    }

    #[test]
    fn bad_rules_are_refused_by_rule_and_field() {
        let ok = || Rule::new("r", Algorithm::SlidingLog, Quota::per_second(3));
        let cases = [
            (Rule::new("", Algorithm::Gcra, Quota::per_second(1)), "name"),
            (Rule::new("a b", Algorithm::Gcra, Quota::per_second(1)), "name"),
            (Rule::new("r", Algorithm::TokenBucket, Quota::per_second(5).with_burst(0)), "burst"),
            (Rule::new("r", Algorithm::FixedWindow, Quota::new(5, std::time::Duration::from_millis(0))), "period"),
            (ok().cost(4), "cost"),
            (ok().key([]), "key"),
            (ok().key([KeyPart::header("bad header")]), "key"),
            (
                ok().failure_policy(FailurePolicy::LocalBudget { limit: 0, period: std::time::Duration::from_secs(1) }),
                "local_budget.limit",
            ),
            (
                ok().failure_policy(FailurePolicy::LocalBudget {
                    limit: 2,
                    period: std::time::Duration::from_millis(0),
                }),
                "local_budget.period",
            ),
            (ok().matching(Match::any().path("no-slash")), "match.path"),
            (ok().real_cost_header("x tokens"), "real_cost_header"),
        ];
        for (rule, field) in cases {
            let name = rule.name.clone();
            let e = build(rule).expect_err(field);
            assert_eq!((e.rule.as_deref(), e.field.as_str()), (Some(name.as_str()), field), "{e}");
        }
        let twice = RuleSet::builder().rule(ok()).rule(ok()).build().unwrap_err();
        assert_eq!(twice.to_string(), "rule \"r\", field name: is used by an earlier rule; names must be unique");
        assert!(build(ok().cost(3)).is_ok());
        // Periods need not be whole seconds (the policy field names the seconds that hold them).
        let short = Rule::new("r", Algorithm::FixedWindow, Quota::new(5, std::time::Duration::from_millis(1_500)))
            .failure_policy(FailurePolicy::LocalBudget { limit: 2, period: std::time::Duration::from_millis(250) });
        assert!(build(short).is_ok());
    }
}
