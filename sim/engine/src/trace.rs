//! What happened: one record per decision, and the hash that proves a replay identical.

use redis_ratelimit::Source;

use crate::subject::{Answer, DecidedBy};
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
    /// return for a fallback (the policy decides after the call failed). Oracle and checkers
    /// judge each decision at this time.
    pub at_ms: u64,
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

/// One rule's part in a multi-rule decision, as Redis (or the failure policy) answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleMark {
    /// Whether this rule alone admitted the request.
    pub allowed: bool,
    /// Whether the request's cost was taken from this rule.
    pub consumed: bool,
}

impl Record {
    /// The record of one check of `arrival` on `instance`: started at `t_ms`, returned at
    /// `done_ms` (ms since the run began, which the wall clock read as `run_epoch_ms`).
    /// `at_ms` is when the decision was made: Redis's clock for a store decision that says
    /// so (Redis's clock is the run's), the request's own time for a decision by the client's
    /// clock, the middle of the call for one by Redis's clock at an unknown moment (see
    /// [`uncertainty_ms`]), the return for a fallback (the policy decides after the call
    /// failed).
    pub fn of_answer(
        instance: u32,
        seq: u32,
        arrival: &Arrival,
        t_ms: u64,
        done_ms: u64,
        answer: &Answer,
        run_epoch_ms: u64,
    ) -> Record {
        let at_ms = match (answer.source, answer.decided_by) {
            (Source::Store, DecidedBy::Server(ms)) => ms.saturating_sub(run_epoch_ms),
            (Source::Store, DecidedBy::Client) => t_ms,
            (Source::Store, DecidedBy::Unknown) => t_ms + (done_ms.saturating_sub(t_ms)) / 2,
            _ => done_ms,
        };
        Record {
            t_ms,
            done_ms,
            at_ms,
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
}

/// How far off a record's `at_ms` may be: the store decisions taken by Redis's clock at an
/// unknown moment were placed in the middle of their call, so they happened within half the
/// call's length of it. The checkers widen (or narrow) their windows by this much, so a
/// reported break is a real one.
pub fn uncertainty_ms(records: &[Record], decided_by_unknown: bool) -> u64 {
    if !decided_by_unknown {
        return 0;
    }
    records.iter().filter(|r| r.source == Source::Store).map(|r| (r.done_ms - r.t_ms).div_ceil(2)).max().unwrap_or(0)
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
        // Rule marks only where there are some, so single-limit traces hash as before.
        for m in &r.rules {
            line.pop();
            let _ = writeln!(line, " {}{}", m.allowed as u8, m.consumed as u8);
        }
        h.update(line.as_bytes());
    }
    h.digest().to_string()
}
