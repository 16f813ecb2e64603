//! The one module that speaks the library's language: configuration entries become the
//! library's rules, descriptors become its direct limits, and its decisions come back as this
//! crate's [`Answer`]s. Nothing else in the crate names a `redis_ratelimit` type, so a change of
//! the library's API is a change of this file.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redis_ratelimit::enforce::{DirectLimit, Enforcer};
use redis_ratelimit::rules::{Identity, Rule, RuleSet};
use redis_ratelimit::store::Tls;
use redis_ratelimit::{Algorithm, BreakerConfig, Clock, FailurePolicy, Quota, Reconciled, RedisStore, StoreEvent};

use crate::config::{Config, ConfigError, Limit, Node, Policy, Rate, Unit};

mod answer;
mod permits;
use answer::answer_of;
pub use answer::{Answer, AnsweredBy, Decided, Grant, Why};
use permits::Permits;
pub use permits::{Held, InFlightRule};

/// A duration as the project writes them (`250ms`, `30s`, `5m`, `1h`, `1d`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    redis_ratelimit::duration::parse_ms(text).map(Duration::from_millis)
}

/// Which Redis the service keeps its counts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server (`redis://` or `rediss://`).
    Single(String),
    /// A Redis Cluster, found from any of these nodes.
    Cluster(Vec<String>),
    /// The primary these Sentinels report for `service`; `node_url` gives the data servers'
    /// user, password and database.
    Sentinel {
        /// The Sentinels.
        sentinels: Vec<String>,
        /// The service (master) name.
        service: String,
        /// `redis://user:password@/db` for the data servers.
        node_url: Option<String>,
    },
}

/// How the service reaches Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// Where.
    pub topology: Topology,
    /// A CA to trust for `rediss://` (else the system's roots).
    pub tls_ca: Option<PathBuf>,
    /// A client certificate and key for `rediss://`.
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// How long one call may take before the failure policies answer.
    pub timeout: Duration,
    /// Decide with the Redis module's commands instead of the scripts.
    pub module: bool,
}

/// The service's decision engine and what it needs besides Redis.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Prefix of every Redis key.
    pub key_prefix: String,
    /// Longest descriptor identity accepted, in bytes.
    pub max_key_bytes: usize,
    /// Failed calls in a row that open the breaker.
    pub breaker_failures: u32,
    /// How long the breaker stays open before a probe.
    pub breaker_open: Duration,
    /// Share of a limit at which an admitted request counts as near it.
    pub near_limit_ratio: f64,
    /// The secret the RateLimit fields' partition keys are keyed with.
    pub partition_key_secret: Option<Vec<u8>>,
}

/// A change of Redis's health, as the service reports it: one log line and a gauge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHealth {
    /// Whether Redis decides (false while the breaker is open).
    pub available: bool,
    /// What happened, with the cause and never a credential.
    pub message: String,
}

/// Connects the store `settings` describe (lazily: nothing is dialled until the first call).
pub fn store(settings: &StoreSettings) -> Result<RedisStore, String> {
    let store = match &settings.topology {
        Topology::Single(url) => RedisStore::from_url(url),
        Topology::Cluster(urls) => RedisStore::cluster(urls),
        Topology::Sentinel { sentinels, service, node_url } => {
            RedisStore::sentinel(sentinels, service, node_url.as_deref())
        }
    }
    .map_err(|e| e.to_string())?;
    let store = if settings.tls_ca.is_some() || settings.tls_client.is_some() {
        let mut tls = Tls::system_roots();
        if let Some(ca) = &settings.tls_ca {
            tls = tls.with_ca_file(ca).map_err(|e| e.to_string())?;
        }
        if let Some((cert, key)) = &settings.tls_client {
            tls = tls.with_client_files(cert, key).map_err(|e| e.to_string())?;
        }
        store.with_tls(&tls).map_err(|e| e.to_string())?
    } else {
        store
    };
    let store = store.with_timeout(settings.timeout).map_err(|e| e.to_string())?;
    if settings.module {
        store.with_module().map_err(|e| e.to_string())
    } else {
        Ok(store)
    }
}

/// Describes the library's own metrics (store calls, breaker) for the exposition.
pub fn describe_library_metrics() {
    redis_ratelimit::metrics::describe();
}

/// Where Redis is, without credentials.
pub fn describe(store: &RedisStore) -> String {
    store.describe()
}

