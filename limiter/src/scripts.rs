//! The algorithms' Lua scripts (from `redis-ratelimit-scripts`, the files in `lua/`), the
//! Redis-side source of truth, and how a request becomes a script call.

use crate::algo::Outcome;
use crate::quota::{Algorithm, Quota};

/// One algorithm's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LuaScript {
    /// The algorithm it implements.
    pub algorithm: Algorithm,
    /// The file name in `lua/`.
    pub file: &'static str,
    /// The script text.
    pub source: &'static str,
}

/// Fixed window (a counter per window: SET PX, then INCRBY).
pub const FIXED_WINDOW: LuaScript = LuaScript {
    algorithm: Algorithm::FixedWindow,
    file: "fixed_window.lua",
    source: redis_ratelimit_scripts::FIXED_WINDOW,
};
/// Sliding-window counter.
pub const SLIDING_WINDOW: LuaScript = LuaScript {
    algorithm: Algorithm::SlidingWindow,
    file: "sliding_window.lua",
    source: redis_ratelimit_scripts::SLIDING_WINDOW,
};
/// Sliding log.
pub const SLIDING_LOG: LuaScript = LuaScript {
    algorithm: Algorithm::SlidingLog,
    file: "sliding_log.lua",
    source: redis_ratelimit_scripts::SLIDING_LOG,
};
/// Token bucket.
pub const TOKEN_BUCKET: LuaScript = LuaScript {
    algorithm: Algorithm::TokenBucket,
    file: "token_bucket.lua",
    source: redis_ratelimit_scripts::TOKEN_BUCKET,
};
/// GCRA.
pub const GCRA: LuaScript =
    LuaScript { algorithm: Algorithm::Gcra, file: "gcra.lua", source: redis_ratelimit_scripts::GCRA };

/// Every algorithm's script, in the order of `Algorithm::ALL` (built from it).
#[cfg(any(test, feature = "harness"))]
pub const ALL: [LuaScript; Algorithm::ALL.len()] = {
    let mut all = [FIXED_WINDOW; Algorithm::ALL.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = for_algorithm(Algorithm::ALL[i]);
        i += 1;
    }
    all
};

/// The script of `algorithm`: every algorithm has one, and the compiler holds this to it.
pub const fn for_algorithm(algorithm: Algorithm) -> LuaScript {
    match algorithm {
        Algorithm::FixedWindow => FIXED_WINDOW,
        Algorithm::SlidingWindow => SLIDING_WINDOW,
        Algorithm::SlidingLog => SLIDING_LOG,
        Algorithm::TokenBucket => TOKEN_BUCKET,
        Algorithm::Gcra => GCRA,
    }
}

/// The concurrency script (`lua/concurrency.lua`): permits held at once, each until its holder
/// releases it or its lease ends; [`crate::algo::concurrency`] is its twin. Called as
/// [`permit_invocation`] builds it; it answers what an algorithm's script answers.
pub const CONCURRENCY: &str = redis_ratelimit_scripts::CONCURRENCY;

/// The Redis module's command for a concurrency limit (`limiter/module`), taking exactly the
/// concurrency script's KEYS and ARGV ([`permit_invocation`]) and answering its reply.
pub const CONCURRENCY_MODULE_COMMAND: &str = "RATELIMIT.CONCURRENCY";

/// What a concurrency limit's key carries after its stem: its holders, a sorted set.
pub const PERMITS_SUFFIX: &str = "permits";

/// The name a concurrency limiter without a name of its own gives its state in Redis: its
/// limit (`c=10`). The lease is not part of it: each holder's lease is in its own score, so
/// limiters of one limit but different leases count the same holders.
pub fn permits_state(limit: u64) -> String {
    format!("c={limit}")
}

/// The call of `lua/concurrency.lua` running `op` for `holder` on the holders kept at `key`,
/// `limit` permits with leases of `lease_ms`, on the clock `now_ms` (None: Redis's `TIME`).
pub fn permit_invocation(
    key: &str,
    now_ms: Option<u64>,
    limit: u64,
    lease_ms: u64,
    holder: &str,
    op: crate::algo::concurrency::PermitOp,
) -> Invocation {
    let now = now_ms.map_or(String::new(), |n| n.to_string());
    let args = vec![now, limit.to_string(), lease_ms.to_string(), holder.to_owned(), op.name().to_owned()];
    Invocation { keys: vec![key.to_owned()], args }
}

/// Reads the reply every decision script answers, `{allowed, remaining, retry_after_ms,
/// reset_after_ms, now_ms}`, into the outcome and the clock reading it was decided by; None
/// when the reply is anything else.
pub fn read_outcome(reply: &[i64]) -> Option<(Outcome, u64)> {
    match *reply {
        [allowed @ (0 | 1), remaining, retry, reset, now] if remaining >= 0 && retry >= 0 && reset >= 0 && now >= 0 => {
            let outcome = Outcome {
                allowed: allowed == 1,
                remaining: remaining as u64,
                retry_after_ms: retry as u64,
                reset_after_ms: reset as u64,
            };
            Some((outcome, now as u64))
        }
        _ => None,
    }
}

