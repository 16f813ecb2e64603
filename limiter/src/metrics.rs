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
//! | `limiter_decisions_total` | counter | one per limiter check and per enforced rule of an enforcer check: `limiter` (the limiter's state name, or the rule's name), `outcome` (allowed, denied), `source` (store, fail-open, fail-closed, local-budget, ...), `degraded` (none, timeout, unavailable, refused, breaker-open) |
//! | `limiter_near_limit_total` | counter | `limiter`: admitted decisions that left at most 1 - ratio of the limit (ratio 0.8 unless the builder's `near_limit_ratio` says otherwise), as envoy's ratelimit counts `near_limit` |
//! | `limiter_store_call_seconds` | histogram | `algorithm` (the script's: an algorithm, or `rules` for the enforcer's), `result` (ok, timeout, unavailable, refused, error) |
//! | `limiter_store_errors_total` | counter | `kind` (timeout, unavailable, refused, wrong-type, reply, server) |
//! | `limiter_breaker_state` | gauge | `limiter` (a limiter's state name, `rules` for an enforcer): 0 closed, 1 half-open, 2 open |
//! | `limiter_breaker_transitions_total` | counter | `limiter`, `to` (closed, half-open, open) |
//! | `limiter_reconnects_total` | counter | new connections after the first (one server), or calls getting through again after a lost primary (cluster) |
//! | `limiter_noscript_reloads_total` | counter | EVALSHA answered NOSCRIPT, so EVAL sent the script |
//! | `limiter_failovers_total` | counter | Sentinel named another primary; a cluster slot's primary came back (a promoted replica) |
//! | `limiter_shadow_would_deny_total` | counter | `rule`: shadow-mode checks that would have denied |
//! | `limiter_reconciled_units_total` | counter | `limiter` (a limiter's state name, or the rule's name), `result`: units of real costs reconciled, `refunded` (a surplus given back), `charged` (an excess, into debt where it did not fit), `uncharged` (beyond `max_excess` or the one capacity a key may owe) |
//! | `limiter_permits_held` | gauge | `limiter` (a concurrency limiter's state name): permits this process holds now, in Redis or a local budget (a fail-open permit is held nowhere and not counted) |

/// Decisions by outcome, source and why the store was skipped.
pub const DECISIONS: &str = "limiter_decisions_total";
/// Admitted decisions close to their limit, by limiter or rule.
pub const NEAR_LIMIT: &str = "limiter_near_limit_total";
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
/// Permits a concurrency limiter of this process holds now.
pub const PERMITS_HELD: &str = "limiter_permits_held";
/// Units of real costs reconciled, by limiter and result.
pub const RECONCILED_UNITS: &str = "limiter_reconciled_units_total";

use crate::decision::{Decision, Degraded, Source};
use crate::error::{ConfigError, Error};
use crate::reconcile::Reconciled;
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
        describe_counter!(NEAR_LIMIT, "Admitted decisions that left little of the limit, by limiter or rule");
        describe_gauge!(PERMITS_HELD, "Permits of a concurrency limiter this process holds now");
        describe_counter!(RECONCILED_UNITS, "Units of real costs reconciled: refunded, charged, uncharged");
    }
}

/// Counts what a reconciliation of the limiter or rule named `limiter` did, in units.
pub(crate) fn reconciled(limiter: &str, done: &Reconciled) {
    #[cfg(feature = "metrics")]
    {
        let (refunded, charged) = match *done {
            Reconciled::Exact | Reconciled::Refunded { given: false, .. } => (0, 0),
            Reconciled::Refunded { units, given: true } => (units, 0),
            Reconciled::Charged { charged, .. } => (0, charged),
        };
        for (result, units) in [("refunded", refunded), ("charged", charged), ("uncharged", done.uncharged())] {
            if units > 0 {
                metrics::counter!(RECONCILED_UNITS, "limiter" => limiter.to_owned(), "result" => result)
                    .increment(units);
            }
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (limiter, done);
}

/// Counts a shadow-mode check that would have denied (the request went through).
pub fn shadow_would_deny(rule: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(SHADOW_WOULD_DENY, "rule" => rule.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = rule;
}

#[cfg_attr(not(feature = "http"), allow(dead_code))]
fn degraded_name(d: Option<Degraded>) -> &'static str {
    match d {
        None => "none",
        Some(Degraded::Timeout) => "timeout",
        Some(Degraded::Unavailable) => "unavailable",
        Some(Degraded::BreakerOpen) => "breaker-open",
        Some(Degraded::Refused) => "refused",
    }
}

/// The share of the limit used at which an admitted decision counts as near it, unless a
/// builder says otherwise (envoy's ratelimit counts `near_limit` at 80% too).
pub const DEFAULT_NEAR_LIMIT_RATIO: f64 = 0.8;

/// Refuses a near-limit ratio outside (0, 1].
pub(crate) fn check_near_limit_ratio(ratio: f64) -> Result<(), ConfigError> {
    if ratio > 0.0 && ratio <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::new("near_limit_ratio", format!("must be above 0 and at most 1, got {ratio}")))
    }
}

/// Whether an admitted decision used at least `ratio` of its limit. Fail-open enforces no
/// limit, so its answers are never near one.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
fn near_limit(d: &Decision, ratio: f64) -> bool {
    d.allowed
        && d.source != Source::FailOpen
        && d.capacity > 0
        && (d.capacity.saturating_sub(d.remaining)) as f64 >= ratio * d.capacity as f64
}

