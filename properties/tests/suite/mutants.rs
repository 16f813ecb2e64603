//! Not vacuous: every invariant is fed known-bad state machines (the adr002 subject, correct
//! algorithms held to a stricter promise, and the one-bug copies in
//! `properties::mutants`) and must catch each within a fixed, seeded budget of cases.
//! Test names read `<invariant>_catches_<model>`.

use properties::invariants::{
    CLOCK_BACK, CLOCK_LAG, COST_SPLIT, NO_LOST_REFILL, PEEK, REMAINING, RESET_AFTER, RETRY_AFTER, SAFETY, WITHIN_RATE,
};
use properties::mutants::*;
use properties::runner::catches;
use properties::strategy::Shape;
use properties::{Invariant, Subject};
use redis_ratelimit::Algorithm;

fn without_peeks(invariant: Invariant) -> Invariant {
    Invariant { shape: Shape { peeks: false, ..invariant.shape }, ..invariant }
}

fn adr002() -> Subject {
    Subject::adr002()
}

fn fixed_window_as_sliding_log() -> Subject {
    Subject::real(Algorithm::FixedWindow).held_to(Algorithm::SlidingLog)
}

fn sliding_window_as_sliding_log() -> Subject {
    Subject::real(Algorithm::SlidingWindow).held_to(Algorithm::SlidingLog)
}

macro_rules! caught {
    ($($name:ident: $invariant:expr => $subject:expr;)*) => {$(
        #[test]
        fn $name() {
            catches($invariant, $subject);
        }
    )*};
}

caught! {
    safety_catches_fixed_window_limit_plus_one: SAFETY => FIXED_WINDOW_LIMIT_PLUS_ONE;
    safety_catches_fixed_window_checks_one_unit: SAFETY => FIXED_WINDOW_CHECKS_ONE_UNIT;
    safety_catches_sliding_log_drops_early: SAFETY => SLIDING_LOG_DROPS_EARLY;
    safety_catches_sliding_log_counts_requests: SAFETY => SLIDING_LOG_COUNTS_REQUESTS;
    safety_catches_gcra_interval_floored: SAFETY => GCRA_INTERVAL_FLOORED;
    safety_catches_sliding_window_floored_weight: SAFETY => SLIDING_WINDOW_FLOORED_WEIGHT;
    safety_catches_fixed_window_held_to_the_sliding_log_bound: SAFETY => fixed_window_as_sliding_log();
    safety_catches_sliding_window_held_to_the_sliding_log_bound: SAFETY => sliding_window_as_sliding_log();

    within_rate_catches_token_bucket_floored_refill: WITHIN_RATE => TOKEN_BUCKET_FLOORED_REFILL;
    within_rate_catches_adr002: WITHIN_RATE => adr002();
    within_rate_catches_sliding_log_keeps_boundary: WITHIN_RATE => SLIDING_LOG_KEEPS_BOUNDARY;
    within_rate_catches_sliding_window_held_to_the_sliding_log_rate: WITHIN_RATE => sliding_window_as_sliding_log();

    no_lost_refill_catches_token_bucket_floored_refill: NO_LOST_REFILL => TOKEN_BUCKET_FLOORED_REFILL;
    no_lost_refill_catches_adr002: NO_LOST_REFILL => adr002();
    no_lost_refill_catches_sliding_log_keeps_boundary: NO_LOST_REFILL => SLIDING_LOG_KEEPS_BOUNDARY;

    retry_after_catches_gcra_retry_floored: RETRY_AFTER => GCRA_RETRY_FLOORED;
    retry_after_catches_fixed_window_retry_late: RETRY_AFTER => FIXED_WINDOW_RETRY_LATE;
    retry_after_catches_sliding_log_drops_early: RETRY_AFTER => SLIDING_LOG_DROPS_EARLY;
    retry_after_catches_sliding_log_keeps_boundary: RETRY_AFTER => SLIDING_LOG_KEEPS_BOUNDARY;

    reset_after_catches_gcra_reset_before_consuming: RESET_AFTER => GCRA_RESET_BEFORE_CONSUMING;
    reset_after_catches_adr002: RESET_AFTER => adr002();

    peek_catches_token_bucket_peek_consumes: PEEK => TOKEN_BUCKET_PEEK_CONSUMES;
    peek_catches_adr002: PEEK => adr002();

    cost_split_catches_sliding_log_counts_requests: COST_SPLIT => SLIDING_LOG_COUNTS_REQUESTS;
    cost_split_catches_fixed_window_checks_one_unit: COST_SPLIT => FIXED_WINDOW_CHECKS_ONE_UNIT;

    remaining_catches_token_bucket_remaining_ceil: REMAINING => TOKEN_BUCKET_REMAINING_CEIL;
    remaining_catches_fixed_window_limit_plus_one: REMAINING => FIXED_WINDOW_LIMIT_PLUS_ONE;

    clock_back_catches_token_bucket_abs_diff: CLOCK_BACK => TOKEN_BUCKET_ABS_DIFF;
    clock_back_catches_fixed_window_held_to_the_sliding_log_bound: CLOCK_BACK => fixed_window_as_sliding_log();

    clock_lag_catches_token_bucket_ping_pong: CLOCK_LAG => TOKEN_BUCKET_PING_PONG;
    clock_lag_catches_token_bucket_abs_diff: CLOCK_LAG => TOKEN_BUCKET_ABS_DIFF;
    // A finding, not a mutant: the real sliding log scores a lagging admission at the
    // lagging reading, so it leaves the window early. If this starts failing, the sliding
    // log was fixed (score at max(now, newest)): move it to the suites that must hold.
    // Without peeks, so the counterexample shows a plain lagging admission.
    clock_lag_finds_the_sliding_log_scoring_lagging_admissions_early: without_peeks(CLOCK_LAG) => Subject::real(Algorithm::SlidingLog);
}
