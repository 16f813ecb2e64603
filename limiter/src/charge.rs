//! One rule applied to one request: a [`Charge`]. Both front doors build it (a
//! [`crate::Limiter`] one per call, keyed by the caller's string; an
//! [`crate::enforce::Enforcer`] one per matched rule, keyed by the request's identity), every
//! store takes it ([`crate::store::StateStore`]), and [`crate::gate::Gate`] wraps the breaker
//! and the failure policy around it. What a charge is called in Redis is decided here and
//! nowhere else ([`state_name`], [`Charge::stem`]). A concurrency limit asks for no units but
//! for one of a key's permits: its request is a [`Claim`], named by the same rules.

use std::borrow::Cow;

use crate::clock::TimeSource;
use crate::key::KeySpace;
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};
use crate::scripts;

/// One rule applied to one request: what it costs, under which algorithm and quota, against
/// which state, on which clock, and what happens when the store cannot be asked.
#[derive(Debug, Clone)]
pub(crate) struct Charge<'a> {
    /// The limiter's state name or the rule's name: what messages and metrics call it.
    pub(crate) name: Cow<'a, str>,
    /// The algorithm.
    pub(crate) algorithm: Algorithm,
    /// The quota this request is decided under (a plan's, or the rule's own).
    pub(crate) quota: Quota,
    /// Where its state lives.
    pub(crate) state: StateKey<'a>,
    /// Whose clock decides: Redis's `TIME`, or this instance's.
    pub(crate) time_source: TimeSource,
    /// Units asked for (0: a peek, which consumes nothing).
    pub(crate) cost: u64,
    /// It reads the block on its key ([`StateKey::block_key`]).
    pub(crate) blockable: bool,
    /// It is decided and reported but never refuses the request.
    pub(crate) shadow: bool,
    /// What answers for it when the store cannot be asked.
    pub(crate) policy: FailurePolicy,
}

/// Where a charge's state lives: an identity (a limiter's user key is a hash tag alone; a
/// rule's identity is its first key part as the tag and the others after it) and what the
/// keys carry after it, the state name ([`state_name`]).
#[derive(Debug, Clone)]
pub(crate) struct StateKey<'a> {
    /// The identity's hash tag, unescaped (the key space escapes it).
    pub(crate) tag: Cow<'a, str>,
    /// The rest of the identity, already escaped; empty for a limiter's key.
    pub(crate) rest: Cow<'a, str>,
    /// The state name this request counts against.
    pub(crate) state: Cow<'a, str>,
    /// The state name of the rule's own quota, under which the key's block lives, so a block
    /// stops the key under every quota it is decided by.
    pub(crate) home: Cow<'a, str>,
    /// The store keeps one limiter's keys only: in process, its own quota's state and its blocks
    /// are found by the user key alone, with nothing hashed beside it.
    pub(crate) alone: bool,
    /// `state` is `home`: the request counts against the state of the rule's own quota.
    pub(crate) own: bool,
}

/// What the Redis keys of a state carry after the identity: the limiter's or rule's `name` if it
/// has one, with the period after it where another period is another state (a token bucket
/// counts its units in periods; a window of another period than the rule's own `home_period_ms`
/// is another run of windows); without a name, the quota itself ([`scripts::quota_state`]).
pub(crate) fn state_name(algorithm: Algorithm, name: Option<&str>, home_period_ms: u64, quota: &Quota) -> String {
    let Some(name) = name else { return scripts::quota_state(algorithm, quota) };
    if algorithm == Algorithm::TokenBucket || (algorithm.is_windowed() && quota.period_ms() != home_period_ms) {
        format!("{name}:p{}", quota.period_ms())
    } else {
        name.to_owned()
    }
}

impl StateKey<'_> {
    /// `prefix:{tag}:rest:STATE:` for the state name `state`: the stem every Redis key of it
    /// starts with.
    fn stem_of(&self, keys: &KeySpace, state: &str) -> String {
        let mut stem = keys.stem(&self.tag);
        if !self.rest.is_empty() {
            stem.push_str(&self.rest);
            stem.push(':');
        }
        stem.push_str(state);
        stem.push(':');
        stem
    }

    /// Whether the in-process store finds this state by the user key alone.
    pub(crate) fn by_key_alone(&self) -> bool {
        self.alone && self.own
    }
}

