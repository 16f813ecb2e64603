//! What the suite generates: quotas in everyday ranges and near the bounds `Quota::validate`
//! accepts, costs, clock steps, and hostile state written where a script will read.

use rand::rngs::SmallRng;
use rand::Rng;
use redis_ratelimit::harness::scripts;
use redis_ratelimit::{Algorithm, Quota};
use std::time::Duration;

pub const EXACT_MAX: u64 = 1 << 50;

pub fn cmd(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

pub fn s(text: impl ToString) -> Vec<u8> {
    text.to_string().into_bytes()
}

pub fn pick<'a, T>(rng: &mut SmallRng, items: &'a [T]) -> &'a T {
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
    Quota::new(limit, Duration::from_millis(period)).with_burst(burst)
}

/// Quotas near the bounds `Quota::validate` accepts for `algorithm`.
fn huge_quota(rng: &mut SmallRng, algorithm: Algorithm) -> Quota {
    let pow = |e: u32| 1u64 << e;
    let near = |rng: &mut SmallRng, x: u64| x - rng.random_range(0..=2u64.min(x - 1));
    match algorithm {
        Algorithm::FixedWindow => {
            let limit = *pick(rng, &[EXACT_MAX, EXACT_MAX - 1, pow(40), 1]);
            let period = *pick(rng, &[EXACT_MAX, 1_000_000_000_000_000, pow(45), 1]);
            Quota::new(limit, Duration::from_millis(period))
        }
        Algorithm::SlidingWindow => {
            let a = rng.random_range(0..=48);
            let limit = near(rng, pow(a));
            Quota::new(limit.max(1), Duration::from_millis(pow(48) / limit.max(1)))
        }
        Algorithm::SlidingLog => {
            let limit = *pick(rng, &[1_000_000, 999_999, 100_000]);
            let period = *pick(rng, &[EXACT_MAX, 1, pow(40)]);
            Quota::new(limit, Duration::from_millis(period))
        }
        Algorithm::TokenBucket => {
            let a = rng.random_range(0..=50);
            let burst = pow(a);
            let period = EXACT_MAX / burst;
            let limit = *pick(rng, &[1, EXACT_MAX, pow(30), 1_000]);
            Quota::new(limit, Duration::from_millis(period)).with_burst(near(rng, burst).max(1))
        }
        Algorithm::Gcra => {
            let period = *pick(rng, &[EXACT_MAX / 1000, 1, 1_000, pow(30)]);
            let limit = *pick(rng, &[1, period * 1000, (period * 1000).div_ceil(3), 7]);
            let interval = (period * 1000).div_ceil(limit);
            let burst = (EXACT_MAX / interval).max(1);
            Quota::new(limit, Duration::from_millis(period)).with_burst(near(rng, burst).max(1))
        }
        _ => {
            let limit = *pick(rng, &[EXACT_MAX, 1, 3, pow(30)]);
            let period = *pick(rng, &[1, 3, 1_000, EXACT_MAX]);
            let burst = *pick(rng, &[EXACT_MAX, EXACT_MAX - 1, 1, pow(20)]);
            Quota::new(limit, Duration::from_millis(period)).with_burst(burst)
        }
    }
}

pub fn quota(rng: &mut SmallRng, algorithm: Algorithm) -> Quota {
    loop {
        let q = if rng.random_ratio(1, 6) { huge_quota(rng, algorithm) } else { everyday_quota(rng) };
        if q.validate(algorithm).is_ok() {
            return q;
        }
    }
}

pub fn cost(rng: &mut SmallRng, algorithm: Algorithm, q: &Quota) -> u64 {
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

pub fn step(rng: &mut SmallRng, period_ms: u64) -> i64 {
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

/// A script on a key's units, called with the algorithm's KEYS and ARGV, the units in place of
/// the cost, then the algorithm's key suffix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Units {
    /// `lua/refund.lua`: gives them back.
    Refund,
    /// `lua/debit.lua`: charges them whether they fit or not.
    Debit,
}

impl Units {
    pub fn source(self) -> &'static str {
        match self {
            Units::Refund => scripts::REFUND,
            Units::Debit => scripts::DEBIT,
        }
    }
}

pub struct Call {
    pub algorithm: Algorithm,
    pub quota: Quota,
    /// `prefix:{user key}:`, as the store builds it.
    pub stem: String,
    pub now_ms: i64,
    pub cost: u64,
    /// A call of a units script (a refund or a debit of `cost`), instead of the algorithm's.
    pub units: Option<Units>,
    /// A blockable limiter's call (`lua/blockable.lua`): the key's block goes last among KEYS.
    pub blockable: bool,
    /// A call of `lua/block.lua` blocking the key for this many ms (0 lifts the block), instead
    /// of the algorithm's script.
    pub block: Option<u64>,
}

