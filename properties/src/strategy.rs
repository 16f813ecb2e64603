//! proptest strategies: quotas over each algorithm's whole valid range (tiny and huge), and
//! request schedules whose gaps are drawn around the quota's own time scales (same
//! millisecond, one unit's refill time, one window), with backward clock steps and peeks
//! where a suite asks for them.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use redis_ratelimit::{Algorithm, Quota};
use std::time::Duration;

use crate::reference::gcra_interval_us;
use crate::schedule::{Case, Req};
use crate::subject::Subject;

/// 2^50: the exactness bound `Quota::validate` enforces (it keeps its constant private).
const EXACT_MAX: u64 = 1 << 50;
/// Largest gap between two requests, so clock readings stay below 2^51 ms (exact in a
/// double, like the Lua scripts need) whatever the period.
const GAP_MAX_MS: u64 = 1 << 44;
/// Longest schedule: long enough to drain, refill and cross windows several times, short
/// enough that a failure prints as a page and the suite stays fast.
pub const REQUESTS_MAX: usize = 40;

/// What a suite's schedules may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Clock readings may step back (as with skewed instances or an NTP step).
    pub backward: bool,
    /// ... also for the window algorithms (fixed window, sliding-window counter), whose
    /// state is keyed by window index: a step back into an earlier window sees another
    /// counter, so "at rest" only means something with time moving forward.
    pub backward_windows: bool,
    /// Some requests are peeks (cost 0).
    pub peeks: bool,
}

impl Shape {
    /// Monotone time, with peeks.
    pub const FORWARD: Shape = Shape { backward: false, backward_windows: false, peeks: true };
    /// Backward steps and peeks.
    pub const ANY: Shape = Shape { backward: true, backward_windows: true, peeks: true };
    /// Backward steps except for the window algorithms, and peeks.
    pub const BACKWARD_BUT_WINDOWS: Shape = Shape { backward: true, backward_windows: false, peeks: true };
}

fn amount() -> BoxedStrategy<u64> {
    prop_oneof![
        4 => 1u64..=4,
        4 => 1u64..=1_000,
        1 => 1_000u64..=1_000_000,
        1 => (1u64 << 20)..=EXACT_MAX,
    ]
    .boxed()
}

fn period() -> BoxedStrategy<u64> {
    prop_oneof![
        3 => 1u64..=10,
        4 => 1u64..=10_000,
        2 => 1_000u64..=86_400_000,
        1 => (1u64 << 30)..=EXACT_MAX,
    ]
    .boxed()
}

/// Bends `(limit, period, burst)` into `algorithm`'s valid range, keeping it as large as
/// the range allows (so the edges of the range are drawn too).
fn fit(algorithm: Algorithm, mut limit: u64, mut period: u64, mut burst: u64) -> Quota {
    match algorithm {
        Algorithm::FixedWindow => {
            limit = limit.min(EXACT_MAX);
            period = period.min(EXACT_MAX);
        }
        Algorithm::SlidingWindow => {
            period = period.min(EXACT_MAX / 4);
            limit = limit.min((EXACT_MAX / 4) / period).max(1);
        }
        Algorithm::SlidingLog => {
            limit = limit.min(redis_ratelimit::SLIDING_LOG_MAX_LIMIT);
            period = period.min(EXACT_MAX);
        }
        Algorithm::TokenBucket => {
            period = period.min(EXACT_MAX);
            burst = burst.min(EXACT_MAX / period).max(1);
        }
        Algorithm::Gcra => {
            period = period.min(EXACT_MAX / 1000);
            limit = limit.min(period * 1000);
            let interval = (period * 1000).div_ceil(limit);
            burst = burst.min(EXACT_MAX / interval).max(1);
        }
        other => panic!("no promise is written down for {other}: add it here"),
    }
    Quota::new(limit, Duration::from_millis(period)).with_burst(burst)
}

/// Quotas valid for the subject's algorithm and for the one whose promise it is held to.
pub fn quota(subject: &Subject) -> BoxedStrategy<Quota> {
    let (base, promise) = (subject.base, subject.promise);
    (amount(), period(), amount())
        .prop_map(move |(l, p, b)| fit(promise, l, p, b))
        .prop_map(move |q| fit(base, q.limit(), q.period_ms(), q.burst()))
        .prop_filter("quota valid for both algorithms", move |q| {
            q.validate(base).is_ok() && q.validate(promise).is_ok()
        })
        .boxed()
}

/// Ms per unit of the quota: one token's refill time, GCRA's emission interval.
fn unit_ms(subject: &Subject, q: &Quota) -> u64 {
    if subject.promise == Algorithm::Gcra || subject.base == Algorithm::Gcra {
        gcra_interval_us(q).div_ceil(1000).max(1)
    } else {
        q.period_ms().div_ceil(q.limit()).max(1)
    }
}

/// A signed clock step: `(backward, magnitude)`.
fn step(subject: &Subject, q: &Quota, shape: Shape) -> BoxedStrategy<(bool, u64)> {
    let w = q.period_ms().min(GAP_MAX_MS);
    let u = unit_ms(subject, q).min(GAP_MAX_MS);
    let forward = prop_oneof![
        3 => Just(0u64),
        3 => 1u64..=3,
        3 => u.saturating_sub(1)..=u + 1,
        2 => 0..=w,
        1 => w.saturating_sub(1)..=w + 1,
        1 => 0..=(3 * w).min(GAP_MAX_MS),
    ]
    .prop_map(|m| (false, m));
    if !shape.backward {
        return forward.boxed();
    }
    let backward = prop_oneof![
        2 => 1u64..=3,
        1 => Just(u),
        2 => 1..=w.max(1),
        1 => Just(w),
    ]
    .prop_map(|m| (true, m));
    prop_oneof![6 => forward, 1 => backward].boxed()
}

fn cost(cap: u64, peeks: bool) -> BoxedStrategy<u64> {
    let positive = prop_oneof![
        6 => Just(1u64),
        2 => 1..=cap.min(4),
        1 => Just(cap),
        1 => Just(cap.saturating_sub(1).max(1)),
        1 => 1..=cap,
    ];
    if peeks {
        prop_oneof![12 => positive, 1 => Just(0u64)].boxed()
    } else {
        positive.boxed()
    }
}

fn start() -> BoxedStrategy<u64> {
    prop_oneof![1 => Just(0u64), 2 => 0u64..=100_000, 2 => (1u64 << 40)..=(1u64 << 41)].boxed()
}

/// Schedules for `subject` of the given shape: a valid quota, a start time, and up to
/// [`REQUESTS_MAX`] requests with costs up to the capacity.
pub fn case(subject: Subject, shape: Shape) -> BoxedStrategy<Case> {
    let window = subject.promise.is_windowed();
    let shape = Shape { backward: shape.backward && (shape.backward_windows || !window), ..shape };
    quota(&subject)
        .prop_flat_map(move |q| {
            let cap = subject.capacity(&q);
            (
                Just(q),
                start(),
                prop::collection::vec((step(&subject, &q, shape), cost(cap, shape.peeks)), 1..=REQUESTS_MAX),
            )
        })
        .prop_map(|(quota, t0, steps)| {
            let mut t = t0;
            let reqs = steps
                .into_iter()
                .enumerate()
                .map(|(i, ((back, m), cost))| {
                    if i > 0 {
                        t = if back { t.saturating_sub(m) } else { t + m };
                    }
                    Req { t_ms: t, cost }
                })
                .collect();
            Case { quota, reqs }
        })
        .boxed()
}
