//! What a subject is, measured, whatever it promises (even `kind = "none"`): on one key at
//! exact times on the model, its delivered rate against the offered rate (beside what an
//! exact limiter of its promise delivers from the same requests), the largest burst it admits
//! at once, the longest it leaves a client that keeps asking at 1.5x the rate without an
//! admission, the keys it leaves without a TTL, and its memory per key. The simulator's
//! sweeps add the effect of clock skew and of concurrent instances.
//!
//! The profile and the verdicts must agree: a subject that delivers less than the exact
//! limiter from the same requests loses capacity somewhere, and the schedule that showed it
//! ([`Measured::shortfall`]) goes to the lost-capacity check as evidence.

use std::sync::Arc;

use redis_ratelimit::Quota;
use sim_engine::promise::{Counts, Promise};
use sim_engine::subject::SubjectFile;

use super::direct::Direct;
use super::schedule::{Event, Schedule, KEY};

/// Offered loads of the rate curve, as multiples of the limit.
pub const OFFERED: [f64; 7] = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0];

/// How far below the exact limiter's delivered rate a subject may fall before the profile
/// counts it as lost capacity: one unit in twenty (a float script deciding a tie late now
/// and then costs far less). The lost-capacity check holds every steady trickle to it too
/// (`checks::capacity`), so a profile that shows it always has a verdict that does.
pub const SHORTFALL: f64 = 0.05;

/// A rate is measured over this many periods, after this many of warm-up.
pub const MEASURED_PERIODS: u64 = 10;
pub const WARM_PERIODS: u64 = 5;

/// See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// `(offered, delivered)`, both as multiples of the limit, over ten periods after a warm-up.
    pub rate_curve: Vec<(f64, f64)>,
    /// What an exact limiter of the promise delivers from the same requests (the twin's, or
    /// the first-hit window's), where the promise has one.
    pub exact_curve: Vec<(f64, f64)>,
    /// The first load at which the subject delivered less than the exact limiter by more than
    /// [`SHORTFALL`], with the schedule that showed it.
    pub shortfall: Option<(f64, Schedule)>,
    /// Admitted from a fresh key by one burst of five times the capacity at one instant.
    pub largest_burst: u64,
    /// The longest gap between admissions (ms) for a client asking at 1.5x the rate.
    pub longest_starvation_ms: u64,
    /// What an exact limiter of the promise leaves (ms) under the same load, to compare.
    pub exact_longest_gap_ms: Option<u64>,
    /// Keys with no TTL after the runs, with a few names.
    pub keys_without_ttl: Vec<String>,
    /// Average `MEMORY USAGE` per key after a request on each of 100 keys.
    pub memory_per_key_bytes: f64,
}

/// An exact limiter of `promise` for one key: the twin of the library's algorithm of the same
/// promise, or the first-hit window (which lasts through the millisecond its key expires in).
pub(crate) struct Exact {
    promise: Promise,
    quota: Quota,
    twin: Option<redis_ratelimit::harness::algo::State>,
    window: Option<(u64, u64)>,
}

impl Exact {
    pub(crate) fn new(promise: Promise, quota: Quota) -> Option<Exact> {
        (promise.twin().is_some() || promise == (Promise::FixedWindow { first_hit: true })).then_some(Exact {
            promise,
            quota,
            twin: None,
            window: None,
        })
    }

    /// Whether it admits a request of one unit at `t` ms after the run's start.
    pub(crate) fn admits(&mut self, t: u64) -> bool {
        match self.promise.twin() {
            Some(algorithm) => {
                let now = sim_engine::simclock::EPOCH_MS + t;
                redis_ratelimit::harness::algo::step(algorithm, &self.quota, &mut self.twin, now, 1).allowed
            }
            None => {
                let (start, used) = match self.window {
                    Some((start, used)) if t <= start + self.quota.period_ms() => (start, used),
                    _ => (t, 0),
                };
                let ok = used < self.quota.limit();
                if ok {
                    self.window = Some((start, used + 1));
                }
                ok
            }
        }
    }
}

