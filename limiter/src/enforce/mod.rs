//! The enforcement point: an [`Enforcer`] decides a request against a [`RuleSet`].
//!
//! For each request, in order:
//!
//! 1. The client IP is found ([`crate::rules::ClientIp`]: forwarding headers only from
//!    trusted proxies), and the request is read once: every header that says who the client is
//!    must arrive once (or the request is refused naming it), and the lists and every rule read
//!    that one value. The deny list refuses and the allow list admits before anything else,
//!    without asking Redis; the allow list trusts only the client IP and the identities an
//!    authentication layer verified ([`crate::rules::User`], [`crate::rules::ApiKey`]).
//! 2. Every rule whose matcher accepts the request applies. Each gives the request an
//!    identity from its key parts; a request with no usable key gets the rule's
//!    [`crate::rules::OnMissingKey`] treatment.
//! 3. All matched rules are decided **all-or-nothing**: a request denied by one rule consumes
//!    nothing from the others, and a shadow rule is decided and counted but never denies. On
//!    one Redis (and in process) this is one call of the all-or-nothing script
//!    (`algo::all_or_nothing` explains it): atomic, at one clock reading; a request that one
//!    rule decides alone is one call of that rule's own script. Cost 0 peeks every rule.
//! 4. When Redis cannot be asked (down, slow, the breaker open), each rule's own
//!    [`FailurePolicy`](crate::FailurePolicy) answers, still all-or-nothing across the rules' local budgets.
//!
//! # Rules whose keys cannot share a slot
//!
//! A rule's Redis keys are `prefix:{tag}:rest:rule:`; the tag is the rule's first key part, so
//! on a Redis Cluster rules whose first parts agree share a slot. On a single Redis every rule
//! of a request goes into one script call, whatever its tag. Over a cluster store
//! ([`crate::RedisStore::cluster`]) the enforcer groups the rules by tag, and across groups
//! the decision cannot be one atomic step: it runs a dry pass over every group (each group
//! atomic on its own), and only
//! if every enforced rule fits, a committing pass group by group. Between the two passes a
//! concurrent request can take what a rule had left: the committing pass of that group then
//! denies, after the groups before it consumed. So across slots the guarantee is weaker: every
//! rule still never admits beyond its own bound (each group's call is atomic), and a request
//! that is admitted consumed from every rule; but a denied request may have consumed from
//! rules in other slots (it is charged for what it did not get), under contention only. The
//! simulator's `rules-per-slot` subject runs exactly that path and its checker counts those
//! requests. Put the identity that matters first in every rule's key to keep them atomic.
//!
//! ```
//! use redis_ratelimit::enforce::{Enforcer, Ruling};
//! use redis_ratelimit::rules::{KeyPart, Match, Rule, RuleSet};
//! use redis_ratelimit::{Algorithm, Quota};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let rules = RuleSet::builder()
//!     .rule(Rule::new("per-key", Algorithm::SlidingLog, Quota::per_minute(2)).key([KeyPart::header("x-api-key")]))
//!     .rule(Rule::new("global", Algorithm::SlidingLog, Quota::per_minute(100)))
//!     .build()?;
//! let enforcer = Enforcer::builder(rules).build()?; // in process; `.redis(store)` to share
//! let req = http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
//! for _ in 0..2 {
//!     assert!(matches!(enforcer.check(&req).await?, Ruling::Decided(d) if d.allowed));
//! }
//! let Ruling::Decided(denied) = enforcer.check(&req).await? else { unreachable!() };
//! assert!(!denied.allowed);
//! // The global rule admitted it alone, but nothing was taken from it: all or nothing.
//! assert_eq!(denied.violated().map(|r| r.rule.as_str()).collect::<Vec<_>>(), ["per-key"]);
//! assert!(denied.rules.iter().all(|r| !r.consumed));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod counts;
mod direct;
mod in_flight;
mod key_ops;
mod partition;
#[cfg(feature = "config")]
mod reload;
mod ruling;

use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

use http::Request;

pub use counts::{Counts, RuleCounts};
pub use direct::{DirectLimit, Leased};
pub use in_flight::Acquisition;
pub use partition::PartitionSecret;
#[cfg(feature = "config")]
pub use reload::{ReloadError, Watch};
pub use ruling::{RuleDecision, RulesDecision, Ruling};

use std::borrow::Cow;

use crate::breaker::{BreakerConfig, BreakerState};
use crate::charge::{self, Charge, StateKey};
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::gate::Gate;
use crate::health::{Health, OnStoreEvent, StoreEvent};
use crate::key::KeySpace;
use crate::quota::Quota;
use crate::rules::{Access, Identity, KeyPart, OnMissingKey, Reading, Rule, RuleSet};
use crate::store::RedisStore;

