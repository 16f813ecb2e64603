//! What the library decided, as the service's [`Answer`]s.

use std::time::Duration;

use redis_ratelimit::enforce::RulesDecision;
use redis_ratelimit::{Decision, Degraded, Source};

/// Why Redis was not asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The call took longer than the timeout.
    Timeout,
    /// Redis could not be reached.
    Unavailable,
    /// The breaker is open.
    BreakerOpen,
    /// Redis refused this client (credentials, ACL, TLS).
    Refused,
}

impl Why {
    /// The reason's name.
    pub const fn name(self) -> &'static str {
        match self {
            Why::Timeout => "timeout",
            Why::Unavailable => "unavailable",
            Why::BreakerOpen => "breaker-open",
            Why::Refused => "refused",
        }
    }
}

/// Who answered one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnsweredBy {
    /// Redis.
    Redis,
    /// The fail-open policy: admitted unchecked.
    FailOpen(Why),
    /// The fail-closed policy: refused.
    FailClosed(Why),
    /// This instance's local budget.
    LocalBudget(Why),
}

impl AnsweredBy {
    /// The policy's name, None for Redis.
    pub const fn policy(self) -> Option<&'static str> {
        match self {
            AnsweredBy::Redis => None,
            AnsweredBy::FailOpen(_) => Some("fail-open"),
            AnsweredBy::FailClosed(_) => Some("fail-closed"),
            AnsweredBy::LocalBudget(_) => Some("local-budget"),
        }
    }

    /// Why Redis was not asked, None when it was.
    pub const fn why(self) -> Option<Why> {
        match self {
            AnsweredBy::Redis => None,
            AnsweredBy::FailOpen(w) | AnsweredBy::FailClosed(w) | AnsweredBy::LocalBudget(w) => Some(w),
        }
    }
}

/// One limit's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether this limit alone admits the request.
    pub allowed: bool,
    /// What the limit still admits (units of cost 1).
    pub remaining: u64,
    /// When denied: how long until the request alone is admitted (ms).
    pub retry_after_ms: u64,
    /// How long until the limit is whole again (ms).
    pub reset_after_ms: u64,
    /// Whether the request's cost was taken from it.
    pub consumed: bool,
    /// The clock reading it was decided at (ms since the epoch).
    pub decided_at_ms: u64,
    /// Who answered.
    pub by: AnsweredBy,
}

/// What the limits of one call decided.
#[derive(Debug, Clone)]
pub struct Decided {
    /// Whether every enforced limit admits the request.
    pub allowed: bool,
    /// One per limit, in the order asked.
    pub answers: Vec<Answer>,
    decision: RulesDecision,
}

/// The answer a library decision gives; `consumed` when it took the request's cost.
pub(super) fn answer_of(decision: &Decision, consumed: bool) -> Answer {
    let why = |w: Option<Degraded>| match w {
        Some(Degraded::Timeout) => Why::Timeout,
        Some(Degraded::BreakerOpen) => Why::BreakerOpen,
        Some(Degraded::Refused) => Why::Refused,
        _ => Why::Unavailable,
    };
    let by = match decision.source {
        Source::FailOpen => AnsweredBy::FailOpen(why(decision.degraded)),
        Source::FailClosed => AnsweredBy::FailClosed(why(decision.degraded)),
        Source::LocalBudget => AnsweredBy::LocalBudget(why(decision.degraded)),
        _ => AnsweredBy::Redis,
    };
    Answer {
        allowed: decision.allowed,
        remaining: decision.remaining,
        retry_after_ms: whole_ms(decision.retry_after),
        reset_after_ms: whole_ms(decision.reset_after),
        consumed,
        decided_at_ms: decision.decided_at_ms,
        by,
    }
}

impl Decided {
    pub(super) fn from_library(d: RulesDecision) -> Decided {
        let answers = d.rules.iter().map(|r| answer_of(&r.decision, r.consumed)).collect();
        Decided { allowed: d.allowed, answers, decision: d }
    }

    /// The draft-11 `RateLimit-Policy` and `RateLimit` fields of the enforced limits (named by
    /// their rules), `RateLimit-Shadow` for the shadow ones and `Retry-After` on a denial, as
    /// the library's HTTP layer writes them; with `legacy`, the `X-RateLimit-*` fields of the
    /// most constrained limit instead.
    pub fn headers(&self, legacy: bool) -> Vec<(String, String)> {
        let mut map = http::HeaderMap::new();
        if legacy {
            redis_ratelimit::http::headers::apply_legacy_rules(&mut map, &self.decision);
        } else {
            redis_ratelimit::http::headers::apply(&mut map, &self.decision);
        }
        map.iter().filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned()))).collect()
    }
}

/// A decision with a lease: the request's own decision, and the units leased beyond it.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The request's decision (one limit).
    pub decided: Decided,
    /// Units leased beyond the request's cost.
    pub spare: u64,
    /// When the lease ends, on the clock that decided (ms since the epoch).
    pub valid_until_ms: u64,
}

/// A duration in whole milliseconds, as the wire speaks them.
fn whole_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
