//! The all-or-nothing script: several rules of one request decided in one script call, at one
//! clock reading, consuming from all of them or from none (`algo::all_or_nothing` is its twin).
//!
//! The script is `lua/all_or_nothing.lua` with the five algorithm files spliced in, each as a
//! local function, so the arithmetic exists once; its header says how a shim lets each rule be
//! decided once and written only if every enforced rule fits. A request of n rules costs Redis
//! each rule's own reads and writes once, as n separate scripts would, in one call.
//!
//! Call: KEYS are every rule's keys in rule order (a blockable rule's block last among its
//! own). ARGV is the number of rules, `1` to consume or `0` for a dry run (decide, consume
//! nothing: a cluster's first pass), then per rule its algorithm's key suffix (`fw`, `sw`,
//! `sl`, `tb`, `gcra`), `1` for a shadow rule or `0`, `1` for a blockable rule or `0`, its key
//! count, its argument count, and its arguments exactly as its own script takes them
//! (`scripts::Request::invocation`; the cost is the last). Reply: `{allowed, rules, then per
//! rule allowed, remaining, retry_after_ms, reset_after_ms, now_ms, consumed}`.

use crate::algo::all_or_nothing::ItemOutcome;
#[cfg(feature = "harness")]
use crate::algo::all_or_nothing::RulesOutcome;
use crate::scripts::{self, key_suffix, Invocation};

/// The Redis module's command deciding several rules (`limiter/module`): the script's KEYS and
/// ARGV, with the key count after the first key ([`RulesRequest::module_invocation`]).
pub const MODULE_COMMAND: &str = "RATELIMIT.RULES";

/// The script text (`lua/all_or_nothing.lua` with the five algorithm files spliced in).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub fn source() -> &'static str {
    redis_ratelimit_scripts::all_or_nothing()
}

/// One rule of a batch: its script request, whether it is a shadow rule, and whether it reads
/// blocks.
#[derive(Debug, Clone, Copy)]
pub struct RuleCall<'a> {
    /// What the rule's own script would be called with.
    pub request: scripts::Request<'a>,
    /// A shadow rule is decided and reported but never denies the request.
    pub shadow: bool,
    /// For a blockable rule, the key of its block ([`scripts::block_key`]), which goes last
    /// among its keys; None for a rule that reads no block.
    pub block: Option<&'a str>,
}

/// Several rules of one request, decided together.
#[derive(Debug, Clone, Default)]
pub struct RulesRequest<'a> {
    /// The rules, in the order their answers come back.
    pub items: Vec<RuleCall<'a>>,
    /// False for a dry run: every rule decided, nothing consumed.
    pub commit: bool,
}

/// One rule's answer in a batch reply, with the clock reading it decided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemReply {
    /// The rule's answer.
    pub item: ItemOutcome,
    /// The clock reading (ms) it decided by.
    pub now_ms: u64,
}

/// A batch reply: whether the request is admitted, and every rule's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesReply {
    /// Admitted.
    pub allowed: bool,
    /// One per rule, in request order.
    pub items: Vec<ItemReply>,
}

impl RulesReply {
    /// The reply without clock readings, to compare with the twin's [`RulesOutcome`].
    #[cfg(feature = "harness")]
    pub fn outcome(&self) -> RulesOutcome {
        RulesOutcome { allowed: self.allowed, items: self.items.iter().map(|i| i.item).collect() }
    }
}