struct Shared {
    rules: RwLock<Arc<RuleSet>>,
    in_flight: in_flight::InFlightLimiters,
    gate: Gate,
    counters: counts::Counters,
    pk_secret: Option<PartitionSecret>,
    /// The share of a rule's limit at which an admitted decision counts as near it.
    near_limit_ratio: f64,
}

/// Decides requests against a reloadable [`RuleSet`]; see the module docs. Cheap to clone:
/// clones share the rules, the store, the breaker and the counters.
#[derive(Clone)]
pub struct Enforcer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcer").field("rules", &self.rules().rules().len()).finish_non_exhaustive()
    }
}

/// Builds an [`Enforcer`]; [`EnforcerBuilder::build`] checks everything.
#[must_use = "a builder does nothing until it is built"]
pub struct EnforcerBuilder {
    rules: RuleSet,
    redis: Option<Arc<RedisStore>>,
    clock: Arc<dyn Clock>,
    breaker: BreakerConfig,
    on_store_event: Option<OnStoreEvent>,
    prefix: String,
    max_key_len: usize,
    max_local_keys: usize,
    pk_secret: Option<Vec<u8>>,
    near_limit_ratio: f64,
}

impl EnforcerBuilder {
    /// The share of a rule's limit (above 0, at most 1; default 0.8) at which an admitted
    /// decision also counts in `limiter_near_limit_total` under the rule's name
    /// ([`crate::metrics`]).
    pub fn near_limit_ratio(mut self, ratio: f64) -> Self {
        self.near_limit_ratio = ratio;
        self
    }

    /// The secret the RateLimit fields' partition keys (`pk`) are keyed with: the same on every
    /// gateway of a deployment, at least 16 bytes, from its configuration (not from the rules
    /// file, which is often shared). Without it the fields carry no `pk` (see
    /// [`PartitionSecret`] for why an unkeyed digest would give the key away).
    pub fn partition_key_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.pk_secret = Some(secret.as_ref().to_vec());
        self
    }

    /// Keeps state in Redis (default: in this process). An `Arc<RedisStore>` shares one store,
    /// and its connections, with other limiters.
    pub fn redis(mut self, store: impl Into<Arc<RedisStore>>) -> Self {
        self.redis = Some(store.into());
        self
    }

    /// The instance's clock (client-time rules, local budgets, the breaker).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Circuit breaker thresholds (one breaker for the store, shared by every rule).
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// Hears each change of the store's health (the breaker opening with its cause, the cause
    /// changing, the breaker closing): one call per change, never one per request; log it.
    pub fn on_store_event(mut self, report: impl Fn(&StoreEvent) + Send + Sync + 'static) -> Self {
        self.on_store_event = Some(Arc::new(report));
        self
    }

    /// Key prefix (default `ratelimiter`).
    pub fn key_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Longest identity accepted, in bytes (default 512): a longer one is refused as
    /// [`Error::InvalidKey`] (the layer answers 400).
    pub fn max_key_len(mut self, bytes: usize) -> Self {
        self.max_key_len = bytes;
        self
    }

    /// Most keys kept in process by the in-process store and the local budgets (default
    /// 100,000): memory stays bounded whatever keys clients send, and a full table makes room
    /// in O(1) amortized by giving up a key not asked for lately.
    pub fn max_local_keys(mut self, keys: usize) -> Self {
        self.max_local_keys = keys;
        self
    }

    /// Validates everything and builds the enforcer.
    pub fn build(self) -> Result<Enforcer, ConfigError> {
        self.breaker.validate()?;
        crate::metrics::check_near_limit_ratio(self.near_limit_ratio)?;
        if self.max_local_keys == 0 {
            return Err(ConfigError::new("max_local_keys", "must be at least 1, got 0".into()));
        }
        let keys = KeySpace::new(&self.prefix, self.max_key_len)?;
        let pk_secret = self.pk_secret.as_deref().map(PartitionSecret::new).transpose()?;
        let options = in_flight::Options {
            redis: self.redis.clone(),
            clock: self.clock.clone(),
            breaker: self.breaker,
            prefix: self.prefix.clone(),
            max_key_len: self.max_key_len,
            max_local_keys: self.max_local_keys,
        };
        let in_flight = in_flight::InFlightLimiters::new(options, &self.rules)?;
        let health = Health::new(self.breaker, self.on_store_event, "rules");
        let gate = Gate::new(self.redis, self.max_local_keys, keys, self.clock, health);
        let names: Vec<&str> = self.rules.rules().iter().map(Rule::name).collect();
        let counters = counts::Counters::default();
        counters.retain(&names);
        Ok(Enforcer {
            shared: Arc::new(Shared {
                rules: RwLock::new(Arc::new(self.rules)),
                in_flight,
                gate,
                counters,
                pk_secret,
                near_limit_ratio: self.near_limit_ratio,
            }),
        })
    }
}

