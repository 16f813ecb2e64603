//! The round-trip modes' scripts and their wire contract, as `crate::scripts` is for the
//! algorithms' own: a [`LeaseRequest`] or a [`BatchRequest`] turns into KEYS and ARGV, and a
//! reply reads back into outcomes. The Redis store sends exactly this; the conformance and
//! property suites send the same.

use crate::algo::lease::{LeaseArgs, LeaseOutcome};
use crate::algo::Outcome;
use crate::quota::{Algorithm, Quota};
use crate::scripts::{self, Invocation, LuaScript};

/// Leases of GCRA units.
pub const LEASE_GCRA: LuaScript =
    LuaScript { algorithm: Algorithm::Gcra, file: "lease_gcra.lua", source: redis_ratelimit_scripts::LEASE_GCRA };
/// Leases of token-bucket units.
pub const LEASE_TOKEN_BUCKET: LuaScript = LuaScript {
    algorithm: Algorithm::TokenBucket,
    file: "lease_token_bucket.lua",
    source: redis_ratelimit_scripts::LEASE_TOKEN_BUCKET,
};

/// The batch script's file name in `lua/`.
#[cfg(feature = "harness")]
pub const BATCH_FILE: &str = "batch.lua";
/// The batch script with its placeholder for the algorithm's script.
pub const BATCH_TEMPLATE: &str = redis_ratelimit_scripts::BATCH_TEMPLATE;

/// The lease script of `algorithm`, if it can lease.
pub const fn lease_script(algorithm: Algorithm) -> Option<LuaScript> {
    match algorithm {
        Algorithm::TokenBucket => Some(LEASE_TOKEN_BUCKET),
        Algorithm::Gcra => Some(LEASE_GCRA),
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => None,
    }
}

/// Every lease script: one for each algorithm that can lease, in the order of `Algorithm::ALL`
/// (for the conformance suites and the bench, through the harness).
#[cfg(feature = "harness")]
pub fn leases() -> impl Iterator<Item = LuaScript> {
    Algorithm::ALL.into_iter().filter_map(lease_script)
}

/// The batch script deciding requests of `algorithm`: `lua/batch.lua` with the algorithm's own
/// script as its `decide` function (and the block's check, `lua/guard.lua`).
pub fn batch_source(algorithm: Algorithm) -> String {
    redis_ratelimit_scripts::around(BATCH_TEMPLATE, scripts::for_algorithm(algorithm).source)
}

/// One lease call as its script sees it.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    /// The algorithm (token bucket or GCRA).
    pub algorithm: Algorithm,
    /// Its quota.
    pub quota: &'a Quota,
    /// The whole stem, `prefix:{escaped key}:STATE:` (the key is the stem and the suffix).
    pub stem: &'a str,
    /// Client time in ms, or `None` for Redis's `TIME`.
    pub now_ms: Option<u64>,
    /// What to ask for and what to give back.
    pub args: LeaseArgs,
}

/// The Redis module's command leasing `algorithm`'s units (`limiter/module`), taking exactly
/// its lease script's KEYS and ARGV ([`LeaseRequest::invocation`]); None for an algorithm that
/// cannot lease.
pub const fn lease_module_command(algorithm: Algorithm) -> Option<&'static str> {
    match algorithm {
        Algorithm::Gcra => Some("RATELIMIT.LEASE.GCRA"),
        Algorithm::TokenBucket => Some("RATELIMIT.LEASE.TB"),
        _ => None,
    }
}

impl LeaseRequest<'_> {
    /// The script call; None for an algorithm that cannot lease.
    pub fn invocation(&self) -> Option<Invocation> {
        let q = self.quota;
        let a = &self.args;
        let key = format!("{}{}", self.stem, scripts::key_suffix(self.algorithm));
        let now = self.now_ms.map_or(String::new(), |n| n.to_string());
        let args: Vec<u64> = match self.algorithm {
            Algorithm::Gcra => vec![
                q.gcra_interval_us(),
                q.burst(),
                a.lifetime_ms * 1000,
                a.horizon_ms * 1000,
                a.want,
                a.need,
                a.give_back,
                a.written.0,
            ],
            Algorithm::TokenBucket => vec![
                q.limit(),
                q.period_ms(),
                q.burst(),
                a.lifetime_ms,
                a.horizon_ms,
                a.want,
                a.need,
                a.give_back,
                a.written.0,
                a.written.1,
            ],
            _ => return None,
        };
        let args = std::iter::once(now).chain(args.iter().map(u64::to_string)).collect();
        Some(Invocation { keys: vec![key], args })
    }

    /// Reads the script's reply into the outcome and the clock reading it decided by (ms).
    pub fn read_reply(&self, reply: &[i64]) -> Option<(LeaseOutcome, u64)> {
        if reply.len() != 9 || reply.iter().any(|&n| n < 0) {
            return None;
        }
        let r: Vec<u64> = reply.iter().map(|&n| n as u64).collect();
        let outcome = LeaseOutcome {
            granted: r[0],
            start_us: r[1],
            written: (r[2], r[3]),
            credited: r[4],
            remaining: r[5],
            retry_after_ms: r[6],
            reset_after_ms: r[7],
        };
        Some((outcome, r[8]))
    }
}

