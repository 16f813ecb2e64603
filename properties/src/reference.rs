//! Exact references, written independently of `redis_ratelimit::harness::algo` and from the promises alone:
//! window sums over an admission history, the sliding-window counter's estimate, an exact
//! token bucket, and the schedules a client "within the rate" may send.

use std::collections::BTreeMap;

use redis_ratelimit::{Algorithm, Quota};

use crate::schedule::Req;

/// An admitted request: `(step index, time, cost)`.
pub type Point = (usize, u64, u64);

/// GCRA's emission interval in µs, rounded up as `limiter` rounds it (the limiter keeps it
/// private; the promise depends on it).
pub fn gcra_interval_us(q: &Quota) -> u64 {
    (q.period_ms() * 1000).div_ceil(q.limit())
}

fn sorted(points: &[Point]) -> Vec<Point> {
    let mut v = points.to_vec();
    v.sort_by_key(|p| (p.1, p.0));
    v
}

/// The heaviest half-open window `(t - w, t]` over `points`: `(units, t, index of a request
/// at t)`. Over integer milliseconds this is also the heaviest `[s, s + w)`.
pub fn heaviest_window(points: &[Point], w: u64) -> Option<(u128, u64, usize)> {
    let v = sorted(points);
    let mut best: Option<(u128, u64, usize)> = None;
    let mut left = 0;
    let mut sum: u128 = 0;
    let mut right = 0;
    while right < v.len() {
        // Take every point at this time, so the window ends after all of them.
        let t = v[right].1;
        let mut last = right;
        while right < v.len() && v[right].1 == t {
            sum += u128::from(v[right].2);
            last = right;
            right += 1;
        }
        while v[left].1 + w <= t {
            sum -= u128::from(v[left].2);
            left += 1;
        }
        if best.is_none_or(|b| sum > b.0) {
            best = Some((sum, t, v[last].0));
        }
    }
    best
}

/// Units admitted per aligned window index `t / w`, with the last request of each window.
pub fn aligned_sums(points: &[Point], w: u64) -> BTreeMap<u64, (u128, usize)> {
    let mut out: BTreeMap<u64, (u128, usize)> = BTreeMap::new();
    for &(i, t, c) in points {
        let e = out.entry(t / w).or_insert((0, i));
        e.0 += u128::from(c);
        e.1 = e.1.max(i);
    }
    out
}

/// A bucket bound `units * unit <= cap + gain * d` for every closed interval `[a, b]`,
/// `d = b - a` ms. Returns the worst breach: `(units, a, b, index of a request at b)`.
pub fn bucket_breach(points: &[Point], unit: u128, gain: u128, cap: u128) -> Option<(u128, u64, u64, usize)> {
    let v = sorted(points);
    // Group by time.
    let mut groups: Vec<(u64, u128, usize)> = Vec::new();
    for &(i, t, c) in &v {
        match groups.last_mut() {
            Some(g) if g.0 == t => {
                g.1 += u128::from(c);
                g.2 = g.2.max(i);
            }
            _ => groups.push((t, u128::from(c), i)),
        }
    }
    let mut worst: Option<(u128, u64, u64, usize, u128)> = None;
    for a in 0..groups.len() {
        let mut units = 0u128;
        for b in a..groups.len() {
            units += groups[b].1;
            let d = u128::from(groups[b].0 - groups[a].0);
            let allowed = cap + gain * d;
            let used = units * unit;
            if used > allowed {
                let excess = used - allowed;
                if worst.is_none_or(|w| excess > w.4) {
                    worst = Some((units, groups[a].0, groups[b].0, groups[b].2, excess));
                }
            }
        }
    }
    worst.map(|w| (w.0, w.1, w.2, w.3))
}

/// The sliding-window counter's estimate, scaled by `w` to stay integral, for a request of
/// `cost` at `t` given the history `points` (admissions before it): `prev * (w - e) +
/// (cur + cost) * w`, to be compared with `limit * w`.
pub fn sliding_estimate(points: &[Point], w: u64, t: u64, cost: u64) -> (u128, u128, u128) {
    let k = t / w;
    let e = t % w;
    let mut prev = 0u128;
    let mut cur = 0u128;
    for &(_, ti, ci) in points {
        if ti / w == k {
            cur += u128::from(ci);
        } else if k > 0 && ti / w == k - 1 {
            prev += u128::from(ci);
        }
    }
    let est = prev * u128::from(w - e) + (cur + u128::from(cost)) * u128::from(w);
    (est, prev, cur)
}

