//! How a service file says to read answers (`[answer]`), and what the service does while Redis
//! cannot be asked (`[failure]`).

use std::time::Duration;

use serde::Deserialize;

use sim_engine::subject::file::{At, FileError, QuotaTable};

/// How to read an answer: HTTP statuses, or RLS codes (1 = OK, 2 = OVER_LIMIT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerRules {
    /// Codes that admit.
    pub admitted: Vec<i32>,
    /// Codes that deny because of the limit.
    pub denied: Vec<i32>,
    /// Codes that refuse because the limiter could not decide (a failure policy).
    pub degraded: Vec<i32>,
    /// A header present on every answer a failure policy gave (lower case).
    pub degraded_header: Option<String>,
    /// A header holding the seconds an obedient client waits after a denial (lower case): a
    /// `Retry-After` in seconds, or a draft-11 `RateLimit` field, read by its `t`.
    pub retry_after_header: Option<String>,
}

/// What the service does while Redis cannot be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Admits unchecked.
    FailOpen,
    /// Refuses.
    FailClosed,
    /// Admits at most this many per period per instance.
    LocalBudget {
        /// Units per period.
        limit: u64,
        /// The period, ms.
        period_ms: u64,
    },
}

impl Policy {
    /// The name the file uses.
    pub fn name(self) -> &'static str {
        match self {
            Policy::FailOpen => "fail-open",
            Policy::FailClosed => "fail-closed",
            Policy::LocalBudget { .. } => "local-budget",
        }
    }
}

/// The declared failure behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The policy.
    pub policy: Policy,
    /// How long the service waits for Redis before the policy answers.
    pub timeout: Duration,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAnswer {
    admitted: Option<Vec<toml::Value>>,
    denied: Option<Vec<toml::Value>>,
    #[serde(default)]
    degraded: Vec<toml::Value>,
    degraded_header: Option<String>,
    retry_after_header: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFailure {
    policy: String,
    local_budget: Option<QuotaTable>,
    timeout_ms: Option<u64>,
}

/// RLS codes by name, as Envoy's `RateLimitResponse.Code` spells them.
const RLS_CODES: [(&str, i32); 3] = [("UNKNOWN", 0), ("OK", 1), ("OVER_LIMIT", 2)];

/// A TOML value as a message shows it.
fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::String(s) => format!("{s:?}"),
        other => format!("a TOML {}", other.type_str()),
    }
}

impl RawAnswer {
    /// `rls`: the file asks over RLS (codes by name), not HTTP (statuses).
    pub(crate) fn validate(self, rls: bool, err: &At<'_>) -> Result<AnswerRules, FileError> {
        let codes = |field: &str, values: Option<Vec<toml::Value>>, default: i32| -> Result<Vec<i32>, FileError> {
            let Some(values) = values else { return Ok(vec![default]) };
            values
                .iter()
                .map(|v| match (rls, v) {
                    (false, toml::Value::Integer(n)) if (100..=599).contains(n) => Ok(*n as i32),
                    (true, toml::Value::String(s)) => {
                        RLS_CODES.iter().find(|(name, _)| name == s).map(|(_, c)| *c).ok_or_else(|| {
                            err(field, format!("{s:?}: expected an RLS code: OK, OVER_LIMIT or UNKNOWN"))
                        })
                    }
                    (false, other) => Err(err(field, format!("{}: expected an HTTP status, 100 to 599", shown(other)))),
                    (true, other) => {
                        Err(err(field, format!("{}: expected an RLS code: \"OK\" or \"OVER_LIMIT\"", shown(other))))
                    }
                })
                .collect()
        };
        let admitted = codes("answer.admitted", self.admitted, if rls { 1 } else { 200 })?;
        let denied = codes("answer.denied", self.denied, if rls { 2 } else { 429 })?;
        let degraded =
            if self.degraded.is_empty() { Vec::new() } else { codes("answer.degraded", Some(self.degraded), 0)? };
        for (field, list) in [("answer.denied", &denied), ("answer.degraded", &degraded)] {
            if let Some(c) = list.iter().find(|c| admitted.contains(c)) {
                return Err(err(field, format!("{c} is also in answer.admitted: one code, one meaning")));
            }
        }
        if let Some(c) = degraded.iter().find(|c| denied.contains(c)) {
            return Err(err("answer.degraded", format!("{c} is also in answer.denied: one code, one meaning")));
        }
        let header = |field: &str, h: Option<String>| -> Result<Option<String>, FileError> {
            h.map(|h| {
                http::HeaderName::from_bytes(h.as_bytes())
                    .map(|n| n.as_str().to_owned())
                    .map_err(|_| err(field, format!("{h:?} is not a header name")))
            })
            .transpose()
        };
        Ok(AnswerRules {
            admitted,
            denied,
            degraded,
            degraded_header: header("answer.degraded_header", self.degraded_header)?,
            retry_after_header: header("answer.retry_after_header", self.retry_after_header)?,
        })
    }
}

impl RawFailure {
    pub(crate) fn validate(self, err: &At<'_>) -> Result<Failure, FileError> {
        let policy = match (self.policy.as_str(), self.local_budget) {
            ("fail-open", None) => Policy::FailOpen,
            ("fail-closed", None) => Policy::FailClosed,
            ("local-budget", Some(b)) => {
                if b.limit == 0 || b.period_ms == 0 || b.burst.is_some() {
                    return Err(err(
                        "failure.local_budget",
                        format!(
                            "limit {} per {} ms: expected a limit and a period above 0, and no burst",
                            b.limit, b.period_ms
                        ),
                    ));
                }
                Policy::LocalBudget { limit: b.limit, period_ms: b.period_ms }
            }
            ("local-budget", None) => {
                return Err(err("failure.local_budget", "is missing: local-budget needs { limit, period_ms }".into()))
            }
            ("fail-open" | "fail-closed", Some(_)) => {
                return Err(err("failure.local_budget", format!("applies to local-budget, not {}", self.policy)))
            }
            (other, _) => {
                return Err(err(
                    "failure.policy",
                    format!("{other:?}: expected fail-open, fail-closed or local-budget"),
                ))
            }
        };
        let timeout_ms = self.timeout_ms.unwrap_or(1_000);
        if !(1..=10_000).contains(&timeout_ms) {
            return Err(err("failure.timeout_ms", format!("{timeout_ms}: expected 1 to 10000")));
        }
        Ok(Failure { policy, timeout: Duration::from_millis(timeout_ms) })
    }
}
