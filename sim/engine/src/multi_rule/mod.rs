//! Several rules per request: what the `multi-rule` scenario enforces, the oracle that applies
//! the same rules all-or-nothing in true time order ([`oracle`]), and the checks ([`check`]):
//! no request consumed from one rule while another denied it, and each rule kept its own
//! bound.
//!
//! Every request of the scenario matches three rules: one per user (the arrival's key), one
//! per route (the key's route, `key % ROUTES`), and one global. A third of the users are on
//! the `pro` plan ([`is_pro`]), for which the per-user rule has a tier of twice its quota: the
//! enforcer learns the plan from the request, the oracle from the user, and each tier is held
//! to its own bound. Each rule's first key part is
//! its Redis Cluster hash tag, so the three live in three different slots: the library decides
//! them in one script call on one Redis ([`RulesSubject::OneCall`], what `redis_ratelimit::enforce`
//! does), and the `rules-per-slot` subject runs the path a cluster would need, one dry and one
//! committing call per slot ([`RulesSubject::PerSlot`]), whose splits are the finding.

pub mod check;
pub mod oracle;

use redis_ratelimit::rules::{KeyPart, Match, Rule, RuleSet};
use redis_ratelimit::{Algorithm, FailurePolicy, Quota};
use std::time::Duration;

use crate::promise::Promise;

/// The routes requests are spread over.
pub const ROUTES: u32 = 2;

/// How the scenario's rules are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RulesSubject {
    /// The library's enforcement point on one Redis: every rule in one atomic script call.
    OneCall,
    /// The same rules decided slot by slot, as a Redis Cluster store must when a request's
    /// rules cannot share a slot: a dry pass, then a committing pass, per slot.
    PerSlot,
    /// The library's enforcement point on the Redis module: every rule in one
    /// `RATELIMIT.RULES` (`--store module`).
    OneCallModule,
}

/// What a rule counts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The user (the arrival's key).
    User,
    /// The route (`key % ROUTES`).
    Route,
    /// One count for every request.
    Global,
}

/// One of the scenario's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimRule {
    /// Its name (the policy's name).
    pub name: &'static str,
    /// Its algorithm.
    pub algorithm: Algorithm,
    /// Its quota.
    pub quota: Quota,
    /// What it counts by.
    pub by: By,
    /// The quota of users on the `pro` plan, if it has a tier for them.
    pub pro: Option<Quota>,
}

/// Whether the user `key` is on the `pro` plan: a third of the users.
pub fn is_pro(key: u32) -> bool {
    key % 3 == 1
}

impl SimRule {
    /// The identity (a number per user, route, or 0) of a request on `key` under this rule.
    pub fn identity(&self, key: u32) -> u32 {
        match self.by {
            By::User => key,
            By::Route => route_of(key),
            By::Global => 0,
        }
    }

    /// The quota a request on `key` is held to: the `pro` tier's for a user on that plan.
    pub fn quota_for(&self, key: u32) -> Quota {
        match self.pro {
            Some(pro) if is_pro(key) => pro,
            _ => self.quota,
        }
    }

    /// What it promises.
    pub fn promise(&self) -> Promise {
        Promise::of(self.algorithm)
    }
}

/// What the rules together admit per `bucket_ms` over `keys` (the users seen): the tightest
/// of each rule's rates summed over the identities it has among them (each at its tier's).
pub fn limit_per_bucket(rules: &[SimRule], keys: &std::collections::BTreeSet<u32>, bucket_ms: u64) -> f64 {
    rules
        .iter()
        .map(|r| {
            let identities: std::collections::BTreeMap<u32, Quota> =
                keys.iter().map(|&k| (r.identity(k), r.quota_for(k))).collect();
            let rate = |q: &Quota| q.limit() as f64 * bucket_ms as f64 / q.period_ms() as f64;
            if identities.is_empty() {
                rate(&r.quota)
            } else {
                identities.values().map(rate).sum()
            }
        })
        .fold(f64::INFINITY, f64::min)
}

/// The route of a request on `key`.
pub fn route_of(key: u32) -> u32 {
    key % ROUTES
}

impl RulesSubject {
    /// The catalogue's two, in table order (the module's row is `--store module`'s).
    pub const ALL: [RulesSubject; 2] = [RulesSubject::OneCall, RulesSubject::PerSlot];

    /// Its name in tables and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            RulesSubject::OneCall => "rules",
            RulesSubject::PerSlot => "rules-per-slot",
            RulesSubject::OneCallModule => "rules-module",
        }
    }

    /// Whether it is the library's own way (its broken checks fail the run).
    pub const fn is_library(self) -> bool {
        matches!(self, RulesSubject::OneCall | RulesSubject::OneCallModule)
    }

    /// The scenario's rules for its quota `q` (the per-user rule's): per user a token bucket
    /// of `q` (twice `q` for `pro` users), per route a sliding log of twice `q`'s limit, and a
    /// global GCRA of three times it, so each binds at the scenario's load.
    pub fn rules(q: Quota) -> Vec<SimRule> {
        let (l, w) = (q.limit(), q.period_ms());
        let pro = Some(Quota::new(2 * l, Duration::from_millis(w)).with_burst(2 * q.burst()));
        vec![
            SimRule { name: "per-user", algorithm: Algorithm::TokenBucket, quota: q, by: By::User, pro },
            SimRule {
                name: "per-route",
                algorithm: Algorithm::SlidingLog,
                quota: Quota::new(2 * l, Duration::from_millis(w)),
                by: By::Route,
                pro: None,
            },
            SimRule {
                name: "global",
                algorithm: Algorithm::Gcra,
                quota: Quota::new(3 * l, Duration::from_millis(w)).with_burst(l),
                by: By::Global,
                pro: None,
            },
        ]
    }

    /// The same rules for the library, every one failing over to `policy`.
    pub fn rule_set(q: Quota, policy: FailurePolicy) -> anyhow::Result<RuleSet> {
        let mut builder = RuleSet::builder();
        for r in Self::rules(q) {
            let key = match r.by {
                By::User => KeyPart::User,
                By::Route => KeyPart::Route,
                By::Global => KeyPart::Const("all".into()),
            };
            let mut rule =
                Rule::new(r.name, r.algorithm, r.quota).matching(Match::any()).key([key]).failure_policy(policy);
            if let Some(pro) = r.pro {
                rule = rule.tier("pro", pro);
            }
            builder = builder.rule(rule);
        }
        Ok(builder.build()?)
    }
}