/// Requests of one algorithm and quota, decided in order by one call of the batch script.
#[derive(Debug, Clone)]
pub struct BatchRequest<'a> {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its quota.
    pub quota: &'a Quota,
    /// Each request: its whole stem (`prefix:{key}:STATE:`, as
    /// [`scripts::Request::invocation_of_stem`] takes it), client time (None: Redis's `TIME`)
    /// and cost.
    pub requests: Vec<(&'a str, Option<u64>, u64)>,
    /// The limiter is blockable: each request runs behind its key's block, the last of its keys
    /// ([`scripts::block_key`] of its stem).
    pub blockable: bool,
}

/// One request's part of a batch reply: its outcome and clock, or the error its own call would
/// have raised.
pub type BatchEntry = Result<(Outcome, u64), String>;

impl BatchRequest<'_> {
    /// The batch script's call: every request's KEYS and ARGV, one after the other.
    pub fn invocation(&self) -> Invocation {
        let mut keys = Vec::new();
        let mut args = Vec::new();
        let (mut per_keys, mut per_args) = (0, 0);
        for &(stem, now_ms, cost) in &self.requests {
            let request = scripts::Request { algorithm: self.algorithm, quota: self.quota, stem, now_ms, cost };
            let one = if self.blockable {
                request.blockable_invocation(&scripts::block_key(self.algorithm, stem))
            } else {
                request.invocation_of_stem()
            };
            per_keys = one.keys.len();
            per_args = one.args.len();
            keys.extend(one.keys);
            args.extend(one.args);
        }
        let head = [self.requests.len(), per_keys, per_args, usize::from(self.blockable)].map(|n| n.to_string());
        Invocation { keys, args: head.into_iter().chain(args).collect() }
    }

    /// Reads one entry of the reply: the algorithm's reply (its integers) or an error's text.
    pub fn read_entry(&self, index: usize, entry: Result<&[i64], &str>) -> Option<BatchEntry> {
        let &(stem, now_ms, cost) = self.requests.get(index)?;
        match entry {
            Ok(ints) => {
                let one = scripts::Request { algorithm: self.algorithm, quota: self.quota, stem, now_ms, cost };
                one.read_reply(ints).map(Ok)
            }
            Err(text) => Some(Err(text.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_script_wraps_each_algorithm_s_own() {
        for a in Algorithm::ALL {
            let source = batch_source(a);
            assert!(!source.contains(redis_ratelimit_scripts::ALGORITHM_PLACEHOLDER), "{a}");
            assert!(source.contains(scripts::for_algorithm(a).source), "{a}");
        }
    }

    #[test]
    fn a_batch_sends_every_request_s_keys_and_arguments_in_order() {
        let q = Quota::new(5, std::time::Duration::from_secs(1));
        let batch = BatchRequest {
            algorithm: Algorithm::Gcra,
            quota: &q,
            requests: vec![("p:{a}:", Some(7), 1), ("p:{b}:", None, 2)],
            blockable: true,
        };
        let call = batch.invocation();
        assert_eq!(call.keys, ["p:{a}:gcra", "p:{a}:gcra:blk", "p:{b}:gcra", "p:{b}:gcra:blk"]);
        assert_eq!(call.args, ["2", "2", "4", "1", "7", "200000", "5", "1", "", "200000", "5", "2"]);
        let plain = BatchRequest { blockable: false, ..batch }.invocation();
        assert_eq!(plain.keys, ["p:{a}:gcra", "p:{b}:gcra"]);
        assert_eq!(plain.args[..4], ["2", "1", "4", "0"]);
    }

    #[test]
    fn only_the_bucket_algorithms_have_a_lease_call() {
        let q = Quota::new(5, std::time::Duration::from_secs(1));
        let args = LeaseArgs { lifetime_ms: 10, horizon_ms: 10, want: 2, need: 1, give_back: 0, written: (0, 0) };
        for a in Algorithm::ALL {
            let req = LeaseRequest { algorithm: a, quota: &q, stem: "p:{k}:", now_ms: Some(1), args };
            assert_eq!(req.invocation().is_some(), lease_script(a).is_some(), "{a}");
        }
    }
}
