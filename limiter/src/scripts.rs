//! The Lua scripts, embedded from `lua/`, the Redis-side source of truth.

use crate::quota::Algorithm;

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

/// Fixed window (INCRBY + PEXPIRE).
pub const FIXED_WINDOW: LuaScript = LuaScript {
    algorithm: Algorithm::FixedWindow,
    file: "fixed_window.lua",
    source: include_str!("../../lua/fixed_window.lua"),
};
/// Sliding-window counter.
pub const SLIDING_WINDOW: LuaScript = LuaScript {
    algorithm: Algorithm::SlidingWindow,
    file: "sliding_window.lua",
    source: include_str!("../../lua/sliding_window.lua"),
};
/// Sliding log.
pub const SLIDING_LOG: LuaScript = LuaScript {
    algorithm: Algorithm::SlidingLog,
    file: "sliding_log.lua",
    source: include_str!("../../lua/sliding_log.lua"),
};
/// Token bucket.
pub const TOKEN_BUCKET: LuaScript = LuaScript {
    algorithm: Algorithm::TokenBucket,
    file: "token_bucket.lua",
    source: include_str!("../../lua/token_bucket.lua"),
};
/// GCRA.
pub const GCRA: LuaScript =
    LuaScript { algorithm: Algorithm::Gcra, file: "gcra.lua", source: include_str!("../../lua/gcra.lua") };
/// ADR-002's script, byte for byte as the record wrote it.
pub const ADR002: LuaScript =
    LuaScript { algorithm: Algorithm::Adr002, file: "adr002.lua", source: include_str!("../../lua/adr002.lua") };

/// Every script. The naive subject has none: it is GET and SET from the client.
pub const ALL: [LuaScript; 6] = [FIXED_WINDOW, SLIDING_WINDOW, SLIDING_LOG, TOKEN_BUCKET, GCRA, ADR002];

/// The script of `algorithm`, if it has one.
pub fn for_algorithm(algorithm: Algorithm) -> Option<LuaScript> {
    ALL.into_iter().find(|s| s.algorithm == algorithm)
}

/// The key suffix of each algorithm, after the `prefix:{key}:` stem.
pub const fn key_suffix(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => "fw",
        Algorithm::SlidingWindow => "sw",
        Algorithm::SlidingLog => "sl",
        Algorithm::TokenBucket => "tb",
        Algorithm::Gcra => "gcra",
        Algorithm::Adr002 => "adr002",
        Algorithm::NaiveGetSet => "naive",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ADR-002's script is kept byte for byte; this is the SHA-1 of the text as the record
    /// printed it, so an accidental "fix" of the subject fails here.
    #[test]
    fn adr002_script_is_the_record_byte_for_byte() {
        let sha = sha1_hex(ADR002.source.as_bytes());
        assert_eq!(sha, "3bca5d9a3ab7511baab046228b3b09c899c5e0e5");
        assert!(ADR002.source.contains("math.floor((timePassed * refillRate) / 1000)"));
    }

    #[test]
    fn every_scripted_algorithm_has_its_script() {
        for a in Algorithm::ALL {
            assert_eq!(for_algorithm(a).is_some(), a != Algorithm::NaiveGetSet, "{a}");
        }
    }

    fn sha1_hex(data: &[u8]) -> String {
        redis::Script::new(std::str::from_utf8(data).expect("utf8")).get_hash().to_string()
    }
}
