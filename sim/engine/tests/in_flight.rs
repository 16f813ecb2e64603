//! The in-flight scenario family: the library's concurrency limiter keeps its promise where
//! the INCR/DECR counter public implementations use breaks it, each in the way its design
//! predicts, and every run replays.

use sim_engine::checker::Verdict;
use sim_engine::in_flight::{run, Holder, InFlightSpec, InFlightVariant};

#[test]
fn the_library_keeps_at_most_n_and_loses_no_slot_past_a_lease_in_every_scenario() {
    for variant in InFlightVariant::ALL {
        for seed in [1, 2, 3] {
            let spec = InFlightSpec::new(variant, Holder::Library, seed);
            let out = run(&spec).expect("runs");
            let j = &out.judged;
            assert!(j.held(), "{}: {}; {}", spec.replay_command(), j.at_most.detail, j.no_leak.detail);
            // Demand is half again the slots: the limit is reached, and refusals happen.
            assert_eq!(j.peak.0 as u64, spec.limit, "{}: {}", spec.replay_command(), j.at_most.detail);
            assert!(j.series.iter().any(|&n| n as u64 == spec.limit));
            let refused = out.holds.iter().filter(|h| h.acquire == sim_engine::in_flight::check::Acquire::Full);
            assert!(refused.count() > 20, "{}", spec.replay_command());
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
fn the_incr_decr_counter_breaks_each_half_of_the_promise_where_its_design_says() {
    for seed in [1, 2, 3] {
        let judged = |variant| run(&InFlightSpec::new(variant, Holder::IncrDecr, seed)).expect("runs").judged;
        // Dead holders' slots never come back: the key refuses with fewer than N held.
        let crashes = judged(InFlightVariant::Crashes);
        assert_eq!(crashes.no_leak.verdict, Verdict::Broken, "seed {seed}: {}", crashes.no_leak.detail);
        assert!(crashes.unexplained > 20, "seed {seed}: {}", crashes.no_leak.detail);
        // An acquire whose reply was lost counted a slot nobody holds.
        let lost = judged(InFlightVariant::LostReplies);
        assert_eq!(lost.no_leak.verdict, Verdict::Broken, "seed {seed}: {}", lost.no_leak.detail);
        // A second release frees someone else's slot: more than N run at once.
        let double = judged(InFlightVariant::DoubleRelease);
        assert_eq!(double.at_most.verdict, Verdict::Broken, "seed {seed}: {}", double.at_most.detail);
        assert!(double.peak.0 > 4 + 2, "seed {seed}: {}", double.at_most.detail);
    }
}