/// Measures `file` driven with `quota`.
pub fn measure(file: &Arc<SubjectFile>, promise: Promise, quota: Quota) -> Measured {
    let w = quota.period_ms();
    let rate_per_ms = quota.limit() as f64 / w as f64;
    let mut rate_curve = Vec::new();
    let mut exact_curve = Vec::new();
    let mut shortfall = None;
    let mut immortal = Vec::new();
    for x in OFFERED {
        let mut direct = Direct::new(file.clone(), quota);
        let mut exact = Exact::new(promise, quota);
        let every = 1.0 / (rate_per_ms * x);
        let (warm, measured) = (WARM_PERIODS * w, MEASURED_PERIODS * w);
        let (mut admitted, mut exact_admitted) = (0u64, 0u64);
        let mut events = Vec::new();
        let mut i = 0u64;
        loop {
            let t = (i as f64 * every) as u64;
            if t >= warm + measured {
                break;
            }
            let d = direct.request(t, 0, KEY, 1);
            events.push(Event::Request { t_ms: t, cost: 1, skew_ms: 0 });
            let exact_ok = exact.as_mut().is_some_and(|e| e.admits(t));
            if t >= warm {
                admitted += if d.allowed { d.cost } else { 0 };
                exact_admitted += exact_ok as u64;
            }
            i += 1;
        }
        let per = quota.limit() as f64 * (measured / w) as f64;
        rate_curve.push((x, admitted as f64 / per));
        if exact.is_some() {
            exact_curve.push((x, exact_admitted as f64 / per));
            // Windows that count denied units, and the sliding-window counter's estimate, deliver
            // less by design: the curve shows it, the lost-capacity check does not hold them to it.
            let explained = file.counts == Counts::Requests || promise == Promise::SlidingWindow;
            if !explained && shortfall.is_none() && (admitted as f64) < exact_admitted as f64 * (1.0 - SHORTFALL) {
                shortfall = Some((x, Schedule(events)));
            }
        }
        immortal.extend(direct.keys_without_ttl(warm + measured));
    }

    let capacity = promise.capacity(&quota).max(quota.limit()).max(quota.burst());
    let mut direct = Direct::new(file.clone(), quota);
    let largest_burst = (0..5 * capacity).filter(|_| direct.request(0, 0, KEY, 1).allowed).count() as u64;

    let trickle: Vec<u64> = {
        let every = (1.0 / (rate_per_ms * 1.5)).max(1.0);
        (0..).map(|i| (i as f64 * every) as u64).take_while(|&t| t < 20 * w).collect()
    };
    let mut direct = Direct::new(file.clone(), quota);
    let admitted: Vec<u64> = trickle.iter().copied().filter(|&t| direct.request(t, 0, KEY, 1).allowed).collect();
    let longest_starvation_ms = longest_gap(&admitted, trickle.last().copied().unwrap_or(0));
    immortal.extend(direct.keys_without_ttl(20 * w));
    let exact_longest_gap_ms = Exact::new(promise, quota).map(|mut exact| {
        let admitted: Vec<u64> = trickle.iter().copied().filter(|&t| exact.admits(t)).collect();
        longest_gap(&admitted, trickle.last().copied().unwrap_or(0))
    });

    let mut direct = Direct::new(file.clone(), quota);
    for key in 0..100 {
        direct.request(0, 0, &format!("user-{key}"), 1);
    }
    let (keys, bytes) = direct.memory(0);
    immortal.extend(direct.keys_without_ttl(0));
    immortal.sort();
    immortal.dedup();
    // Per limited identity: a subject may keep several Redis keys per user key.
    let memory_per_key_bytes = if keys == 0 { 0.0 } else { bytes as f64 / 100.0 };

    Measured {
        rate_curve,
        exact_curve,
        shortfall,
        largest_burst,
        longest_starvation_ms,
        exact_longest_gap_ms,
        keys_without_ttl: immortal,
        memory_per_key_bytes,
    }
}

/// The longest stretch without an admission, from the start to `end`.
fn longest_gap(admitted: &[u64], end: u64) -> u64 {
    let mut last = 0;
    let mut longest = 0;
    for &t in admitted {
        longest = longest.max(t - last);
        last = t;
    }
    longest.max(end.saturating_sub(last))
}
