//! The all-or-nothing script: several rules of one request decided in one script call, at one
//! clock reading, consuming from all of them or from none (`algo::all_or_nothing` is its twin).
//!
//! The script is built at compile time from the very files in `lua/`: each algorithm's body
//! becomes a local function of `(KEYS, ARGV, redis)`, so the arithmetic exists once. The
//! `redis` the bodies see is a shim:
//!
//! - `TIME` is answered from one reading taken on first use: every server-time rule of the
//!   batch decides at the same instant.
//! - Reads go to Redis, and their replies are kept: asking the same again costs no call.
//! - Writes are held back. Every algorithm file reads everything before it writes and never
//!   uses a write's reply (the shim refuses a read after a write), so each
//!   rule is decided once, with its cost, and its writes are sent only if every enforced rule
//!   fits. A rule that fitted in a request that is refused reports its standing as a peek would
//!   (cost 0), from the kept replies.
//!
//! So a request of n rules costs Redis each rule's own reads and writes once, as n separate
//! scripts would, in one call.
//!
//! Call: KEYS are every rule's keys in rule order. ARGV is the number of rules, `1` to consume
//! or `0` for a dry run (decide, consume nothing: a cluster's first pass), then per rule
//! its algorithm's key suffix (`fw`, `sw`, `sl`, `tb`, `gcra`), `1` for a shadow rule or `0`,
//! its key count, its argument count, and its arguments exactly as its own script takes them
//! (`scripts::Request::invocation`; the cost is the last). Reply: `{allowed, rules, then per
//! rule allowed, remaining, retry_after_ms, reset_after_ms, now_ms, consumed}`.

use crate::algo::all_or_nothing::{ItemOutcome, RulesOutcome};
use crate::scripts::{self, key_suffix, Invocation};