/// The decision engine: the library's enforcer over the service's store, and the concurrency
/// limiters of the in-flight limits.
#[derive(Clone)]
pub struct Engine {
    enforcer: Enforcer,
    permits: Arc<Permits>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine deciding on `store` (None: in this process only, for tests and a single
    /// instance), reading `clock` (None: the system's), telling `on_health` each change of
    /// Redis's health.
    pub fn new(
        store: Option<RedisStore>,
        clock: Option<Arc<dyn Clock>>,
        settings: &EngineSettings,
        on_health: impl Fn(StoreHealth) + Send + Sync + 'static,
    ) -> Result<Engine, String> {
        let mut builder = Enforcer::builder(RuleSet::default())
            .key_prefix(&settings.key_prefix)
            .max_key_len(settings.max_key_bytes)
            .near_limit_ratio(settings.near_limit_ratio)
            .breaker(BreakerConfig::new(settings.breaker_failures, settings.breaker_open))
            .on_store_event(move |event| {
                let available = matches!(event, StoreEvent::Closed { .. });
                on_health(StoreHealth { available, message: event.to_string() });
            });
        let store = store.map(Arc::new);
        let permits = Arc::new(Permits {
            store: store.clone(),
            clock: clock.clone(),
            key_prefix: settings.key_prefix.clone(),
            max_key_bytes: settings.max_key_bytes,
            breaker: BreakerConfig::new(settings.breaker_failures, settings.breaker_open),
            built: std::sync::Mutex::new(HashMap::new()),
        });
        if let Some(store) = store {
            builder = builder.redis(store);
        }
        if let Some(clock) = clock {
            builder = builder.clock(clock);
        }
        if let Some(secret) = &settings.partition_key_secret {
            builder = builder.partition_key_secret(secret);
        }
        builder.build().map(|enforcer| Engine { enforcer, permits }).map_err(|e| e.to_string())
    }

    /// Whether Redis is being asked (the breaker is not open).
    pub fn store_available(&self) -> bool {
        !matches!(self.enforcer.breaker_state(), redis_ratelimit::BreakerState::Open { .. })
    }

    /// Decides `asks` all-or-nothing, in one call.
    pub async fn decide(&self, asks: &[Ask<'_>]) -> Result<Decided, DecideError> {
        let limits = asks.iter().map(direct).collect();
        let decision = self.enforcer.decide(limits).await.map_err(DecideError::from_library)?;
        Ok(Decided::from_library(decision))
    }

    /// Settles `ask` for a request that reserved `reserved` units of it, now that its real
    /// cost, `ask.cost`, is known: a surplus goes back, an excess is charged whether it fits
    /// or not (up to the limit's capacity for one request, and one capacity owed).
    pub async fn reconcile(&self, ask: &Ask<'_>, reserved: u64) -> Result<Settled, DecideError> {
        let done = self.enforcer.reconcile_direct(direct(ask), reserved).await.map_err(DecideError::from_library)?;
        Ok(match done {
            Reconciled::Exact => Settled { refunded: 0, charged: 0, uncharged: 0 },
            Reconciled::Refunded { units, .. } => Settled { refunded: units, charged: 0, uncharged: 0 },
            Reconciled::Charged { excess, charged } => Settled { refunded: 0, charged, uncharged: excess - charged },
        })
    }

    /// Decides `ask` and leases up to `spare` more units of its key for `lifetime`.
    pub async fn lease(&self, ask: &Ask<'_>, spare: u64, lifetime: Duration) -> Result<Grant, DecideError> {
        let leased = self.enforcer.lease(direct(ask), spare, lifetime).await.map_err(DecideError::from_library)?;
        Ok(Grant {
            decided: Decided::from_library(leased.decision),
            spare: leased.spare,
            valid_until_ms: leased.valid_until_ms,
        })
    }
}

/// What settling a request's real cost did, in units: given back (a surplus), charged (an
/// excess, into debt where it did not fit), and not charged (beyond the capacity of one request
/// or of one capacity owed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Units given back.
    pub refunded: u64,
    /// Units charged.
    pub charged: u64,
    /// Units of the excess not charged.
    pub uncharged: u64,
}

/// A decision that could not be made: what the caller sent cannot be decided, or Redis
/// answered what no limiter should.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// The descriptor's identity cannot be a key (too long).
    #[error("{0}")]
    InvalidKey(String),
    /// Redis answered something the service cannot use (a reply it should never give, a
    /// module that is not loaded, a command refused).
    #[error("{0}")]
    Store(String),
}

impl DecideError {
    fn from_library(e: redis_ratelimit::Error) -> DecideError {
        match e {
            redis_ratelimit::Error::InvalidKey(m) => DecideError::InvalidKey(m),
            other => DecideError::Store(other.to_string()),
        }
    }
}

/// One configuration entry's limit as the library enforces it.
#[derive(Debug)]
pub struct LimitRule {
    rule: Rule,
    /// The entry's limit.
    pub limit: Limit,
    grants: Option<GrantTerms>,
}

