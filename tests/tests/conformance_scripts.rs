//! Differential test for the limiter's own Lua scripts: long generated EVALSHA/EVAL sequences
//! for every script in `lua/` go to a real `redis-server` and to the model, and every reply must
//! be byte-identical (error texts included: both servers name the same SHA).
//!
//! What is generated, per the scripts' contracts (see each file's header):
//!
//! - Quotas in the everyday ranges (limits and bursts 1..=1000, periods 1..=600000 ms), plus
//!   huge ones near the bounds `Quota::validate` accepts (products up to 2^50), costs 0..=capacity.
//! - Client time: a clock starting near 1.7e12 ms that mostly moves forward by 0..3 periods and
//!   sometimes steps back by up to three seconds.
//! - Hostile state written beforehand with SET/HSET/ZADD: text, "NaN", "inf", fractions,
//!   negative and huge numbers, and keys of the wrong type.
//! - EVALSHA mostly; EVAL of the source sometimes; now and then SCRIPT FLUSH, so EVALSHA gets
//!   NOSCRIPT on both before the script is loaded again.
//!
//! **Time.** The scripts set TTLs derived from the generated clock, and each server expires keys
//! by its own real clock, so a key could vanish on one server between the two executions of the
//! same call. To keep real time out of the comparison, each call is pipelined with a snapshot
//! script that reads every key (type, value, PTTL) and PERSISTs it; the test then expires keys
//! itself, identically on both servers, once the *generated* clock passes the deadline the
//! snapshot reported. So the comparison covers the replies, the full state after every call, and
//! the TTLs the scripts set: to the millisecond, since the snapshot runs microseconds after the
//! call, with slack only for the time a loaded machine measurably held a server up. The one
//! real-time effect left is a key with a TTL of 1-2 ms expiring on one server before its
//! snapshot ran; such a key is dropped on both and counted in the summary. Server time
//! (`now` = "") is compared separately and only by the reply's shape and decision.
//!
//! Left out on purpose: a sliding-log sequence counter beyond 2^53 (`SET ...:seq 9007199254740993`)
//! makes the script's member loop spin forever in doubles; Redis then stays BUSY while the model
//! kills the script after its instruction budget (a documented difference of the model).
//!
//! `KEYS pattern` is compared here too, as a command and from a script: the snapshot relies on it.
//!
//! `CONFORMANCE_CALLS=N` changes the calls per script (default 4000); `CONFORMANCE_SEED=S` the
//! seed (a failure prints the one to replay).

// Comparing against a real server means measuring real time in one place (the server-time case).
#![allow(clippy::disallowed_methods)]

mod conformance_support;

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use limiter::harness::scripts::{self, LuaScript};
use limiter::{Algorithm, Quota};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use conformance_support::{show, show_cmd, Pair};

const BASE_MS: i64 = 1_700_000_000_000;
const EXACT_MAX: u64 = 1 << 50;
const DEFAULT_CALLS: usize = 4000;
const EPISODE_CALLS: usize = 150;

