//! The oracle: an exact limiter fed every request in true simulated-time order, with true
//! time, from one process. What it decides is what should have happened; each recorded
//! decision is then an agreement, a wrong allow or a wrong limit (Cloudflare's measure).

use std::collections::BTreeMap;

use limiter::harness::algo::{self, State};
use limiter::{Algorithm, Quota};

use crate::simclock::EPOCH_MS;
use crate::trace::Record;

/// The algorithm a run is judged against: itself, or for a subject the algorithm it meant
/// to be (the naive counter means a fixed window; ADR-002 means a token bucket).
pub fn intended(algorithm: Algorithm) -> Algorithm {
    match algorithm {
        Algorithm::NaiveGetSet => Algorithm::FixedWindow,
        Algorithm::Adr002 => Algorithm::TokenBucket,
        other => other,
    }
}

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

/// Replays `records` (already in decision-time order) through the exact limiter; returns the
/// oracle's verdict per record and the counts.
pub fn judge(algorithm: Algorithm, quota: &Quota, records: &[Record]) -> (Vec<bool>, Accuracy) {
    let exact = intended(algorithm);
    let mut states: BTreeMap<u32, Option<State>> = BTreeMap::new();
    let mut acc = Accuracy::default();
    let mut verdicts = Vec::with_capacity(records.len());
    for r in records {
        let state = states.entry(r.key).or_default();
        let ok = algo::step(exact, quota, state, EPOCH_MS + r.at_ms, r.cost).allowed;
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
