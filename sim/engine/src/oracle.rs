//! The oracle: an exact limiter fed every request in true simulated-time order, with true
//! time, from one process. What it decides is what should have happened; each recorded
//! decision is then an agreement, a wrong allow or a wrong limit (Cloudflare's measure).
//!
//! The exact limiter is the twin of the algorithm the promise names; a window that starts at
//! its first request has no twin in the library and is written here.

use std::collections::BTreeMap;

use redis_ratelimit::harness::algo::{self, State};
use redis_ratelimit::{Quota, Source};

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

/// Per key, how many times the key's state came within `within_ms` of rest (one lease
/// lifetime) as the instances' own admissions left it: a twin of `promise` fed only the
/// requests Redis's state admitted (a failure policy's admissions never reach it), asked at
/// each request of the key. A key near rest from its first request on counts once.
///
/// A lease places its units' slots after its lifetime's end, so when the key's queue ends
/// sooner than that, the slots between are refill no lease can use: at most one lifetime's, and
/// once per stretch near rest, since a lease that leaves the key busy makes the next one use
/// every slot. Redis's state holds every admitted unit, each no earlier than it was admitted,
/// plus units leased and never spent, so Redis is that near rest only while this twin is. The
/// exact limiter fed every request is the wrong state to ask: it admits more, so it rests less
/// often than Redis does. Empty for a promise without a twin.
pub fn near_rest(promise: Promise, quota: &Quota, records: &[Record], within_ms: u64) -> BTreeMap<u32, u64> {
    let Some(twin) = promise.twin() else { return BTreeMap::new() };
    // Per key: the twin's state, and whether it was near rest at the key's last request.
    let mut keys: BTreeMap<u32, (Option<State>, bool)> = BTreeMap::new();
    let mut stretches: BTreeMap<u32, u64> = BTreeMap::new();
    for r in records {
        let now = EPOCH_MS + r.at_ms;
        let (state, was_near) = keys.entry(r.key).or_default();
        let near = state.as_ref().is_none_or(|s| algo::is_idle(quota, s, now + within_ms));
        if near && !*was_near {
            *stretches.entry(r.key).or_default() += 1;
        }
        *was_near = near;
        if r.allowed && matches!(r.source, Source::Lease | Source::Store) {
            algo::step(twin, quota, state, now, r.cost);
        }
    }
    stretches
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
    fn a_key_near_rest_counts_once_per_stretch_fed_only_what_redis_admitted() {
        // 10 per second: a unit comes back every 100 ms, one lease lifetime below.
        let q = Quota::new(10, std::time::Duration::from_secs(1));
        let mut records = vec![rec(0, true)];
        // Denials and a failure policy's admissions leave Redis's state as it was: still near rest.
        records.extend([1, 2, 3].map(|t| rec(t, false)));
        records.push(Record { source: Source::FailOpen, ..Record::exact(4, 0, 9, true) });
        // Five admitted at once: more than one lifetime's refill from rest, then busy...
        records.extend((10..15).map(|t| rec(t, true)));
        records.push(rec(50, true));
        // ... until the bucket is full again: a second stretch.
        records.push(rec(1_000, true));
        records.push(Record::exact(1_000, 1, 1, true));
        let stretches = near_rest(Promise::TokenBucket, &q, &records, 100);
        assert_eq!(stretches, BTreeMap::from([(0, 2), (1, 1)]));
        assert!(near_rest(Promise::None, &q, &records, 100).is_empty());
    }

    #[test]
    fn without_a_promise_the_oracle_admits_everything() {
        let records: Vec<Record> = [0, 0, 0].map(|t| rec(t, false)).to_vec();
        let (_, acc) = judge(Promise::None, &Quota::new(1, std::time::Duration::from_secs(1)), &records);
        assert_eq!((acc.oracle_admitted, acc.wrong_limit), (3, 3));
    }
}