/// Reads every key and PERSISTs it, pipelined right after each script call (see module docs).
const SNAPSHOT: &str = r#"
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)['ok']
  local v = {}
  if t == 'string' then
    v = {redis.call('GET', k)}
  elseif t == 'hash' then
    v = redis.call('HGETALL', k)
  elseif t == 'zset' then
    v = {redis.call('ZCARD', k), redis.call('ZRANGE', k, 0, 2, 'WITHSCORES'),
         redis.call('ZRANGE', k, -3, -1, 'WITHSCORES')}
  end
  out[#out + 1] = {k, t, redis.call('PTTL', k), v}
  redis.call('PERSIST', k)
end
return out
"#;

// ---------------------------------------------------------------------------------------------
// A pipelining RESP2 client that keeps each reply's raw bytes and a parsed form.

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum V {
    Status(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<V>>),
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Conn { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Sends every command in one write, then reads one reply per command.
    fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> io::Result<Vec<(Vec<u8>, V)>> {
        let mut out = Vec::new();
        for args in cmds {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.writer.write_all(&out)?;
        let mut replies = Vec::with_capacity(cmds.len());
        for _ in cmds {
            let mut raw = Vec::new();
            let value = read_value(&mut self.reader, &mut raw)?;
            replies.push((raw, value));
        }
        Ok(replies)
    }
}

fn read_value(r: &mut BufReader<TcpStream>, raw: &mut Vec<u8>) -> io::Result<V> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 3 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    raw.extend_from_slice(&line);
    let body = line[1..line.len() - 2].to_vec();
    let number = || -> io::Result<i64> {
        std::str::from_utf8(&body).ok().and_then(|s| s.parse().ok()).ok_or_else(|| io::Error::other("bad number"))
    };
    Ok(match line[0] {
        b'+' => V::Status(body.clone()),
        b'-' => V::Error(body.clone()),
        b':' => V::Int(number()?),
        b'$' => {
            let n = number()?;
            if n < 0 {
                V::Bulk(None)
            } else {
                let mut data = vec![0u8; n as usize + 2];
                r.read_exact(&mut data)?;
                raw.extend_from_slice(&data);
                data.truncate(n as usize);
                V::Bulk(Some(data))
            }
        }
        b'*' => {
            let n = number()?;
            if n < 0 {
                V::Array(None)
            } else {
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(read_value(r, raw)?);
                }
                V::Array(Some(items))
            }
        }
        other => return Err(io::Error::other(format!("unexpected reply type byte {other:#x}"))),
    })
}

fn cmd(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn s(text: impl ToString) -> Vec<u8> {
    text.to_string().into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Both servers, side by side.

struct Servers {
    redis: Conn,
    model: Conn,
    /// Keeps both servers alive; also empties them between episodes.
    pair: Pair,
    history: VecDeque<String>,
    /// How long the last pipeline took on (redis, model), in whole ms rounded up.
    round_trip_ms: (i64, i64),
}

impl Servers {
    fn start() -> Servers {
        let pair = Pair::start();
        let redis = Conn::connect(pair.redis_addr()).expect("connect to redis-server");
        let model = Conn::connect(pair.model_server.addr).expect("connect to the model");
        Servers { redis, model, pair, history: VecDeque::new(), round_trip_ms: (0, 0) }
    }

    fn remember(&mut self, cmds: &[Vec<Vec<u8>>]) {
        for c in cmds {
            let mut c = c.clone();
            // Script bodies are long: name them instead.
            if c.len() > 1 && c[0].eq_ignore_ascii_case(b"EVAL") {
                if c[1] == SNAPSHOT.as_bytes() {
                    c[1] = b"<snapshot>".to_vec();
                } else if let Some(script) = scripts::ALL.iter().find(|x| x.source.as_bytes() == c[1]) {
                    c[1] = format!("<{}>", script.file).into_bytes();
                }
            }
            if c.len() > 2 && c[0].eq_ignore_ascii_case(b"SCRIPT") {
                if let Some(script) = scripts::ALL.iter().find(|x| x.source.as_bytes() == c[2]) {
                    c[2] = format!("<{}>", script.file).into_bytes();
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
    #[allow(clippy::type_complexity)]
    fn both(&mut self, cmds: &[Vec<Vec<u8>>]) -> (Vec<(Vec<u8>, V)>, Vec<(Vec<u8>, V)>) {
        self.remember(cmds);
        let started = Instant::now();
        let r = self.redis.pipeline(cmds).expect("redis-server replies");
        let redis_done = Instant::now();
        let m = self.model.pipeline(cmds).expect("model replies");
        let ms = |d: Duration| d.as_micros().div_ceil(1000) as i64;
        self.round_trip_ms = (ms(redis_done - started), ms(redis_done.elapsed()));
        (r, m)
    }

    fn history(&self) -> String {
        self.history.iter().map(|c| format!("  {c}")).collect::<Vec<_>>().join("\n")
    }
}

// ---------------------------------------------------------------------------------------------
// Generation.

fn pick<'a, T>(rng: &mut SmallRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn mostly_small(rng: &mut SmallRng, max: u64) -> u64 {
    match rng.random_range(0..4) {
        0 => rng.random_range(1..=3.min(max)),
        1 => rng.random_range(1..=10.min(max)),
        _ => rng.random_range(1..=max),
    }
}

fn everyday_quota(rng: &mut SmallRng) -> Quota {
    let limit = mostly_small(rng, 1000);
    let period = match rng.random_range(0..7) {
        0 => rng.random_range(1..=10),
        1 => 1_000,
        2 => 60_000,
        3 => 600_000,
        4 => rng.random_range(100..=5_000),
        _ => rng.random_range(1..=600_000),
    };
    let burst = mostly_small(rng, 1000);
    Quota::new(limit, period).with_burst(burst)
}

/// Quotas near the bounds `Quota::validate` accepts for `algorithm`.
fn huge_quota(rng: &mut SmallRng, algorithm: Algorithm) -> Quota {
    let pow = |e: u32| 1u64 << e;
    let near = |rng: &mut SmallRng, x: u64| x - rng.random_range(0..=2u64.min(x - 1));
    match algorithm {
        Algorithm::FixedWindow => {
            let limit = *pick(rng, &[EXACT_MAX, EXACT_MAX - 1, pow(40), 1]);
            let period = *pick(rng, &[EXACT_MAX, 1_000_000_000_000_000, pow(45), 1]);
            Quota::new(limit, period)
        }
        Algorithm::SlidingWindow => {
            let a = rng.random_range(0..=48);
            let limit = near(rng, pow(a));
            Quota::new(limit.max(1), pow(48) / limit.max(1))
        }
        Algorithm::SlidingLog => {
            let limit = *pick(rng, &[1_000_000, 999_999, 100_000]);
            let period = *pick(rng, &[EXACT_MAX, 1, pow(40)]);
            Quota::new(limit, period)
        }
        Algorithm::TokenBucket => {
            let a = rng.random_range(0..=50);
            let burst = pow(a);
            let period = EXACT_MAX / burst;
            let limit = *pick(rng, &[1, EXACT_MAX, pow(30), 1_000]);
            Quota::new(limit, period).with_burst(near(rng, burst).max(1))
        }
        Algorithm::Gcra => {
            let period = *pick(rng, &[EXACT_MAX / 1000, 1, 1_000, pow(30)]);
            let limit = *pick(rng, &[1, period * 1000, (period * 1000).div_ceil(3), 7]);
            let interval = (period * 1000).div_ceil(limit);
            let burst = (EXACT_MAX / interval).max(1);
            Quota::new(limit, period).with_burst(near(rng, burst).max(1))
        }
        _ => {
            let limit = *pick(rng, &[EXACT_MAX, 1, 3, pow(30)]);
            let period = *pick(rng, &[1, 3, 1_000, EXACT_MAX]);
            let burst = *pick(rng, &[EXACT_MAX, EXACT_MAX - 1, 1, pow(20)]);
            Quota::new(limit, period).with_burst(burst)
        }
    }
}

fn quota(rng: &mut SmallRng, algorithm: Algorithm) -> Quota {
    loop {
        let q = if rng.random_ratio(1, 6) { huge_quota(rng, algorithm) } else { everyday_quota(rng) };
        if q.validate(algorithm).is_ok() {
            return q;
        }
    }
}

fn cost(rng: &mut SmallRng, algorithm: Algorithm, q: &Quota) -> u64 {
    let mut cap = q.capacity(algorithm);
    if algorithm == Algorithm::SlidingLog {
        // One sorted-set member per admitted unit: keep a single call's ZADD loop short.
        cap = cap.min(1000);
    }
    match rng.random_range(0..12) {
        0 => 0,
        1 => cap,
        2 | 3 => rng.random_range(0..=cap),
        4 => rng.random_range(0..=cap.min(5)),
        _ => 1,
    }
}

fn step(rng: &mut SmallRng, period_ms: u64) -> i64 {
    let p = period_ms.min(1_000_000_000) as i64;
    match rng.random_range(0..24) {
        0 => -rng.random_range(1..=3_000),
        1..=5 => 0,
        6..=9 => rng.random_range(1..=20),
        10 => rng.random_range(1..=p),
        _ => rng.random_range(0..=3 * p),
    }
}

const HOSTILE: &[&str] = &[
    "abc",
    "NaN",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "+inf",
    "Infinity",
    "1.5",
    "0.5",
    "-1",
    "-3.25",
    "0",
    "-0",
    "1e300",
    "-1e300",
    "1e308",
    "1e400",
    "99999999999999999999",
    "9223372036854775807",
    "-9223372036854775808",
    "4503599627370495",
    "4503599627370496",
    "9007199254740993",
    "0x10",
    " 5",
    "5 ",
    "",
    "1e3",
    "0.1",
    "007",
    "2",
];
const HOSTILE_SCORES: &[&str] = &["inf", "-inf", "1e300", "-1e300", "-5", "0", "0.5", "nan", "abc", "1e17", "-0"];

/// A number near `center`, as text: sometimes fractional, negative or far off.
fn near_text(rng: &mut SmallRng, center: i64, spread: i64) -> Vec<u8> {
    let spread = spread.max(1);
    let x = center + rng.random_range(-spread..=spread);
    match rng.random_range(0..6) {
        0 => s(format!("{x}.5")),
        1 => s(-x),
        _ => s(x),
    }
}

fn hostile_text(rng: &mut SmallRng) -> Vec<u8> {
    s(pick(rng, HOSTILE))
}

// ---------------------------------------------------------------------------------------------
// One script's run.

struct Call {
    algorithm: Algorithm,
    quota: Quota,
    /// `prefix:{user key}:`, as the store builds it.
    stem: String,
    now_ms: i64,
    cost: u64,
}

impl Call {
    fn window_index(&self) -> i64 {
        self.now_ms.div_euclid(self.quota.period_ms() as i64)
    }

    /// The algorithm's key under the user's stem.
    fn key(&self) -> String {
        format!("{}{}", self.stem, scripts::key_suffix(self.algorithm))
    }

    /// KEYS and ARGV exactly as the Redis store sends them (`scripts::Request::invocation`); with
    /// `server_time` the scripts read Redis's TIME (`now` = "").
    fn keys_and_args(&self, server_time: bool) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let now = (!server_time).then_some(self.now_ms as u64);
        let request = scripts::Request {
            algorithm: self.algorithm,
            quota: &self.quota,
            stem: &self.stem,
            now_ms: now,
            cost: self.cost,
        };
        let inv = request.invocation();
        let args: Vec<Vec<u8>> = inv.args.into_iter().map(String::into_bytes).collect();
        (inv.keys.into_iter().map(String::into_bytes).collect(), args)
    }

    /// The keys the script will read, for hostile writes.
    fn read_keys(&self) -> Vec<String> {
        let key = self.key();
        match self.algorithm {
            Algorithm::FixedWindow => vec![format!("{key}:{}", self.window_index())],
            Algorithm::SlidingWindow => {
                let i = self.window_index();
                vec![format!("{key}:{i}"), format!("{key}:{}", i - 1)]
            }
            Algorithm::SlidingLog => vec![format!("{key}:seq"), key],
            _ => vec![key],
        }
    }

    /// EVALSHA (or EVAL with the source) of this call.
    fn command(&self, head: &[u8], script_ref: &[u8]) -> Vec<Vec<u8>> {
        self.command_at(head, script_ref, false)
    }

    fn command_at(&self, head: &[u8], script_ref: &[u8], server_time: bool) -> Vec<Vec<u8>> {
        let (keys, args) = self.keys_and_args(server_time);
        let mut c = vec![head.to_vec(), script_ref.to_vec(), s(keys.len())];
        c.extend(keys);
        c.extend(args);
        c
    }

    /// A write that leaves something hostile where the script will read.
    fn hostile_write(&self, rng: &mut SmallRng) -> Vec<Vec<u8>> {
        let keys = self.read_keys();
        let key = s(pick(rng, &keys));
        let wrong_type = |rng: &mut SmallRng, key: Vec<u8>, kind: &str| -> Vec<Vec<u8>> {
            match (kind, rng.random_range(0..2)) {
                ("string", 0) => vec![s("HSET"), key, s("f"), s("v")],
                ("string", _) => vec![s("ZADD"), key, s("1"), s("m")],
                ("hash", 0) => vec![s("SET"), key, s("v")],
                ("hash", _) => vec![s("ZADD"), key, s("1"), s("m")],
                (_, 0) => vec![s("SET"), key, s("v")],
                (_, _) => vec![s("HSET"), key, s("f"), s("v")],
            }
        };
        let now = self.now_ms;
        let period = self.quota.period_ms() as i64;
        let roll = rng.random_range(0..10);
        match self.algorithm {
            Algorithm::FixedWindow | Algorithm::SlidingWindow => match roll {
                0 => wrong_type(rng, key, "string"),
                1..=2 => vec![s("SET"), key, s(rng.random_range(0..=self.quota.limit() + 1))],
                _ => vec![s("SET"), key, hostile_text(rng)],
            },
            Algorithm::Gcra => match roll {
                0 => wrong_type(rng, key, "string"),
                1..=3 => {
                    let tau = (self.quota.burst() as i64).saturating_mul(period * 1000 / self.quota.limit() as i64);
                    vec![s("SET"), key, near_text(rng, now * 1000 + tau, tau.max(1000))]
                }
                _ => vec![s("SET"), key, hostile_text(rng)],
            },
            Algorithm::SlidingLog => {
                if key.ends_with(b":seq") {
                    // A sequence beyond 2^53 (either sign) makes the script's `for` loop over the
                    // new members spin forever in doubles (i + 1 == i): Redis then stays BUSY
                    // while the model kills the script after its instruction budget, a documented
                    // difference. Such values are left out here.
                    let mut text = hostile_text(rng);
                    while text == b"9007199254740993" || text == b"-9223372036854775808" {
                        text = hostile_text(rng);
                    }
                    match roll {
                        0 => wrong_type(rng, key, "string"),
                        1..=2 => vec![s("SET"), key, s(rng.random_range(0..100))],
                        3 => vec![s("SET"), key, s(4_503_599_627_370_496u64 + rng.random_range(0..1000))],
                        _ => vec![s("SET"), key, text],
                    }
                } else {
                    let member = s(pick(rng, &["1", "2", "x", "999", ""]));
                    match roll {
                        0 => wrong_type(rng, key, "zset"),
                        1..=4 => vec![s("ZADD"), key, near_text(rng, now - period / 2, period.max(2)), member],
                        5 => {
                            let (a, b) = (near_text(rng, now, 10), near_text(rng, now - 1, 10));
                            vec![s("ZADD"), key, a, s("a"), b, s("b")]
                        }
                        _ => vec![s("ZADD"), key, s(pick(rng, HOSTILE_SCORES)), member],
                    }
                }
            }
            _ => {
                let (f1, f2) =
                    if self.algorithm == Algorithm::TokenBucket { ("u", "t") } else { ("tokens", "lastRefillTime") };
                let cap = (self.quota.burst() as i64).saturating_mul(if f1 == "u" { period } else { 1 });
                let v1 = match rng.random_range(0..3) {
                    0 => hostile_text(rng),
                    _ => near_text(rng, cap / 2, cap / 2 + 1),
                };
                let v2 = match rng.random_range(0..3) {
                    0 => hostile_text(rng),
                    _ => near_text(rng, now, 3 * period),
                };
                match roll {
                    0 => wrong_type(rng, key, "hash"),
                    1 => vec![s("HSET"), key, s(f1), v1],
                    2 => vec![s("HSET"), key, s(f2), v2],
                    _ => vec![s("HSET"), key, s(f1), v1, s(f2), v2],
                }
            }
        }
    }
}

/// Readable form of a parsed reply, for failure messages.
fn render(v: &V) -> String {
    match v {
        V::Status(t) => format!("+{}", show(t)),
        V::Error(t) => format!("-{}", show(t)),
        V::Int(n) => n.to_string(),
        V::Bulk(Some(b)) => format!("'{}'", show(b)),
        V::Bulk(None) | V::Array(None) => "nil".to_string(),
        V::Array(Some(items)) => format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(", ")),
    }
}

fn describe(state: Option<&KeyState>) -> String {
    match state {
        None => "(no such key)".to_string(),
        Some(k) => format!("{} ({}), PTTL {}: {}", show(&k.key), show(&k.kind), k.pttl, render(&k.value)),
    }
}

/// One key as the snapshot saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyState {
    key: Vec<u8>,
    kind: Vec<u8>,
    pttl: i64,
    value: V,
}

fn parse_snapshot(v: &V) -> Result<BTreeMap<Vec<u8>, KeyState>, String> {
    let V::Array(Some(entries)) = v else { return Err(format!("snapshot is not an array: {v:?}")) };
    let mut out = BTreeMap::new();
    for e in entries {
        let V::Array(Some(parts)) = e else { return Err(format!("snapshot entry: {e:?}")) };
        let [V::Bulk(Some(key)), V::Bulk(Some(kind)), V::Int(pttl), value] = &parts[..] else {
            return Err(format!("snapshot entry: {e:?}"));
        };
        let mut value = value.clone();
        if kind == b"hash" {
            // Field order is the encoding's business; compare the set of pairs.
            if let V::Array(Some(items)) = &value {
                let mut pairs: Vec<Vec<V>> = items.chunks(2).map(|c| c.to_vec()).collect();
                pairs.sort();
                value = V::Array(Some(pairs.concat()));
            }
        }
        out.insert(key.clone(), KeyState { key: key.clone(), kind: kind.clone(), pttl: *pttl, value });
    }
    Ok(out)
}

#[derive(Default)]
struct Totals {
    calls: usize,
    agreed: usize,
    expiry_races: usize,
    /// Replies by kind, to show the run reached every path: admitted, denied, error.
    allowed: usize,
    denied: usize,
    errors: usize,
}

struct Run<'a> {
    servers: &'a mut Servers,
    rng: SmallRng,
    script: LuaScript,
    sha: Vec<u8>,
    /// Each key's deadline on the generated clock (None: no deadline).
    deadlines: BTreeMap<Vec<u8>, Option<i64>>,
    totals: &'a mut Totals,
    seed: u64,
}

impl Run<'_> {
    fn fail(&self, what: &str, redis: &str, model: &str) -> ! {
        panic!(
            "{} ({}): {what}\nredis: {}\nmodel: {}\nlast commands (oldest first):\n{}\nreplay: CONFORMANCE_SEED={} \
             cargo test -p redis-tests --test conformance_scripts",
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
        let script_ref = if head == b"EVAL" { self.script.source.as_bytes().to_vec() } else { self.sha.clone() };
        let cmds = vec![call.command(head, &script_ref), cmd(&[b"EVAL", SNAPSHOT.as_bytes(), b"0"])];
        let (r, m) = self.servers.both(&cmds);
        self.totals.calls += 1;
        match &r[0].1 {
            V::Error(_) => self.totals.errors += 1,
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
        let keys: std::collections::BTreeSet<&Vec<u8>> = rs.keys().chain(ms.keys()).collect();
        for key in keys {
            match (rs.get(key), ms.get(key)) {
                (Some(a), Some(b)) => {
                    // A snapshot's PTTL is the TTL the script set minus the time between the two
                    // (under a millisecond, unless the machine stalled that server): some TTL
                    // must be consistent with both readings.
                    let (rt_r, rt_m) = self.servers.round_trip_ms;
                    let ttl_agrees = (a.pttl < 0 && a.pttl == b.pttl)
                        || (a.pttl >= 0
                            && b.pttl >= 0
                            && a.pttl.max(b.pttl) <= (a.pttl + rt_r + 1).min(b.pttl + rt_m + 1));
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
                (Some(only), None) | (None, Some(only)) if (0..=2).contains(&only.pttl) => {
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

    fn episode(&mut self, calls: usize) {
        self.reset();
        let algorithm = self.script.algorithm;
        let q = quota(&mut self.rng, algorithm);
        let users = self.rng.random_range(1..=3);
        let mut now = BASE_MS + self.rng.random_range(0..1_000_000_000);
        for _ in 0..calls {
            now += step(&mut self.rng, q.period_ms());
            let user = self.rng.random_range(0..users);
            let c = Call {
                algorithm,
                quota: q,
                stem: format!("ratelimiter:{{k{user}}}:"),
                now_ms: now,
                cost: cost(&mut self.rng, algorithm, &q),
            };
            self.expire(now);
            if self.rng.random_ratio(1, 12) {
                let w = c.hostile_write(&mut self.rng);
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

fn sha1_of(pair_servers: &mut Servers, source: &str) -> Vec<u8> {
    let (r, m) = pair_servers.both(&[cmd(&[b"SCRIPT", b"LOAD", source.as_bytes()])]);
    assert_eq!(r[0].0, m[0].0, "SCRIPT LOAD");
    match &r[0].1 {
        V::Bulk(Some(sha)) => sha.clone(),
        other => panic!("SCRIPT LOAD answered {other:?}"),
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn every_script_answers_like_redis_for_generated_calls_hostile_state_and_clock_steps() {
    let calls_per_script = env_number("CONFORMANCE_CALLS").map_or(DEFAULT_CALLS, |n| n as usize);
    let seed = env_number("CONFORMANCE_SEED").unwrap_or(20_240_601);
    let mut servers = Servers::start();
    let mut totals = Totals::default();
    let started = Instant::now();
    for (i, script) in scripts::ALL.into_iter().enumerate() {
        let sha = sha1_of(&mut servers, script.source);
        let mut run = Run {
            servers: &mut servers,
            rng: SmallRng::seed_from_u64(seed.wrapping_add(i as u64)),
            script,
            sha,
            deadlines: BTreeMap::new(),
            totals: &mut totals,
            seed,
        };
        let mut left = calls_per_script;
        while left > 0 {
            let n = left.min(EPISODE_CALLS);
            run.episode(n);
            left -= n;
        }
    }
    println!(
        "conformance: {} script calls over {} scripts, {} agreed",
        totals.calls,
        scripts::ALL.len(),
        totals.agreed
    );
    println!(
        "  ({} admitted, {} denied, {} errors; {} keys dropped after a real-time expiry race; {:.1} s)",
        totals.allowed,
        totals.denied,
        totals.errors,
        totals.expiry_races,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(totals.calls, totals.agreed);
    assert!(totals.calls >= scripts::ALL.len() * calls_per_script);
}

/// With `now` = "" each server reads its own TIME, so only the reply's shape and the decision
/// can be compared (and the clocks the replies report, loosely). ADR-002's script has no
/// server-time mode: an empty `now` is a Lua error, which must read the same on both.
#[test]
fn server_time_calls_agree_on_shape_and_decision() {
    let mut servers = Servers::start();
    let mut compared = 0;
    for script in scripts::ALL {
        let sha = sha1_of(&mut servers, script.source);
        let algorithm = script.algorithm;
        // Two per ten minutes: the third call is denied whatever the two clocks read.
        let q = Quota::new(2, 600_000).with_burst(2);
        for i in 0..3 {
            let c = Call { algorithm, quota: q, stem: "ratelimiter:{server-time}:".to_string(), now_ms: 0, cost: 1 };
            let (r, m) = servers.both(&[c.command_at(b"EVALSHA", &sha, true)]);
            let ((rr, rv), (mr, mv)) = (&r[0], &m[0]);
            {
                let ints = |v: &V| match v {
                    V::Array(Some(items)) => {
                        items.iter().map(|x| if let V::Int(n) = x { Some(*n) } else { None }).collect()
                    }
                    _ => None,
                };
                let (Some(a), Some(b)): (Option<Vec<i64>>, Option<Vec<i64>>) = (ints(rv), ints(mv)) else {
                    panic!("{}: not arrays of integers\nredis: {}\nmodel: {}", script.file, show(rr), show(mr));
                };
                assert_eq!((a.len(), b.len()), (5, 5), "{}: {} / {}", script.file, show(rr), show(mr));
                assert_eq!(
                    a[0],
                    b[0],
                    "{} call {i}: allowed flag\nredis: {}\nmodel: {}",
                    script.file,
                    show(rr),
                    show(mr)
                );
                assert_eq!(a[0], i64::from(i < 2), "{} call {i}: two of three admitted", script.file);
                // Both report the clock they decided by: the same real clock, read moments apart.
                let (ra, mb) = (a[4], b[4]);
                assert!(ra > BASE_MS && mb > BASE_MS, "{}: {ra} / {mb}", script.file);
                assert!(ra.abs_diff(mb) <= 5_000, "{}: clocks {ra} / {mb}", script.file);
            }
            compared += 1;
        }
    }
    println!("conformance: {compared} server-time script calls over {} scripts, {compared} agreed", scripts::ALL.len());
}

/// KEYS with Redis's glob rules, as a command and from a script. Redis lists keys in its hash
/// table's order, so both replies are compared as sorted lists.
#[test]
fn keys_glob_patterns_select_the_same_keys_as_redis() {
    let mut servers = Servers::start();
    servers.pair.reset();
    let names: &[&[u8]] = &[
        b"",
        b"a",
        b"b",
        b"ab",
        b"abc",
        b"abd",
        b"a*",
        b"a?",
        b"[a]",
        b"a\\b",
        b"a-b",
        b"^",
        b"]",
        b"-",
        b"A",
        b"z",
        b"{k}",
        b"ratelimiter:{a}:fw:1",
        b"ratelimiter:{a}:sl:seq",
        b"ratelimiter:{b}:tb",
        b"\xff",
        b"\xc3\xa9",
        b"a\x00b",
        b"hello",
        b"hallo",
        b"hxllo",
        b"hllo",
        b"heeello",
    ];
    for name in names {
        servers.both(&[vec![s("SET"), name.to_vec(), s("v")]]);
    }
    servers.both(&[vec![s("SET"), b"a".repeat(1001), s("v")], vec![s("SET"), b"a".repeat(1002), s("v")]]);
    // Already past its deadline: KEYS must skip it on both.
    servers.both(&[cmd(&[b"SET", b"gone", b"v", b"PXAT", b"1"])]);
    let mut patterns: Vec<Vec<u8>> = [
        "*",
        "**",
        "",
        "?",
        "??",
        "?*",
        "a*",
        "*b",
        "a*b",
        "a*c*",
        "h?llo",
        "h*llo",
        "h[ae]llo",
        "h[^e]llo",
        "h[a-b]llo",
        "h[b-a]llo",
        "[abc",
        "a[",
        "[",
        "[^",
        "[]",
        "[]a]",
        "\\*",
        "a\\*",
        "a\\",
        "\\",
        "[\\]]",
        "[a-]",
        "[-a]",
        "*:{a}:*",
        "ratelimiter:\\{a\\}*",
        "*seq",
        "[\u{ff}-a]",
        "[a-z]",
        "*\u{e9}*",
        "a?b",
        "*gone*",
        "g*",
    ]
    .iter()
    .map(|p| p.as_bytes().to_vec())
    .collect();
    patterns.push(b"[\xff-a]".to_vec());
    patterns.push(b"a*".repeat(1001));
    patterns.push(b"a*".repeat(1002));
    let mut rng = SmallRng::seed_from_u64(env_number("CONFORMANCE_SEED").unwrap_or(7));
    let alphabet: &[u8] = b"ab*?[]^-\\{}:eh\xff";
    for _ in 0..400 {
        let len = rng.random_range(0..8);
        patterns.push((0..len).map(|_| *pick(&mut rng, alphabet)).collect());
    }
    let sorted = |v: &V| match v {
        V::Array(Some(items)) => {
            let mut items = items.clone();
            items.sort();
            Some(items)
        }
        _ => None,
    };
    let mut compared = 0;
    for pattern in &patterns {
        let commands = [
            vec![s("KEYS"), pattern.clone()],
            vec![s("EVAL"), s("return redis.call('KEYS', ARGV[1])"), s("0"), pattern.clone()],
        ];
        for command in commands {
            let (r, m) = servers.both(std::slice::from_ref(&command));
            let (a, b) = (sorted(&r[0].1), sorted(&m[0].1));
            assert!(a.is_some(), "{}: {}", show_cmd(&command), show(&r[0].0));
            assert_eq!(a, b, "{}\nredis: {}\nmodel: {}", show_cmd(&command), show(&r[0].0), show(&m[0].0));
            compared += 1;
        }
    }
    println!("conformance: {compared} KEYS patterns, {compared} agreed");
}

/// Inside a script Redis 7.0 judges expiry by the script's start time, but computes relative
/// deadlines, "already past" deadlines and PTTL from the clock read at that moment. A script
/// that spins 20 ms on TIME makes the two differ by far more than the servers' timing noise.
#[test]
fn inside_a_script_deadlines_and_ttls_use_the_clock_read_now() {
    let mut servers = Servers::start();
    servers.pair.reset();
    let script = r#"
local function now_ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local function spin(ms) local s = now_ms() while now_ms() - s <= ms do end end
redis.call('SET', KEYS[1], 1, 'PX', 5)
redis.call('SET', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], 5)
spin(20)
local out = {redis.call('GET', KEYS[1]) or false, redis.call('PTTL', KEYS[1]), redis.call('EXISTS', KEYS[2]),
             redis.call('PTTL', KEYS[2])}
redis.call('SET', KEYS[3], 1)
out[#out + 1] = redis.call('PEXPIREAT', KEYS[3], now_ms() - 10)
out[#out + 1] = redis.call('EXISTS', KEYS[3])
redis.call('SET', KEYS[4], 1, 'PX', 100000)
out[#out + 1] = redis.call('SET', KEYS[4], 2, 'NX') or false
out[#out + 1] = redis.call('INCR', KEYS[4])
return out
"#;
    let command = vec![s("EVAL"), s(script), s("4"), s("a"), s("b"), s("c"), s("d")];
    let (r, m) = servers.both(std::slice::from_ref(&command));
    assert_eq!(show(&r[0].0), show(&m[0].0));
    // Alive by the frozen time, TTL 0 by the clock; a deadline 10 ms ago deletes at once.
    assert_eq!(render(&r[0].1), "['1', 0, 1, 0, 1, 0, nil, 2]", "{}", show(&r[0].0));
    println!("conformance: 1 script timing case, 1 agreed");
}
