//! The oracle of several rules: every request in true time order, each rule's exact twin fed
//! true time, and the request admitted only if every rule admits it alone, in which case
//! each rule is charged, else none. Written from that definition (a trial on a copy of each
//! rule's state), not from the peek the script uses, so the two are independent.

use std::collections::BTreeMap;

use redis_ratelimit::harness::algo::{self, State};

use super::SimRule;
use crate::oracle::Accuracy;
use crate::simclock::EPOCH_MS;
use crate::trace::Record;

/// The oracle's verdict per record (already in decision-time order) and the counts.
pub fn judge(rules: &[SimRule], records: &[Record]) -> (Vec<bool>, Accuracy) {
    let mut states: BTreeMap<(usize, u32), Option<State>> = BTreeMap::new();
    let mut acc = Accuracy::default();
    let mut verdicts = Vec::with_capacity(records.len());
    for r in records {
        let now = EPOCH_MS + r.at_ms;
        let trials: Vec<((usize, u32), Option<State>, bool)> = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let id = (i, rule.identity(r.key));
                let mut state = states.get(&id).cloned().flatten();
                let ok = algo::step(rule.algorithm, &rule.quota_for(r.key), &mut state, now, r.cost).allowed;
                (id, state, ok)
            })
            .collect();
        let ok = trials.iter().all(|(_, _, ok)| *ok);
        if ok {
            for (id, state, _) in trials {
                states.insert(id, state);
            }
        }
        verdicts.push(ok);
        acc.oracle_admitted += ok as u64;
        match (r.allowed, ok) {
            (true, false) => acc.wrong_allow += 1,
            (false, true) => acc.wrong_limit += 1,
            _ => {}
        }
    }
    (verdicts, acc)
}

#[cfg(test)]
mod tests {
    use redis_ratelimit::{Algorithm, Quota};

    use super::*;
    use crate::multi_rule::By;

    fn rec(at_ms: u64, key: u32) -> Record {
        Record::exact(at_ms, key, 1, true)
    }

    #[test]
    fn a_request_one_rule_denies_is_charged_to_none() {
        let rules = [
            SimRule {
                name: "u",
                algorithm: Algorithm::SlidingLog,
                quota: Quota::new(1, std::time::Duration::from_secs(1)),
                by: By::User,
                pro: None,
            },
            SimRule {
                name: "g",
                algorithm: Algorithm::SlidingLog,
                quota: Quota::new(2, std::time::Duration::from_secs(1)),
                by: By::Global,
                pro: None,
            },
        ];
        // Key 0 twice (the second denied by the per-user rule), then key 1: the global rule
        // still has room, because the denied request took nothing from it.
        let (verdicts, acc) = judge(&rules, &[rec(0, 0), rec(1, 0), rec(2, 1), rec(3, 2)]);
        assert_eq!(verdicts, [true, false, true, false]);
        assert_eq!((acc.oracle_admitted, acc.wrong_allow), (2, 2));
    }
}
