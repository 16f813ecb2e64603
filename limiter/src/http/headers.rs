//! The RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-11, written with a
//! structured-field serializer (`sfv`, RFC 8941/9651).
//!
//! - `RateLimit-Policy`: one item per enforced rule the request matched, a String naming the
//!   policy (the rule's name) with `q` (the quota: the rule's limit), `w` (its period in whole
//!   seconds; a sub-second or fractional period, `250ms` or `1500ms`, is named by the whole
//!   seconds that hold it, rounded up, so a client keeping to `q` per `w` is never refused for
//!   it) and `pk` (the partition key, below).
//! - `RateLimit`: one item per enforced rule with `r` (what the rule still admits after this
//!   request: a request of cost `r` under this rule alone would be admitted now), `t` (whole
//!   seconds, rounded up, until the rule's quota for this key is whole again) and `pk`.
//!
//! Both describe the policy actually enforced ([`RuleDecision::enforced_quota`]): while Redis
//! cannot be asked and a rule's local budget answers, its items are the budget's (`q` its limit
//! per instance, `w` its period, `r` and `t` its state), not the Redis quota nobody is counting;
//! a rule answered by fail-open or fail-closed enforces no quota and gets no item at all, so a
//! client never reads a quota that is not being applied.
//! - `RateLimit-Shadow` (not part of the draft): the shadow rules, as `RateLimit` items, with
//!   a `denied` flag when the rule would have rejected the request.
//!
//! `pk` is the first 8 bytes of the HMAC-SHA-256 of the request's identity under the rule
//! (`ip=198.51.100.7`, `api-key=alice`), keyed with the deployment's secret
//! (`EnforcerBuilder::partition_key_secret`), as a Byte Sequence: clients can tell partitions
//! apart, every gateway sharing the secret names a partition alike, and without the secret no
//! one can test a guess (an unkeyed digest of `ip=ADDRESS` gives every IPv4 address away in
//! seconds). Without a secret there is no `pk`; a constant key (a global cap) has no partition
//! and no `pk` either.
//!
//! A denial adds `Retry-After` in whole seconds, rounded up, the longest wait of the violated
//! rules; it is never earlier than the real end of the wait.

use http::{HeaderMap, HeaderName, HeaderValue};
use sfv::{Integer, KeyRef, ListSerializer, RefBareItem, StringRef};

use crate::decision::Decision;
use crate::enforce::{RuleDecision, RulesDecision};
use crate::limiter::Limiter;
use crate::quota::Quota;

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `RateLimit-Shadow`: the shadow rules (this crate's own field).
pub const RATELIMIT_SHADOW: HeaderName = HeaderName::from_static("ratelimit-shadow");

/// `X-RateLimit-Limit` (legacy).
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining` (legacy).
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset` (legacy, seconds until the quota is whole again).
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The largest integer a structured field carries (15 digits).
const SF_MAX: u64 = 999_999_999_999_999;

/// `d` in whole seconds, rounded up: a client that waits that long is never early.
fn secs_up(d: std::time::Duration) -> u64 {
    crate::duration::whole_ms(d).div_ceil(1000)
}

fn int(v: u64) -> Integer {
    // Below SF_MAX every value converts.
    Integer::try_from(v.min(SF_MAX)).unwrap_or(Integer::MAX)
}

fn key(name: &'static str) -> &'static KeyRef {
    KeyRef::constant(name)
}

/// The partition key of a rule decision (see the module docs), None for a constant key or
/// without a secret.
pub fn partition_key(r: &RuleDecision) -> Option<[u8; 8]> {
    r.partition_key
}

/// One policy as the fields describe it: a rule the enforcer decided, or a single limiter.
struct PolicyItem<'a> {
    /// Its name, a String item: rule names are validated to letters, digits, `.`, `_` and `-`;
    /// a limiter's state name is printable ASCII too.
    name: &'a str,
    /// The quota actually enforced ([`crate::FailurePolicy::enforced_quota`]); no item without one.
    quota: Option<Quota>,
    decision: &'a Decision,
    pk: Option<[u8; 8]>,
    shadow: bool,
}

fn rule_items(d: &RulesDecision) -> Vec<PolicyItem<'_>> {
    d.rules
        .iter()
        .map(|r| PolicyItem {
            name: &r.rule,
            quota: r.enforced_quota(),
            decision: &r.decision,
            pk: partition_key(r),
            shadow: r.shadow,
        })
        .collect()
}

