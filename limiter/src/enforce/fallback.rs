//! When Redis cannot be asked, each rule's own failure policy answers ([`policy::answer`]),
//! and the request is still decided all-or-nothing.

use crate::decision::Degraded;
use crate::policy::{self, Asked};

use super::{rule_decision, Planned, RulesDecision, Shared};

/// Decides `planned` by the rules' failure policies at `now`; `retry_after_ms` is when Redis
/// may be asked again.
pub(super) fn decide(
    shared: &Shared,
    planned: Vec<Planned>,
    now: u64,
    why: Degraded,
    retry_after_ms: u64,
) -> RulesDecision {
    let asked: Vec<Asked<'_>> = planned
        .iter()
        .map(|p| Asked { policy: p.rule.policy(), key: &p.stem, cost: p.cost, shadow: p.rule.is_shadow() })
        .collect();
    let answered = policy::answer(&shared.budget, &asked, now, retry_after_ms);
    let rules = planned
        .into_iter()
        .zip(answered.items)
        .map(|(p, (item, source))| rule_decision(shared, p, item, now, source, Some(why)))
        .collect();
    RulesDecision { allowed: answered.allowed, rules }
}
