//! Limits given directly rather than read from an HTTP request: what a service in front of the
//! enforcer (a gRPC rate limit service whose callers send descriptors, not requests) decides.
//! The caller has already matched its request to [`Rule`]s and built each one's [`Identity`];
//! the enforcer decides them exactly as it decides an HTTP request's matched rules (one
//! all-or-nothing call, each rule's failure policy when Redis cannot be asked, the breaker, the
//! counts and metrics), with the quota and the cost the caller gives per limit.
//!
//! [`Enforcer::lease`] decides one limit and leases more of its key's units in the same call, as
//! [`crate::modes::Leases`] does for a limiter: units a caller may spend without asking again
//! until the lease ends, with the algorithm's own bound kept whatever it does with them (see
//! `algo::lease`), as long as it spends them within the lease on the clock that decided.

use std::future::Future;
use std::time::Duration;

use super::{charge_with, Enforcer, RulesDecision, Ruling, Shared};
use crate::algo::lease::{self as lease_twin, LeaseArgs};
use crate::algo::Outcome;
use crate::charge::Charge;
use crate::decision::Decision;
use crate::error::Error;
use crate::health::Guarded;
use crate::modes::wire::LeaseRequest;
use crate::quota::Quota;
use crate::reconcile::Reconciled;
use crate::rules::{Identity, Rule};

/// One limit of a request, given directly: the rule it falls under (its algorithm, failure
/// policy, clock, shadow and blockable settings, and its name, which names its Redis keys), the
/// identity it is counted by, and the quota and cost of this request under it (the rule's own
/// quota, or another chosen per request as a plan's tier is).
#[derive(Debug, Clone, PartialEq)]
pub struct DirectLimit {
    /// The rule.
    pub rule: Rule,
    /// What the request is counted by under the rule.
    pub identity: Identity,
    /// The quota enforced for this request.
    pub quota: Quota,
    /// What the request costs (0: it only peeks).
    pub cost: u64,
}

/// What [`Enforcer::lease`] answered: the request's own decision and the units leased beyond it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct Leased {
    /// The request's decision, one rule's: admitted when the lease held its cost.
    pub decision: RulesDecision,
    /// Units leased beyond the request's cost, for the caller to spend until `valid_until_ms`
    /// without asking again (0 when nothing was leased).
    pub spare: u64,
    /// When the lease ends, on the clock that decided (`decision`'s `decided_at_ms`): Redis's
    /// `TIME` for a server-time rule. Spent no later than this, every leased unit keeps the
    /// algorithm's bound.
    pub valid_until_ms: u64,
}

impl Enforcer {
    /// Decides `limits` all-or-nothing, as the rules an HTTP request matches are decided (see
    /// the module docs of [`crate::enforce`]): one call of the all-or-nothing script, each
    /// rule's failure policy when Redis cannot be asked. An empty list is admitted. Errors name
    /// what cannot be decided: an identity longer than the key bound, a quota the rule's
    /// algorithm cannot enforce, a cost above what the quota could ever admit. Two limits of
    /// one call must not count the same state (the same rule and identity): sum their costs
    /// into one instead.
    pub fn decide(
        &self,
        limits: Vec<DirectLimit>,
    ) -> impl Future<Output = Result<RulesDecision, Error>> + Send + 'static {
        let charged = limits.into_iter().map(|l| self.shared.charged(l)).collect::<Result<Vec<_>, _>>();
        let shared = self.shared.clone();
        async move {
            let (charges, identities): (Vec<_>, Vec<_>) = charged?.into_iter().unzip();
            let decision = if charges.is_empty() {
                RulesDecision { allowed: true, rules: Vec::new() }
            } else {
                shared.decide(charges, identities).await?
            };
            Ok(shared.recorded(decision))
        }
    }

    /// Decides `limit` and leases up to `spare` more of its key's units in the same call, valid
    /// for `lifetime` from the decision (a lease of the token bucket or GCRA, which start now:
    /// none is queued for later). The request is admitted when the lease holds its cost; a
    /// request of cost 0 leases only, at least one unit. The rest, [`Leased::spare`], is the
    /// caller's to spend until [`Leased::valid_until_ms`]: the instances together keep the
    /// algorithm's bound, `B + L * d / T` in any interval `d`, however the units are spent
    /// within the lease; what leasing costs is under-admission (units leased and never spent,
    /// and the slots of one lifetime a lease leaves unused on an idle key).
    ///
    /// A limit that cannot lease is decided as [`Enforcer::decide`] decides it, with nothing
    /// spare: an algorithm other than the two buckets, a blockable rule (a leased unit is spent
    /// where no block can reach it), a store in process, a lifetime too long for the quota's
    /// burst to hold the request's cost. When Redis cannot be asked the rule's failure policy
    /// answers, with nothing spare.
    pub fn lease(
        &self,
        limit: DirectLimit,
        spare: u64,
        lifetime: Duration,
    ) -> impl Future<Output = Result<Leased, Error>> + Send + 'static {
        let lifetime_ms = u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX).max(1);
        let leasable = lease_twin::can_lease(limit.rule.algorithm())
            && !limit.rule.is_blockable()
            && self.shared.gate.redis().is_some()
            && limit.cost.max(1) <= lease_twin::capacity(limit.rule.algorithm(), &limit.quota, lifetime_ms);
        let plain = (!leasable).then(|| self.decide(vec![limit.clone()]));
        let charged = self.shared.charged(limit);
        let shared = self.shared.clone();
        async move {
            if let Some(plain) = plain {
                let decision = plain.await?;
                let valid_until_ms = decision.rules.first().map_or(0, |r| r.decision.decided_at_ms);
                return Ok(Leased { decision, spare: 0, valid_until_ms });
            }
            let (charge, identity) = charged?;
            let leased = shared.lease(charge, identity, spare, lifetime_ms).await?;
            Ok(Leased { decision: shared.recorded(leased.decision), ..leased })
        }
    }
}

