//! What happened: one record per decision, and the hash that proves a replay identical.

use redis_ratelimit::Source;

use crate::subject::{Answer, DecidedBy, RuleMark};
use crate::workload::Arrival;

/// One decision as the harness saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// True simulated time the check started (ms since the run began).
    pub t_ms: u64,
    /// When the decision came back (ms since the run began).
    pub done_ms: u64,
    /// When the decision was made, in true time: Redis's clock for a server-time store
    /// decision, the request's own timestamp for client time (the script decided by it), the
    /// return for a fallback (the policy decides after the call failed). The oracle replays
    /// decisions in this order; where the moment is known only to lie in an interval
    /// ([`Record::lo_ms`]..=[`Record::hi_ms`]), this is its middle.
    pub at_ms: u64,
    /// The earliest moment the decision can have been made (ms since the run began, on the
    /// clock it was made by): equal to `at_ms` and `hi_ms` when the moment is known exactly.
    pub lo_ms: u64,
    /// The latest moment the decision can have been made. The checkers call a promise broken
    /// only when no placement of each decision inside its interval explains the admissions.
    pub hi_ms: u64,
    /// The instance that decided.
    pub instance: u32,
    /// Per-instance sequence number (ties at equal times keep arrival order).
    pub seq: u32,
    /// Key index.
    pub key: u32,
    /// Cost.
    pub cost: u64,
    /// Admitted?
    pub allowed: bool,
    /// Who decided.
    pub source: Source,
    /// The decision's Retry-After.
    pub retry_after_ms: u64,
    /// Set when the limiter returned an error instead of a decision.
    pub error: bool,
    /// For a subject that enforces several rules per request: each rule's part, in rule
    /// order (empty otherwise).
    pub rules: Vec<RuleMark>,
}

impl Record {
    /// The record of one check of `arrival` on `instance`: started at `t_ms`, returned at
    /// `done_ms` (ms since the run began, which the wall clock read as `run_epoch_ms`). The
    /// decision was made where the answer says: at Redis's reading for a store decision that
    /// reports it (the library's scripts return the clock they decided by), between two
    /// readings of Redis's clock for one bracketed by `TIME` (a subject file's script), at the
    /// request's own time for a decision by the client's clock, anywhere between sending and
    /// answering for one made at an unknown moment, and at the return for a fallback (the
    /// policy decides after the call failed).
    pub fn of_answer(
        instance: u32,
        seq: u32,
        arrival: &Arrival,
        t_ms: u64,
        done_ms: u64,
        answer: &Answer,
        run_epoch_ms: u64,
    ) -> Record {
        let since_start = |ms: u64| ms.saturating_sub(run_epoch_ms);
        let (lo_ms, hi_ms) = match (answer.source, answer.decided_by) {
            (Source::Store, DecidedBy::Server(ms)) => (since_start(ms), since_start(ms)),
            // Whether the script kept Redis's time in µs or in ms, the moment it decided by lies
            // in whole milliseconds between these.
            (Source::Store, DecidedBy::Between(lo, hi)) => (since_start(lo / 1000), since_start(hi.div_ceil(1000))),
            (Source::Store, DecidedBy::Client) => (t_ms, t_ms),
            (Source::Store, DecidedBy::Unknown) => (t_ms, done_ms.max(t_ms)),
            _ => (done_ms, done_ms),
        };
        let hi_ms = hi_ms.max(lo_ms);
        Record {
            t_ms,
            done_ms,
            at_ms: lo_ms + (hi_ms - lo_ms) / 2,
            lo_ms,
            hi_ms,
            instance,
            seq,
            key: arrival.key,
            cost: answer.cost,
            allowed: answer.allowed,
            source: answer.source,
            retry_after_ms: answer.retry_after_ms,
            error: answer.error.is_some(),
            rules: answer.rules.clone(),
        }
    }

    /// A decision made at exactly `at_ms` (for tests and models that know the moment).
    pub fn exact(at_ms: u64, key: u32, cost: u64, allowed: bool) -> Record {
        Record {
            t_ms: at_ms,
            done_ms: at_ms,
            at_ms,
            lo_ms: at_ms,
            hi_ms: at_ms,
            instance: 0,
            seq: 0,
            key,
            cost,
            allowed,
            source: Source::Store,
            retry_after_ms: 0,
            error: false,
            rules: Vec::new(),
        }
    }
}

/// Sorts records into decision-time order (the oracle's order) and hashes them: SHA-1 over one
/// text line per record.
pub fn finish(records: &mut [Record]) -> String {
    use std::fmt::Write;
    records.sort_by_key(|r| (r.at_ms, r.t_ms, r.instance, r.seq));
    let mut h = sha1_smol::Sha1::new();
    let mut line = String::with_capacity(96);
    for r in records.iter() {
        line.clear();
        // Writing to a String cannot fail.
        let _ = writeln!(
            line,
            "{} {} {} {} {} {} {} {} {} {} {}",
            r.t_ms,
            r.done_ms,
            r.at_ms,
            r.instance,
            r.seq,
            r.key,
            r.cost,
            r.allowed as u8,
            r.source.name(),
            r.retry_after_ms,
            r.error as u8
        );
        // A decision known only to an interval says so; an exact one hashes as before.
        if (r.lo_ms, r.hi_ms) != (r.at_ms, r.at_ms) {
            line.pop();
            let _ = writeln!(line, " {}..{}", r.lo_ms, r.hi_ms);
        }
        // Rule marks only where there are some, so single-limit traces hash as before.
        for m in &r.rules {
            line.pop();
            let _ = writeln!(line, " {}{}", m.allowed as u8, m.consumed as u8);
        }
        h.update(line.as_bytes());
    }
    h.digest().to_string()
}