/// The script forgetting one key's state (`lua/reset.lua`): called with [`state_keys`] as
/// KEYS and no ARGV, it deletes them and returns how many existed.
pub const RESET: &str = redis_ratelimit_scripts::RESET;

/// The script giving units back to one key's state (`lua/refund.lua`), called as
/// [`Request::units_invocation`] builds it; it returns 1 if anything was given back, else 0.
pub const REFUND: &str = redis_ratelimit_scripts::REFUND;

/// The script charging units to one key's state whether they fit or not (`lua/debit.lua`),
/// called as [`Request::units_invocation`] builds it; it returns the units charged.
pub const DEBIT: &str = redis_ratelimit_scripts::DEBIT;

/// The script setting or lifting a key's block (`lua/block.lua`), called as
/// [`block_invocation`] builds it; it returns the instant the block ends (0: lifted).
pub const BLOCK: &str = redis_ratelimit_scripts::BLOCK;

/// The script a blockable limiter sends for one request of `algorithm`: the algorithm's own
/// behind its key's block (`lua/blockable.lua` around it; same KEYS, ARGV and reply).
pub fn blockable_source(algorithm: Algorithm) -> &'static str {
    use std::sync::LazyLock;
    static SOURCES: LazyLock<[String; Algorithm::ALL.len()]> = LazyLock::new(|| {
        Algorithm::ALL.map(|a| {
            redis_ratelimit_scripts::around(redis_ratelimit_scripts::BLOCKABLE_TEMPLATE, for_algorithm(a).source)
        })
    });
    // `Algorithm::ALL` lists the variants in declaration order (checked where it is defined).
    &SOURCES[algorithm as usize]
}

/// The Redis keys holding the state whose stem is `stem` (a limiter's whole stem,
/// `prefix:{key}:STATE:`) under `algorithm` and `quota`, as seen at `now_ms`: the algorithm's
/// one key, or for the sliding window every window an instance whose clock is within one
/// period of `now_ms` may read or write (indices N-2 to N+1 around N = `now_ms / period`). The
/// key's block is apart ([`block_key`]).
pub fn state_keys(algorithm: Algorithm, quota: &Quota, stem: &str, now_ms: u64) -> Vec<String> {
    let key = format!("{stem}{}", key_suffix(algorithm));
    match algorithm {
        Algorithm::SlidingWindow => {
            let n = now_ms / quota.period_ms();
            (n.saturating_sub(2)..=n + 1).map(|i| format!("{key}:{i}")).collect()
        }
        _ => vec![key],
    }
}

/// The call of `lua/block.lua` blocking for `duration_ms` (0 lifts the block) the key whose
/// block is `block` ([`block_key`]), on the clock `now_ms` (None: Redis's `TIME`).
pub fn block_invocation(block: &str, now_ms: Option<u64>, duration_ms: u64) -> Invocation {
    let now = now_ms.map_or(String::new(), |n| n.to_string());
    Invocation { keys: vec![block.to_owned()], args: vec![now, duration_ms.to_string()] }
}

/// The key holding the block on the user key whose stem is `stem` (`lua/guard.lua`): the
/// algorithm's key (a window algorithm's key stem) and `:blk`, in the same hash tag. A
/// limiter's is under its own stem, whatever quota a request is decided under
/// ([`crate::Limiter::check_with`]): a block stops the key, not one of its plans.
pub fn block_key(algorithm: Algorithm, stem: &str) -> String {
    format!("{stem}{}:blk", key_suffix(algorithm))
}

/// The key suffix of each algorithm, after the `prefix:{key}:` stem.
pub const fn key_suffix(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => "fw",
        Algorithm::SlidingWindow => "sw",
        Algorithm::SlidingLog => "sl",
        Algorithm::TokenBucket => "tb",
        Algorithm::Gcra => "gcra",
    }
}

/// The Redis module's command deciding `algorithm` (`limiter/module`): `RATELIMIT.` and the
/// algorithm's key suffix, taking exactly its script's KEYS and ARGV
/// ([`Request::invocation_of_stem`]) and answering its reply.
pub const fn module_command(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => "RATELIMIT.FW",
        Algorithm::SlidingWindow => "RATELIMIT.SW",
        Algorithm::SlidingLog => "RATELIMIT.SL",
        Algorithm::TokenBucket => "RATELIMIT.TB",
        Algorithm::Gcra => "RATELIMIT.GCRA",
    }
}

/// The name a limiter without a name of its own gives its state in Redis: its quota as the
/// algorithm reads it (`q=100/60000ms`, and `/bN` for the bucket algorithms, whose burst is part
/// of their state's meaning). Keys are `prefix:{user key}:STATE:suffix`, so two limiters of one
/// prefix and algorithm but different quotas never read each other's state. The `=` keeps it
/// apart from every name a limiter can be given (letters, digits, `.`, `_`, `-`).
pub fn quota_state(algorithm: Algorithm, quota: &Quota) -> String {
    match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra => {
            format!("q={}/{}ms/b{}", quota.limit(), quota.period_ms(), quota.burst())
        }
        _ => format!("q={}/{}ms", quota.limit(), quota.period_ms()),
    }
}

