//! `ShouldRateLimit`: a request's descriptors matched to the configuration, decided by the
//! engine, answered with every field of the response.
//!
//! For each descriptor, in order:
//!
//! 1. Its entries are matched level by level as the reference matches them: at each level the
//!    entry with the same key and value, else a wildcard value that matches (in file order), else
//!    the entry with the key alone; the limit applies only if the descriptor's last entry lands
//!    on an entry with a `rate_limit` (a descriptor with more entries than the configuration has
//!    levels matches nothing). Then `replaces` drops every limit another matched limit names.
//! 2. Its cost is its own `hits_addend` when set (0 peeks), else the request's, else 1; its own
//!    `limit` replaces the entry's quota where the entry says `allow_request_limit` (or anywhere,
//!    with `--request-limits anywhere`, as the reference does).
//! 3. All limited descriptors are decided together: all-or-nothing by default (one atomic call:
//!    nothing is charged when any enforced descriptor is over its limit), or each on its own
//!    with `--charge everything` (the reference's way: a request refused by one descriptor is
//!    still charged by the others). Two descriptors counting the same state are one limit of
//!    their summed cost.
//! 4. With quota grants asked for (the `ratelimit-quota-grants` metadata) and allowed by every
//!    limited descriptor's entry, each admitted descriptor's status carries a quota: requests the
//!    proxy may admit itself until the quota's `valid_until` (see [`crate`]'s guide for the bound).
//! 5. In-flight limits take their permits before anything is charged (a refused permit leaves
//!    the rates only looked at; a refused rate gives the permits back), and an admitted request
//!    carries its permits' tickets in `dynamic_metadata` for the proxy to send back, as a
//!    descriptor of one `ratelimit.permits` entry, when its stream ends (`docs/RLS.md`).
//! 6. A descriptor whose last entry is `ratelimit.reserved` settles the rate limit of the
//!    entries before it when the stream ends: its cost is the request's real cost, the entry's
//!    value what it reserved; the surplus goes back, the excess is charged whether it fits or
//!    not, as a debt the key's next requests wait out (`docs/RLS.md`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

use crate::adapter::{Answer, AnsweredBy, Ask, DecideError, Decided, Engine, Held, InFlightRule, LimitRule, Rules};
use crate::config::{Config, Unit};
use crate::metrics;

mod in_flight;
mod matching;
use in_flight::permits_metadata;
use matching::{MatchKind, Matched};
mod response;
mod validate;
use response::{clip, no_limit_status};

/// How a request's descriptors are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Charge {
    /// All-or-nothing: one atomic decision; a refused request is charged nothing.
    #[default]
    AllOrNothing,
    /// Each descriptor on its own (the reference's way): a refused request is still charged by
    /// every descriptor that admitted it.
    Everything,
}

/// What to answer for a domain no configuration file names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownDomain {
    /// `NOT_FOUND`, naming the domain: a misspelt domain is a limit nobody enforces.
    #[default]
    Refuse,
    /// OK with no limit, as the reference answers.
    Allow,
}

/// Where a descriptor's own `limit` is honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestLimits {
    /// Under entries that say `allow_request_limit: true`.
    #[default]
    Configured,
    /// Everywhere, as the reference does (a descriptor no entry matches is then limited by its
    /// own `limit`, counted by its entries).
    Anywhere,
}

/// Which response headers the service adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Headers {
    /// The draft-11 `RateLimit-Policy` and `RateLimit` fields and `Retry-After` on a denial.
    #[default]
    Draft11,
    /// The `X-RateLimit-Limit`, `-Remaining` and `-Reset` fields instead.
    Legacy,
    /// None.
    Off,
}