/// Units in `(t - w, t]` among `points`.
pub fn window_units(points: &[Point], w: u64, t: u64) -> u128 {
    points.iter().filter(|p| p.1 <= t && p.1 + w > t).map(|p| u128::from(p.2)).sum()
}

/// An exact token bucket: `unit` units make one token, `gain` units arrive per ms, at most
/// `cap` units are held. Integers throughout, so no refill is ever lost. A reading earlier
/// than the last one refills nothing (no time has passed).
#[derive(Debug, Clone)]
pub struct ExactBucket {
    /// Units per token.
    pub unit: u128,
    /// Units gained per ms.
    pub gain: u128,
    /// Capacity in units.
    pub cap: u128,
    /// Units held now (negative only if someone admitted more than it held).
    pub level: i128,
    last_ms: Option<u64>,
}

impl ExactBucket {
    /// The exact bucket a promise describes: the token bucket's (`period_ms` units per
    /// token, `limit` per ms) or GCRA's (its rounded-up emission interval in µs per token,
    /// 1000 per ms).
    pub fn for_promise(promise: Algorithm, q: &Quota) -> ExactBucket {
        let (unit, gain) = match promise {
            Algorithm::Gcra => (u128::from(gcra_interval_us(q)), 1000),
            _ => (u128::from(q.period_ms()), u128::from(q.limit())),
        };
        let cap = unit * u128::from(q.burst());
        ExactBucket { unit, gain, cap, level: cap as i128, last_ms: None }
    }

    /// Brings the level up to `t_ms`.
    pub fn advance(&mut self, t_ms: u64) {
        if let Some(last) = self.last_ms {
            if t_ms > last {
                let gained = self.gain.saturating_mul(u128::from(t_ms - last));
                self.level = (self.level.saturating_add(gained.min(self.cap) as i128)).min(self.cap as i128);
            } else {
                return;
            }
        }
        self.last_ms = Some(t_ms);
    }

    /// Whether `cost` tokens are held.
    pub fn fits(&self, cost: u64) -> bool {
        self.level >= (u128::from(cost) * self.unit) as i128
    }

    /// Takes `cost` tokens (the level may go negative if they were not there).
    pub fn take(&mut self, cost: u64) {
        self.level -= (u128::from(cost) * self.unit) as i128;
    }

    /// Ms until `cost` tokens are held, from the last reading.
    pub fn wait_for(&self, cost: u64) -> u64 {
        let need = (u128::from(cost) * self.unit) as i128 - self.level;
        if need <= 0 {
            0
        } else {
            u64::try_from((need as u128).div_ceil(self.gain)).unwrap_or(u64::MAX)
        }
    }

    /// The level in tokens, for messages.
    pub fn tokens(&self) -> f64 {
        self.level as f64 / self.unit as f64
    }
}