/// The script text: the shim, the five algorithm files as local functions, the one pass.
pub const SOURCE: &str = concat!(
    "-- name: all_or_nothing\n",
    "-- Generated at compile time by limiter/src/rules_script.rs from the files in lua/; see there.\n",
    r#"local clock
local kept = {}
local READS = {GET = true, MGET = true, HMGET = true, ZCOUNT = true, ZRANGE = true, ZRANGEBYSCORE = true}
local held
local function read(call, how, command, ...)
  if #held > 0 then error('all_or_nothing: a rule read with ' .. command .. ' after it wrote') end
  local id = table.concat({how, command, ...}, '\0')
  local reply = kept[id]
  if reply == nil then
    reply = call(command, ...)
    kept[id] = reply
  end
  return reply
end
local shim = {}
function shim.call(command, ...)
  if command == 'TIME' then
    if not clock then clock = redis.call('TIME') end
    return clock
  end
  if READS[command] then return read(redis.call, 'c', command, ...) end
  held[#held + 1] = {command, ...}
end
function shim.pcall(command, ...)
  if READS[command] then return read(redis.pcall, 'p', command, ...) end
  error('all_or_nothing: a rule wrote with pcall (' .. command .. '), whose reply it would read')
end
"#,
    "local fw = function(KEYS, ARGV, redis)\n",
    include_str!("../../lua/fixed_window.lua"),
    "\nend\n",
    "local sw = function(KEYS, ARGV, redis)\n",
    include_str!("../../lua/sliding_window.lua"),
    "\nend\n",
    "local sl = function(KEYS, ARGV, redis)\n",
    include_str!("../../lua/sliding_log.lua"),
    "\nend\n",
    "local tb = function(KEYS, ARGV, redis)\n",
    include_str!("../../lua/token_bucket.lua"),
    "\nend\n",
    "local gcra = function(KEYS, ARGV, redis)\n",
    include_str!("../../lua/gcra.lua"),
    "\nend\n",
    r#"local algorithms = {fw = fw, sw = sw, sl = sl, tb = tb, gcra = gcra}
local n = tonumber(ARGV[1])
local commit = ARGV[2] == '1'
local rules = {}
local a, k = 3, 1
for i = 1, n do
  local r = {run = algorithms[ARGV[a]], shadow = ARGV[a + 1] == '1', keys = {}, args = {}}
  if not r.run then return redis.error_reply('unknown algorithm ' .. tostring(ARGV[a])) end
  local nkeys, nargs = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  for j = 1, nkeys do r.keys[j] = KEYS[k + j - 1] end
  for j = 1, nargs do r.args[j] = ARGV[a + 3 + j] end
  k = k + nkeys
  a = a + 4 + nargs
  r.cost = tonumber(r.args[nargs])
  rules[i] = r
end

-- Decide every rule once, with its cost, holding its writes back.
local all_fit = true
for i = 1, n do
  local r = rules[i]
  held = {}
  r.out = r.run(r.keys, r.args, shim)
  r.writes = held
  r.fits = r.out[1] == 1
  if not r.fits and not r.shadow then all_fit = false end
end

-- Write for every fitting rule if every enforced rule fits (and this is not a dry run), else
-- for none. A fitting rule left unwritten reports its standing as a peek does; a rule that
-- does not fit was denied and wrote nothing.
local take = commit and all_fit
local out = {0, n}
for i = 1, n do
  local r = rules[i]
  local o, consumed = r.out, 0
  if r.fits and r.cost > 0 then
    if take then
      for _, w in ipairs(r.writes) do redis.call(unpack(w)) end
      consumed = 1
    else
      local peek_args = {}
      for j = 1, #r.args do peek_args[j] = r.args[j] end
      peek_args[#peek_args] = '0'
      held = {}
      o = r.run(r.keys, peek_args, shim)
    end
  end
  for j = 1, 5 do out[#out + 1] = o[j] end
  out[#out + 1] = consumed
end
if all_fit then out[1] = 1 end
return out
"#
);

/// One rule of a batch: its script request and whether it is a shadow rule.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// What the rule's own script would be called with.
    pub request: scripts::Request<'a>,
    /// A shadow rule is decided and reported but never denies the request.
    pub shadow: bool,
}

/// Several rules of one request, decided together.
#[derive(Debug, Clone, Default)]
pub struct RulesRequest<'a> {
    /// The rules, in the order their answers come back.
    pub items: Vec<Item<'a>>,
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
            let one = item.request.invocation_of_stem();
            args.push(key_suffix(item.request.algorithm).to_owned());
            args.push(if item.shadow { "1" } else { "0" }.to_owned());
            args.push(one.keys.len().to_string());
            args.push(one.args.len().to_string());
            keys.extend(one.keys);
            args.extend(one.args);
        }
        Invocation { keys, args }
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
    use crate::quota::{Algorithm, Quota};

    #[test]
    fn the_script_holds_each_algorithm_file_once_as_a_function() {
        for script in scripts::ALL {
            assert_eq!(SOURCE.matches(script.source).count(), 1, "{}", script.file);
            let suffix = key_suffix(script.algorithm);
            assert!(SOURCE.contains(&format!("local {suffix} = function(KEYS, ARGV, redis)\n{}", script.source)));
        }
    }

    #[test]
    fn keys_and_arguments_follow_each_rules_own_invocation() {
        let (q1, q2) = (Quota::per_second(5), Quota::per_minute(100));
        let stem1 = "rl:{k}:a:";
        let stem2 = "rl:{k}:b:";
        let batch = RulesRequest {
            items: vec![
                Item {
                    request: scripts::Request {
                        algorithm: Algorithm::SlidingLog,
                        quota: &q1,
                        stem: stem1,
                        now_ms: None,
                        cost: 1,
                    },
                    shadow: false,
                },
                Item {
                    request: scripts::Request {
                        algorithm: Algorithm::Gcra,
                        quota: &q2,
                        stem: stem2,
                        now_ms: Some(7),
                        cost: 2,
                    },
                    shadow: true,
                },
            ],
            commit: true,
        };
        let call = batch.invocation();
        assert_eq!(call.keys, ["rl:{k}:a:sl", "rl:{k}:b:gcra"]);
        assert_eq!(
            call.args,
            ["2", "1", "sl", "0", "1", "4", "", "5", "1000", "1", "gcra", "1", "1", "4", "7", "600000", "100", "2"]
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
