//! What the limiter measures, as ADR-002's monitoring section asks: decisions, the store's
//! latency and errors, the breaker, reconnections, script reloads and failovers.
//!
//! With the `metrics` feature the limiter records them through the [`metrics`](https://docs.rs/metrics)
//! facade, so whichever recorder the application installs (Prometheus, StatsD, ...) gets
//! them, and wraps every store call in a `tracing` span (`limiter.store`, with the algorithm
//! and the server). Without the feature, nothing is recorded and neither crate is linked; the
//! names below are the same either way.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `limiter_decisions_total` | counter | one per limiter check and per enforced rule of an enforcer check: `outcome` (allowed, denied), `source` (store, fail-open, fail-closed, local-budget), `degraded` (none, timeout, unavailable, refused, breaker-open) |
//! | `limiter_store_call_seconds` | histogram | `algorithm` (the script's: an algorithm, or `rules` for the enforcer's), `result` (ok, timeout, unavailable, refused, error) |
//! | `limiter_store_errors_total` | counter | `kind` (timeout, unavailable, refused, wrong-type, reply, server) |
//! | `limiter_breaker_state` | gauge | 0 closed, 1 half-open, 2 open |
//! | `limiter_breaker_transitions_total` | counter | `to` (closed, half-open, open) |
//! | `limiter_reconnects_total` | counter | new connections after the first (one server), or calls getting through again after a lost primary (cluster) |
//! | `limiter_noscript_reloads_total` | counter | EVALSHA answered NOSCRIPT, so EVAL sent the script |
//! | `limiter_failovers_total` | counter | Sentinel named another primary; a cluster slot's primary came back (a promoted replica) |
//! | `limiter_shadow_would_deny_total` | counter | `rule`: shadow-mode checks that would have denied |

/// Decisions by outcome, source and why the store was skipped.
pub const DECISIONS: &str = "limiter_decisions_total";
/// Latency of each store call (seconds), connecting included, by algorithm and result.
pub const STORE_CALL_SECONDS: &str = "limiter_store_call_seconds";
/// Store calls that produced no decision, by kind.
pub const STORE_ERRORS: &str = "limiter_store_errors_total";
/// The breaker's state: 0 closed, 1 half-open, 2 open.
pub const BREAKER_STATE: &str = "limiter_breaker_state";
/// Breaker transitions, by the state entered.
pub const BREAKER_TRANSITIONS: &str = "limiter_breaker_transitions_total";
/// Reconnections to Redis.
pub const RECONNECTS: &str = "limiter_reconnects_total";
/// Scripts sent again by EVAL after NOSCRIPT.
pub const NOSCRIPT_RELOADS: &str = "limiter_noscript_reloads_total";
/// Failovers the store followed.
pub const FAILOVERS: &str = "limiter_failovers_total";
/// Shadow-mode checks that would have denied, by rule.
pub const SHADOW_WOULD_DENY: &str = "limiter_shadow_would_deny_total";

use crate::decision::{Decision, Degraded};
use crate::error::Error;
use crate::store::StoreError;

/// Registers every metric's description with the installed recorder (the `# HELP` lines of
/// a Prometheus exposition). Call it once after installing a recorder; without the
/// `metrics` feature it does nothing.
pub fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_counter!(DECISIONS, "Rate-limit decisions by outcome, source and degradation");
        describe_histogram!(STORE_CALL_SECONDS, Unit::Seconds, "Latency of store calls, connecting included");
        describe_counter!(STORE_ERRORS, "Store calls that produced no decision, by kind");
        describe_gauge!(BREAKER_STATE, "Circuit breaker: 0 closed, 1 half-open, 2 open");
        describe_counter!(BREAKER_TRANSITIONS, "Circuit breaker transitions by the state entered");
        describe_counter!(RECONNECTS, "Reconnections to Redis");
        describe_counter!(NOSCRIPT_RELOADS, "Scripts sent again by EVAL after NOSCRIPT");
        describe_counter!(FAILOVERS, "Failovers to a new primary the store followed");
        describe_counter!(SHADOW_WOULD_DENY, "Shadow-mode checks that would have denied, by rule");
    }
}

