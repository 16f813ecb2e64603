//! The checks of a multi-rule run: all-or-nothing on every request, and each rule's own bound
//! on what was consumed from it.
//!
//! Each record carries one mark per rule, in rule order: whether the rule alone admitted the
//! request and whether the request's cost was taken from it (what Redis answered). A request
//! breaks all-or-nothing when it consumed from one rule while another denied it (it was
//! charged for what it did not get), or when it was admitted by Redis without paying every
//! rule.

use redis_ratelimit::Source;

use results::{RuleBound, RulesResult};

use super::{is_pro, SimRule};
use crate::checker::{self, Check, Verdict};
use crate::promise::Tolerance;
use crate::trace::Record;

/// What a record's marks show, if anything is wrong.
fn split(r: &Record) -> Option<String> {
    let consumed: Vec<usize> = (0..r.rules.len()).filter(|&i| r.rules[i].consumed).collect();
    let denied: Vec<usize> = (0..r.rules.len()).filter(|&i| !r.rules[i].allowed).collect();
    if !consumed.is_empty() && !denied.is_empty() {
        return Some(format!("consumed from rules {consumed:?} while rules {denied:?} denied it"));
    }
    if r.allowed && r.source == Source::Store && r.cost > 0 && consumed.len() < r.rules.len() {
        return Some(format!("admitted having paid only rules {consumed:?}"));
    }
    None
}

/// Checks `records` (in decision-time order) of a run of `rules`; `data_losses` is how often
/// Redis lost its data.
pub fn check(rules: &[SimRule], records: &[Record], data_losses: u64) -> (Check, RulesResult) {
    let mut split_requests = 0;
    let mut first = None;
    for r in records.iter().filter(|r| r.rules.len() == rules.len()) {
        if let Some(what) = split(r) {
            split_requests += 1;
            first.get_or_insert_with(|| {
                format!("instance {} request {} (key-{}) at {} ms {what}", r.instance, r.seq, r.key, r.at_ms)
            });
        }
    }
    let marked = records.iter().filter(|r| r.rules.len() == rules.len()).count();
    let (aon, aon_detail) = match first {
        Some(first) => {
            (Verdict::Broken, format!("{split_requests} of {marked} requests split across rules; first: {first}"))
        }
        None => (Verdict::Held, format!("none of {marked} requests consumed from one rule while another denied it")),
    };
    let mut bounds = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        // A rule with a tier is held to each quota on the users it applies to.
        let mut tiers = vec![(rule.name.to_owned(), rule.quota, false)];
        if let Some(pro) = rule.pro {
            tiers.push((format!("{} (pro)", rule.name), pro, true));
        }
        for (name, quota, pro) in tiers {
            // What Redis took from this rule, per identity, as records of a single limiter (a
            // failure policy's local budget is checked as the policy's promise).
            let taken: Vec<Record> = records
                .iter()
                .filter(|r| r.source == Source::Store && r.rules.get(i).is_some_and(|m| m.consumed))
                .filter(|r| rule.pro.is_none() || is_pro(r.key) == pro)
                .map(|r| Record {
                    key: rule.identity(r.key),
                    allowed: true,
                    source: Source::Store,
                    rules: Vec::new(),
                    ..r.clone()
                })
                .collect();
            let c = checker::check_bound(rule.promise(), &quota, &taken, data_losses, Tolerance::EXACT);
            bounds.push(RuleBound {
                name,
                algorithm: rule.algorithm.name().to_owned(),
                limit: quota.limit(),
                period_ms: quota.period_ms(),
                burst: quota.burst(),
                consumed: taken.iter().map(|r| r.cost).sum(),
                bound: c.verdict,
                bound_detail: c.detail,
            });
        }
    }
    let broken_rule = bounds.iter().find(|b| b.bound == Verdict::Broken);
    let check = match (aon, broken_rule) {
        (Verdict::Broken, _) => Check { verdict: Verdict::Broken, detail: format!("all-or-nothing: {aon_detail}") },
        (_, Some(b)) => Check { verdict: Verdict::Broken, detail: format!("rule {}: {}", b.name, b.bound_detail) },
        _ => Check {
            verdict: Verdict::Held,
            detail: format!(
                "all-or-nothing held on {marked} requests; {}",
                bounds.iter().map(|b| format!("{} {}", b.name, b.bound)).collect::<Vec<_>>().join(", ")
            ),
        },
    };
    let result = RulesResult { all_or_nothing: aon, split_requests, all_or_nothing_detail: aon_detail, rules: bounds };
    (check, result)
}

