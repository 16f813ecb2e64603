//! The multi-rule scenario on the Redis model: the library's enforcement point decides every
//! request's rules all-or-nothing and each rule keeps its bound, under the race and under
//! faults, with every failure policy; deciding the same rules slot by slot (as a Redis Cluster
//! store would have to across slots) charges requests another rule denied, and the checker
//! says so.

use redis_ratelimit::FailurePolicy;
use sim_engine::multi_rule::limit_per_bucket;
use sim_engine::results::{RunResult, Verdict};
use sim_engine::run::{self, is_failure};
use sim_engine::scenario;
use sim_engine::subject::{RulesSubject, Subject};

fn run_all(subjects: &[RulesSubject], seeds: &[u64]) -> Vec<RunResult> {
    let subjects: Vec<Subject> = subjects.iter().map(|&s| Subject::Rules(s)).collect();
    let specs = scenario::find("multi-rule").expect("in the catalogue").runs(&subjects, seeds, None, 8_000);
    run::run_many(&specs, 2, &|| {}).expect("simulation runs")
}

#[test]
fn one_script_call_holds_all_or_nothing_and_every_rules_bound_under_every_policy() {
    let results = run_all(&[RulesSubject::OneCall], &[1, 2]);
    assert_eq!(results.len(), 6, "three policies, two seeds");
    for r in &results {
        let rules = r.rules.as_ref().expect("a multi-rule run reports its rules");
        assert_eq!(rules.all_or_nothing, Verdict::Held, "{}: {}", r.replay, rules.all_or_nothing_detail);
        assert_eq!(rules.split_requests, 0);
        // The per-user rule is held to each of its tiers on the users it applies to.
        let names: Vec<&str> = rules.rules.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["per-user", "per-user (pro)", "per-route", "global"]);
        assert_eq!(
            (rules.rules[0].limit * 2, rules.rules[0].period_ms),
            (rules.rules[1].limit, rules.rules[1].period_ms)
        );
        for b in &rules.rules {
            assert_eq!(b.bound, Verdict::Held, "{} rule {}: {}", r.replay, b.name, b.bound_detail);
            assert!(b.consumed > 0, "rule {} took nothing", b.name);
        }
        assert!(!is_failure(r), "{}: {} / {}", r.replay, r.bound_detail, r.policy_detail);
        assert_eq!(r.policy_check, Verdict::Held, "{}: {}", r.replay, r.policy_detail);
        // Every rule binds: requests are denied, and admitted, in numbers.
        assert!(r.admitted > r.requests / 5 && r.admitted < r.requests * 4 / 5, "{} of {}", r.admitted, r.requests);
    }
}

#[test]
fn deciding_the_rules_slot_by_slot_splits_requests_and_the_checker_reports_it() {
    let results = run_all(&[RulesSubject::PerSlot], &[1]);
    for r in &results {
        let rules = r.rules.as_ref().expect("rules reported");
        assert_eq!(rules.all_or_nothing, Verdict::Broken, "{}", r.replay);
        assert!(rules.split_requests > 20, "{}: {}", r.replay, rules.split_requests);
        assert!(rules.all_or_nothing_detail.contains("while rules"), "{}", rules.all_or_nothing_detail);
        // Each slot's call is atomic: no rule admits past its own bound, only the whole splits.
        assert!(rules.rules.iter().all(|b| b.bound == Verdict::Held), "{:?}", rules.rules);
        assert_eq!(r.bound, Verdict::Broken);
        assert!(r.expected_finding && !is_failure(r), "a finding, not a failure: {}", r.replay);
    }
}

#[test]
fn a_multi_rule_run_replays_byte_identically() {
    let subjects = [Subject::Rules(RulesSubject::OneCall)];
    let mut specs = scenario::find("multi-rule").expect("in the catalogue").runs(&subjects, &[5], None, 4_000);
    specs.truncate(1);
    let twice = run::run_many(&[specs[0].clone(), specs[0].clone()], 2, &|| {}).expect("runs");
    assert_eq!(twice[0].trace_hash, twice[1].trace_hash);
}

#[test]
fn the_rules_are_valid_for_the_catalogue_quota_and_count_by_three_things() {
    let q = scenario::QUOTA;
    let set = RulesSubject::rule_set(q, FailurePolicy::FailClosed).expect("valid");
    assert_eq!(set.rules().len(), 3);
    let rules = RulesSubject::rules(q);
    assert_eq!(rules.iter().map(|r| r.identity(5)).collect::<Vec<_>>(), [5, 1, 0]);
    // User 4 is on the pro plan: twice the per-user quota, the same shared rules.
    assert_eq!(
        rules.iter().map(|r| r.quota_for(4).limit()).collect::<Vec<_>>(),
        [2 * q.limit(), 2 * q.limit(), 3 * q.limit()]
    );
    assert_eq!(rules[0].quota_for(5), q);
    // Six users (two on pro): 80 per 500 ms per user, 40 per route pair, 30 global: the
    // global binds.
    let six: std::collections::BTreeSet<u32> = (0..6).collect();
    assert_eq!(limit_per_bucket(&rules, &six, 500), 30.0);
    let one: std::collections::BTreeSet<u32> = [3].into();
    assert_eq!(limit_per_bucket(&rules, &one, 500), 10.0);
}