impl Charge<'_> {
    /// The stem of its state's Redis keys.
    pub(crate) fn stem(&self, keys: &KeySpace) -> String {
        self.state.stem_of(keys, &self.state.state)
    }

    /// The Redis key of the block on its key: under the rule's own quota's stem.
    pub(crate) fn block_key(&self, keys: &KeySpace) -> String {
        scripts::block_key(self.algorithm, &self.state.stem_of(keys, &self.state.home))
    }

    /// The most one request may cost under its quota.
    pub(crate) fn capacity(&self) -> u64 {
        self.quota.capacity(self.algorithm)
    }

    /// The clock reading sent to Redis: this instance's in client time, none in server time.
    pub(crate) fn client_now(&self, now_ms: u64) -> Option<u64> {
        self.time_source.sent(now_ms)
    }

    /// The charge as its script is called (`scripts::Request`), against `stem`.
    pub(crate) fn script_request<'s>(&'s self, stem: &'s str, now_ms: u64) -> scripts::Request<'s> {
        scripts::Request {
            algorithm: self.algorithm,
            quota: &self.quota,
            stem,
            now_ms: self.client_now(now_ms),
            cost: self.cost,
        }
    }
}

/// A concurrency limit applied to one request: a claim on one of the `limit` permits of a key,
/// each held until its holder releases it or its lease of `lease_ms` ends
/// ([`crate::algo::concurrency`]). Built by [`crate::ConcurrencyLimiter`].
#[derive(Debug, Clone)]
pub(crate) struct Claim<'a> {
    /// The limiter's state name: what messages and metrics call it.
    pub(crate) name: Cow<'a, str>,
    /// The user key (the hash tag of its Redis key).
    pub(crate) tag: Cow<'a, str>,
    /// The most permits held at once.
    pub(crate) limit: u64,
    /// How long a permit is held without a renewal, in ms.
    pub(crate) lease_ms: u64,
    /// Whose clock ends leases: Redis's `TIME`, or this instance's.
    pub(crate) time_source: TimeSource,
    /// What answers an acquire when the store cannot be asked.
    pub(crate) policy: FailurePolicy,
}

impl Claim<'_> {
    /// The Redis key of its holders: `prefix:{tag}:STATE:permits`.
    pub(crate) fn key(&self, keys: &KeySpace) -> String {
        let mut key = keys.stem(&self.tag);
        key.push_str(&self.name);
        key.push(':');
        key.push_str(scripts::PERMITS_SUFFIX);
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge<'a>(tag: &'a str, rest: &'a str, state: &'a str, home: &'a str) -> Charge<'a> {
        Charge {
            name: Cow::Borrowed("api"),
            algorithm: Algorithm::FixedWindow,
            quota: Quota::per_minute(5),
            state: StateKey {
                tag: tag.into(),
                rest: rest.into(),
                state: state.into(),
                home: home.into(),
                alone: rest.is_empty(),
                own: state == home,
            },
            time_source: TimeSource::Server,
            cost: 1,
            blockable: true,
            shadow: false,
            policy: FailurePolicy::FailOpen,
        }
    }

    #[test]
    fn one_naming_rule_for_limiters_and_rules() {
        let keys = KeySpace::default();
        // A limiter's key: the user key is the tag.
        assert_eq!(charge("u{1}", "", "api", "api").stem(&keys), "ratelimiter:{u%7B1%7D}:api:");
        // A rule's identity: the tag, then the rest.
        assert_eq!(charge("ip=1", "route=a", "api", "api").stem(&keys), "ratelimiter:{ip=1}:route=a:api:");
        // The block is under the own quota's state, whatever quota decides.
        let tier = charge("ip=1", "", "api:p1000", "api");
        assert_eq!(tier.block_key(&keys), "ratelimiter:{ip=1}:api:fw:blk");
        assert!(!tier.state.by_key_alone());
    }

    #[test]
    fn a_claim_is_named_as_a_limiter_s_state_is() {
        let claim = Claim {
            name: "c=3".into(),
            tag: "u{1}".into(),
            limit: 3,
            lease_ms: 1_000,
            time_source: TimeSource::Server,
            policy: FailurePolicy::FailOpen,
        };
        assert_eq!(claim.key(&KeySpace::default()), "ratelimiter:{u%7B1%7D}:c=3:permits");
    }

    #[test]
    fn a_named_state_carries_the_period_where_another_period_is_another_state() {
        let q = |period_ms| Quota::new(5, std::time::Duration::from_millis(period_ms));
        assert_eq!(state_name(Algorithm::TokenBucket, Some("n"), 60_000, &q(60_000)), "n:p60000");
        assert_eq!(state_name(Algorithm::FixedWindow, Some("n"), 60_000, &q(60_000)), "n");
        assert_eq!(state_name(Algorithm::SlidingWindow, Some("n"), 60_000, &q(1_000)), "n:p1000");
        assert_eq!(state_name(Algorithm::Gcra, Some("n"), 60_000, &q(1_000)), "n");
        assert_eq!(state_name(Algorithm::SlidingLog, None, 60_000, &q(1_000)), "q=5/1000ms");
    }
}