/// What the synchronous part of a check found: a ruling, or the charges of the matched
/// rules with the identity each counts by, to decide together.
enum Matched {
    Done(Ruling),
    Decide(Vec<Charge<'static>>, Vec<Identity>),
}

impl Enforcer {
    /// Starts building an enforcer of `rules`.
    pub fn builder(rules: RuleSet) -> EnforcerBuilder {
        EnforcerBuilder {
            rules,
            redis: None,
            clock: Arc::new(SystemClock),
            breaker: BreakerConfig::default(),
            on_store_event: None,
            prefix: crate::key::DEFAULT_PREFIX.into(),
            max_key_len: crate::key::DEFAULT_MAX_KEY_LEN,
            max_local_keys: crate::store::local::DEFAULT_MAX_KEYS,
            pk_secret: None,
            near_limit_ratio: crate::metrics::DEFAULT_NEAR_LIMIT_RATIO,
        }
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<RuleSet> {
        self.shared.rules.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts `rules` in force for every request that starts checking from now on. Counters
    /// and Redis state of rules kept by name carry over (see `docs/ARCHITECTURE.md` on which
    /// quota changes keep an algorithm's state).
    pub fn replace_rules(&self, rules: RuleSet) {
        let names: Vec<&str> = rules.rules().iter().map(Rule::name).collect();
        self.shared.counters.retain(&names);
        // Every part of an in-flight rule's limiter was checked when the enforcer was built
        // (the store's settings) and when the rules were (the rule's), so this cannot fail.
        let _checked = self.shared.in_flight.replace(&rules);
        *self.shared.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rules);
    }

    /// What the rules decided so far, counted in this process (the `metrics` feature's
    /// exposition is [`crate::metrics`]).
    pub fn counts(&self) -> Counts {
        self.shared.counters.snapshot()
    }

    /// The circuit breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.shared.gate.breaker_state()
    }

    /// Decides `req`. Everything read from the request is read now; the future owns what it
    /// needs and does not borrow the request.
    pub fn check<B>(&self, req: &Request<B>) -> impl Future<Output = Result<Ruling, Error>> + Send + 'static {
        let rules = self.rules();
        self.rule(self.plan(&rules, req, &read(&rules, req)))
    }

    /// [`Enforcer::check`] and [`Enforcer::acquire`] of one request, which is read once for
    /// both: what the rules layer does with every request.
    pub(crate) fn check_and_acquire<B>(
        &self,
        req: &Request<B>,
    ) -> (
        impl Future<Output = Result<Ruling, Error>> + Send + 'static,
        impl Future<Output = Result<Acquisition, Error>> + Send + 'static,
    ) {
        let rules = self.rules();
        let read = read(&rules, req);
        (self.rule(self.plan(&rules, req, &read)), in_flight::acquire(self.claims(req, &read)))
    }

    /// The ruling on what `plan` matched, decided and counted.
    fn rule(&self, plan: Result<Matched, Error>) -> impl Future<Output = Result<Ruling, Error>> + Send + 'static {
        let shared = self.shared.clone();
        async move {
            let ruling = match plan? {
                Matched::Done(ruling) => ruling,
                Matched::Decide(charges, identities) => Ruling::Decided(shared.decide(charges, identities).await?),
            };
            shared.counters.record(&ruling, shared.near_limit_ratio);
            Ok(ruling)
        }
    }

    /// The rate rules `req` matches, as `read` found it.
    fn plan<B>(&self, rules: &RuleSet, req: &Request<B>, read: &Read<'_>) -> Result<Matched, Error> {
        let (reading, ip) = match read {
            Ok((reading, ip)) => (reading, *ip),
            Err(Listed::Repeated { header, count }) => {
                return Ok(Matched::Done(Ruling::RepeatedHeader { header: header.clone(), count: *count }))
            }
            Err(Listed::Denied) => return Ok(Matched::Done(Ruling::Denylisted)),
            Err(Listed::Allowed) => return Ok(Matched::Done(Ruling::Allowlisted)),
        };
        let (mut charges, mut identities) = (Vec::new(), Vec::new());
        for rule in rules.rules().iter().filter(|r| r.matcher().matches(req)) {
            let identity = match identity_for(rule.key_parts(), rule.missing_key(), reading, ip) {
                Ok(Some(identity)) => identity,
                Ok(None) => continue,
                Err(part) => return Ok(Matched::Done(Ruling::MissingKey { rule: rule.name().to_owned(), part })),
            };
            self.shared.gate.keys().check(&identity.text())?;
            charges.push(charge_of(rule, &identity, rule.quota_for(reading.plan)));
            identities.push(identity);
        }
        if charges.is_empty() {
            return Ok(Matched::Done(Ruling::Unmatched));
        }
        Ok(Matched::Decide(charges, identities))
    }
}