/// The terms of a limit's quota grants, read when the configuration is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantTerms {
    /// How long a grant may be spent after it is made.
    pub lifetime: Duration,
    /// The most requests one grant holds.
    pub max_requests: u64,
}

impl LimitRule {
    /// The terms of its quota grants, if its entry allows them.
    pub fn grants(&self) -> Option<GrantTerms> {
        self.grants
    }

    /// The most one request may cost under the entry's own quota.
    pub fn capacity(&self) -> u64 {
        self.rule.quota().capacity(self.rule.algorithm())
    }

    /// The most one request may cost under `requests` per `unit` (a per-request limit).
    pub fn capacity_under(&self, requests: u32, unit: Unit) -> u64 {
        quota_of(self.rule.algorithm(), requests, unit, None).capacity(self.rule.algorithm())
    }

    /// Whether the limit's quota refuses everything (0 requests per unit).
    pub fn refuses_all(&self) -> bool {
        self.limit.requests_per_unit == 0
    }
}

/// The compiled rules of one configuration: one per limited entry, by the entry's statistics
/// name, and per domain the rule of per-request limits that no entry allows.
#[derive(Debug, Default)]
pub struct Rules {
    by_stat: HashMap<String, Arc<LimitRule>>,
    request_limits: HashMap<String, Arc<LimitRule>>,
    in_flight: HashMap<String, Arc<InFlightRule>>,
    in_flight_named: HashMap<String, Arc<InFlightRule>>,
}

impl Rules {
    /// The rule of the limited entry `node`.
    pub fn of(&self, node: &Node) -> Option<&Arc<LimitRule>> {
        self.by_stat.get(&node.stat)
    }

    /// The in-flight rule of the entry `node`.
    pub fn in_flight_of(&self, node: &Node) -> Option<&Arc<InFlightRule>> {
        self.in_flight.get(&node.stat)
    }

    /// The rule a per-request limit is decided under in `domain` when no entry allows it and
    /// the service honours such limits anywhere (as the reference does).
    pub fn request_limit(&self, domain: &str) -> Option<&Arc<LimitRule>> {
        self.request_limits.get(domain)
    }
}