/// The service's options (the command line's).
#[derive(Debug, Clone)]
pub struct Options {
    /// How descriptors are charged.
    pub charge: Charge,
    /// What an unknown domain gets.
    pub unknown_domain: UnknownDomain,
    /// Where per-request limits apply.
    pub request_limits: RequestLimits,
    /// Which response headers to add.
    pub headers: Headers,
    /// Every limit in shadow mode: decided, counted, never refusing (the reference's global
    /// shadow mode).
    pub shadow: bool,
    /// Most descriptors in one request.
    pub max_descriptors: usize,
    /// Most entries in one descriptor.
    pub max_entries: usize,
    /// Longest key or value of an entry, in bytes.
    pub max_entry_bytes: usize,
    /// Largest cost of one descriptor.
    pub max_hits: u64,
    /// How much earlier than the lease ends a quota grant's `valid_until` says: room for the
    /// proxy's clock to run behind Redis's.
    pub grant_clock_allowance: Duration,
    /// Share of a limit at which an admitted request counts as near it.
    pub near_limit_ratio: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            charge: Charge::default(),
            unknown_domain: UnknownDomain::default(),
            request_limits: RequestLimits::default(),
            headers: Headers::default(),
            shadow: false,
            max_descriptors: 64,
            max_entries: 32,
            max_entry_bytes: 4_096,
            max_hits: u64::from(u32::MAX),
            grant_clock_allowance: Duration::from_millis(25),
            near_limit_ratio: 0.8,
        }
    }
}

/// A request refused before any decision: which gRPC code and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code.
    pub code: tonic::Code,
    /// What is wrong, naming the field and the value.
    pub message: String,
}

impl Refusal {
    fn invalid(message: impl Into<String>) -> Refusal {
        Refusal { code: tonic::Code::InvalidArgument, message: message.into() }
    }
}

impl From<Refusal> for tonic::Status {
    fn from(r: Refusal) -> tonic::Status {
        tonic::Status::new(r.code, r.message)
    }
}

/// A configuration and its compiled rules, swapped whole on reload.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Its rules.
    pub rules: Rules,
}

/// The rate limit service: the configuration in force, the engine and the options.
#[derive(Debug)]
pub struct Service {
    loaded: RwLock<Arc<Loaded>>,
    engine: Engine,
    options: Options,
    /// The detailed metric names seen, bounded (beyond it an entry's own name is used).
    labels: Mutex<HashSet<String>>,
}

/// Most distinct detailed metric names kept.
const MAX_DETAILED_LABELS: usize = 10_000;

/// The key of the one entry of a descriptor that releases permits: the proxy sends it when a
/// request's stream ends, its value the `ratelimit.permits` metadata the service answered the
/// request with.
pub const PERMITS: &str = "ratelimit.permits";

/// The key of the last entry of a descriptor that settles a request's real cost: the proxy
/// sends it when the stream ends, the descriptor's hits the real cost and the entry's value the
/// units the request reserved when it was admitted.
pub const RESERVED: &str = "ratelimit.reserved";