/// One rate-limit request as its script sees it: the one description both the Redis store
/// and the harness turn into a script call, so they cannot drift apart.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its quota.
    pub quota: &'a Quota,
    /// `prefix:{escaped key}:`, the stem every key of this user key starts with (see
    /// [`Request::invocation`] and [`Request::invocation_of_stem`] for what follows it).
    pub stem: &'a str,
    /// Client time in ms, or `None` for Redis's `TIME` (server time).
    pub now_ms: Option<u64>,
    /// Cost (0 = peek).
    pub cost: u64,
}

/// The KEYS and ARGV a script is called with for one request: what the Redis store sends,
/// available to anyone who must send exactly the same (the conformance and property suites).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// KEYS.
    pub keys: Vec<String>,
    /// ARGV.
    pub args: Vec<String>,
}

impl Request<'_> {
    /// The script call as a limiter without a name of its own sends it: `stem` is
    /// `prefix:{key}:`, and the keys add the quota's state name ([`quota_state`]):
    /// `prefix:{key}:q=5/1000ms/b5:gcra`.
    #[cfg(any(test, feature = "harness"))]
    pub fn invocation(&self) -> Invocation {
        let stem = format!("{}{}:", self.stem, quota_state(self.algorithm, self.quota));
        Request { stem: &stem, ..*self }.invocation_of_stem()
    }

    /// The script call for keys that are `stem` and the algorithm's suffix, for a stem that
    /// already names the state: a limiter's whole stem (`prefix:{key}:STATE:`, what the library
    /// sends), or a rule's (`prefix:{tag}:rest:rule:`).
    pub fn invocation_of_stem(&self) -> Invocation {
        let q = self.quota;
        let key = format!("{}{}", self.stem, key_suffix(self.algorithm));
        let now = self.now_ms.map_or(String::new(), |n| n.to_string());
        let cost = self.cost.to_string();
        let (keys, args) = match self.algorithm {
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
                (vec![key], vec![now, q.limit().to_string(), q.period_ms().to_string(), cost])
            }
            Algorithm::TokenBucket => {
                (vec![key], vec![now, q.limit().to_string(), q.period_ms().to_string(), q.burst().to_string(), cost])
            }
            Algorithm::Gcra => (vec![key], vec![now, q.gcra_interval_us().to_string(), q.burst().to_string(), cost]),
        };
        Invocation { keys, args }
    }

    /// The call of `lua/refund.lua` giving `self.cost` units back, or of `lua/debit.lua`
    /// charging them: the algorithm's own KEYS
    /// and ARGV ([`Request::invocation_of_stem`]), with the algorithm's key suffix after them.
    pub fn units_invocation(&self) -> Invocation {
        let mut call = self.invocation_of_stem();
        call.args.push(key_suffix(self.algorithm).to_owned());
        call
    }

    /// The call a blockable limiter sends (`lua/blockable.lua`, [`blockable_source`]): the
    /// algorithm's own KEYS and ARGV ([`Request::invocation_of_stem`]), with `block`, the key's
    /// block ([`block_key`]), as the last of KEYS.
    pub fn blockable_invocation(&self, block: &str) -> Invocation {
        let mut call = self.invocation_of_stem();
        call.keys.push(block.to_owned());
        call
    }

    /// Reads the script's reply (its integers) into the outcome and the clock reading it
    /// decided by ([`read_outcome`]); None when the reply is not what the script returns.
    pub fn read_reply(&self, reply: &[i64]) -> Option<(Outcome, u64)> {
        read_outcome(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_quota_unless_the_stem_names_the_state() {
        let q = Quota::per_minute(100).with_burst(20);
        let req = |algorithm, stem| Request { algorithm, quota: &q, stem, now_ms: None, cost: 1 };
        assert_eq!(req(Algorithm::Gcra, "p:{k}:").invocation().keys, ["p:{k}:q=100/60000ms/b20:gcra"]);
        assert_eq!(req(Algorithm::SlidingLog, "p:{k}:").invocation().keys, ["p:{k}:q=100/60000ms:sl"]);
        assert_eq!(req(Algorithm::Gcra, "p:{k}:api:").invocation_of_stem().keys, ["p:{k}:api:gcra"]);
        // Another quota, other keys.
        let other = Quota::per_minute(101).with_burst(20);
        let keys = Request { quota: &other, ..req(Algorithm::Gcra, "p:{k}:") }.invocation().keys;
        assert_ne!(keys, req(Algorithm::Gcra, "p:{k}:").invocation().keys);
    }

    #[test]
    fn every_algorithm_has_its_script_and_all_lists_each_once() {
        for (i, a) in Algorithm::ALL.into_iter().enumerate() {
            assert_eq!(for_algorithm(a).algorithm, a, "{a}");
            assert_eq!(ALL[i].algorithm, a, "{a}");
            assert_eq!(module_command(a), format!("RATELIMIT.{}", key_suffix(a).to_uppercase()), "{a}");
        }
    }
}