fn policy_list(items: &[PolicyItem<'_>]) -> Option<String> {
    let mut list = ListSerializer::new();
    for it in items.iter().filter(|it| !it.shadow) {
        let Some(quota) = it.quota else { continue };
        let mut item = list
            .bare_item(StringRef::from_str(it.name).ok()?)
            .parameter(key("q"), int(quota.limit()))
            .parameter(key("w"), int(quota.window_secs()));
        if let Some(pk) = &it.pk {
            item = item.parameter(key("pk"), RefBareItem::ByteSequence(pk));
        }
        drop(item);
    }
    list.finish()
}

fn status_list(items: &[PolicyItem<'_>], shadow: bool) -> Option<String> {
    let mut list = ListSerializer::new();
    for it in items.iter().filter(|it| it.shadow == shadow && it.quota.is_some()) {
        let mut item = list
            .bare_item(StringRef::from_str(it.name).ok()?)
            .parameter(key("r"), int(it.decision.remaining))
            .parameter(key("t"), int(secs_up(it.decision.reset_after)));
        if let Some(pk) = &it.pk {
            item = item.parameter(key("pk"), RefBareItem::ByteSequence(pk));
        }
        if shadow && !it.decision.allowed {
            item = item.parameter(key("denied"), true);
        }
        drop(item);
    }
    list.finish()
}

/// The `RateLimit-Policy` field, None when no enforced rule applies.
pub fn policy_field(d: &RulesDecision) -> Option<String> {
    policy_list(&rule_items(d))
}

/// The `RateLimit` field, None when no enforced rule has a known quota state.
pub fn ratelimit_field(d: &RulesDecision) -> Option<String> {
    status_list(&rule_items(d), false)
}

/// The `RateLimit-Shadow` field, None without shadow rules.
pub fn shadow_field(d: &RulesDecision) -> Option<String> {
    status_list(&rule_items(d), true)
}

/// The one writer of both layers: the fields of `items`, and `Retry-After` (whole seconds,
/// rounded up) when `retry_after_secs` says the request was refused.
fn write(headers: &mut HeaderMap, items: &[PolicyItem<'_>], retry_after_secs: Option<u64>) {
    let fields = [
        (RATELIMIT_POLICY, policy_list(items)),
        (RATELIMIT, status_list(items, false)),
        (RATELIMIT_SHADOW, status_list(items, true)),
    ];
    for (name, value) in fields {
        // Serialized structured fields are visible ASCII: always a valid header value.
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    if let Some(secs) = retry_after_secs {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    }
}

/// Sets the fields of `d` on a response's headers (and `Retry-After` when it is a denial).
pub fn apply(headers: &mut HeaderMap, d: &RulesDecision) {
    write(headers, &rule_items(d), (!d.allowed).then(|| d.retry_after_secs()));
}

/// Sets the fields of one limiter's decision: one item named by the limiter's state name
/// ([`Limiter::state_name`]: its name, or its quota), describing the quota it enforced.
pub fn apply_limiter(headers: &mut HeaderMap, limiter: &Limiter, d: &Decision) {
    let item = PolicyItem {
        name: limiter.state_name(),
        quota: limiter.policy().enforced_quota(d.source, limiter.quota()),
        decision: d,
        pk: None,
        shadow: false,
    };
    write(headers, &[item], (!d.allowed).then(|| d.retry_after_secs()));
}

/// `Retry-After` alone, when `d` refused: what a concurrency limit's refusal says (no rate
/// fields describe a count of requests in flight).
pub(crate) fn apply_retry_after(headers: &mut HeaderMap, d: &Decision) {
    write(headers, &[], (!d.allowed).then(|| d.retry_after_secs()));
}

/// The legacy fields of several rules, which can name one policy only: the enforced rule that
/// admits least from here (its quota actually enforced, the fewest units left, the longest
/// wait on a tie); none when no enforced rule has a quota state.
pub fn apply_legacy_rules(headers: &mut HeaderMap, d: &RulesDecision) {
    let tightest = d
        .rules
        .iter()
        .filter(|r| !r.shadow && r.enforced_quota().is_some())
        .min_by_key(|r| (r.decision.remaining, std::cmp::Reverse(r.decision.reset_after)));
    if let Some(r) = tightest {
        apply_legacy(headers, &r.decision);
    }
}

/// The legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` (seconds) fields that many clients
/// still read, for one decision: what the layers' `legacy_headers` option adds.
pub fn apply_legacy(headers: &mut HeaderMap, d: &Decision) {
    headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(d.capacity));
    headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(d.remaining));
    headers.insert(X_RATELIMIT_RESET, HeaderValue::from(secs_up(d.reset_after)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::enforce::RuleDecision;
    use crate::quota::{Algorithm, Quota};
    use crate::rules::KeyPart;

    fn rule(
        name: &str,
        shadow: bool,
        allowed: bool,
        remaining: u64,
        retry: u64,
        reset: u64,
        key: KeyPart,
    ) -> RuleDecision {
        let req = http::Request::builder().header("x-api-key", "abc").body(()).unwrap();
        let identity = crate::rules::identity_of(&[key], &req, None).unwrap();
        let secret = crate::enforce::PartitionSecret::new(b"sixteen-byte-key").unwrap();
        RuleDecision {
            rule: name.into(),
            partition_key: secret.partition_key(&identity),
            identity,
            algorithm: Algorithm::SlidingLog,
            quota: Quota::new(5, std::time::Duration::from_secs(60)),
            policy: crate::FailurePolicy::FailOpen,
            shadow,
            cost: 1,
            decision: Decision::store(
                allowed,
                5,
                remaining,
                std::time::Duration::from_millis(retry),
                std::time::Duration::from_millis(reset),
                0,
            ),
            consumed: allowed,
        }
    }

    #[test]
    fn fields_list_each_enforced_rule_with_exact_parameters() {
        let d = RulesDecision {
            allowed: false,
            rules: vec![
                rule("per-key", false, false, 0, 1_200, 59_001, KeyPart::header("x-api-key")),
                rule("global", false, true, 3, 0, 1_000, KeyPart::Const("all".into())),
                rule("dark", true, false, 0, 9_000, 9_000, KeyPart::header("x-api-key")),
            ],
        };
        let pk = partition_key(&d.rules[0]).unwrap();
        // The identity is "x-api-key=abc"; its HMAC's first 8 bytes, in base64.
        let tag =
            ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"sixteen-byte-key"), b"x-api-key=abc");
        assert_eq!(pk, tag.as_ref()[..8]);
        let b64 = policy_field(&d).unwrap();
        assert!(b64.starts_with("\"per-key\";q=5;w=60;pk=:"), "{b64}");
        assert!(b64.ends_with(":, \"global\";q=5;w=60"), "{b64}");
        // A sub-second window is named by the whole second that holds it.
        let short = crate::quota::Quota::new(5, std::time::Duration::from_millis(250));
        assert_eq!(
            (short.window_secs(), crate::quota::Quota::new(5, std::time::Duration::from_millis(1500)).window_secs()),
            (1, 2)
        );
        let status = ratelimit_field(&d).unwrap();
        assert!(status.starts_with("\"per-key\";r=0;t=60;pk=:"), "{status}");
        assert!(status.ends_with(":, \"global\";r=3;t=1"), "{status}");
        let shadow = shadow_field(&d).unwrap();
        assert!(shadow.starts_with("\"dark\";r=0;t=9;pk=:") && shadow.ends_with(":;denied"), "{shadow}");
        let mut headers = HeaderMap::new();
        apply(&mut headers, &d);
        assert_eq!(headers["retry-after"], "2");
    }
}
