//! What the rules decided, counted per rule in this process ([`super::Enforcer::counts`]): for a
//! dashboard of its own and for seeing what a shadow rule would have done (the `metrics` feature
//! also sends each decision to the `metrics` facade). Memory is bounded by the number of rules,
//! whatever keys clients send.

use std::collections::BTreeMap;

use crate::decision::Source;
use crate::sync::{lock, Mutex};

use super::ruling::{RulesDecision, Ruling};

/// One rule's counters since it was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RuleCounts {
    /// Requests the rule decided.
    pub decided: u64,
    /// Requests the rule alone denied (for a shadow rule: would have denied).
    pub denied: u64,
    /// Requests whose cost was taken from the rule.
    pub consumed: u64,
    /// Decisions made by the rule's failure policy rather than Redis.
    pub degraded: u64,
}

/// Everything counted since the enforcer started (rule counters since each rule was loaded).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Counts {
    /// Per rule, by name; a shadow rule's `denied` is what it would have rejected.
    pub rules: BTreeMap<String, RuleCounts>,
    /// Requests the allow list let through.
    pub allowlisted: u64,
    /// Requests the deny list refused.
    pub denylisted: u64,
    /// Requests refused for a missing key, or a header saying who the client is sent twice.
    pub missing_key: u64,
    /// Requests admitted.
    pub allowed: u64,
    /// Requests denied by the rules.
    pub denied: u64,
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    inner: Mutex<Counts>,
}

impl Counters {
    /// Counts `ruling`; `near_limit_ratio` is the share of a rule's limit at which an admitted
    /// decision counts as near it in the metrics.
    pub(crate) fn record(&self, ruling: &Ruling, near_limit_ratio: f64) {
        let mut m = lock(&self.inner);
        match ruling {
            Ruling::Allowlisted => m.allowlisted += 1,
            Ruling::Denylisted => m.denylisted += 1,
            Ruling::MissingKey { .. } | Ruling::RepeatedHeader { .. } => m.missing_key += 1,
            Ruling::Decided(d) => record_decision(&mut m, d, near_limit_ratio),
            Ruling::Unmatched => {}
        }
    }

    /// Keeps the counters of the rules still loaded, drops the others.
    pub(crate) fn retain(&self, names: &[&str]) {
        lock(&self.inner).rules.retain(|name, _| names.contains(&name.as_str()));
    }

    pub(crate) fn snapshot(&self) -> Counts {
        lock(&self.inner).clone()
    }
}

fn record_decision(m: &mut Counts, d: &RulesDecision, near_limit_ratio: f64) {
    if d.allowed {
        m.allowed += 1;
    } else {
        m.denied += 1;
    }
    for r in &d.rules {
        // Rule names are bounded by the rule set; allocate only for a rule seen first.
        let c = match m.rules.get_mut(&r.rule) {
            Some(c) => c,
            None => m.rules.entry(r.rule.clone()).or_default(),
        };
        c.decided += 1;
        c.denied += !r.decision.allowed as u64;
        if !r.shadow {
            crate::metrics::decision(&r.decision, &r.rule, near_limit_ratio);
        } else if !r.decision.allowed {
            crate::metrics::shadow_would_deny(&r.rule);
        }
        c.consumed += r.consumed as u64;
        c.degraded += (r.decision.source != Source::Store) as u64;
    }
}