/// A rule's name: letters, digits, `.`, `_`, `-`, at most 64 of them. The statistics name as it
/// is when it fits, else what fits of it and a digest of the whole (FNV-1a, stable across
/// builds, since the name is part of Redis keys).
fn rule_name(stat: &str) -> String {
    let clean: String =
        stat.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    if clean == stat && stat.len() <= 64 {
        return clean;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in stat.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let head: String = clean.chars().take(45).collect();
    format!("{head}-h{h:016x}")
}

fn algorithm_of(name: &str) -> Algorithm {
    Algorithm::ALL.into_iter().find(|a| a.name() == name).unwrap_or(Algorithm::FixedWindow)
}

fn quota_of(algorithm: Algorithm, requests: u32, unit: Unit, burst: Option<u64>) -> Quota {
    let quota = Quota::new(u64::from(requests), Duration::from_millis(unit.ms()));
    match burst {
        Some(b) if algorithm.is_bucket() => quota.with_burst(b),
        _ => quota,
    }
}

fn policy_of(policy: Policy) -> FailurePolicy {
    match policy {
        Policy::FailOpen => FailurePolicy::FailOpen,
        Policy::FailClosed => FailurePolicy::FailClosed,
        Policy::LocalBudget { requests, unit } => {
            FailurePolicy::LocalBudget { limit: requests, period: Duration::from_millis(unit.ms()) }
        }
    }
}

fn rule_of(name: &str, limit: &Limit) -> Rule {
    let algorithm = algorithm_of(&limit.algorithm);
    // A limit of 0 refuses everything without asking Redis; its rule is never decided, and
    // holds a quota of 1 only so that it can be built.
    let quota = quota_of(algorithm, limit.requests_per_unit.max(1), limit.unit, limit.burst);
    Rule::new(name, algorithm, quota)
        .failure_policy(policy_of(limit.policy))
        .shadow(limit.shadow)
        .blockable(limit.blockable)
}

/// Compiles `config` into the library's rules, refusing what the library cannot enforce with
/// the entry's place in the file (a sliding log above its largest limit, a burst of 0, a
/// quota grant whose lifetime leaves no unit to grant).
pub fn compile(config: &Config) -> Result<Rules, ConfigError> {
    let mut rules = Rules::default();
    let mut names: HashMap<String, String> = HashMap::new();
    for node in config.limits() {
        let place = match &node.rate {
            Some(Rate::Limited(limit)) => &limit.place,
            Some(Rate::InFlight(f)) => &f.place,
            _ => continue,
        };
        let name = rule_name(&node.stat);
        if let Some(other) = names.insert(name.clone(), node.stat.clone()) {
            return Err(ConfigError {
                place: place.clone(),
                message: format!("its name in Redis keys, {name:?}, is also {other:?}'s; rename one of the entries"),
            });
        }
        let limit = match &node.rate {
            Some(Rate::Limited(limit)) => limit,
            Some(Rate::InFlight(f)) => {
                let rule = Arc::new(InFlightRule::new(name.clone(), (**f).clone()));
                rules.in_flight.insert(node.stat.clone(), rule.clone());
                rules.in_flight_named.insert(name, rule);
                continue;
            }
            _ => continue,
        };
        let rule = rule_of(&name, limit);
        RuleSet::builder()
            .rule(rule.clone())
            .build()
            .map_err(|e| ConfigError { place: limit.place.clone(), message: format!("{}: {}", e.field, e.message) })?;
        let grants = match &limit.grants {
            Some(g) => {
                let lifetime =
                    parse_duration(&g.lifetime).map_err(|m| ConfigError { place: g.place.clone(), message: m })?;
                let lifetime_ms = u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX);
                if lifetime_ms == 0 {
                    return Err(ConfigError { place: g.place.clone(), message: "must be at least 1ms".into() });
                }
                let capacity = redis_ratelimit::modes::Leases::default()
                    .with_lifetime(lifetime)
                    .capacity(rule.algorithm(), &rule.quota());
                if capacity == 0 {
                    return Err(ConfigError {
                        place: g.place.clone(),
                        message: format!(
                            "{} refills the whole burst of {} at {} per {}: a grant could hold nothing; use a shorter \
                             lifetime or a larger burst",
                            g.lifetime,
                            rule.quota().burst(),
                            limit.requests_per_unit,
                            limit.unit.name()
                        ),
                    });
                }
                Some(GrantTerms { lifetime, max_requests: g.max_requests })
            }
            None => None,
        };
        rules.by_stat.insert(node.stat.clone(), Arc::new(LimitRule { rule, limit: (**limit).clone(), grants }));
    }
    for domain in config.domains.keys() {
        let stat = format!("{domain}.request_limit");
        let limit = Limit {
            requests_per_unit: 1,
            unit: Unit::Second,
            name: None,
            replaces: Vec::new(),
            shadow: false,
            algorithm: "fixed-window".into(),
            burst: None,
            policy: Policy::FailOpen,
            blockable: false,
            allow_request_limit: true,
            grants: None,
            place: crate::config::Place { file: PathBuf::new(), path: stat.clone(), line: 0 },
        };
        let rule = rule_of(&rule_name(&stat), &limit);
        rules.request_limits.insert(domain.clone(), Arc::new(LimitRule { rule, limit, grants: None }));
    }
    Ok(rules)
}

/// One limit of a request to decide: the entry's rule, what the request is counted by (its
/// descriptor's entries, as keys and values), the per-request limit if one applies, and what
/// it costs.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// The entry's rule.
    pub rule: &'a LimitRule,
    /// The descriptor's entries: key and the value counted by.
    pub entries: Vec<(&'a str, &'a str)>,
    /// A per-request limit: requests per unit.
    pub request_limit: Option<(u32, Unit)>,
    /// The cost (0 peeks).
    pub cost: u64,
}

fn direct(ask: &Ask<'_>) -> DirectLimit {
    let rule = &ask.rule.rule;
    let quota = match ask.request_limit {
        Some((requests, unit)) => quota_of(rule.algorithm(), requests, unit, None),
        None => rule.quota(),
    };
    DirectLimit { rule: rule.clone(), identity: identity(&ask.entries), quota, cost: ask.cost }
}

/// What a descriptor's entries count by.
fn identity(entries: &[(&str, &str)]) -> Identity {
    Identity::from_values(entries.iter().copied())
        .unwrap_or_else(|| Identity::from_values([("descriptor", "")]).expect("one value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_fit_the_library_and_stay_apart() {
        assert_eq!(rule_name("messaging.to_number"), "messaging.to_number");
        let odd = rule_name("edge.path_/api/*/x");
        assert!(odd.starts_with("edge.path_-api-"), "{odd}");
        assert!(odd.len() <= 64 && odd.chars().all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c)), "{odd}");
        assert_ne!(rule_name("d.k_a/b"), rule_name("d.k_a?b"));
        let long = rule_name(&"x".repeat(200));
        assert!(long.len() <= 64, "{long}");
    }
}
