//! How far the sliding-window counter is from an exact sliding window: its promise is only
//! "about `limit`", so the suite measures the error (as Cloudflare reported theirs) and
//! asserts the documented hard bound, `2 * limit` in any window.

use std::collections::VecDeque;

use redis_ratelimit::{Algorithm, Quota};

use crate::reference;
use crate::schedule::{Req, Run};
use crate::subject::Subject;

/// The error of one run of the sliding-window counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accuracy {
    /// Requests decided.
    pub requests: u64,
    /// Admitted although the exact window `(t - W, t]` of what it had admitted was full.
    pub wrongly_allowed: u64,
    /// Denied although the exact window of what it had admitted had room.
    pub wrongly_denied: u64,
    /// Decided otherwise than an exact sliding log fed the same requests.
    pub differs_from_log: u64,
    /// Most units it admitted in any `(t - W, t]`.
    pub worst_window_units: u128,
    /// Units it admitted.
    pub admitted: u64,
    /// Units the exact sliding log admitted from the same requests.
    pub log_admitted: u64,
}

impl Accuracy {
    /// Adds another run's counts.
    pub fn add(&mut self, other: &Accuracy) {
        self.requests += other.requests;
        self.wrongly_allowed += other.wrongly_allowed;
        self.wrongly_denied += other.wrongly_denied;
        self.differs_from_log += other.differs_from_log;
        self.worst_window_units = self.worst_window_units.max(other.worst_window_units);
        self.admitted += other.admitted;
        self.log_admitted += other.log_admitted;
    }
}

/// Runs `reqs` (times must not step back) through the sliding-window counter and an exact
/// sliding log, and judges each of the counter's decisions against the exact window over
/// its own admissions.
pub fn sliding_window_error(q: &Quota, reqs: &[Req]) -> Accuracy {
    let sw = Run::new(&Subject::real(Algorithm::SlidingWindow), q, reqs);
    let log = Run::new(&Subject::real(Algorithm::SlidingLog), q, reqs);
    let (limit, w) = (u128::from(q.limit()), q.period_ms());
    let mut window: VecDeque<(u64, u64)> = VecDeque::new();
    let mut in_window: u128 = 0;
    let mut acc = Accuracy { requests: reqs.len() as u64, ..Accuracy::default() };
    let mut admitted = Vec::new();
    for (i, (st, exact)) in sw.steps.iter().zip(&log.steps).enumerate() {
        let (t, c) = (st.req.t_ms, st.req.cost);
        while window.front().is_some_and(|&(ti, _)| ti + w <= t) {
            if let Some((_, ci)) = window.pop_front() {
                in_window -= u128::from(ci);
            }
        }
        let fits = in_window + u128::from(c) <= limit;
        if st.outcome.allowed && !fits {
            acc.wrongly_allowed += 1;
        }
        if !st.outcome.allowed && fits {
            acc.wrongly_denied += 1;
        }
        if st.outcome.allowed != exact.outcome.allowed {
            acc.differs_from_log += 1;
        }
        if exact.outcome.allowed {
            acc.log_admitted += c;
        }
        if st.outcome.allowed && c > 0 {
            acc.admitted += c;
            window.push_back((t, c));
            in_window += u128::from(c);
            admitted.push((i, t, c));
        }
    }
    acc.worst_window_units = reference::heaviest_window(&admitted, w).map_or(0, |x| x.0);
    acc
}

/// A small deterministic generator (SplitMix64), so the measured workload is the same on
/// every run without a dependency on `rand`.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `(0, 1]`.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// Poisson arrivals of cost-1 requests at `load` times the quota's rate for `windows`
/// windows, with an occasional burst of up to 20 requests in the same millisecond.
pub fn traffic(q: &Quota, load: f64, windows: u64, rng: &mut SplitMix) -> Vec<Req> {
    let mean_gap_ms = q.period_ms() as f64 / (q.limit() as f64 * load);
    let end = q.period_ms() * windows;
    let mut t = 0.0f64;
    let mut out = Vec::new();
    while (t as u64) < end {
        let burst = if rng.unit() < 0.02 { 1 + rng.next_u64() % 20 } else { 1 };
        for _ in 0..burst {
            out.push(Req { t_ms: t as u64, cost: 1 });
        }
        t += -rng.unit().ln() * mean_gap_ms * burst as f64;
    }
    out
}