/// What one descriptor came to before deciding.
enum Slot<'a> {
    /// Releases the permits its value's tickets stand for.
    Release,
    /// Settles a rate limit: `reserved` when the request was admitted, the descriptor's cost
    /// now that it is known.
    Settle { rule: &'a LimitRule, request_limit: Option<(u32, Unit)>, reserved: u64, entries: Vec<(&'a str, &'a str)> },
    /// An in-flight limit: a permit asked for (or, at a cost of 0, only looked at).
    InFlight { rule: &'a InFlightRule, shadow: bool, entries: Vec<(&'a str, &'a str)>, peek: bool },
    /// No limit applies (nothing matched, or another limit replaced it).
    NoLimit,
    /// `unlimited: true`.
    Unlimited,
    /// A limit of 0: refused without asking Redis.
    Blocked { rule: &'a LimitRule, shadow: bool, request_limit: Option<(u32, Unit)> },
    /// Decided by the engine, as the limit `item` of the call.
    Limited {
        rule: &'a LimitRule,
        shadow: bool,
        request_limit: Option<(u32, Unit)>,
        cost: u64,
        too_costly: bool,
        item: usize,
    },
}

impl Slot<'_> {
    fn enforced_refusal(&self) -> bool {
        match self {
            Slot::Blocked { shadow, .. } => !shadow,
            Slot::Limited { shadow, too_costly, .. } => *too_costly && !shadow,
            _ => false,
        }
    }
}

/// What a call's limits answered, for the response: per ask, the answers, the decisions that
/// made them (for the headers) and the quota granted; per descriptor, its permit's answer.
struct Outcomes {
    answers: Vec<Answer>,
    decisions: Vec<Decided>,
    granted: Vec<Option<Granted>>,
    permits: Vec<Option<Answer>>,
}

/// The quota granted for one limit.
#[derive(Debug, Clone, Copy)]
struct Granted {
    requests: u64,
    valid_until_ms: u64,
}

impl Service {
    /// A service deciding with `engine` under `loaded`.
    pub fn new(loaded: Loaded, engine: Engine, options: Options) -> Service {
        metrics::config_loaded(&loaded.config);
        Service { loaded: RwLock::new(Arc::new(loaded)), engine, options, labels: Mutex::new(HashSet::new()) }
    }

    /// The configuration in force.
    pub fn loaded(&self) -> Arc<Loaded> {
        self.loaded.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts `loaded` in force for every request from now on; requests already deciding finish
    /// under the configuration they started with.
    pub fn replace(&self, loaded: Loaded) {
        metrics::config_loaded(&loaded.config);
        *self.loaded.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded);
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Answers `req`; `grants` says whether the caller asked for quota grants.
    pub async fn should_rate_limit(&self, req: &RateLimitRequest, grants: bool) -> Result<RateLimitResponse, Refusal> {
        let answer = self.answer(req, grants).await;
        if let Err(r) = &answer {
            metrics::refused(&req.domain, r.code);
        }
        answer
    }

    async fn answer(&self, req: &RateLimitRequest, wants_grants: bool) -> Result<RateLimitResponse, Refusal> {
        self.validate(req)?;
        let loaded = self.loaded();
        let Some(domain) = loaded.config.domains.get(&req.domain) else {
            if self.options.unknown_domain == UnknownDomain::Allow {
                return Ok(RateLimitResponse {
                    overall_code: Code::Ok as i32,
                    statuses: req.descriptors.iter().map(|_| no_limit_status()).collect(),
                    ..Default::default()
                });
            }
            let known: Vec<&str> = loaded.config.domains.keys().map(String::as_str).take(10).collect();
            return Err(Refusal {
                code: tonic::Code::NotFound,
                message: format!(
                    "unknown domain {:?}; the configuration names {}",
                    clip(&req.domain),
                    known.join(", ")
                ),
            });
        };

        // 1. Match, and find each descriptor's limit.
        let mut matched: Vec<Matched<'_>> = Vec::with_capacity(req.descriptors.len());
        for (i, d) in req.descriptors.iter().enumerate() {
            matched.push(self.matched(&loaded.rules, &req.domain, &domain.root, i, d, req.hits_addend)?);
        }
        let replaced: HashSet<&str> = matched.iter().flat_map(|m| m.replaces.iter().copied()).collect();

        // 2. The limits to decide, one per distinct state.
        let mut asks: Vec<Ask<'_>> = Vec::new();
        let mut slots: Vec<Slot<'_>> = Vec::with_capacity(matched.len());
        for (d, m) in req.descriptors.iter().zip(&matched) {
            let slot = match m.kind {
                MatchKind::NoLimit => Slot::NoLimit,
                MatchKind::Unlimited => Slot::Unlimited,
                MatchKind::Release => Slot::Release,
                MatchKind::Settle { rule, request_limit, reserved } => {
                    if rule.limit.name.as_deref().is_some_and(|n| replaced.contains(n)) {
                        Slot::NoLimit
                    } else {
                        let entries = d.entries.iter().zip(&m.values).map(|(e, v)| (e.key.as_str(), *v)).collect();
                        Slot::Settle { rule, request_limit, reserved, entries }
                    }
                }
                MatchKind::InFlight { rule } => {
                    if rule.limit.name.as_deref().is_some_and(|n| replaced.contains(n)) {
                        Slot::NoLimit
                    } else {
                        let entries = d.entries.iter().zip(&m.values).map(|(e, v)| (e.key.as_str(), *v)).collect();
                        let shadow = self.options.shadow || rule.limit.shadow;
                        Slot::InFlight { rule, shadow, entries, peek: m.cost == 0 }
                    }
                }
                MatchKind::Limited { rule, request_limit } => {
                    let shadow = self.options.shadow || rule.limit.shadow;
                    if rule.limit.name.as_deref().is_some_and(|n| replaced.contains(n)) {
                        Slot::NoLimit
                    } else if request_limit.map_or(rule.refuses_all(), |(r, _)| r == 0) {
                        Slot::Blocked { rule, shadow, request_limit }
                    } else {
                        let capacity = match request_limit {
                            Some((r, u)) => rule.capacity_under(r, u),
                            None => rule.capacity(),
                        };
                        let too_costly = m.cost > capacity;
                        let entries: Vec<(&str, &str)> =
                            d.entries.iter().zip(&m.values).map(|(e, v)| (e.key.as_str(), *v)).collect();
                        let same = asks.iter().position(|a| {
                            std::ptr::eq(a.rule, rule) && a.entries == entries && a.request_limit == request_limit
                        });
                        let item = match same {
                            Some(i) => {
                                asks[i].cost = asks[i].cost.saturating_add(if too_costly { 0 } else { m.cost });
                                i
                            }
                            None => {
                                let cost = if too_costly { 0 } else { m.cost };
                                asks.push(Ask { rule, entries, request_limit, cost });
                                asks.len() - 1
                            }
                        };
                        Slot::Limited { rule, shadow, request_limit, cost: m.cost, too_costly, item }
                    }
                }
            };
            slots.push(slot);
        }
        // A merged limit whose summed cost no longer fits is refused like one too costly.
        for (i, a) in asks.iter_mut().enumerate() {
            let capacity = match a.request_limit {
                Some((r, u)) => a.rule.capacity_under(r, u),
                None => a.rule.capacity(),
            };
            if a.cost > capacity {
                a.cost = 0;
                for s in slots.iter_mut() {
                    if let Slot::Limited { item, too_costly, .. } = s {
                        if *item == i {
                            *too_costly = true;
                        }
                    }
                }
            }
        }
        let doomed = slots.iter().any(Slot::enforced_refusal);

        // 3. Release what the proxy gives back and settle the costs it reports, then take
        //    permits before any charge: a permit can be given back when something else refuses
        //    the request, a charge cannot.
        for ((d, slot), m) in req.descriptors.iter().zip(&slots).zip(&matched) {
            match slot {
                Slot::Release => {
                    self.release(&loaded.rules, &req.domain, &d.entries[0].value).await.map_err(refusal)?;
                }
                Slot::Settle { rule, request_limit, reserved, entries } => {
                    let ask = Ask { rule, entries: entries.clone(), request_limit: *request_limit, cost: m.cost };
                    let done = self.engine.reconcile(&ask, *reserved).await.map_err(refusal)?;
                    metrics::settled(&req.domain, &m.metric, done);
                }
                _ => {}
            }
        }
        let (permits, permits_refuse) = self.permits(&loaded.rules, &slots, doomed).await.map_err(refusal)?;

        // 4. Decide.
        let doomed = doomed || permits_refuse;
        let grantable = wants_grants && !doomed && self.grantable(&slots, &asks);
        let decided = self.decide(&mut asks, doomed, grantable).await.map_err(refusal);
        let (answers, decisions, granted) = match decided {
            Ok(d) => d,
            Err(e) => {
                self.give_back(&loaded.rules, &permits).await;
                return Err(e);
            }
        };

        // 5. Answer; a request refused holds no permit, an admitted one carries its tickets.
        let answered = permits.iter().map(|p| p.as_ref().map(|h| h.answer.clone())).collect();
        let outcomes = Outcomes { answers, decisions, granted, permits: answered };
        let mut response = self.response(req, &matched, &slots, &outcomes);
        let tickets: Vec<&str> = permits.iter().flatten().filter_map(|h| h.ticket.as_deref()).collect();
        if response.overall_code == Code::OverLimit as i32 {
            self.give_back(&loaded.rules, &permits).await;
        } else if !tickets.is_empty() {
            response.dynamic_metadata = Some(permits_metadata(&tickets.join(" ")));
        }
        Ok(response)
    }

    /// Whether every limited descriptor may be granted quota: its entry allows grants, it
    /// enforces (a shadow limit must see every request to count them), costs 1 (a grant counts
    /// requests, not units), and has no per-request limit.
    fn grantable(&self, slots: &[Slot<'_>], asks: &[Ask<'_>]) -> bool {
        let mut any = false;
        for s in slots {
            match s {
                Slot::Limited { rule, shadow, request_limit, cost, too_costly, item } => {
                    if rule.limit.grants.is_none()
                        || *shadow
                        || *cost != 1
                        || *too_costly
                        || request_limit.is_some()
                        || asks[*item].cost != 1
                    {
                        return false;
                    }
                    any = true;
                }
                // A quota spent by the proxy would start requests no permit counts.
                Slot::Blocked { .. } | Slot::InFlight { .. } | Slot::Settle { .. } => return false,
                Slot::NoLimit | Slot::Unlimited | Slot::Release => {}
            }
        }
        any
    }

    /// Decides `asks`: one answer per ask, the decisions that made them (for the headers), and
    /// the quota granted per ask when `grantable`.
    async fn decide(
        &self,
        asks: &mut [Ask<'_>],
        doomed: bool,
        grantable: bool,
    ) -> Result<(Vec<Answer>, Vec<Decided>, Vec<Option<Granted>>), DecideError> {
        if asks.is_empty() {
            return Ok((Vec::new(), Vec::new(), Vec::new()));
        }
        let allowance_ms = u64::try_from(self.options.grant_clock_allowance.as_millis()).unwrap_or(u64::MAX);
        if grantable {
            let grants = |a: &Ask<'_>| a.rule.grants().expect("grantable limits have grants");
            if let [one] = &*asks {
                let g = grants(one);
                let grant = self.engine.lease(one, g.max_requests, g.lifetime).await?;
                let valid_until_ms = grant.valid_until_ms.saturating_sub(allowance_ms);
                let granted = (grant.spare > 0 && valid_until_ms > grant.decided.answers[0].decided_at_ms)
                    .then_some(Granted { requests: grant.spare, valid_until_ms });
                return Ok((grant.decided.answers.clone(), vec![grant.decided], vec![granted]));
            }
            let decided = self.engine.decide(asks).await?;
            let mut granted = vec![None; asks.len()];
            if decided.allowed && decided.answers.iter().all(|a| a.by == AnsweredBy::Redis) {
                let leases = futures::future::join_all(asks.iter().map(|a| {
                    let g = grants(a);
                    let pure = Ask { cost: 0, ..a.clone() };
                    async move { self.engine.lease(&pure, g.max_requests, g.lifetime).await }
                }))
                .await;
                for (slot, lease) in granted.iter_mut().zip(leases) {
                    if let Ok(grant) = lease {
                        let valid_until_ms = grant.valid_until_ms.saturating_sub(allowance_ms);
                        let at = grant.decided.answers.first().map_or(0, |a| a.decided_at_ms);
                        if grant.spare > 0 && valid_until_ms > at {
                            *slot = Some(Granted { requests: grant.spare, valid_until_ms });
                        }
                    }
                }
            }
            return Ok((decided.answers.clone(), vec![decided], granted));
        }
        if doomed {
            // Refused whatever Redis says: the others are only looked at, never charged.
            for a in asks.iter_mut() {
                a.cost = 0;
            }
        }
        match self.options.charge {
            Charge::AllOrNothing => {
                let decided = self.engine.decide(asks).await?;
                Ok((decided.answers.clone(), vec![decided], vec![None; asks.len()]))
            }
            Charge::Everything => {
                let each =
                    futures::future::join_all(asks.iter().map(|a| self.engine.decide(std::slice::from_ref(a)))).await;
                let mut answers = Vec::with_capacity(asks.len());
                let mut decisions = Vec::with_capacity(asks.len());
                for d in each {
                    let d = d?;
                    answers.push(d.answers[0].clone());
                    decisions.push(d);
                }
                Ok((answers, decisions, vec![None; asks.len()]))
            }
        }
    }
}

/// How a call that could not be decided is refused.
fn refusal(e: DecideError) -> Refusal {
    match e {
        DecideError::InvalidKey(m) => Refusal::invalid(format!("a descriptor cannot be counted: {m}")),
        DecideError::Store(m) => Refusal { code: tonic::Code::Unavailable, message: m },
    }
}
