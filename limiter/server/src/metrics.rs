//! What the service measures, through the `metrics` facade (the binary serves them as a
//! Prometheus exposition, `--metrics-listen`). Labels are bounded by the configuration: a
//! descriptor is named by its entry (`domain.key_value.key2`, the reference's statistics name),
//! and by the request's values only where an entry asks for it (`detailed_metric`,
//! `value_to_metric`), within a bounded set of names; a domain label on a refusal is the
//! domain only when the configuration knows it.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `ratelimit_hits_total` | domain, descriptor | units asked for (each descriptor's cost) |
//! | `ratelimit_within_limit_total` | domain, descriptor | units admitted |
//! | `ratelimit_near_limit_total` | domain, descriptor | units admitted with less than (1 − near ratio) of the limit left |
//! | `ratelimit_over_limit_total` | domain, descriptor | units refused by an enforced limit |
//! | `ratelimit_shadow_mode_total` | domain, descriptor | units a shadow limit would have refused |
//! | `ratelimit_degraded_total` | domain, descriptor, policy, reason | units answered by a failure policy, and why Redis was not asked |
//! | `ratelimit_quota_granted_total` | domain, descriptor | requests granted as quota |
//! | `ratelimit_unlimited_total` | domain, descriptor | descriptors an unlimited entry answered |
//! | `ratelimit_request_limit_ignored_total` | domain | per-request limits no entry allowed |
//! | `ratelimit_permits_released_total` | domain, result | permit tickets a proxy sent back: `released`, or `gone` (its lease had ended, or it was released already) |
//! | `ratelimit_settled_units_total` | domain, descriptor, result | units of real costs settled at a stream's end: `refunded` (a surplus), `charged` (an excess, into debt where it did not fit), `uncharged` (beyond one request's capacity or the one capacity a key may owe) |
//! | `ratelimit_global_shadow_total` | domain | refusals the global shadow mode turned into OK |
//! | `ratelimit_errors_total` | kind | requests refused with a gRPC error, by code |
//! | `ratelimit_decision_seconds` | outcome | time to answer a call (histogram) |
//! | `ratelimit_config_loads_total` | result | configuration loads, `ok` or `error` |
//! | `ratelimit_config_domains` | | domains in force |
//! | `ratelimit_store_available` | | 1 while Redis decides, 0 while the breaker is open |

use metrics::{counter, gauge, histogram};

use crate::adapter::Settled;
use crate::config::Config;

/// How a descriptor's units went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted; `near` when close to the limit.
    Within {
        /// Less than (1 − near ratio) of the limit is left.
        near: bool,
    },
    /// Refused (or, for a shadow limit, would have been).
    Over {
        /// The limit only observes.
        shadow: bool,
    },
}

/// Describes every metric (help texts) once, at start.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!("ratelimit_hits_total", "Units asked for, per descriptor");
    describe_counter!("ratelimit_within_limit_total", "Units admitted");
    describe_counter!("ratelimit_near_limit_total", "Units admitted near the limit");
    describe_counter!("ratelimit_over_limit_total", "Units refused by an enforced limit");
    describe_counter!("ratelimit_shadow_mode_total", "Units a shadow limit would have refused");
    describe_counter!("ratelimit_degraded_total", "Units answered by a failure policy (Redis not asked)");
    describe_counter!("ratelimit_quota_granted_total", "Requests granted as quota");
    describe_counter!("ratelimit_unlimited_total", "Descriptors an unlimited entry answered");
    describe_counter!("ratelimit_request_limit_ignored_total", "Per-request limits no entry allowed");
    describe_counter!("ratelimit_permits_released_total", "Permit tickets sent back, released or gone");
    describe_counter!("ratelimit_settled_units_total", "Units of real costs settled: refunded, charged, uncharged");
    describe_counter!("ratelimit_global_shadow_total", "Refusals the global shadow mode answered OK");
    describe_counter!("ratelimit_errors_total", "Calls refused with a gRPC error, by code");
    describe_histogram!("ratelimit_decision_seconds", metrics::Unit::Seconds, "Time to answer a call");
    describe_counter!("ratelimit_config_loads_total", "Configuration loads by result");
    describe_gauge!("ratelimit_config_domains", "Domains in force");
    describe_gauge!("ratelimit_store_available", "1 while Redis decides, 0 while the breaker is open");
}