impl Enforcer {
    /// Settles `limit` for a request that reserved `reserved` units of it when it was decided,
    /// now that its real cost is known: `limit.cost`, which may be above what one request could
    /// be admitted at. A surplus goes back, an excess is charged whether it fits or not, up to
    /// the quota's capacity for one request and one capacity owed, as [`Enforcer::reconcile`]
    /// settles a rule of an HTTP request. A gRPC rate limit service answers Envoy's call at a
    /// stream's end with it. Errors as [`Enforcer::decide`]'s, and [`Error::Unavailable`] when
    /// Redis cannot be asked: nothing was charged or given back.
    pub fn reconcile_direct(
        &self,
        limit: DirectLimit,
        reserved: u64,
    ) -> impl Future<Output = Result<Reconciled, Error>> + Send + 'static {
        let actual = limit.cost;
        let checked = self.shared.checked(DirectLimit { cost: 0, ..limit });
        let shared = self.shared.clone();
        async move {
            let (charge, _) = checked?;
            shared.gate.reconcile(&charge, reserved, actual, charge.capacity()).await
        }
    }
}

impl Shared {
    /// A direct limit checked and ready to decide: its charge and its identity.
    fn charged(&self, limit: DirectLimit) -> Result<(Charge<'static>, Identity), Error> {
        let (charge, identity) = self.checked(limit)?;
        let (cost, capacity) = (charge.cost, charge.capacity());
        if cost > capacity {
            return Err(Error::CostExceedsCapacity { cost, capacity });
        }
        Ok((charge, identity))
    }

    /// A direct limit's charge, its identity a key and its quota one the rule's algorithm can
    /// enforce, whatever its cost.
    fn checked(&self, limit: DirectLimit) -> Result<(Charge<'static>, Identity), Error> {
        let DirectLimit { rule, identity, quota, cost } = limit;
        self.gate.keys().check(&identity.text())?;
        quota.validate(rule.algorithm())?;
        Ok((charge_with(&rule, &identity, quota, cost), identity))
    }

    /// Counts a direct decision as a request's is counted.
    fn recorded(&self, decision: RulesDecision) -> RulesDecision {
        let ruling = Ruling::Decided(decision);
        self.counters.record(&ruling, self.near_limit_ratio);
        let Ruling::Decided(decision) = ruling else { unreachable!("built as Decided above") };
        decision
    }

