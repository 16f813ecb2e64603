//! Running one script's generated calls on both servers: each call pipelined with the snapshot,
//! replies and state compared, deadlines tracked on the generated clock.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;
use redis_ratelimit::harness::scripts::{self, LuaScript};

use super::generate::{cmd, cost, quota, s, step, Call, Units};
use super::snapshot::{describe, parse_snapshot, SNAPSHOT};
use super::BASE_MS;
use crate::conformance_support::{show, show_cmd, Pair, Raw, V};

// ---------------------------------------------------------------------------------------------
// Both servers, side by side.

pub struct Servers {
    /// Both servers and a connection to each; also empties them between episodes.
    pub pair: Pair,
    history: VecDeque<String>,
    /// How long the last pipeline took on (redis, model), in whole ms rounded up.
    round_trip_ms: (i64, i64),
}

impl Servers {
    pub fn start() -> Servers {
        Servers { pair: Pair::start(), history: VecDeque::new(), round_trip_ms: (0, 0) }
    }

    fn remember(&mut self, cmds: &[Vec<Vec<u8>>]) {
        for c in cmds {
            let mut c = c.clone();
            // Script bodies are long: name them instead.
            if c.len() > 1 && c[0].eq_ignore_ascii_case(b"EVAL") {
                if c[1] == SNAPSHOT.as_bytes() {
                    c[1] = b"<snapshot>".to_vec();
                } else if let Some(name) = script_name(&c[1]) {
                    c[1] = name;
                }
            }
            if c.len() > 2 && c[0].eq_ignore_ascii_case(b"SCRIPT") {
                if let Some(name) = script_name(&c[2]) {
                    c[2] = name;
                }
            }
            let mut shown = show_cmd(&c);
            if shown.len() > 300 {
                shown.truncate(300);
                shown.push_str("...");
            }
            self.history.push_back(shown);
            if self.history.len() > 30 {
                self.history.pop_front();
            }
        }
    }

    /// The same pipeline to both servers: (redis replies, model replies).
    pub fn both(&mut self, cmds: &[Vec<Vec<u8>>]) -> (Vec<Raw>, Vec<Raw>) {
        self.remember(cmds);
        let started = Instant::now();
        let r = self.pair.redis.pipeline(cmds).expect("redis-server replies");
        let redis_done = Instant::now();
        let m = self.pair.model.pipeline(cmds).expect("model replies");
        let ms = |d: Duration| d.as_micros().div_ceil(1000) as i64;
        self.round_trip_ms = (ms(redis_done - started), ms(redis_done.elapsed()));
        (self.pair.compare_all(r), self.pair.compare_all(m))
    }

    fn history(&self) -> String {
        self.history.iter().map(|c| format!("  {c}")).collect::<Vec<_>>().join("\n")
    }
}

/// The distance between adjacent doubles at `n` (a positive whole number): 0 up to 2^53, where
/// every whole number is a double, and doubling with each power of two beyond.
fn double_spacing(n: i64) -> i64 {
    let bits = 63 - i64::from(n.max(1).leading_zeros());
    if bits > 52 {
        1 << (bits - 52)
    } else {
        0
    }
}

/// `<file>` for the source of one of the limiter's scripts.
fn script_name(source: &[u8]) -> Option<Vec<u8>> {
    let named = [("refund.lua", scripts::REFUND), ("debit.lua", scripts::DEBIT), ("block.lua", scripts::BLOCK)];
    let algorithms = scripts::ALL.iter().map(|x| (x.file, x.source));
    let blockable = scripts::ALL.iter().map(|x| ("blockable.lua", scripts::blockable_source(x.algorithm)));
    let (file, _) = named.into_iter().chain(algorithms).chain(blockable).find(|(_, text)| text.as_bytes() == source)?;
    Some(format!("<{file}>").into_bytes())
}

