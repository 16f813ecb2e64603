//! Building the response: each descriptor's status, the overall code, the RateLimit fields
//! and what the upstream and the client are told of degraded answers.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    quota::ExpirationSpecifier, Code, DescriptorStatus, Quota, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf;

use super::{Granted, Headers, Matched, Outcomes, Service, Slot};
use crate::adapter::{Answer, AnsweredBy, LimitRule};
use crate::config::Unit;
use crate::metrics::{self, Outcome};

impl Service {
    pub(super) fn response(
        &self,
        req: &RateLimitRequest,
        matched: &[Matched<'_>],
        slots: &[Slot<'_>],
        decided: &Outcomes,
    ) -> RateLimitResponse {
        let Outcomes { answers, decisions, granted, permits } = decided;
        let mut over = false;
        let mut statuses = Vec::with_capacity(slots.len());
        let mut tally = Tally {
            domain: &req.domain,
            near_ratio: self.options.near_limit_ratio,
            degraded: Vec::new(),
            closed: false,
        };
        let set_granted: Option<Granted> = granted.iter().flatten().copied().min_by_key(|g| g.valid_until_ms);
        let mut permit_wait_ms: Option<u64> = None;
        for (i, ((slot, m), d)) in slots.iter().zip(matched).zip(&req.descriptors).enumerate() {
            let status = match *slot {
                Slot::Release => no_limit_status(),
                // Settled after the stream ended: nothing to refuse, and the proxy reads no
                // more than that it was heard.
                Slot::Settle { rule, request_limit, .. } => {
                    let (requests, unit) = request_limit.unwrap_or((rule.limit.requests_per_unit, rule.limit.unit));
                    DescriptorStatus {
                        code: Code::Ok as i32,
                        current_limit: Some(current_limit(rule, requests, unit)),
                        ..Default::default()
                    }
                }
                Slot::InFlight { rule, shadow, peek, .. } => {
                    // Every in-flight slot was asked or looked at (`Service::permits`).
                    let Some(a) = &permits[i] else {
                        statuses.push(no_limit_status());
                        continue;
                    };
                    let permits_n = rule.limit.permits;
                    let admits = a.allowed;
                    if !peek {
                        over |= !admits && !shadow;
                        tally.count(&m.metric, a, admits, shadow, 1, permits_n as f64);
                        if !admits && !shadow {
                            permit_wait_ms = permit_wait_ms.max(Some(a.retry_after_ms));
                        }
                    }
                    DescriptorStatus {
                        code: if admits || shadow || peek { Code::Ok } else { Code::OverLimit } as i32,
                        current_limit: Some(RateLimit {
                            name: rule.limit.name.clone().unwrap_or_default(),
                            requests_per_unit: u32::try_from(permits_n).unwrap_or(u32::MAX),
                            unit: 0,
                        }),
                        limit_remaining: u32::try_from(a.remaining).unwrap_or(u32::MAX),
                        duration_until_reset: Some(duration(a.reset_after_ms)),
                        quota: None,
                    }
                }
                Slot::NoLimit => {
                    let mut s = no_limit_status();
                    s.quota = set_granted.map(|g| quota(u64::from(u32::MAX), g.valid_until_ms));
                    s
                }
                Slot::Unlimited => {
                    metrics::unlimited(&m.metric, &req.domain);
                    DescriptorStatus {
                        code: Code::Ok as i32,
                        limit_remaining: u32::MAX,
                        quota: set_granted.map(|g| quota(u64::from(u32::MAX), g.valid_until_ms)),
                        ..Default::default()
                    }
                }
                Slot::Blocked { rule, shadow, request_limit } => {
                    let (requests, unit) = request_limit.unwrap_or((0, rule.limit.unit));
                    over |= !shadow;
                    let cost = m.cost;
                    metrics::decided(&req.domain, &m.metric, cost, Outcome::Over { shadow }, None);
                    DescriptorStatus {
                        code: if shadow { Code::Ok } else { Code::OverLimit } as i32,
                        current_limit: Some(current_limit(rule, requests, unit)),
                        limit_remaining: 0,
                        duration_until_reset: Some(duration(unit.ms())),
                        quota: None,
                    }
                }
                Slot::Limited { rule, shadow, request_limit, cost, too_costly, item } => {
                    let a = &answers[item];
                    let (requests, unit) = request_limit.unwrap_or((rule.limit.requests_per_unit, rule.limit.unit));
                    let admits = a.allowed && !too_costly;
                    over |= !admits && !shadow;
                    tally.count(&m.metric, a, admits, shadow, cost, f64::from(requests));
                    let _ = d;
                    DescriptorStatus {
                        code: if admits || shadow { Code::Ok } else { Code::OverLimit } as i32,
                        current_limit: Some(current_limit(rule, requests, unit)),
                        limit_remaining: u32::try_from(a.remaining).unwrap_or(u32::MAX),
                        duration_until_reset: Some(duration(a.reset_after_ms)),
                        quota: granted.get(item).copied().flatten().map(|g| {
                            metrics::granted(&req.domain, &m.metric, g.requests);
                            quota(g.requests, g.valid_until_ms)
                        }),
                    }
                }
            };
            statuses.push(status);
        }
        // The engine's own verdict counts too (an all-or-nothing refusal by another limit).
        if decisions.iter().any(|d| !d.allowed) {
            over = true;
        }
        if over && self.options.shadow {
            metrics::global_shadow(&req.domain);
            over = false;
        }
        let mut response = RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            ..Default::default()
        };
        if self.options.headers != Headers::Off {
            let legacy = self.options.headers == Headers::Legacy;
            let mut fields: Vec<(String, String)> = Vec::new();
            for d in decisions {
                for (k, v) in d.headers(legacy) {
                    match fields.iter_mut().find(|(name, _)| *name == k) {
                        Some((_, existing)) if k != "retry-after" => {
                            existing.push_str(", ");
                            existing.push_str(&v);
                        }
                        Some((_, existing)) => {
                            if v.parse::<u64>().unwrap_or(0) > existing.parse::<u64>().unwrap_or(0) {
                                *existing = v;
                            }
                        }
                        None => fields.push((k, v)),
                    }
                }
            }
            if let Some(ms) = permit_wait_ms {
                let secs = ms.div_ceil(1000).max(1).to_string();
                match fields.iter_mut().find(|(name, _)| name == "retry-after") {
                    Some((_, existing)) if existing.parse::<u64>().unwrap_or(0) >= secs.parse::<u64>().unwrap_or(0) => {
                    }
                    Some((_, existing)) => *existing = secs,
                    None => fields.push(("retry-after".into(), secs)),
                }
            }
            for (k, v) in fields {
                if !over && k == "retry-after" {
                    continue;
                }
                let header = HeaderValue { key: k.clone(), value: v, raw_value: Vec::new() };
                // The shadow limits are for the upstream, which may act on them; not for the client.
                if k == "ratelimit-shadow" {
                    response.request_headers_to_add.push(header);
                } else {
                    response.response_headers_to_add.push(header);
                }
            }
        }
        let Tally { degraded, closed, .. } = tally;
        if !degraded.is_empty() {
            let said: Vec<String> = degraded.iter().map(|(p, w)| format!("{p};reason={w}")).collect();
            let header =
                HeaderValue { key: "ratelimit-degraded".into(), value: said.join(", "), raw_value: Vec::new() };
            response.request_headers_to_add.push(header.clone());
            response.response_headers_to_add.push(header);
            if closed && over {
                let why = degraded.iter().find(|(p, _)| *p == "fail-closed").map_or("unavailable", |(_, w)| w);
                response.raw_body = format!(
                    "The rate limit service cannot reach its store ({why}), and a limit of this request fails closed: \
                     the request is refused for want of a decision, not for exceeding a quota.\n"
                )
                .into_bytes();
            }
        }
        response
    }
}

/// What the enforced answers of one call came to: their metrics, counted as they are read, and
/// the failure policies that answered (`closed` when a fail-closed one refused).
struct Tally<'r> {
    domain: &'r str,
    near_ratio: f64,
    degraded: Vec<(&'static str, &'static str)>,
    closed: bool,
}

