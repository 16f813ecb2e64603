//! What to do when Redis cannot be asked: the policies. `crate::gate` applies them, to a
//! limiter's one charge as to a request's rules.

use crate::error::ConfigError;

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
    /// admits up to `limit` per `period` per key on its own (a fixed window in process),
    /// so a cluster of N instances admits at most N x `limit` per period.
    LocalBudget {
        /// Units per key per period on this instance.
        limit: u64,
        /// The period in ms.
        period: std::time::Duration,
    },
}

impl FailurePolicy {
    /// The quota actually enforced by a decision from `source` under this policy, for a
    /// limiter or rule of `quota`: the quota itself when Redis decided (or a round-trip mode
    /// from Redis's state), the local budget when that answered, None when fail-open or
    /// fail-closed answered, which enforce no quota at all.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn enforced_quota(
        self,
        source: crate::decision::Source,
        quota: crate::quota::Quota,
    ) -> Option<crate::quota::Quota> {
        use crate::decision::Source;
        match (source, self) {
            (Source::FailOpen | Source::FailClosed, _) => None,
            (Source::LocalBudget, FailurePolicy::LocalBudget { limit, period }) => {
                Some(crate::quota::Quota::new(limit, period))
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
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let FailurePolicy::LocalBudget { limit, period } = *self {
            if limit == 0 {
                return Err(ConfigError::new(
                    "local_budget.limit",
                    "must be at least 1, got 0 (use FailClosed to admit nothing)".into(),
                ));
            }
            if crate::duration::whole_ms(period) == 0 {
                return Err(ConfigError::new("local_budget.period", "must be at least 1 ms, got 0".into()));
            }
        }
        Ok(())
    }
}
