//! Every invariant over every correct algorithm, `PROPTEST_CASES` cases each. Test names
//! read `invariants::<invariant>::<algorithm>`.

macro_rules! holds_for_every_algorithm {
    ($($module:ident => $invariant:expr),* $(,)?) => {$(
        mod $module {
            use redis_ratelimit::Algorithm;
            use properties::runner::holds;
            use properties::Subject;

            #[test]
            fn fixed_window() {
                holds($invariant, Subject::real(Algorithm::FixedWindow));
            }

            #[test]
            fn sliding_window() {
                holds($invariant, Subject::real(Algorithm::SlidingWindow));
            }

            #[test]
            fn sliding_log() {
                holds($invariant, Subject::real(Algorithm::SlidingLog));
            }

            #[test]
            fn token_bucket() {
                holds($invariant, Subject::real(Algorithm::TokenBucket));
            }

            #[test]
            fn gcra() {
                holds($invariant, Subject::real(Algorithm::Gcra));
            }
        }
    )*};
}

holds_for_every_algorithm! {
    safety => properties::invariants::SAFETY,
    within_rate => properties::invariants::WITHIN_RATE,
    no_lost_refill => properties::invariants::NO_LOST_REFILL,
    retry_after => properties::invariants::RETRY_AFTER,
    reset_after => properties::invariants::RESET_AFTER,
    peek => properties::invariants::PEEK,
    cost_split => properties::invariants::COST_SPLIT,
    remaining => properties::invariants::REMAINING,
    clock_back => properties::invariants::CLOCK_BACK,
}

/// Lagging readings: kept by the algorithms whose stored time only moves forward.
mod clock_lag {
    use properties::invariants::CLOCK_LAG;
    use properties::runner::holds;
    use properties::Subject;
    use redis_ratelimit::Algorithm;

    #[test]
    fn token_bucket() {
        holds(CLOCK_LAG, Subject::real(Algorithm::TokenBucket));
    }

    #[test]
    fn gcra() {
        holds(CLOCK_LAG, Subject::real(Algorithm::Gcra));
    }
}