#[derive(Default)]
pub struct Totals {
    pub calls: usize,
    pub agreed: usize,
    pub expiry_races: usize,
    /// Replies by kind, to show the run reached every path: admitted, denied, error.
    pub allowed: usize,
    pub denied: usize,
    pub errors: usize,
    /// Calls of the refund script among `calls`.
    pub refunds: usize,
    /// Calls of the debit script among `calls`.
    pub debits: usize,
    /// Calls of the block script among `calls`.
    pub blocks: usize,
}

pub struct Run<'a> {
    pub servers: &'a mut Servers,
    pub rng: SmallRng,
    /// The script under test: an algorithm's own, or a blockable limiter's around it.
    pub script: LuaScript,
    /// `script` is a blockable limiter's: its calls carry the key's block, and blocks are set,
    /// lifted and spoiled between them.
    pub blockable: bool,
    pub sha: Vec<u8>,
    /// Each key's deadline on the generated clock (None: no deadline).
    pub deadlines: BTreeMap<Vec<u8>, Option<i64>>,
    pub totals: &'a mut Totals,
    pub seed: u64,
}

impl Run<'_> {
    fn fail(&self, what: &str, redis: &str, model: &str) -> ! {
        panic!(
            "{} ({}): {what}\nredis: {}\nmodel: {}\nlast commands (oldest first):\n{}\nreplay: CONFORMANCE_SEED={} \
             cargo test -p redis-tests --test redis -- conformance_scripts::",
            self.script.file,
            self.script.algorithm,
            redis,
            model,
            self.servers.history(),
            self.seed
        )
    }

    /// Sends `cmds` to both and requires byte-identical replies.
    fn same(&mut self, cmds: &[Vec<Vec<u8>>], what: &str) -> Vec<V> {
        let (r, m) = self.servers.both(cmds);
        for ((rr, _), (mr, _)) in r.iter().zip(&m) {
            if rr != mr {
                self.fail(what, &show(rr), &show(mr));
            }
        }
        r.into_iter().map(|(_, v)| v).collect()
    }

    fn reset(&mut self) {
        self.servers.pair.reset();
        self.deadlines.clear();
        let v = self.same(&[cmd(&[b"SCRIPT", b"LOAD", self.script.source.as_bytes()])], "SCRIPT LOAD");
        assert_eq!(v[0], V::Bulk(Some(self.sha.clone())), "SCRIPT LOAD names the script by its SHA1");
    }

    /// Deletes, on both servers, every key whose generated deadline has passed.
    fn expire(&mut self, now_ms: i64) {
        let due: Vec<Vec<u8>> =
            self.deadlines.iter().filter(|(_, d)| d.is_some_and(|d| now_ms > d)).map(|(k, _)| k.clone()).collect();
        if due.is_empty() {
            return;
        }
        let mut del = vec![s("DEL")];
        del.extend(due.iter().cloned());
        self.same(&[del], "DEL of keys past their generated deadline");
        for k in due {
            self.deadlines.remove(&k);
        }
    }

    /// A write outside the script. On a real server the written state would have some TTL of
    /// its own (or none); here it gets a generated deadline a few periods ahead when the write
    /// creates the key or replaces it (SET), and keeps the key's deadline otherwise (HSET, ZADD),
    /// so hostile state comes and goes during an episode.
    fn write(&mut self, c: Vec<Vec<u8>>, now_ms: i64, period_ms: u64) {
        let key = c[1].clone();
        let replaces = c[0] == b"SET";
        self.same(&[c], "hostile write");
        let lifetime = self.rng.random_range(0..=2 * period_ms.min(1_000_000) as i64);
        let entry = self.deadlines.entry(key).or_insert(None);
        if replaces || entry.is_none() {
            *entry = Some(now_ms + lifetime);
        }
    }

    /// One script call pipelined with the snapshot; both must agree.
    fn call(&mut self, call: &Call, head: &[u8]) {
        // The units and block scripts go by EVAL: the episode's SCRIPT FLUSH would drop their SHAs.
        let script_ref = match (call.units, call.block, head) {
            (_, Some(_), _) => scripts::BLOCK.as_bytes().to_vec(),
            (Some(units), _, _) => units.source().as_bytes().to_vec(),
            (None, None, b"EVAL") => self.script.source.as_bytes().to_vec(),
            (None, None, _) => self.sha.clone(),
        };
        let other = call.units.is_some() || call.block.is_some();
        let head: &[u8] = if other { b"EVAL" } else { head };
        let cmds = vec![call.command(head, &script_ref), cmd(&[b"EVAL", SNAPSHOT.as_bytes(), b"0"])];
        let (r, m) = self.servers.both(&cmds);
        self.totals.calls += 1;
        self.totals.refunds += usize::from(call.units == Some(Units::Refund));
        self.totals.debits += usize::from(call.units == Some(Units::Debit));
        self.totals.blocks += usize::from(call.block.is_some());
        match &r[0].1 {
            V::Error(_) => self.totals.errors += 1,
            _ if other => {}
            V::Array(Some(items)) if items.first() == Some(&V::Int(1)) => self.totals.allowed += 1,
            _ => self.totals.denied += 1,
        }
        if r[0].0 != m[0].0 {
            let what = format!("the script's reply differs (quota {:?}, now {})", call.quota, call.now_ms);
            self.fail(&what, &show(&r[0].0), &show(&m[0].0));
        }
        let (rs, ms) = match (parse_snapshot(&r[1].1), parse_snapshot(&m[1].1)) {
            (Ok(rs), Ok(ms)) => (rs, ms),
            (Err(e), _) | (_, Err(e)) => {
                self.fail(&format!("snapshot unreadable: {e}"), &show(&r[1].0), &show(&m[1].0))
            }
        };
        let mut raced = Vec::new();
        let (rt_r, rt_m) = self.servers.round_trip_ms;
        let keys: std::collections::BTreeSet<&Vec<u8>> = rs.keys().chain(ms.keys()).collect();
        for key in keys {
            // How long a key kept on one server may have had left when the other lost it to
            // real time: a millisecond or two, and the losing server's round trip more when the
            // machine stalled it.
            let may_race = 2 + if rs.contains_key(key) { rt_m } else { rt_r };
            match (rs.get(key), ms.get(key)) {
                (Some(a), Some(b)) => {
                    // A snapshot's PTTL is the TTL the script set minus the time between the two
                    // (under a millisecond, unless the machine stalled that server): some TTL
                    // must be consistent with both readings. The snapshot reads PTTL in Lua,
                    // whose numbers are doubles, so a TTL beyond 2^53 ms (a huge quota's) comes
                    // back rounded to the doubles' spacing there: a millisecond apart on the
                    // servers can read 16 apart near 10^17.
                    let rounding = double_spacing(a.pttl.max(b.pttl));
                    let ttl_agrees = (a.pttl < 0 && a.pttl == b.pttl)
                        || (a.pttl >= 0
                            && b.pttl >= 0
                            && a.pttl.max(b.pttl) <= (a.pttl + rt_r + 1 + rounding).min(b.pttl + rt_m + 1 + rounding));
                    if a.kind != b.kind || a.value != b.value || !ttl_agrees {
                        self.fail(
                            &format!("state after the call differs for key {}", show(key)),
                            &describe(Some(a)),
                            &describe(Some(b)),
                        );
                    }
                }
                // A key with a TTL of a millisecond or two may expire by real time on one server
                // between the call and the snapshot of the same pipeline; the test then drops it
                // on both (see the module docs). Anything else is a disagreement.
                (Some(only), None) | (None, Some(only)) if (0..=may_race).contains(&only.pttl) => {
                    let (kept, lost) = if rs.contains_key(key) { ("redis", "model") } else { ("model", "redis") };
                    eprintln!(
                        "note: {} (PTTL {} on the {kept}) expired by real time on the {lost} before the snapshot",
                        show(key),
                        only.pttl
                    );
                    raced.push(only.key.clone());
                }
                (a, b) => self.fail(
                    &format!("key {} exists on one server only after the call", show(key)),
                    &describe(a),
                    &describe(b),
                ),
            }
        }
        // Track deadlines on the generated clock.
        let mut next = BTreeMap::new();
        for (key, state) in &rs {
            let other = ms.get(key).map_or(state.pttl, |m| m.pttl);
            let deadline = if state.pttl >= 0 {
                Some(call.now_ms + state.pttl.max(other))
            } else {
                self.deadlines.get(key).copied().flatten()
            };
            next.insert(key.clone(), deadline);
        }
        self.deadlines = next;
        if !raced.is_empty() {
            self.totals.expiry_races += raced.len();
            let mut del = vec![s("DEL")];
            del.extend(raced.iter().cloned());
            self.servers.both(&[del]);
            for k in raced {
                self.deadlines.remove(&k);
            }
        }
        self.totals.agreed += 1;
    }

    pub fn episode(&mut self, calls: usize) {
        self.reset();
        let algorithm = self.script.algorithm;
        let q = quota(&mut self.rng, algorithm);
        let users = self.rng.random_range(1..=3);
        let mut now = BASE_MS + self.rng.random_range(0..1_000_000_000);
        for _ in 0..calls {
            now += step(&mut self.rng, q.period_ms());
            let user = self.rng.random_range(0..users);
            let block = self.blockable && self.rng.random_ratio(1, 8);
            let c = Call {
                algorithm,
                quota: q,
                stem: format!("ratelimiter:{{k{user}}}:"),
                now_ms: now,
                cost: cost(&mut self.rng, algorithm, &q),
                // Interleaved with the requests, so refunds and debits meet every state the
                // script leaves, and the debts debits leave meet the script.
                units: match (block, self.rng.random_range(0..16)) {
                    (false, 0 | 1) => Some(Units::Refund),
                    (false, 2 | 3) => Some(Units::Debit),
                    _ => None,
                },
                blockable: self.blockable,
                // Blocks of every length: lifted, shorter than a step, across several periods.
                block: block.then(|| match self.rng.random_range(0..6) {
                    0 => 0,
                    1 => self.rng.random_range(1..=20),
                    _ => self.rng.random_range(1..=3 * q.period_ms().min(1_000_000)),
                }),
            };
            self.expire(now);
            if self.rng.random_ratio(1, 12) {
                let w = c.hostile_write(&mut self.rng);
                self.write(w, now, q.period_ms());
            }
            if self.blockable && self.rng.random_ratio(1, 16) {
                let w = c.hostile_block(&mut self.rng);
                self.write(w, now, q.period_ms());
            }
            match self.rng.random_range(0..100) {
                0 => {
                    // The cache is lost: NOSCRIPT on both, then loaded again.
                    self.same(&[cmd(&[b"SCRIPT", b"FLUSH"])], "SCRIPT FLUSH");
                    self.same(&[c.command(b"EVALSHA", &self.sha.clone())], "EVALSHA after SCRIPT FLUSH");
                    self.same(&[cmd(&[b"SCRIPT", b"LOAD", self.script.source.as_bytes()])], "SCRIPT LOAD");
                    self.call(&c, b"EVALSHA");
                }
                1..=10 => self.call(&c, b"EVAL"),
                _ => self.call(&c, b"EVALSHA"),
            }
        }
    }
}

#[test]
fn double_spacing_is_the_gap_between_adjacent_doubles() {
    assert_eq!(double_spacing((1 << 53) - 1), 0);
    assert_eq!(double_spacing(1 << 53), 2);
    // The TTL a huge quota's sliding log was given, as two servers read it a millisecond apart.
    assert_eq!(double_spacing(99_999_294_161_725_488), 16);
    assert_eq!(99_999_294_161_725_495_i64 as f64 as i64, 99_999_294_161_725_488);
}
