//! The RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-11, written with a
//! structured-field serializer (`sfv`, RFC 8941/9651).
//!
//! - `RateLimit-Policy`: one item per enforced rule the request matched, a String naming the
//!   policy (the rule's name) with `q` (the quota: the rule's limit), `w` (its period in whole
//!   seconds) and `pk` (the partition key, below).
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

use crate::enforce::{RuleDecision, RulesDecision};

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `RateLimit-Shadow`: the shadow rules (this crate's own field).
pub const RATELIMIT_SHADOW: HeaderName = HeaderName::from_static("ratelimit-shadow");

/// The largest integer a structured field carries (15 digits).
const SF_MAX: u64 = 999_999_999_999_999;

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

/// Rule names are validated to letters, digits, `.`, `_` and `-`, all valid in a String.
fn name(r: &RuleDecision) -> Option<&StringRef> {
    StringRef::from_str(&r.rule).ok()
}

/// The `RateLimit-Policy` field, None when no enforced rule applies.
pub fn policy_field(d: &RulesDecision) -> Option<String> {
    let mut list = ListSerializer::new();
    for r in d.rules.iter().filter(|r| !r.shadow) {
        let Some(quota) = r.enforced_quota() else { continue };
        let pk = partition_key(r);
        let mut item = list
            .bare_item(name(r)?)
            .parameter(key("q"), int(quota.limit()))
            .parameter(key("w"), int(quota.period_ms() / 1000));
        if let Some(pk) = &pk {
            item = item.parameter(key("pk"), RefBareItem::ByteSequence(pk));
        }
        drop(item);
    }
    list.finish()
}

fn status_items(d: &RulesDecision, shadow: bool) -> Option<String> {
    let mut list = ListSerializer::new();
    for r in d.rules.iter().filter(|r| r.shadow == shadow && r.enforced_quota().is_some()) {
        let pk = partition_key(r);
        let mut item = list
            .bare_item(name(r)?)
            .parameter(key("r"), int(r.decision.remaining))
            .parameter(key("t"), int(r.decision.reset_after_ms.div_ceil(1000)));
        if let Some(pk) = &pk {
            item = item.parameter(key("pk"), RefBareItem::ByteSequence(pk));
        }
        if shadow && !r.decision.allowed {
            item = item.parameter(key("denied"), true);
        }
        drop(item);
    }
    list.finish()
}

/// The `RateLimit` field, None when no enforced rule has a known quota state.
pub fn ratelimit_field(d: &RulesDecision) -> Option<String> {
    status_items(d, false)
}

/// The `RateLimit-Shadow` field, None without shadow rules.
pub fn shadow_field(d: &RulesDecision) -> Option<String> {
    status_items(d, true)
}

/// Sets the fields of `d` on a response's headers (and `Retry-After` when it is a denial).
pub fn apply(headers: &mut HeaderMap, d: &RulesDecision) {
    let fields =
        [(RATELIMIT_POLICY, policy_field(d)), (RATELIMIT, ratelimit_field(d)), (RATELIMIT_SHADOW, shadow_field(d))];
    for (name, value) in fields {
        // Serialized structured fields are visible ASCII: always a valid header value.
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    if !d.allowed {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from(d.retry_after_secs().max(1)));
    }
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
            quota: Quota::new(5, 60_000),
            policy: crate::FailurePolicy::FailOpen,
            shadow,
            cost: 1,
            decision: Decision::store(allowed, 5, remaining, retry, reset, 0),
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
