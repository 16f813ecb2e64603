//! Every script the Redis store sends, each hashed once: for each algorithm its own script, its
//! blockable form, its batch form and its lease form where it has one, the all-or-nothing
//! script of several rules, the key operations (reset, refund, block) and the concurrency
//! limit's script. One table, built from [`Algorithm::ALL`] and the exhaustive [`scripts::for_algorithm`],
//! so no algorithm can be missing from it.

use std::sync::LazyLock;

use super::eval::EvalScript;
use crate::modes::wire;
use crate::quota::Algorithm;
use crate::scripts;

/// One algorithm's scripts.
pub(super) struct Loaded {
    /// Its own script (`lua/<algorithm>.lua`).
    pub(super) own: EvalScript,
    /// Its own script behind the key's block (`lua/blockable.lua` around it).
    pub(super) blockable: EvalScript,
    /// The batch script deciding its requests (`lua/batch.lua` around its own).
    pub(super) batch: EvalScript,
    /// Its lease script, if it can lease.
    pub(super) lease: Option<EvalScript>,
}

static BY_ALGORITHM: LazyLock<[Loaded; Algorithm::ALL.len()]> = LazyLock::new(|| {
    Algorithm::ALL.map(|a| Loaded {
        own: EvalScript::new(scripts::for_algorithm(a).source),
        blockable: EvalScript::new(scripts::blockable_source(a)),
        batch: EvalScript::new(&wire::batch_source(a)),
        lease: wire::lease_script(a).map(|s| EvalScript::new(s.source)),
    })
});

#[cfg_attr(not(feature = "http"), allow(dead_code))]
static RULES: LazyLock<EvalScript> = LazyLock::new(|| EvalScript::new(crate::rules_script::source()));

static RESET: LazyLock<EvalScript> = LazyLock::new(|| EvalScript::new(scripts::RESET));

static REFUND: LazyLock<EvalScript> = LazyLock::new(|| EvalScript::new(scripts::REFUND));

static DEBIT: LazyLock<EvalScript> = LazyLock::new(|| EvalScript::new(scripts::DEBIT));

static BLOCK: LazyLock<EvalScript> = LazyLock::new(|| EvalScript::new(scripts::BLOCK));

static CONCURRENCY: LazyLock<EvalScript> = LazyLock::new(|| EvalScript::new(scripts::CONCURRENCY));

/// `algorithm`'s scripts.
pub(super) fn of(algorithm: Algorithm) -> &'static Loaded {
    // `Algorithm::ALL` lists the variants in declaration order (checked where it is defined).
    &BY_ALGORITHM[algorithm as usize]
}

/// The script deleting a key's state (`lua/reset.lua`).
pub(super) fn reset() -> &'static EvalScript {
    &RESET
}

/// The script giving units back to a key's state (`lua/refund.lua`).
pub(super) fn refund() -> &'static EvalScript {
    &REFUND
}

/// The script charging units to a key's state whether they fit or not (`lua/debit.lua`).
pub(super) fn debit() -> &'static EvalScript {
    &DEBIT
}

/// The script blocking a key (`lua/block.lua`).
pub(super) fn block() -> &'static EvalScript {
    &BLOCK
}

/// The concurrency limit's script (`lua/concurrency.lua`).
pub(super) fn concurrency() -> &'static EvalScript {
    &CONCURRENCY
}

/// The all-or-nothing script of several rules (`crate::rules_script`).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(super) fn rules() -> &'static EvalScript {
    &RULES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_algorithm_finds_its_own_scripts() {
        for (i, a) in Algorithm::ALL.into_iter().enumerate() {
            assert_eq!(a as usize, i, "Algorithm::ALL is in declaration order");
            assert_eq!(of(a).own.source(), scripts::for_algorithm(a).source, "{a}");
            assert!(of(a).blockable.source().contains(scripts::for_algorithm(a).source), "{a}");
            assert!(of(a).batch.source().contains(scripts::for_algorithm(a).source), "{a}");
            assert_eq!(of(a).lease.is_some(), wire::lease_script(a).is_some(), "{a}");
        }
    }
}
