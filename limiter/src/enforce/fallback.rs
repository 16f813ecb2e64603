//! When Redis cannot be asked, each rule's own failure policy answers, and the request is
//! still decided all-or-nothing: it proceeds only if every enforced rule's policy admits it,
//! and the local budgets are consumed only then.

use crate::algo::all_or_nothing::ItemOutcome;
use crate::algo::Outcome;
use crate::decision::{Degraded, Source};
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};
use crate::rules_script::ItemReply;
use crate::store::local::RuleItem;

use super::{policy_of, rule_decision, Planned, RulesDecision, Shared};

/// Decides `planned` by the rules' failure policies at `now`; `retry_after_ms` is when Redis
/// may be asked again.
pub(super) fn decide(
    shared: &Shared,
    planned: Vec<Planned>,
    now: u64,
    why: Degraded,
    retry_after_ms: u64,
) -> RulesDecision {
    let closed = Outcome {
        allowed: false,
        remaining: 0,
        retry_after_ms: retry_after_ms.max(1),
        reset_after_ms: retry_after_ms.max(1),
    };
    // The local budgets of the rules that have one, decided together as one batch.
    let budgets: Vec<(usize, u64, Quota)> = planned
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match policy_of(p) {
            FailurePolicy::LocalBudget { limit, period_ms } => Some((i, limit, Quota::new(limit, period_ms))),
            _ => None,
        })
        .collect();
    // A cost above the whole budget could never fit; a fail-closed rule denies outright.
    let enforced_denial = planned.iter().any(|p| {
        !p.rule.is_shadow()
            && match policy_of(p) {
                FailurePolicy::FailClosed => true,
                FailurePolicy::LocalBudget { limit, .. } => p.rule.request_cost() > limit,
                _ => false,
            }
    });
    let items: Vec<RuleItem<'_>> = budgets
        .iter()
        .map(|&(i, limit, ref quota)| RuleItem {
            algorithm: Algorithm::FixedWindow,
            quota,
            key: &planned[i].stem,
            now_ms: now,
            // Costs above the budget are answered below without asking it.
            cost: planned[i].rule.request_cost().min(limit),
            shadow: planned[i].rule.is_shadow(),
        })
        .collect();
    let budget = shared.budget.apply_rules(&items, !enforced_denial);
    let mut allowed = !enforced_denial && budget.allowed;
    let mut answers: Vec<(ItemOutcome, Source)> = planned
        .iter()
        .map(|p| match policy_of(p) {
            FailurePolicy::FailClosed => (ItemOutcome { outcome: closed, consumed: false }, Source::FailClosed),
            _ => (
                ItemOutcome {
                    outcome: Outcome { allowed: true, remaining: 0, retry_after_ms: 0, reset_after_ms: 0 },
                    consumed: false,
                },
                Source::FailOpen,
            ),
        })
        .collect();
    for (&(i, limit, _), item) in budgets.iter().zip(budget.items) {
        let item = if planned[i].rule.request_cost() > limit {
            ItemOutcome { outcome: Outcome { allowed: false, ..closed }, consumed: false }
        } else {
            item
        };
        answers[i] = (item, Source::LocalBudget);
    }
    if answers.iter().zip(&planned).any(|((a, _), p)| !p.rule.is_shadow() && !a.outcome.allowed) {
        allowed = false;
    }
    let rules = planned
        .into_iter()
        .zip(answers)
        .map(|(p, (item, source))| {
            let reply = ItemReply { item, now_ms: now };
            rule_decision(shared, p, reply.item, reply.now_ms, source, Some(why))
        })
        .collect();
    RulesDecision { allowed, rules }
}
