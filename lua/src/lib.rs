//! The Lua scripts of `redis-ratelimit`, embedded: the one source of every script the library
//! sends to Redis. Each algorithm is one atomic script (one `EVALSHA` decides one request); the
//! round-trip modes and the rules of an enforcement point wrap those same scripts rather than
//! repeat their arithmetic.
//!
//! Each file's header says its keys, its arguments and its reply. The library
//! (`redis-ratelimit`) is what builds the arguments and reads the replies, and its pure Rust
//! twins of the same algorithms are what the scripts are tested against. Depend on this crate
//! directly only to load the scripts yourself (into a Redis of your own, a script cache, a test).
//!
//! The files live at the top of this crate's folder, not under `src/`, so they stay where a
//! reader of the repository looks for Lua, and the package ships them beside this file.

#![forbid(unsafe_code)]

/// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use std::sync::LazyLock;

/// Fixed window: one counter per aligned window, read first and incremented only on admission.
pub const FIXED_WINDOW: &str = include_str!("../fixed_window.lua");
/// Sliding-window counter: this window's and the previous window's counts, weighted.
pub const SLIDING_WINDOW: &str = include_str!("../sliding_window.lua");
/// Sliding log: one sorted set of admitted requests per key.
pub const SLIDING_LOG: &str = include_str!("../sliding_log.lua");
/// Token bucket: the bucket's units and the instant they were counted, in one string.
pub const TOKEN_BUCKET: &str = include_str!("../token_bucket.lua");
/// GCRA: the theoretical arrival time in one string.
pub const GCRA: &str = include_str!("../gcra.lua");
/// Leases of GCRA units: one call reserves several units for one instance.
pub const LEASE_GCRA: &str = include_str!("../lease_gcra.lua");
/// Leases of token-bucket units.
pub const LEASE_TOKEN_BUCKET: &str = include_str!("../lease_token_bucket.lua");
/// Concurrency: slots held at once, one sorted set of holders and the ends of their leases.
pub const CONCURRENCY: &str = include_str!("../concurrency.lua");
/// Forgets one key's state: deletes its keys.
pub const RESET: &str = include_str!("../reset.lua");
/// Gives units back to one key's state, for every algorithm.
pub const REFUND: &str = include_str!("../refund.lua");
/// Charges units to one key's state whether they fit or not (a cost found after admission),
/// for every algorithm.
pub const DEBIT: &str = include_str!("../debit.lua");
/// Blocks one key for a while (or lifts its block), for blockable limiters.
pub const BLOCK: &str = include_str!("../block.lua");
/// The block's check, a function the templates below splice in: a request on a blocked key is
/// refused and writes nothing.
pub const GUARD: &str = include_str!("../guard.lua");
/// One request of a blockable limiter: an algorithm's script behind its key's block;
/// [`ALGORITHM_PLACEHOLDER`] marks where the algorithm's script goes (see [`around`]).
pub const BLOCKABLE_TEMPLATE: &str = include_str!("../blockable.lua");
/// Many requests of one algorithm in one call; [`ALGORITHM_PLACEHOLDER`] marks where the
/// algorithm's own script goes (see [`around`]).
pub const BATCH_TEMPLATE: &str = include_str!("../batch.lua");
/// The line of [`BLOCKABLE_TEMPLATE`] and [`BATCH_TEMPLATE`] the algorithm's script replaces.
pub const ALGORITHM_PLACEHOLDER: &str = "--@ALGORITHM@";
/// Several rules of one request all-or-nothing, before the algorithm scripts are spliced in
/// (each line `--@FILE@` stands for that file); [`all_or_nothing`] is the script itself.
pub const ALL_OR_NOTHING_TEMPLATE: &str = include_str!("../all_or_nothing.lua");

