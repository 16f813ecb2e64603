//! The post-hoc cost scenario: every algorithm of the library, admitting at an estimate and
//! reconciling at the real cost, keeps every unit it charges within the promise for twice its
//! capacity and accounts for every unit used; a gateway that charges after the response with
//! no cap breaks it.

use sim_engine::checker::Verdict;
use sim_engine::post_hoc::{run, Charger, PostHocSpec};

#[test]
fn every_algorithm_charges_within_twice_its_capacity_and_accounts_for_every_unit() {
    for algorithm in redis_ratelimit::Algorithm::ALL {
        for seed in [1, 2] {
            let spec = PostHocSpec::new(Charger::Library(algorithm), seed);
            let out = run(&spec).expect("runs");
            assert_eq!(out.bound.verdict, Verdict::Held, "{}: {}", spec.replay_command(), out.bound.detail);
            // The report's bar is the checker's own number: at most 1 where the bound held.
            assert!(out.worst_ratio > 0.0 && out.worst_ratio <= 1.0, "{}: {}", spec.replay_command(), out.worst_ratio);
            // Every unit used was charged (at the estimate, or after), or reported forgiven.
            let charged: u64 = out.records.iter().map(|r| r.cost).sum();
            assert_eq!(charged + out.uncharged, out.used, "{}", spec.replay_command());
            assert!(out.used > 5 * out.admitted, "{}: requests used more than their estimate", spec.replay_command());
            let again = run(&spec).expect("runs");
            assert_eq!(
                again.trace_hash,
                out.trace_hash,
                "{}: the same seed replays the same trace",
                spec.replay_command()
            );
        }
    }
}

#[test]
fn charging_after_the_response_with_no_cap_breaks_the_bound() {
    for seed in [1, 2, 3] {
        let spec = PostHocSpec::new(Charger::ChargeAfter, seed);
        let out = run(&spec).expect("runs");
        assert_eq!(out.bound.verdict, Verdict::Broken, "{}: {}", spec.replay_command(), out.bound.detail);
        assert!(out.bound.detail.contains("bound 200"), "{}", out.bound.detail);
        assert!(out.worst_ratio > 1.0, "{}", out.worst_ratio);
    }
}
