//! What happened: one record per decision, and the hash that proves a replay identical.

use limiter::Source;

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
}

/// Sorts records into decision-time order (the oracle's order) and hashes them.
pub fn finish(records: &mut [Record]) -> String {
    records.sort_by_key(|r| (r.at_ms, r.t_ms, r.instance, r.seq));
    let mut h = sha1_smol::Sha1::new();
    for r in records.iter() {
        h.update(
            format!(
                "{} {} {} {} {} {} {} {} {} {} {}\n",
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
            )
            .as_bytes(),
        );
    }
    h.digest().to_string()
}