/// One descriptor decided.
pub fn decided(
    domain: &str,
    descriptor: &str,
    cost: u64,
    outcome: Outcome,
    degraded: Option<(&'static str, &'static str)>,
) {
    let labels = [("domain", domain.to_owned()), ("descriptor", descriptor.to_owned())];
    counter!("ratelimit_hits_total", &labels).increment(cost);
    match outcome {
        Outcome::Within { near } => {
            counter!("ratelimit_within_limit_total", &labels).increment(cost);
            if near {
                counter!("ratelimit_near_limit_total", &labels).increment(cost);
            }
        }
        Outcome::Over { shadow: false } => counter!("ratelimit_over_limit_total", &labels).increment(cost),
        Outcome::Over { shadow: true } => counter!("ratelimit_shadow_mode_total", &labels).increment(cost),
    }
    if let Some((policy, reason)) = degraded {
        let [d, s] = labels;
        counter!("ratelimit_degraded_total", &[d, s, ("policy", policy.to_owned()), ("reason", reason.to_owned())])
            .increment(cost);
    }
}

/// Quota granted to a descriptor.
pub fn granted(domain: &str, descriptor: &str, requests: u64) {
    counter!("ratelimit_quota_granted_total", "domain" => domain.to_owned(), "descriptor" => descriptor.to_owned())
        .increment(requests);
}

/// An unlimited entry answered a descriptor.
pub fn unlimited(descriptor: &str, domain: &str) {
    counter!("ratelimit_unlimited_total", "domain" => domain.to_owned(), "descriptor" => descriptor.to_owned())
        .increment(1);
}

/// A per-request limit no entry allowed was ignored.
pub fn request_limit_ignored(domain: &str) {
    counter!("ratelimit_request_limit_ignored_total", "domain" => domain.to_owned()).increment(1);
}

/// A permit ticket came back: whether its permit was still held. Permits taken and never
/// counted here were reclaimed by their leases: a proxy that does not send tickets back.
pub fn permit_released(domain: &str, held: bool) {
    let result = if held { "released" } else { "gone" };
    counter!("ratelimit_permits_released_total", "domain" => domain.to_owned(), "result" => result).increment(1);
}

/// A real cost was settled for descriptor `descriptor`: what it gave back, charged and did not.
pub fn settled(domain: &str, descriptor: &str, done: Settled) {
    for (result, units) in [("refunded", done.refunded), ("charged", done.charged), ("uncharged", done.uncharged)] {
        if units > 0 {
            let (domain, descriptor) = (domain.to_owned(), descriptor.to_owned());
            counter!("ratelimit_settled_units_total", "domain" => domain, "descriptor" => descriptor, "result" => result)
                .increment(units);
        }
    }
}

/// The global shadow mode answered OK for a refusal.
pub fn global_shadow(domain: &str) {
    counter!("ratelimit_global_shadow_total", "domain" => domain.to_owned()).increment(1);
}

/// A call refused with `code`. The domain a client sent is not a label (it is unbounded).
pub fn refused(_domain: &str, code: tonic::Code) {
    counter!("ratelimit_errors_total", "kind" => format!("{code:?}")).increment(1);
}

/// The time one call took.
pub fn latency(outcome: &'static str, seconds: f64) {
    histogram!("ratelimit_decision_seconds", "outcome" => outcome).record(seconds);
}

/// A configuration was put in force.
pub fn config_loaded(config: &Config) {
    counter!("ratelimit_config_loads_total", "result" => "ok").increment(1);
    gauge!("ratelimit_config_domains").set(config.domains.len() as f64);
}

/// A configuration was refused.
pub fn config_refused() {
    counter!("ratelimit_config_loads_total", "result" => "error").increment(1);
}

/// Redis's health changed.
pub fn store_available(available: bool) {
    gauge!("ratelimit_store_available").set(if available { 1.0 } else { 0.0 });
}