impl RulesRequest<'_> {
    /// The script call for this batch.
    pub fn invocation(&self) -> Invocation {
        let mut keys = Vec::new();
        let mut args = vec![self.items.len().to_string(), if self.commit { "1" } else { "0" }.to_owned()];
        for item in &self.items {
            // A rule's stem names its state (the rule's name), so its keys carry no quota.
            let r = &item.request;
            let one = match item.block {
                Some(block) => r.blockable_invocation(block),
                None => r.invocation_of_stem(),
            };
            args.push(key_suffix(r.algorithm).to_owned());
            args.push(if item.shadow { "1" } else { "0" }.to_owned());
            args.push(if item.block.is_some() { "1" } else { "0" }.to_owned());
            args.push(one.keys.len().to_string());
            args.push(one.args.len().to_string());
            keys.extend(one.keys);
            args.extend(one.args);
        }
        Invocation { keys, args }
    }

    /// The module command's arguments for this batch: the script's first key, the number of
    /// keys, the other keys, then its ARGV (a cluster client routes a command it does not know
    /// by its first argument, which must be a key). As an [`Invocation`] whose one key is the
    /// first, for a caller that sends keys then arguments.
    pub fn module_invocation(&self) -> Invocation {
        let Invocation { mut keys, args } = self.invocation();
        let count = keys.len().to_string();
        let others = if keys.is_empty() { Vec::new() } else { keys.split_off(1) };
        Invocation { keys, args: std::iter::once(count).chain(others).chain(args).collect() }
    }

    /// Reads the script's reply; None when it is not what the script returns for this batch.
    pub fn read_reply(&self, reply: &[i64]) -> Option<RulesReply> {
        let n = self.items.len();
        let (&[allowed @ (0 | 1), count], rest) = reply.split_first_chunk::<2>()? else { return None };
        if count != n as i64 || rest.len() != 6 * n {
            return None;
        }
        let items = self
            .items
            .iter()
            .zip(rest.chunks_exact(6))
            .map(|(item, chunk)| {
                let (outcome, now_ms) = item.request.read_reply(&chunk[..5])?;
                let consumed = match chunk[5] {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                Some(ItemReply { item: ItemOutcome { outcome, consumed }, now_ms })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(RulesReply { allowed: allowed == 1, items })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_splices_in_and_dispatches_to_every_algorithm() {
        let script = source();
        for a in Algorithm::ALL {
            assert!(script.contains(scripts::for_algorithm(a).source), "{a}'s script is spliced in");
            let suffix = key_suffix(a);
            assert!(script.contains(&format!("{suffix} = {suffix}")), "the script's algorithms table names {a}");
        }
    }
    use crate::quota::{Algorithm, Quota};

    #[test]
    fn the_script_holds_each_algorithm_file_once_as_a_function() {
        for script in scripts::ALL {
            assert_eq!(source().matches(script.source).count(), 1, "{}", script.file);
            let suffix = key_suffix(script.algorithm);
            assert!(source().contains(&format!("local {suffix} = function(KEYS, ARGV, redis)\n{}", script.source)));
        }
    }

    #[test]
    fn the_module_command_takes_the_scripts_keys_and_arguments_with_the_count_after_the_first_key() {
        let q = Quota::per_second(5);
        let items = ["rl:{k}:a:", "rl:{k}:b:"]
            .map(|stem| RuleCall {
                request: scripts::Request { algorithm: Algorithm::Gcra, quota: &q, stem, now_ms: Some(7), cost: 1 },
                shadow: false,
                block: None,
            })
            .to_vec();
        let req = RulesRequest { items, commit: true };
        let (script, module) = (req.invocation(), req.module_invocation());
        assert_eq!(module.keys, script.keys[..1]);
        assert_eq!(module.args[0], "2");
        assert_eq!(module.args[1..2], script.keys[1..]);
        assert_eq!(module.args[2..], script.args[..]);
    }

    #[test]
    fn keys_and_arguments_follow_each_rules_own_invocation() {
        let (q1, q2) = (Quota::per_second(5), Quota::per_minute(100));
        let stem1 = "rl:{k}:a:";
        let stem2 = "rl:{k}:b:";
        let batch = RulesRequest {
            items: vec![
                RuleCall {
                    request: scripts::Request {
                        algorithm: Algorithm::SlidingLog,
                        quota: &q1,
                        stem: stem1,
                        now_ms: None,
                        cost: 1,
                    },
                    shadow: false,
                    block: Some("rl:{k}:a:sl:blk"),
                },
                RuleCall {
                    request: scripts::Request {
                        algorithm: Algorithm::Gcra,
                        quota: &q2,
                        stem: stem2,
                        now_ms: Some(7),
                        cost: 2,
                    },
                    shadow: true,
                    block: None,
                },
            ],
            commit: true,
        };
        let call = batch.invocation();
        assert_eq!(call.keys, ["rl:{k}:a:sl", "rl:{k}:a:sl:blk", "rl:{k}:b:gcra"]);
        assert_eq!(
            call.args,
            [
                "2", "1", "sl", "0", "1", "2", "4", "", "5", "1000", "1", "gcra", "1", "0", "1", "4", "7", "600000",
                "100", "2"
            ]
        );
        let reply = [0, 2, 1, 4, 0, 200, 99, 1, 0, 0, 600, 1200, 7, 0];
        let read = batch.read_reply(&reply).expect("well-formed");
        assert!(!read.allowed);
        assert!(read.items[0].item.consumed);
        assert_eq!(read.items[1].now_ms, 7);
        assert!(batch.read_reply(&reply[..13]).is_none());
        let mut bad = reply;
        bad[13] = 2;
        assert!(batch.read_reply(&bad).is_none());
    }
}
