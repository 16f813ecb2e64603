//! The lock-free `AtomicLimiter` decides exactly like the GCRA twin it wraps, on the same
//! schedules the GCRA suites use (backward clock steps and peeks included).

use properties::strategy::{self, Shape};
use properties::{Run, Subject};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use redis_ratelimit::harness::algo::Outcome;
use redis_ratelimit::store::AtomicLimiter;
use redis_ratelimit::Algorithm;

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/atomic-limiter.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn atomic_limiter_decides_like_the_gcra_twin(case in strategy::case(Subject::real(Algorithm::Gcra), Shape::ANY)) {
        let gcra = Subject::real(Algorithm::Gcra);
        let limiter = AtomicLimiter::new(case.quota).expect("the strategy draws valid GCRA quotas");
        let run = Run::new(&gcra, &case.quota, &case.reqs);
        for (i, step) in run.steps.iter().enumerate() {
            let got = Outcome::from(limiter.check(step.req.t_ms, step.req.cost).expect("costs stay within the burst"));
            prop_assert_eq!(got, step.outcome, "request #{} at t={} cost {}", i, step.req.t_ms, step.req.cost);
        }
    }
}
