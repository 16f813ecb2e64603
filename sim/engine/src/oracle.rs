//! The oracle: an exact limiter fed every request in true simulated-time order, with true
//! time, from one process. What it decides is what should have happened; each recorded
//! decision is then an agreement, a wrong allow or a wrong limit (Cloudflare's measure).
//!
//! The exact limiter is the twin of the algorithm the promise names; a window that starts at
//! its first request has no twin in the library and is written here.

use std::collections::BTreeMap;

use redis_ratelimit::harness::algo::{self, State};
use redis_ratelimit::Quota;

use crate::promise::Promise;
use crate::simclock::EPOCH_MS;
use crate::trace::Record;

/// Agreement counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accuracy {
    /// Requests the oracle admitted.
    pub oracle_admitted: u64,
    /// Admitted, but the oracle denied.
    pub wrong_allow: u64,
    /// Denied, but the oracle admitted.
    pub wrong_limit: u64,
}

/// An exact limiter for one key.
#[derive(Debug, Clone)]
enum Exact {
    Twin(Option<State>),
    /// A first-hit window: when it started (ms) and the units admitted in it.
    FirstHit(Option<(u64, u64)>),
    /// No promise: admits everything.
    Open,
}

impl Exact {
    fn for_promise(promise: Promise) -> Exact {
        match (promise, promise.twin()) {
            (_, Some(_)) => Exact::Twin(None),
            (Promise::FixedWindow { first_hit: true }, None) => Exact::FirstHit(None),
            _ => Exact::Open,
        }
    }

    fn admits(&mut self, promise: Promise, q: &Quota, now_ms: u64, cost: u64) -> bool {
        match self {
            Exact::Twin(state) => {
                let twin = promise.twin().expect("a twin state belongs to a promise with a twin");
                algo::step(twin, q, state, EPOCH_MS + now_ms, cost).allowed
            }
            Exact::FirstHit(window) => {
                // Redis keeps the window's key through the millisecond its TTL ends in (a
                // script that compares `start + T` ends it there instead: both are exact).
                let (start, used) = match *window {
                    Some((start, used)) if now_ms <= start + q.period_ms() => (start, used),
                    _ => (now_ms, 0),
                };
                let ok = used + cost <= q.limit();
                if ok && cost > 0 {
                    *window = Some((start, used + cost));
                }
                ok
            }
            Exact::Open => true,
        }
    }
}

/// Replays `records` (already in decision-time order) through the exact limiter of
/// `promise`; returns the oracle's verdict per record and the counts.
pub fn judge(promise: Promise, quota: &Quota, records: &[Record]) -> (Vec<bool>, Accuracy) {
    let mut exact: BTreeMap<u32, Exact> = BTreeMap::new();
    let mut acc = Accuracy::default();
    let mut verdicts = Vec::with_capacity(records.len());
    for r in records {
        let limiter = exact.entry(r.key).or_insert_with(|| Exact::for_promise(promise));
        let ok = limiter.admits(promise, quota, r.at_ms, r.cost);
        verdicts.push(ok);
        acc.oracle_admitted += ok as u64;
        match (r.allowed, ok) {
            (true, false) => acc.wrong_allow += 1,
            (false, true) => acc.wrong_limit += 1,
            _ => {}
        }
    }
    (verdicts, acc)
}

/// Per key, how many requests found the exact limiter of `promise` at rest (no state, or a
/// state equivalent to none): each is a start from rest, where a lease cannot use the refill of
/// its lifetime. Empty for a promise without a twin.
pub fn idle_starts(promise: Promise, quota: &Quota, records: &[Record]) -> BTreeMap<u32, u64> {
    let Some(twin) = promise.twin() else { return BTreeMap::new() };
    let mut states: BTreeMap<u32, Option<State>> = BTreeMap::new();
    let mut starts: BTreeMap<u32, u64> = BTreeMap::new();
    for r in records {
        let now = EPOCH_MS + r.at_ms;
        let state = states.entry(r.key).or_default();
        if state.as_ref().is_none_or(|s| algo::is_idle(quota, s, now)) {
            *starts.entry(r.key).or_default() += 1;
        }
        algo::step(twin, quota, state, now, r.cost);
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at_ms: u64, allowed: bool) -> Record {
        Record::exact(at_ms, 0, 1, allowed)
    }

    #[test]
    fn a_first_hit_window_starts_at_its_first_request_and_lasts_one_period() {
        let q = Quota::new(2, std::time::Duration::from_secs(1));
        let records: Vec<Record> = [500, 600, 700, 1_400, 1_500, 1_501, 1_600].map(|t| rec(t, true)).to_vec();
        let (verdicts, acc) = judge(Promise::FixedWindow { first_hit: true }, &q, &records);
        // The window opened at 500 holds two and lasts through 1500, as Redis keeps a key
        // through the millisecond its TTL ends in; the window opened at 1501 holds two more.
        assert_eq!(verdicts, [true, true, false, false, false, true, true]);
        assert_eq!((acc.oracle_admitted, acc.wrong_allow), (4, 3));
        let (aligned, _) = judge(Promise::FixedWindow { first_hit: false }, &q, &records);
        assert_eq!(aligned, [true, true, false, true, true, false, false]);
    }

    #[test]
    fn without_a_promise_the_oracle_admits_everything() {
        let records: Vec<Record> = [0, 0, 0].map(|t| rec(t, false)).to_vec();
        let (_, acc) = judge(Promise::None, &Quota::new(1, std::time::Duration::from_secs(1)), &records);
        assert_eq!((acc.oracle_admitted, acc.wrong_limit), (3, 3));
    }
}