/// Every file of this crate by its name, as the templates' placeholders name them.
pub const FILES: [(&str, &str); 16] = [
    ("fixed_window.lua", FIXED_WINDOW),
    ("sliding_window.lua", SLIDING_WINDOW),
    ("sliding_log.lua", SLIDING_LOG),
    ("token_bucket.lua", TOKEN_BUCKET),
    ("gcra.lua", GCRA),
    ("lease_gcra.lua", LEASE_GCRA),
    ("lease_token_bucket.lua", LEASE_TOKEN_BUCKET),
    ("concurrency.lua", CONCURRENCY),
    ("reset.lua", RESET),
    ("refund.lua", REFUND),
    ("debit.lua", DEBIT),
    ("block.lua", BLOCK),
    ("guard.lua", GUARD),
    ("blockable.lua", BLOCKABLE_TEMPLATE),
    ("batch.lua", BATCH_TEMPLATE),
    ("all_or_nothing.lua", ALL_OR_NOTHING_TEMPLATE),
];

/// The all-or-nothing script: [`ALL_OR_NOTHING_TEMPLATE`] with every `--@FILE@` line replaced by
/// that file's text. Built once, on first use.
pub fn all_or_nothing() -> &'static str {
    static SCRIPT: LazyLock<String> = LazyLock::new(|| splice(ALL_OR_NOTHING_TEMPLATE));
    &SCRIPT
}

/// `template` (one with an [`ALGORITHM_PLACEHOLDER`] line: [`BLOCKABLE_TEMPLATE`],
/// [`BATCH_TEMPLATE`]) around `algorithm`, an algorithm's script: the placeholder line replaced
/// by it, and every `--@FILE@` line by that file's text.
pub fn around(template: &str, algorithm: &str) -> String {
    let mut out = String::with_capacity(template.len() + algorithm.len());
    for line in splice(template).split_inclusive('\n') {
        if line.trim_end() == ALGORITHM_PLACEHOLDER {
            out.push_str(algorithm);
            if !algorithm.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    out
}

/// `template` with each line that is exactly `--@NAME@`, for a file NAME of [`FILES`], replaced
/// by that file's text. Any other line is kept as it is.
fn splice(template: &str) -> String {
    let mut out = String::with_capacity(template.len() + FILES.iter().map(|(_, text)| text.len()).sum::<usize>());
    for line in template.split_inclusive('\n') {
        let name = line.trim_end().strip_prefix("--@").and_then(|rest| rest.strip_suffix('@'));
        match name.and_then(|name| FILES.iter().find(|(file, _)| *file == name)) {
            Some((_, text)) => {
                out.push_str(text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_of_the_rules_template_names_an_algorithm_file_and_is_replaced() {
        let script = all_or_nothing();
        assert!(!script.lines().any(|l| l.starts_with("--@")), "a placeholder was left in the script");
        for text in [FIXED_WINDOW, SLIDING_WINDOW, SLIDING_LOG, TOKEN_BUCKET, GCRA] {
            assert!(script.contains(text), "an algorithm script is missing from the rules script");
        }
    }

    #[test]
    fn every_file_names_itself_in_its_first_line() {
        for (file, text) in FILES {
            let first = text.lines().next().unwrap_or_default();
            assert_eq!(first, format!("-- name: {}", file.trim_end_matches(".lua")), "{file}");
        }
    }

    #[test]
    fn a_template_around_an_algorithm_holds_the_algorithm_and_the_guard_and_no_placeholder() {
        for template in [BLOCKABLE_TEMPLATE, BATCH_TEMPLATE] {
            let script = around(template, GCRA);
            assert!(!script.lines().any(|l| l.starts_with("--@")), "a placeholder was left in:\n{script}");
            assert_eq!(script.matches(GCRA).count(), 1, "{script}");
            assert_eq!(script.matches(GUARD).count(), 1, "{script}");
        }
        assert!(all_or_nothing().contains(GUARD), "the rules script checks blocks");
    }

    #[test]
    fn lines_that_are_not_placeholders_are_kept() {
        assert_eq!(splice("a\n--@nothing.lua@\n--@gcra.lua@ x\n"), "a\n--@nothing.lua@\n--@gcra.lua@ x\n");
        let spliced = splice("--@gcra.lua@\nend\n");
        assert!(spliced.starts_with(GCRA) && spliced.ends_with("\nend\n"), "{spliced}");
        assert!(spliced.len() <= GCRA.len() + "\nend\n".len(), "{spliced}");
    }
}
