//! What to do when Redis cannot be asked: the policies, and the one place that applies them.
//! A single-key limiter is the one-rule case of a request's rules, so both answer through
//! [`answer`].

use crate::algo::all_or_nothing::ItemOutcome;
use crate::algo::Outcome;
use crate::decision::Source;
use crate::error::Error;
use crate::quota::{Algorithm, Quota};
use crate::store::local::{LocalStore, RuleItem};

/// The failure policy: what a limiter answers when Redis errors, times out, refuses this
/// client, or the breaker is open. Whatever it answers carries its [`crate::Source`], so it is
/// never mistaken for a real decision.
///
/// A call that timed out may still run on Redis later (a sent command cannot be withdrawn):
/// that request is then decided by the policy and charged by Redis too. Only calls that timed
/// out can count twice, each at most once more and only as a charge, so the key admits less
/// afterwards, never more; per instance and stall they are the calls sent before the breaker
/// opens (`failure_threshold`, or all those sent within one timeout of the stall if more) and
/// one probe per open period. The README's failure-policy section states it with figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Admit everything (ADR-002's choice). Unbounded during an outage: every instance
    /// lets every request through.
    #[default]
    FailOpen,
    /// Deny everything: safe for the protected service, an outage for its users.
    FailClosed,
    /// The HLD card's "fail open at edge with local static budget": each instance
    /// admits up to `limit` per `period_ms` per key on its own (a fixed window in process),
    /// so a cluster of N instances admits at most N x `limit` per period.
    LocalBudget {
        /// Units per key per period on this instance.
        limit: u64,
        /// The period in ms.
        period_ms: u64,
    },
}

impl FailurePolicy {
    /// The quota actually enforced by a decision from `source` under this policy, for a
    /// limiter or rule of `quota`: the quota itself when Redis decided (or a round-trip mode
    /// from Redis's state), the local budget when that answered, None when fail-open or
    /// fail-closed answered, which enforce no quota at all.
    pub(crate) fn enforced_quota(
        self,
        source: crate::decision::Source,
        quota: crate::quota::Quota,
    ) -> Option<crate::quota::Quota> {
        use crate::decision::Source;
        match (source, self) {
            (Source::FailOpen | Source::FailClosed, _) => None,
            (Source::LocalBudget, FailurePolicy::LocalBudget { limit, period_ms }) => {
                Some(crate::quota::Quota::new(limit, period_ms))
            }
            (Source::LocalBudget, _) => None,
            _ => Some(quota),
        }
    }

    /// The policy's name in traces and reports.
    pub const fn name(&self) -> &'static str {
        match self {
            FailurePolicy::FailOpen => "fail-open",
            FailurePolicy::FailClosed => "fail-closed",
            FailurePolicy::LocalBudget { .. } => "local-budget",
        }
    }

    /// Refuses a zero budget or period.
    pub fn validate(&self) -> Result<(), Error> {
        if let FailurePolicy::LocalBudget { limit, period_ms } = *self {
            if limit == 0 {
                return Err(Error::config(
                    "local_budget.limit",
                    "must be at least 1, got 0 (use FailClosed to admit nothing)".into(),
                ));
            }
            if period_ms == 0 {
                return Err(Error::config("local_budget.period_ms", "must be at least 1 ms, got 0".into()));
            }
        }
        Ok(())
    }
}

/// One rule (a single-key limiter is one rule) to be answered by its failure policy.
pub(crate) struct Asked<'a> {
    /// The rule's policy.
    pub policy: FailurePolicy,
    /// The key its local budget is kept under.
    pub key: &'a str,
    /// What the request costs under this rule.
    pub cost: u64,
    /// A shadow rule is answered and counted but never refuses the request.
    pub shadow: bool,
}

/// What the policies answered for one request.
pub(crate) struct Answered {
    /// Whether every enforced rule's policy admits the request.
    pub allowed: bool,
    /// Each rule's answer, in the order asked, and which policy gave it.
    pub items: Vec<(ItemOutcome, Source)>,
}

/// Answers a request by its rules' failure policies at `now`, all-or-nothing as Redis would
/// have: it proceeds only if every enforced rule's policy admits it, and the local budgets (a
/// fixed window each, kept in `budget`) are consumed only then. `retry_after_ms` is when Redis
/// may be asked again: what a fail-closed answer, or a cost no budget can ever hold, tells the
/// client to wait.
pub(crate) fn answer(budget: &LocalStore, asked: &[Asked<'_>], now: u64, retry_after_ms: u64) -> Answered {
    let closed = Outcome {
        allowed: false,
        remaining: 0,
        retry_after_ms: retry_after_ms.max(1),
        reset_after_ms: retry_after_ms.max(1),
    };
    // The local budgets of the rules that have one, decided together as one batch.
    let budgets: Vec<(usize, u64, Quota)> = asked
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a.policy {
            FailurePolicy::LocalBudget { limit, period_ms } => Some((i, limit, Quota::new(limit, period_ms))),
            _ => None,
        })
        .collect();
    // A cost above the whole budget could never fit; a fail-closed rule denies outright.
    let enforced_denial = asked.iter().any(|a| {
        !a.shadow
            && match a.policy {
                FailurePolicy::FailClosed => true,
                FailurePolicy::LocalBudget { limit, .. } => a.cost > limit,
                FailurePolicy::FailOpen => false,
            }
    });
    let items: Vec<RuleItem<'_>> = budgets
        .iter()
        .map(|&(i, limit, ref quota)| RuleItem {
            algorithm: Algorithm::FixedWindow,
            quota,
            key: asked[i].key,
            now_ms: now,
            // Costs above the budget are answered below without asking it.
            cost: asked[i].cost.min(limit),
            shadow: asked[i].shadow,
            // A local budget answers for Redis, whose blocks it cannot read.
            block: None,
        })
        .collect();
    let decided = budget.apply_rules(&items, !enforced_denial);
    let mut items: Vec<(ItemOutcome, Source)> = asked
        .iter()
        .map(|a| match a.policy {
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
    for (&(i, limit, _), item) in budgets.iter().zip(decided.items) {
        let item = if asked[i].cost > limit { ItemOutcome { outcome: closed, consumed: false } } else { item };
        items[i] = (item, Source::LocalBudget);
    }
    let allowed = !enforced_denial
        && decided.allowed
        && items.iter().zip(asked).all(|((item, _), a)| a.shadow || item.outcome.allowed);
    Answered { allowed, items }
}