/// A request as read once for every rule, or why the lists answer it first.
type Read<'r> = Result<(Reading<'r>, Option<IpAddr>), Listed>;

/// Why a request is answered before any rule: a repeated identifying header, or a list.
enum Listed {
    Repeated { header: String, count: usize },
    Denied,
    Allowed,
}

/// Reads `req` once for every rule of `rules` (its client IP, each identifying header once),
/// unless the lists answer it first.
fn read<'r, B>(rules: &'r RuleSet, req: &'r Request<B>) -> Read<'r> {
    let ip: Option<IpAddr> = rules.client_ip().resolve(req);
    let reading = Reading::of(req, ip, rules.identifying_headers())
        .map_err(|r| Listed::Repeated { header: r.header, count: r.count })?;
    match rules.access().check(&reading) {
        Access::Denied => Err(Listed::Denied),
        Access::Allowed => Err(Listed::Allowed),
        Access::Unlisted => Ok((reading, ip)),
    }
}

/// The identity `parts` give the request, or what a rule does without one (`missing`): none
/// to skip the rule, or the missing part's name to reject the request.
fn identity_for(
    parts: &[KeyPart],
    missing: OnMissingKey,
    reading: &Reading<'_>,
    ip: Option<IpAddr>,
) -> Result<Option<Identity>, String> {
    match (Identity::of(parts, reading), missing, ip) {
        (Ok(identity), ..) => Ok(Some(identity)),
        (Err(_), OnMissingKey::Skip, _) => Ok(None),
        (Err(_), OnMissingKey::FallbackToIp, Some(ip)) => Ok(Some(Identity::of_ip(ip))),
        (Err(part), ..) => Err(part.spec()),
    }
}

impl Shared {
    /// Decides a request's `charges` together, each counted by its identity in `identities`.
    async fn decide(&self, charges: Vec<Charge<'static>>, identities: Vec<Identity>) -> Result<RulesDecision, Error> {
        let now = self.gate.clock().now_ms();
        let answers = self.gate.decide_all(&charges, now).await?;
        let rules = charges
            .into_iter()
            .zip(identities)
            .zip(answers.items)
            .map(|((charge, identity), answer)| self.rule_decision(charge, identity, answer.decision, answer.consumed))
            .collect();
        Ok(RulesDecision { allowed: answers.allowed, rules })
    }

    /// What one rule of a request was answered, as the request's decision reports it.
    fn rule_decision(
        &self,
        charge: Charge<'static>,
        identity: Identity,
        decision: Decision,
        consumed: bool,
    ) -> RuleDecision {
        RuleDecision {
            decision,
            consumed,
            rule: charge.name.into_owned(),
            algorithm: charge.algorithm,
            quota: charge.quota,
            policy: charge.policy,
            shadow: charge.shadow,
            cost: charge.cost,
            partition_key: self.pk_secret.as_ref().and_then(|s| s.partition_key(&identity)),
            identity,
        }
    }
}

/// The charge of a request under `rule`, counted by `identity`, under `quota` (the rule's, or
/// its tier's for the request's plan). Its state is named by the rule, so a rule kept across a
/// reload keeps its state (see `docs/ARCHITECTURE.md` on which quota changes keep it).
fn charge_of(rule: &Rule, identity: &Identity, quota: Quota) -> Charge<'static> {
    charge_with(rule, identity, quota, rule.request_cost())
}

/// [`charge_of`] with the cost given (a [`DirectLimit`]'s) rather than the rule's.
fn charge_with(rule: &Rule, identity: &Identity, quota: Quota, cost: u64) -> Charge<'static> {
    let (algorithm, home_period) = (rule.algorithm(), rule.quota().period_ms());
    let state = charge::state_name(algorithm, Some(rule.name()), home_period, &quota);
    let home = charge::state_name(algorithm, Some(rule.name()), home_period, &rule.quota());
    Charge {
        name: Cow::Owned(rule.name().to_owned()),
        algorithm,
        quota,
        state: StateKey {
            tag: Cow::Owned(identity.tag().to_owned()),
            rest: Cow::Owned(identity.rest().to_owned()),
            own: state == home,
            state: Cow::Owned(state),
            home: Cow::Owned(home),
            alone: false,
        },
        time_source: rule.clock(),
        cost,
        blockable: rule.is_blockable(),
        shadow: rule.is_shadow(),
        policy: rule.policy(),
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests;