#[cfg(test)]
mod tests {
    use redis_ratelimit::{Algorithm, Quota};

    use super::*;
    use crate::multi_rule::By;
    use crate::subject::RuleMark;

    fn rec(at_ms: u64, key: u32, allowed: bool, marks: &[(bool, bool)]) -> Record {
        Record {
            rules: marks.iter().map(|&(allowed, consumed)| RuleMark { allowed, consumed }).collect(),
            ..Record::exact(at_ms, key, 1, allowed)
        }
    }

    fn rules() -> [SimRule; 2] {
        [
            SimRule {
                name: "u",
                algorithm: Algorithm::SlidingLog,
                quota: Quota::new(2, std::time::Duration::from_secs(1)),
                by: By::User,
                pro: None,
            },
            SimRule {
                name: "g",
                algorithm: Algorithm::SlidingLog,
                quota: Quota::new(3, std::time::Duration::from_secs(1)),
                by: By::Global,
                pro: None,
            },
        ]
    }

    #[test]
    fn a_split_request_breaks_all_or_nothing_and_a_clean_run_holds() {
        let clean =
            [rec(0, 0, true, &[(true, true), (true, true)]), rec(1, 0, false, &[(true, false), (false, false)])];
        let (c, r) = check(&rules(), &clean, 0);
        assert_eq!((c.verdict, r.split_requests, r.all_or_nothing), (Verdict::Held, 0, Verdict::Held), "{}", c.detail);
        let split = [rec(0, 0, false, &[(true, true), (false, false)])];
        let (c, r) = check(&rules(), &split, 0);
        assert_eq!((c.verdict, r.split_requests), (Verdict::Broken, 1));
        assert!(c.detail.contains("consumed from rules [0] while rules [1] denied it"), "{}", c.detail);
        let unpaid = [rec(0, 0, true, &[(true, true), (true, false)])];
        assert_eq!(check(&rules(), &unpaid, 0).1.split_requests, 1);
    }

    #[test]
    fn a_tier_holds_its_users_to_its_own_quota() {
        let tiered = [SimRule {
            name: "u",
            algorithm: Algorithm::SlidingLog,
            quota: Quota::new(2, std::time::Duration::from_secs(1)),
            by: By::User,
            pro: Some(Quota::new(3, std::time::Duration::from_secs(1))),
        }];
        // User 1 is on pro (3 a second), user 0 is not (2): three each within one period.
        let recs: Vec<Record> = (0..6).map(|i| rec(i, (i % 2) as u32, true, &[(true, true)])).collect();
        let (_, r) = check(&tiered, &recs, 0);
        let bounds: Vec<_> = r.rules.iter().map(|b| (b.name.as_str(), b.limit, b.consumed, b.bound)).collect();
        assert_eq!(bounds, [("u", 2, 3, Verdict::Broken), ("u (pro)", 3, 3, Verdict::Held)]);
    }

    #[test]
    fn each_rule_is_held_to_its_own_bound_on_what_it_consumed() {
        // Three users each consume once from the global rule within a period: fine for the
        // per-user rule, one too many for the global rule of 3... plus one: four.
        let recs: Vec<Record> = (0..4).map(|k| rec(k as u64, k, true, &[(true, true), (true, true)])).collect();
        let (c, r) = check(&rules(), &recs, 0);
        assert_eq!(r.rules[0].bound, Verdict::Held);
        assert_eq!((r.rules[1].bound, r.rules[1].consumed), (Verdict::Broken, 4));
        assert!(c.detail.starts_with("rule g:"), "{}", c.detail);
    }
}
