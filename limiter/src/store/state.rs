//! The Redis store as a [`StateStore`]: each operation on a charge becomes its script (or the
//! module's command) with the keys the charge names.
//!
//! Several charges of one request go to one call of the all-or-nothing script; one charge alone
//! is its own algorithm's call, which costs Redis what the rule does and no more (the
//! all-or-nothing script parses and answers for every rule around it). On a Redis Cluster the
//! charges of different hash tags cannot share a call: they are decided by a dry pass over every
//! tag, and only if every enforced charge fits, a committing pass tag by tag (the enforcer's
//! docs say what that weakens).

use redis::Value;

use super::eval::Sent;
use super::redis::bad_reply;
use super::{loaded, RedisStore, StateStore, StoreError};
use crate::algo::all_or_nothing::ItemOutcome;
use crate::algo::concurrency::PermitOp;
use crate::algo::Outcome;
use crate::charge::{Charge, Claim};
use crate::key::KeySpace;
use crate::rules_script::{self, ItemReply, RulesReply, RulesRequest};
use crate::scripts;

/// A charge's names in Redis, worked out once per call.
struct Named {
    stem: String,
    block: Option<String>,
}

impl Named {
    fn of(charge: &Charge<'_>, keys: &KeySpace) -> Named {
        Named { stem: charge.stem(keys), block: charge.blockable.then(|| charge.block_key(keys)) }
    }
}

impl RedisStore {
    /// Makes the store decide the charges of each hash tag in their own calls, in two passes,
    /// as it does by itself on a cluster: for the harness, which checks what that costs on
    /// one server.
    #[cfg(feature = "harness")]
    pub(crate) fn split_by_tag(self) -> Self {
        RedisStore { per_tag: true, ..self }
    }

    /// The charges decided together: all of them on one server; per hash tag on a cluster.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    fn groups(&self, charges: &[Charge<'_>]) -> Vec<Vec<usize>> {
        if !self.per_tag && !self.is_cluster() {
            return vec![(0..charges.len()).collect()];
        }
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, c) in charges.iter().enumerate() {
            match groups.iter_mut().find(|(tag, _)| *tag == c.state.tag) {
                Some((_, g)) => g.push(i),
                None => groups.push((&c.state.tag, vec![i])),
            }
        }
        groups.into_iter().map(|(_, g)| g).collect()
    }
}

impl StateStore for RedisStore {
    async fn decide(&self, charge: &Charge<'_>, keys: &KeySpace, now_ms: u64) -> Result<(Outcome, u64), StoreError> {
        let named = Named::of(charge, keys);
        self.evaluate(charge.script_request(&named.stem, now_ms), named.block.as_deref()).await
    }

    async fn decide_all(&self, charges: &[Charge<'_>], keys: &KeySpace, now_ms: u64) -> Result<RulesReply, StoreError> {
        let named: Vec<Named> = charges.iter().map(|c| Named::of(c, keys)).collect();
        if let ([one], [named]) = (charges, &named[..]) {
            let request = one.script_request(&named.stem, now_ms);
            let (outcome, now_ms) = self.evaluate(request, named.block.as_deref()).await?;
            let consumed = outcome.allowed && one.cost > 0;
            let item = ItemReply { item: ItemOutcome { outcome, consumed }, now_ms };
            return Ok(RulesReply { allowed: outcome.allowed || one.shadow, items: vec![item] });
        }
        let request_of = |group: &[usize], commit: bool| RulesRequest {
            items: group
                .iter()
                .map(|&i| rules_script::RuleCall {
                    request: charges[i].script_request(&named[i].stem, now_ms),
                    shadow: charges[i].shadow,
                    block: named[i].block.as_deref(),
                })
                .collect(),
            commit,
        };
        let groups = self.groups(charges);
        if let [all] = &groups[..] {
            return self.evaluate_rules(&request_of(all, true)).await;
        }
        let mut replies: Vec<Option<ItemReply>> = vec![None; charges.len()];
        let mut all_fit = true;
        for group in &groups {
            let reply = self.evaluate_rules(&request_of(group, false)).await?;
            all_fit &= reply.allowed;
            for (&i, item) in group.iter().zip(reply.items) {
                replies[i] = Some(item);
            }
        }
        let mut allowed = all_fit;
        if all_fit {
            for group in &groups {
                let reply = self.evaluate_rules(&request_of(group, true)).await?;
                allowed &= reply.allowed;
                for (&i, item) in group.iter().zip(reply.items) {
                    replies[i] = Some(item);
                }
            }
        }
        // Every index is in exactly one group, so every reply is filled.
        Ok(RulesReply { allowed, items: replies.into_iter().flatten().collect() })
    }

    async fn reset(&self, charge: &Charge<'_>, keys: &KeySpace, now_ms: u64) -> Result<(), StoreError> {
        let mut state = scripts::state_keys(charge.algorithm, &charge.quota, &charge.stem(keys), now_ms);
        state.push(charge.block_key(keys));
        self.reset_keys(state).await.map(|_| ())
    }

    async fn refund(&self, charge: &Charge<'_>, keys: &KeySpace, now_ms: u64, units: u64) -> Result<bool, StoreError> {
        let stem = charge.stem(keys);
        let request = scripts::Request { cost: units, ..charge.script_request(&stem, now_ms) };
        self.refund_units(request).await
    }

    /// One call of `lua/debit.lua`: the units it charged, at most those asked for.
    async fn debit(&self, charge: &Charge<'_>, keys: &KeySpace, now_ms: u64, units: u64) -> Result<u64, StoreError> {
        let stem = charge.stem(keys);
        let call = scripts::Request { cost: units, ..charge.script_request(&stem, now_ms) }.units_invocation();
        self.run("debit", Sent::Script(loaded::debit()), &call, |reply| match reply {
            Value::Int(n) if u64::try_from(n).is_ok_and(|n| n <= units) => Ok(n as u64),
            other => Err(bad_reply(&other)),
        })
        .await
    }

    async fn block(
        &self,
        charge: &Charge<'_>,
        keys: &KeySpace,
        now_ms: u64,
        duration_ms: u64,
    ) -> Result<(), StoreError> {
        self.block_key(&charge.block_key(keys), charge.client_now(now_ms), duration_ms).await.map(|_| ())
    }

    async fn permit(
        &self,
        claim: &Claim<'_>,
        keys: &KeySpace,
        now_ms: u64,
        op: PermitOp,
        holder: &str,
    ) -> Result<(Outcome, u64), StoreError> {
        let now = claim.time_source.sent(now_ms);
        let call = scripts::permit_invocation(&claim.key(keys), now, claim.limit, claim.lease_ms, holder, op);
        self.permit_call(&call).await
    }
}