/// Counts a shadow-mode check that would have denied (the request went through).
pub fn shadow_would_deny(rule: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(SHADOW_WOULD_DENY, "rule" => rule.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = rule;
}

fn degraded_name(d: Option<Degraded>) -> &'static str {
    match d {
        None => "none",
        Some(Degraded::Timeout) => "timeout",
        Some(Degraded::Unavailable) => "unavailable",
        Some(Degraded::BreakerOpen) => "breaker-open",
        Some(Degraded::Refused) => "refused",
    }
}

/// Counts one decision.
pub(crate) fn decision(d: &Decision) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        DECISIONS,
        "outcome" => if d.allowed { "allowed" } else { "denied" },
        "source" => d.source.name(),
        "degraded" => degraded_name(d.degraded),
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (d, degraded_name);
}

/// A new connection: `reconnect` when it is not the store's first, `failover` when it
/// reached another primary than before.
pub(crate) fn connected(reconnect: bool, failover: bool) {
    #[cfg(feature = "metrics")]
    {
        if reconnect {
            metrics::counter!(RECONNECTS).increment(1);
        }
        if failover {
            metrics::counter!(FAILOVERS).increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (reconnect, failover);
}

/// EVALSHA met NOSCRIPT and the script went again by EVAL.
pub(crate) fn noscript_reload() {
    #[cfg(feature = "metrics")]
    metrics::counter!(NOSCRIPT_RELOADS).increment(1);
}

/// The breaker entered the state named `name`, shown on the gauge as `level`
/// (`BreakerState::name` and `BreakerState::level`).
pub(crate) fn breaker_entered(name: &'static str, level: u8) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(BREAKER_TRANSITIONS, "to" => name).increment(1);
        metrics::gauge!(BREAKER_STATE).set(f64::from(level));
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (name, level);
}

fn error_kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::Unavailable(Degraded::Timeout) => "timeout",
        StoreError::Unavailable(_) => "unavailable",
        StoreError::Refused(_) | StoreError::Fatal(Error::Refused { .. }) => "refused",
        StoreError::Fatal(Error::WrongType { .. }) => "wrong-type",
        StoreError::Fatal(Error::UnexpectedReply { .. }) => "reply",
        StoreError::Fatal(_) => "server",
    }
}

/// One store call being measured: its latency (tokio's clock, which the simulator drives)
/// and, with the feature, a span around it.
pub(crate) struct StoreCall {
    script: &'static str,
    #[cfg(feature = "metrics")]
    started: tokio::time::Instant,
    #[cfg(feature = "metrics")]
    span: tracing::Span,
}

impl StoreCall {
    /// Starts measuring a call of the script named `script` (an algorithm's, or `rules` for the
    /// all-or-nothing script of several rules).
    pub(crate) fn of_script(script: &'static str, describe: impl FnOnce() -> String) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = describe;
        StoreCall {
            script,
            #[cfg(feature = "metrics")]
            started: tokio::time::Instant::now(),
            #[cfg(feature = "metrics")]
            span: tracing::debug_span!("limiter.store", algorithm = script, redis = %describe()),
        }
    }

    /// `call`, inside the span.
    #[cfg(feature = "metrics")]
    pub(crate) fn instrument<F: std::future::Future>(&self, call: F) -> tracing::instrument::Instrumented<F> {
        tracing::Instrument::instrument(call, self.span.clone())
    }

    /// `call` (no span without the feature).
    #[cfg(not(feature = "metrics"))]
    pub(crate) fn instrument<F: std::future::Future>(&self, call: F) -> F {
        call
    }

    /// Records the latency and, for a failure, its kind.
    pub(crate) fn finish<T>(&self, result: &Result<T, StoreError>) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(StoreError::Unavailable(Degraded::Timeout)) => "timeout",
            Err(StoreError::Unavailable(_)) => "unavailable",
            Err(StoreError::Refused(_)) => "refused",
            Err(StoreError::Fatal(_)) => "error",
        };
        #[cfg(feature = "metrics")]
        {
            let seconds = self.started.elapsed().as_secs_f64();
            metrics::histogram!(STORE_CALL_SECONDS, "algorithm" => self.script, "result" => outcome).record(seconds);
            if let Err(e) = result {
                metrics::counter!(STORE_ERRORS, "kind" => error_kind(e)).increment(1);
                tracing::debug!(parent: &self.span, kind = error_kind(e), "store call failed");
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (outcome, self.script, error_kind);
    }
}