impl Tally<'_> {
    /// Counts `a`, the answer of a descriptor named `metric` in the metrics, of `cost` under a
    /// limit of `limit`.
    fn count(&mut self, metric: &str, a: &Answer, admits: bool, shadow: bool, cost: u64, limit: f64) {
        if let Some(policy) = a.by.policy() {
            let why = a.by.why().map_or("unavailable", |w| w.name());
            if !self.degraded.contains(&(policy, why)) {
                self.degraded.push((policy, why));
            }
            self.closed |= matches!(a.by, AnsweredBy::FailClosed(_)) && !shadow;
        }
        let outcome = if admits {
            Outcome::Within { near: (a.remaining as f64) < (1.0 - self.near_ratio) * limit }
        } else {
            Outcome::Over { shadow }
        };
        let degraded = a.by.policy().map(|p| (p, a.by.why().map_or("", |w| w.name())));
        metrics::decided(self.domain, metric, cost, outcome, degraded);
    }
}

pub(super) fn no_limit_status() -> DescriptorStatus {
    DescriptorStatus { code: Code::Ok as i32, ..Default::default() }
}

fn current_limit(rule: &LimitRule, requests: u32, unit: Unit) -> RateLimit {
    RateLimit { name: rule.limit.name.clone().unwrap_or_default(), requests_per_unit: requests, unit: unit.proto() }
}

fn duration(ms: u64) -> protobuf::Duration {
    protobuf::Duration {
        seconds: i64::try_from(ms / 1000).unwrap_or(i64::MAX),
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

fn quota(requests: u64, valid_until_ms: u64) -> Quota {
    let until = protobuf::Timestamp {
        seconds: i64::try_from(valid_until_ms / 1000).unwrap_or(i64::MAX),
        nanos: ((valid_until_ms % 1000) * 1_000_000) as i32,
    };
    Quota {
        requests: u32::try_from(requests).unwrap_or(u32::MAX),
        id: String::new(),
        expiration_specifier: Some(ExpirationSpecifier::ValidUntil(until)),
    }
}

/// At most 64 characters of a text a client sent, for a message.
pub(super) fn clip(text: &str) -> String {
    let mut out: String = text.chars().take(64).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
