//! How coarsely a bucket refills, measured before it is judged.
//!
//! A token bucket that refills continuously hands out at most one request's worth at a time
//! once its burst is spent: under steady pressure it admits a request each time one token has
//! accrued. Real buckets that keep time in whole seconds (Redis `TIME`'s seconds) or refill `L`
//! at the start of every period hand out a whole step at once: up to `B + step` within a moment
//! across a step, which a promise of `B + L·d/T` taken to the millisecond would call a break.
//! They are correct by their own design, so the verifier measures the step and holds them to
//! `B + step + L·d/T` instead, and says so in the verdict.
//!
//! The measurement: one key under a request every millisecond for three periods; whenever a
//! request is admitted, a burst at the same instant takes everything else available then. The
//! step is the most admitted at one instant after the first denial. A smooth bucket (at rates
//! up to one per millisecond) gives 1, which is no step at all: bugs that admit one request too
//! many (a tolerance off by one interval) are still caught. A constant allowance never hides a
//! bucket that refills too fast: over a long enough interval the rate shows.

use std::sync::Arc;

use redis_ratelimit::Quota;

use super::direct::Direct;
use super::schedule::KEY;
use sim_engine::promise::{Promise, Tolerance};
use sim_engine::subject::SubjectFile;

/// The subject's tolerance: what its file declares, raised by the measured refill step for
/// bucket promises.
pub fn tolerance(file: &Arc<SubjectFile>, promise: Promise, quota: Quota) -> Tolerance {
    let mut tolerance = file.tolerance;
    if promise.is_bucket() {
        tolerance.extra_units = tolerance.extra_units.max(refill_step(file, quota));
    }
    tolerance
}

/// The refill step in units (0 for a smooth bucket).
pub fn refill_step(file: &Arc<SubjectFile>, quota: Quota) -> u64 {
    let mut direct = Direct::new(file.clone(), quota);
    let burst = quota.burst().max(quota.limit()) + 1;
    // A smooth bucket accrues at most this many whole tokens in a millisecond.
    let smooth = (quota.limit() as f64 / quota.period_ms() as f64).ceil() as u64;
    let mut step = 0;
    let mut denied_once = false;
    for t in 0..3 * quota.period_ms() {
        // Only instants after the first denial count: the initial burst is the burst.
        let after_a_denial = denied_once;
        let first = direct.request(t, 0, KEY, 1);
        if first.error.is_some() {
            // A script that errors is judged by its errors, not calibrated.
            return 0;
        }
        if !first.allowed {
            denied_once = true;
            continue;
        }
        let mut at_once = first.cost;
        for _ in 0..burst {
            let more = direct.request(t, 0, KEY, 1);
            if !more.allowed {
                denied_once = true;
                break;
            }
            at_once += more.cost;
        }
        if after_a_denial {
            step = step.max(at_once);
        }
    }
    if step > smooth + 1 {
        step
    } else {
        0
    }
}