/// Moves requests later, keeping their order and later gaps, until the schedule is one that
/// `promise` must admit in full ("a client within the rate"):
/// - token bucket, GCRA: every request finds its cost in an exact bucket of the promise's
///   parameters (an initial burst, then at most the rate; GCRA's rate is its rounded-up
///   emission interval);
/// - sliding log: at most `limit` units in any `(t - W, t]`;
/// - fixed window: at most `limit` units per aligned window;
/// - sliding-window counter: at most `limit` units across any two consecutive aligned
///   windows (half the rate: the counter's weighted estimate may deny a client using the
///   full rate evenly).
///
/// Costs must not exceed the capacity; peeks pass unchanged.
pub fn within_rate(promise: Algorithm, q: &Quota, reqs: &[Req]) -> Vec<Req> {
    let (limit, w) = (q.limit(), q.period_ms());
    let mut out: Vec<Req> = Vec::with_capacity(reqs.len());
    let mut shift = 0u64;
    let mut bucket = ExactBucket::for_promise(promise, q);
    let mut kept: Vec<Point> = Vec::new();
    for r in reqs {
        let mut t = r.t_ms.saturating_add(shift).max(out.last().map_or(0, |p| p.t_ms));
        if r.cost > 0 {
            match promise {
                Algorithm::TokenBucket | Algorithm::Gcra => {
                    bucket.advance(t);
                    if !bucket.fits(r.cost) {
                        t += bucket.wait_for(r.cost);
                        bucket.advance(t);
                    }
                    bucket.take(r.cost);
                }
                Algorithm::SlidingLog => loop {
                    let used = window_units(&kept, w, t);
                    let excess = (used + u128::from(r.cost)).saturating_sub(u128::from(limit));
                    if excess == 0 {
                        break;
                    }
                    // Wait until the oldest `excess` units in the window have left it.
                    let mut inside: Vec<Point> = kept.iter().copied().filter(|p| p.1 <= t && p.1 + w > t).collect();
                    inside.sort_by_key(|p| p.1);
                    let mut gone = 0u128;
                    for p in inside {
                        gone += u128::from(p.2);
                        if gone >= excess {
                            t = p.1 + w;
                            break;
                        }
                    }
                },
                Algorithm::FixedWindow => {
                    let sums = aligned_sums(&kept, w);
                    let used = sums.get(&(t / w)).map_or(0, |s| s.0);
                    if used + u128::from(r.cost) > u128::from(limit) {
                        t = (t / w + 1) * w;
                    }
                }
                Algorithm::SlidingWindow => loop {
                    let sums = aligned_sums(&kept, w);
                    let k = t / w;
                    let cur = sums.get(&k).map_or(0, |s| s.0);
                    let prev = if k > 0 { sums.get(&(k - 1)).map_or(0, |s| s.0) } else { 0 };
                    if prev + cur + u128::from(r.cost) <= u128::from(limit) {
                        break;
                    }
                    t = (k + 1) * w;
                },
                other => panic!("no promise is written down for {other}: add it here"),
            }
            kept.push((out.len(), t, r.cost));
        }
        shift = t.saturating_sub(r.t_ms).max(shift);
        out.push(Req { t_ms: t, cost: r.cost });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(u64, u64)]) -> Vec<Point> {
        v.iter().enumerate().map(|(i, &(t, c))| (i, t, c)).collect()
    }

    #[test]
    fn heaviest_window_is_half_open_on_the_left() {
        // (t - 10, t]: 0 and 10 are never in one window, 1 and 10 are.
        assert_eq!(heaviest_window(&pts(&[(0, 1), (10, 1)]), 10).map(|w| w.0), Some(1));
        assert_eq!(heaviest_window(&pts(&[(1, 1), (10, 1)]), 10).map(|w| w.0), Some(2));
        // Requests at the same time all count.
        assert_eq!(heaviest_window(&pts(&[(5, 2), (5, 3)]), 1).map(|w| w.0), Some(5));
    }

    #[test]
    fn bucket_breach_allows_burst_plus_rate_times_d_exactly() {
        // Burst 2, 1 token per 10 ms: 3 units over [0, 10] fit, 4 do not.
        let (unit, gain, cap) = (10, 1, 20);
        assert_eq!(bucket_breach(&pts(&[(0, 2), (10, 1)]), unit, gain, cap), None);
        assert!(bucket_breach(&pts(&[(0, 2), (10, 2)]), unit, gain, cap).is_some());
        assert!(bucket_breach(&pts(&[(0, 2), (9, 1)]), unit, gain, cap).is_some());
    }

    #[test]
    fn sliding_estimate_weighs_the_previous_window_by_its_overlap() {
        // W = 10, 4 units in window 0; at t = 13 (e = 3) they weigh 4 * 7, plus cost 1 * 10.
        let (est, prev, cur) = sliding_estimate(&pts(&[(2, 4)]), 10, 13, 1);
        assert_eq!((est, prev, cur), (38, 4, 0));
    }

    #[test]
    fn exact_bucket_keeps_fractions_and_ignores_steps_back() {
        // 1 token per 3 ms (unit 3, gain 1), burst 1.
        let q = Quota::new(1, std::time::Duration::from_millis(3)).with_burst(1);
        let mut b = ExactBucket::for_promise(Algorithm::TokenBucket, &q);
        b.advance(0);
        b.take(1);
        b.advance(1);
        b.advance(0); // a step back refills nothing
        b.advance(2);
        assert!(!b.fits(1));
        assert_eq!(b.wait_for(1), 1);
        b.advance(3);
        assert!(b.fits(1));
    }

    #[test]
    fn within_rate_paces_a_bucket_client_and_keeps_later_gaps() {
        let q = Quota::new(1, std::time::Duration::from_millis(10)).with_burst(1);
        let reqs = [Req { t_ms: 0, cost: 1 }, Req { t_ms: 1, cost: 1 }, Req { t_ms: 4, cost: 1 }];
        let paced = within_rate(Algorithm::TokenBucket, &q, &reqs);
        let times: Vec<u64> = paced.iter().map(|r| r.t_ms).collect();
        assert_eq!(times, [0, 10, 20]);
        let log = within_rate(Algorithm::SlidingLog, &Quota::new(2, std::time::Duration::from_millis(10)), &reqs);
        let times: Vec<u64> = log.iter().map(|r| r.t_ms).collect();
        assert_eq!(times, [0, 1, 10]);
    }
}
