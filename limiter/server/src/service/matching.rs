//! Matching a descriptor to the configuration: its limit, the values it counts by, its cost,
//! the limits it replaces and its name in the metrics.

use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

use super::response::clip;
use super::{Refusal, RequestLimits, Service, MAX_DETAILED_LABELS, PERMITS, RESERVED};
use crate::adapter::{InFlightRule, LimitRule, Rules};
use crate::config::{Children, Node, Pattern, Rate, Unit};
use crate::metrics;

impl Service {
    /// Matches descriptor `i`: its limit, the values it is counted by, its cost, and the names
    /// its limit replaces. A descriptor of one `ratelimit.permits` entry releases permits; one
    /// whose last entry is `ratelimit.reserved` settles the rate limit of the entries before it
    /// (its cost is the request's real cost, the entry's value what it reserved).
    pub(super) fn matched<'a>(
        &self,
        rules: &'a Rules,
        domain: &str,
        root: &'a Children,
        i: usize,
        d: &'a RateLimitDescriptor,
        request_hits: u32,
    ) -> Result<Matched<'a>, Refusal> {
        let cost = match &d.hits_addend {
            Some(h) => h.value,
            None => u64::from(request_hits.max(1)),
        };
        if let [e] = &d.entries[..] {
            if e.key == PERMITS {
                let metric = format!("{domain}.{PERMITS}");
                let values = vec![e.value.as_str()];
                return Ok(Matched { kind: MatchKind::Release, values, cost, replaces: Vec::new(), metric });
            }
        }
        let reserved = match d.entries.last() {
            Some(e) if e.key == RESERVED => Some(self.reserved(i, d, &e.value)?),
            _ => None,
        };
        let entries = &d.entries[..d.entries.len() - usize::from(reserved.is_some())];
        let n = entries.len();
        let mut values: Vec<&'a str> = entries.iter().map(|e| e.value.as_str()).collect();
        let mut level = root;
        let mut found: Option<&'a Node> = None;
        let mut path: Vec<(&'a Node, Option<&'a Pattern>)> = Vec::with_capacity(n);
        for (j, e) in entries.iter().enumerate() {
            let Some((node, via)) = level.find(&e.key, &e.value) else { break };
            path.push((node, via));
            if let (true, Some(p)) = (node.share_threshold, via) {
                values[j] = p.text();
            }
            if j == n - 1 && node.rate.is_some() {
                found = Some(node);
            }
            if node.children.is_empty() {
                break;
            }
            level = &node.children;
        }
        let metric = found.map(|node| self.metric_name(domain, node, d, &path));
        let request_limit =
            d.limit.as_ref().map(|l| (l.requests_per_unit, Unit::from_proto(l.unit).unwrap_or(Unit::Second)));
        let (kind, replaces) = match found.and_then(|n| n.rate.as_ref()) {
            Some(Rate::Unlimited { replaces, .. }) => {
                (MatchKind::Unlimited, replaces.iter().map(String::as_str).collect())
            }
            Some(Rate::InFlight(f)) => match rules.in_flight_of(found.expect("a rate is found on a node")) {
                Some(rule) => (MatchKind::InFlight { rule }, f.replaces.iter().map(String::as_str).collect()),
                None => (MatchKind::NoLimit, Vec::new()),
            },
            Some(Rate::Limited(limit)) => {
                let rule = rules.of(found.expect("a rate is found on a node")).map(Arc::as_ref);
                let honoured = limit.allow_request_limit || self.options.request_limits == RequestLimits::Anywhere;
                if request_limit.is_some() && !honoured {
                    metrics::request_limit_ignored(domain);
                }
                match rule {
                    Some(rule) => (
                        MatchKind::Limited { rule, request_limit: request_limit.filter(|_| honoured) },
                        limit.replaces.iter().map(String::as_str).collect(),
                    ),
                    None => (MatchKind::NoLimit, Vec::new()),
                }
            }
            None => match (request_limit, self.options.request_limits, rules.request_limit(domain)) {
                (Some(l), RequestLimits::Anywhere, Some(rule)) => {
                    (MatchKind::Limited { rule, request_limit: Some(l) }, Vec::new())
                }
                _ => (MatchKind::NoLimit, Vec::new()),
            },
        };
        // A settlement charges or gives back; it neither refuses nor replaces another limit.
        let (kind, replaces) = match (reserved, kind) {
            (None, kind) => (kind, replaces),
            (Some(reserved), MatchKind::Limited { rule, request_limit }) => {
                (MatchKind::Settle { rule, request_limit, reserved }, Vec::new())
            }
            (Some(_), _) => (MatchKind::NoLimit, Vec::new()),
        };
        let metric = metric.unwrap_or_else(|| format!("{domain}.request_limit"));
        Ok(Matched { kind, values, cost, replaces, metric })
    }

    /// The units a settlement's `ratelimit.reserved` entry says descriptor `i` reserved.
    fn reserved(&self, i: usize, d: &RateLimitDescriptor, value: &str) -> Result<u64, Refusal> {
        if d.entries.len() == 1 {
            return Err(Refusal::invalid(format!(
                "descriptor {i}: {RESERVED} settles the limit of the entries before it, and it has none"
            )));
        }
        value.parse::<u64>().ok().filter(|&r| r <= self.options.max_hits).ok_or_else(|| {
            Refusal::invalid(format!(
                "descriptor {i}: {RESERVED} is the units the request reserved, a whole number up to {}, not {:?}",
                self.options.max_hits,
                clip(value)
            ))
        })
    }

    /// The descriptor's name in the metrics: its entry's, or with `detailed_metric` (or
    /// `value_to_metric` on the way) the request's values too, within a bounded set of names.
    fn metric_name(
        &self,
        domain: &str,
        node: &Node,
        d: &RateLimitDescriptor,
        path: &[(&Node, Option<&Pattern>)],
    ) -> String {
        let detailed = node.detailed_metric;
        if !detailed && !path.iter().any(|(n, _)| n.value_to_metric) {
            return node.stat.clone();
        }
        let mut name = domain.to_owned();
        for (e, (n, via)) in d.entries.iter().zip(path) {
            name.push('.');
            name.push_str(&e.key);
            let value = match (n.share_threshold, via) {
                (true, Some(p)) => p.text(),
                _ if detailed || n.value_to_metric || n.value.is_some() => e.value.as_str(),
                _ => "",
            };
            if !value.is_empty() {
                name.push('_');
                name.push_str(value);
            }
        }
        let mut labels = self.labels.lock().unwrap_or_else(|p| p.into_inner());
        if labels.contains(&name) || labels.len() < MAX_DETAILED_LABELS {
            labels.insert(name.clone());
            name
        } else {
            node.stat.clone()
        }
    }
}

/// A descriptor's match.
pub(super) struct Matched<'a> {
    pub(super) kind: MatchKind<'a>,
    /// The values it is counted by (a shared wildcard's pattern instead of the value).
    pub(super) values: Vec<&'a str>,
    pub(super) cost: u64,
    pub(super) replaces: Vec<&'a str>,
    pub(super) metric: String,
}

#[derive(Clone, Copy)]
pub(super) enum MatchKind<'a> {
    NoLimit,
    Unlimited,
    Release,
    InFlight {
        rule: &'a InFlightRule,
    },
    Limited {
        rule: &'a LimitRule,
        request_limit: Option<(u32, Unit)>,
    },
    /// A rate limit settled: the request reserved `reserved`, its cost is its real cost.
    Settle {
        rule: &'a LimitRule,
        request_limit: Option<(u32, Unit)>,
        reserved: u64,
    },
}
