//! The rate limit service's scenario family: several service instances answering several
//! proxies in turmoil, judged with the library's oracle and bounds.

use sim_engine::checker::Verdict;
use sim_engine::rls::{run, RlsSpec, Variant};

#[test]
fn grants_keep_gcra_s_bound_through_a_restart_and_proxies_decide_a_share() {
    for seed in [1, 2] {
        let out = run(&RlsSpec::new(Variant::Grants, seed)).expect("runs");
        assert_eq!(out.bound.verdict, Verdict::Held, "seed {seed}: {}", out.bound.detail);
        // Leases place their units where GCRA would have admitted at any moment of the lease, and
        // Redis lost its data once: the exact limiter, fed the same requests, admits at other
        // moments, so only the bound is the promise (as for the library's own leases).
        println!(
            "seed {seed}: {:?}, {} decisions, {} from grants, {} Redis calls",
            out.accuracy, out.decisions, out.from_grants, out.redis_calls
        );
        // At three times the limit most requests are refused, and a refusal carries no grant
        // (a quota is at least one request): the proxies still decide a share themselves.
        assert!(
            out.from_grants * 10 > out.decisions,
            "seed {seed}: {} of {} from grants",
            out.from_grants,
            out.decisions
        );
        assert!(
            out.redis_calls < out.decisions,
            "seed {seed}: {} calls for {} decisions",
            out.redis_calls,
            out.decisions
        );
        let again = run(&RlsSpec::new(Variant::Grants, seed)).expect("runs");
        assert_eq!(again.trace_hash, out.trace_hash, "seed {seed}: the same seed replays the same trace");
    }
}

#[test]
fn several_services_decide_two_descriptors_all_or_nothing() {
    for seed in [1, 2] {
        let out = run(&RlsSpec::new(Variant::AllOrNothing, seed)).expect("runs");
        assert_eq!(out.bound.verdict, Verdict::Held, "seed {seed}: {}", out.bound.detail);
        assert!(out.accuracy.oracle_admitted > 50, "seed {seed}: {:?}", out.accuracy);
        // Decisions lie anywhere between sending and the answer: a few may land either side
        // of the exact limiter's; none beyond the bound.
        let total = out.decisions.max(1);
        assert!(out.accuracy.wrong_allow * 20 <= total, "seed {seed}: {:?} of {total}", out.accuracy);
    }
}
