//! Failover on the Redis model, over generated replication lags and failover times: whatever
//! the lag and whenever the primary dies, each key admits at most one extra burst plus rate x
//! lag over its algorithm's promise (the checker's allowance), every failure policy keeps its
//! own promise in the gap, and the run replays byte for byte.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis_ratelimit::{Algorithm, FailurePolicy};
use sim_engine::faults::{format_schedule, Fault, FaultKind};
use sim_engine::run::{self, is_failure};
use sim_engine::scenario::{self, RunSpec};
use sim_engine::subject::Subject;

fn cases() -> u32 {
    let all = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256u32);
    (all / 16).max(8)
}

fn failovers() -> impl Strategy<Value = RunSpec> {
    let algorithm = proptest::sample::select(Algorithm::ALL.to_vec());
    let policy =
        proptest::sample::select(vec![FailurePolicy::FailOpen, FailurePolicy::FailClosed, scenario::LOCAL_BUDGET]);
    (algorithm, policy, any::<u64>(), 0u64..=1_500, 300u64..3_500, 1u64..=1_200).prop_map(
        |(algorithm, policy, seed, lag_ms, at_ms, gap_ms)| {
            let failover = scenario::find("failover").expect("the failover scenario");
            let mut spec = failover.runs(&[Subject::Library(algorithm)], &[seed], Some(3), 4_500).remove(0);
            spec.policy = policy;
            spec.faults = vec![Fault { kind: FaultKind::Failover { lag_ms }, at_ms, until_ms: at_ms + gap_ms }];
            spec
        },
    )
}

#[test]
fn any_failover_costs_at_most_one_burst_plus_rate_times_lag_per_key() {
    let n = cases();
    let runner = TestRunner::new(Config { cases: n, failure_persistence: None, ..Config::default() });
    let result = runner.clone().run(&failovers(), |spec| {
        let out = sim_engine::turmoil_run::run(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let again = sim_engine::turmoil_run::run(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&out.trace_hash, &again.trace_hash, "replay: {}", run::replay_command(&spec));
        let r = run::judge(&spec, out);
        prop_assert!(
            !is_failure(&r),
            "{} / {} / seed {} under {}: {} / {}\n  replay: {}",
            r.subject,
            r.policy,
            r.seed,
            format_schedule(&spec.faults),
            r.bound_detail,
            r.policy_detail,
            r.replay
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("properties: failover {n} generated lags and failover times held, each replayed byte for byte");
}