    /// One lease call for `charge` (which can lease: see [`Enforcer::lease`]).
    async fn lease(
        &self,
        charge: Charge<'static>,
        identity: Identity,
        spare: u64,
        lifetime_ms: u64,
    ) -> Result<Leased, Error> {
        let Some(redis) = self.gate.redis() else {
            unreachable!("only a Redis store leases (checked by Enforcer::lease)")
        };
        let now = self.gate.clock().now_ms();
        let need = charge.cost.max(1);
        let args = LeaseArgs {
            lifetime_ms,
            horizon_ms: 0,
            want: charge.cost.saturating_add(spare).max(need),
            need,
            give_back: 0,
            written: (0, 0),
        };
        let stem = charge.stem(self.gate.keys());
        let request = LeaseRequest {
            algorithm: charge.algorithm,
            quota: &charge.quota,
            stem: &stem,
            now_ms: charge.client_now(now),
            args,
        };
        let guarded = self.gate.health().guard(self.gate.clock(), now, redis, || redis.lease(request)).await?;
        let (decision, consumed, spare, valid_until_ms) = match guarded {
            Guarded::Answered((o, decided_at_ms)) => {
                let held = o.granted >= need;
                let outcome = Outcome {
                    allowed: held,
                    remaining: o.remaining,
                    retry_after_ms: if held { 0 } else { o.retry_after_ms.max(1) },
                    reset_after_ms: o.reset_after_ms,
                };
                let decision = Decision::from_store(outcome, charge.capacity(), decided_at_ms);
                let spare = if held { o.granted - charge.cost } else { 0 };
                let until = if held { decided_at_ms + lifetime_ms } else { decided_at_ms };
                (decision, held && charge.cost > 0, spare, until)
            }
            Guarded::Unavailable { at_ms, why, retry_after_ms } => {
                let answer =
                    self.gate.fallback(std::slice::from_ref(&charge), at_ms, why, retry_after_ms).items.remove(0);
                (answer.decision, answer.consumed, 0, at_ms)
            }
        };
        let allowed = decision.allowed || charge.shadow;
        let rule = self.rule_decision(charge, identity, decision, consumed);
        Ok(Leased { decision: RulesDecision { allowed, rules: vec![rule] }, spare, valid_until_ms })
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::quota::Algorithm;
    use crate::rules::RuleSet;
    use crate::ManualClock;
    use std::sync::Arc;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
    }

    fn limit(rule: &Rule, who: &str, quota: Quota, cost: u64) -> DirectLimit {
        let identity = Identity::from_values([("user", who)]).expect("one value");
        DirectLimit { rule: rule.clone(), identity, quota, cost }
    }

    #[test]
    fn direct_limits_are_decided_all_or_nothing_with_their_own_quota_and_cost() {
        let per_user = Rule::new("per-user", Algorithm::FixedWindow, Quota::per_minute(5));
        let global = Rule::new("global", Algorithm::SlidingLog, Quota::per_minute(100));
        let enforcer = Enforcer::builder(RuleSet::default()).clock(Arc::new(ManualClock::new(1_000))).build().unwrap();
        block_on(async {
            // A per-request quota of 3 and a cost of 2: one request fits, the second does not,
            // and the denied one takes nothing from the global rule.
            let ask = |cost| {
                vec![limit(&per_user, "a", Quota::per_minute(3), cost), limit(&global, "all", global.quota(), cost)]
            };
            let first = enforcer.decide(ask(2)).await.unwrap();
            assert!(first.allowed);
            assert_eq!((first.rules[0].decision.remaining, first.rules[0].cost), (1, 2));
            let second = enforcer.decide(ask(2)).await.unwrap();
            assert!(!second.allowed);
            assert!(second.rules.iter().all(|r| !r.consumed));
            assert_eq!(second.rules[1].decision.remaining, 98);
            // A cost of 0 peeks; nothing at all is admitted.
            assert!(enforcer.decide(ask(0)).await.unwrap().allowed);
            assert!(enforcer.decide(Vec::new()).await.unwrap().allowed);
            // Errors name what cannot be decided.
            let too_costly = enforcer.decide(vec![limit(&per_user, "a", Quota::per_minute(3), 4)]).await;
            assert!(matches!(too_costly, Err(Error::CostExceedsCapacity { cost: 4, capacity: 3 })), "{too_costly:?}");
            let bad_quota = enforcer.decide(vec![limit(&per_user, "a", Quota::per_minute(0), 1)]).await;
            assert!(matches!(bad_quota, Err(Error::Config(_))), "{bad_quota:?}");
            let long = DirectLimit {
                identity: Identity::from_values([("k", &*"v".repeat(600))]).unwrap(),
                ..ask(1).remove(0)
            };
            assert!(matches!(enforcer.decide(vec![long]).await, Err(Error::InvalidKey(_))));
            // Without Redis nothing leases: the limit is decided as `decide` would.
            let gcra = Rule::new("gcra", Algorithm::Gcra, Quota::per_second(10));
            let leased =
                enforcer.lease(limit(&gcra, "a", gcra.quota(), 1), 5, Duration::from_millis(100)).await.unwrap();
            assert!(leased.decision.allowed);
            assert_eq!((leased.spare, leased.valid_until_ms), (0, 1_000));
        });
        let counts = enforcer.counts();
        assert_eq!((counts.rules["per-user"].decided, counts.rules["gcra"].decided), (3, 1));
    }
}