/// The decision counters of one limiter: their keys (the name and the labels, hashed) are built
/// once per combination of labels and kept, so a decision is counted without building its
/// labels again (a `String`, a `Vec` and a hash per decision otherwise, on every request of an
/// in-process limiter). The recorder is still asked for the counter on every decision, as
/// [`metrics::counter!`] asks it, so a recorder installed after the limiter was built counts it.
#[derive(Debug)]
pub(crate) struct DecisionCounter {
    #[cfg(feature = "metrics")]
    label: metrics::SharedString,
    /// By outcome (2), source (6) and degradation (none and 4).
    #[cfg(feature = "metrics")]
    keys: [std::sync::OnceLock<metrics::Key>; 60],
    #[cfg(feature = "metrics")]
    near: metrics::Key,
    /// A concurrency limiter's permits held.
    #[cfg(feature = "metrics")]
    held: metrics::Key,
}

/// What the `counter!` macro registers its counters with: this module, at level INFO.
#[cfg(feature = "metrics")]
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

impl DecisionCounter {
    /// The counters of the limiter labelled `limiter`.
    pub(crate) fn new(limiter: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            let label = metrics::SharedString::from(limiter.to_owned());
            let near = metrics::Key::from_parts(NEAR_LIMIT, vec![metrics::Label::new("limiter", label.clone())]);
            let held = metrics::Key::from_parts(PERMITS_HELD, vec![metrics::Label::new("limiter", label.clone())]);
            DecisionCounter { label, keys: std::array::from_fn(|_| std::sync::OnceLock::new()), near, held }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = limiter;
            DecisionCounter {}
        }
    }

    /// Counts `d`, as [`decision`] does.
    pub(crate) fn count(&self, d: &Decision, near_ratio: f64) {
        #[cfg(feature = "metrics")]
        {
            let degraded = match d.degraded {
                None => 0,
                Some(Degraded::Timeout) => 1,
                Some(Degraded::Unavailable) => 2,
                Some(Degraded::BreakerOpen) => 3,
                Some(Degraded::Refused) => 4,
            };
            // Exhaustive, so a new source or degradation cannot index past the array.
            let source = match d.source {
                Source::Store => 0,
                Source::FailOpen => 1,
                Source::FailClosed => 2,
                Source::LocalBudget => 3,
                Source::Lease => 4,
                Source::DenialCache => 5,
            };
            let i = (usize::from(d.allowed) * 6 + source) * 5 + degraded;
            let key = self.keys[i].get_or_init(|| {
                let labels = vec![
                    metrics::Label::new("limiter", self.label.clone()),
                    metrics::Label::new("outcome", if d.allowed { "allowed" } else { "denied" }),
                    metrics::Label::new("source", d.source.name()),
                    metrics::Label::new("degraded", degraded_name(d.degraded)),
                ];
                metrics::Key::from_parts(DECISIONS, labels)
            });
            metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1);
            if near_limit(d, near_ratio) {
                metrics::with_recorder(|r| r.register_counter(&self.near, &METADATA)).increment(1);
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (d, near_ratio);
    }

    /// One more permit held (`taken`), or one fewer.
    pub(crate) fn permit_held(&self, taken: bool) {
        #[cfg(feature = "metrics")]
        {
            let gauge = metrics::with_recorder(|r| r.register_gauge(&self.held, &METADATA));
            if taken {
                gauge.increment(1.0);
            } else {
                gauge.decrement(1.0);
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = taken;
    }
}

/// Counts one decision of the limiter or rule named `limiter`; `near_ratio` is the share of the
/// limit at which an admitted one counts as near it too.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn decision(d: &Decision, limiter: &str, near_ratio: f64) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(
            DECISIONS,
            "limiter" => limiter.to_owned(),
            "outcome" => if d.allowed { "allowed" } else { "denied" },
            "source" => d.source.name(),
            "degraded" => degraded_name(d.degraded),
        )
        .increment(1);
        if near_limit(d, near_ratio) {
            metrics::counter!(NEAR_LIMIT, "limiter" => limiter.to_owned()).increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (d, limiter, near_ratio, degraded_name, near_limit);
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

/// The breaker of `limiter` entered the state named `name`, shown on the gauge as `level`
/// (`BreakerState::name` and `BreakerState::level`).
pub(crate) fn breaker_entered(limiter: &str, name: &'static str, level: u8) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(BREAKER_TRANSITIONS, "limiter" => limiter.to_owned(), "to" => name).increment(1);
        metrics::gauge!(BREAKER_STATE, "limiter" => limiter.to_owned()).set(f64::from(level));
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (limiter, name, level);
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

#[cfg(test)]
mod near_limit_tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_admitted_decision_that_used_the_ratio_of_its_limit_is_near_it() {
        let d = |allowed, remaining| Decision::store(allowed, 10, remaining, Duration::ZERO, Duration::ZERO, 0);
        assert!(near_limit(&d(true, 2), 0.8) && near_limit(&d(true, 0), 0.8));
        assert!(!near_limit(&d(true, 3), 0.8), "7 of 10 used is below 80%");
        assert!(!near_limit(&d(false, 0), 0.8), "a denial is counted as one, not as near the limit");
        let open = Decision { source: crate::decision::Source::FailOpen, ..d(true, 0) };
        assert!(!near_limit(&open, 0.8), "fail-open enforces no limit");
        assert!(check_near_limit_ratio(0.0).is_err() && check_near_limit_ratio(1.5).is_err());
        assert!(check_near_limit_ratio(1.0).is_ok());
    }
}