impl Call {
    fn window_index(&self) -> i64 {
        self.now_ms.div_euclid(self.quota.period_ms() as i64)
    }

    /// The stem the store builds for a limiter without a name (`scripts::Request::invocation`):
    /// the user's, then the quota's state name.
    fn state_stem(&self) -> String {
        format!("{}{}:", self.stem, scripts::quota_state(self.algorithm, &self.quota))
    }

    /// The algorithm's key, as the script is called with it.
    fn key(&self) -> String {
        format!("{}{}", self.state_stem(), scripts::key_suffix(self.algorithm))
    }

    /// The key of the user's block.
    fn block_key(&self) -> String {
        scripts::block_key(self.algorithm, &self.state_stem())
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
        let mut inv = request.invocation();
        if let Some(duration) = self.block {
            inv = scripts::block_invocation(&self.block_key(), now, duration);
        } else if self.units.is_some() {
            // A units script's KEYS and ARGV are the algorithm's, then its key suffix.
            inv.args.push(scripts::key_suffix(self.algorithm).to_owned());
        } else if self.blockable {
            inv.keys.push(self.block_key());
        }
        let args: Vec<Vec<u8>> = inv.args.into_iter().map(String::into_bytes).collect();
        (inv.keys.into_iter().map(String::into_bytes).collect(), args)
    }

    /// The keys the script will read, for hostile writes (a blockable limiter's block apart).
    fn read_keys(&self) -> Vec<String> {
        let key = self.key();
        match self.algorithm {
            Algorithm::SlidingWindow => {
                let i = self.window_index();
                vec![format!("{key}:{i}"), format!("{key}:{}", i - 1)]
            }
            _ => vec![key],
        }
    }

    /// A write that leaves something hostile, or a block of its own making, in the user's block:
    /// text, fractions, negative and huge numbers, an end just before or after now, a key of the
    /// wrong type.
    pub fn hostile_block(&self, rng: &mut SmallRng) -> Vec<Vec<u8>> {
        let key = s(self.block_key());
        match rng.random_range(0..6) {
            0 => vec![s("HSET"), key, s("f"), s("v")],
            1 | 2 => vec![s("SET"), key, near_text(rng, self.now_ms, 2_000)],
            _ => vec![s("SET"), key, hostile_text(rng)],
        }
    }

    /// EVALSHA (or EVAL with the source) of this call.
    pub fn command(&self, head: &[u8], script_ref: &[u8]) -> Vec<Vec<u8>> {
        self.command_at(head, script_ref, false)
    }

    pub fn command_at(&self, head: &[u8], script_ref: &[u8], server_time: bool) -> Vec<Vec<u8>> {
        let (keys, args) = self.keys_and_args(server_time);
        let mut c = vec![head.to_vec(), script_ref.to_vec(), s(keys.len())];
        c.extend(keys);
        c.extend(args);
        c
    }

    /// A write that leaves something hostile where the script will read.
    pub fn hostile_write(&self, rng: &mut SmallRng) -> Vec<Vec<u8>> {
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
            Algorithm::FixedWindow => match roll {
                0 => wrong_type(rng, key, "string"),
                // "WINDOW:COUNT" as the script writes it: its own window, the one before or
                // after (a caller whose clock was ahead), a count past the limit, or text.
                1..=5 => {
                    let window = (self.window_index() + rng.random_range(-1..=1)).max(0);
                    let count = match rng.random_range(0..3) {
                        0 => hostile_text(rng),
                        _ => s(rng.random_range(0..=self.quota.limit() + 1)),
                    };
                    let mut value = s(format!("{window}:"));
                    value.extend(count);
                    vec![s("SET"), key, value]
                }
                _ => vec![s("SET"), key, hostile_text(rng)],
            },
            Algorithm::SlidingWindow => match roll {
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
                // "NOW:1" is the form of the script's own names.
                let ours = format!("{now}:1");
                let member = s(pick(rng, &["1", "2", "x", "999", "", ours.as_str()]));
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
                    // The token bucket's own form, "units:ms", and broken forms of it; its old
                    // hash (the HSETs) is read once and replaced.
                    3..=6 if f1 == "u" => {
                        let text = match roll {
                            3 => [v1, b":".to_vec(), v2].concat(),
                            4 => [v1, b":".to_vec()].concat(),
                            5 => [b":".to_vec(), v2].concat(),
                            _ => [v1, b"::".to_vec(), v2].concat(),
                        };
                        vec![s("SET"), key, text]
                    }
                    _ => vec![s("HSET"), key, s(f1), v1, s(f2), v2],
                }
            }
        }
    }
}
