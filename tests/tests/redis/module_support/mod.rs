//! What the module's conformance suites share: a server with the module loaded, generated
//! quotas and foreign state, every key's state read back, and the TTL comparison.

// Real Redis keeps real time: TTLs are compared within what a step took.
#![allow(clippy::disallowed_methods, dead_code)]

use rand::rngs::SmallRng;
use rand::Rng;
use redis::Value;
use redis_ratelimit::harness::scripts;
use redis_ratelimit::{Algorithm, Quota};
use redis_tests::RedisServer;
use std::time::Duration;

pub const BASE_MS: u64 = 1_700_000_000_000;

pub fn server() -> RedisServer {
    let module = redis_tests::build_module("dev").expect("the Redis module builds");
    RedisServer::start_real_with_module(&module).expect("redis-server loads the module")
}

/// The two servers [`real_and_model`] starts; both stop when it is dropped.
pub struct Servers(RedisServer, crate::conformance_support::ModelServer);

/// A real `redis-server` with the module loaded and the Redis model, and a connection to each
/// (Redis's first): what the suites comparing the model's commands with Redis's start. Keep the
/// servers while the connections are used.
pub fn real_and_model() -> (Servers, redis::Connection, redis::Connection) {
    let server = server();
    let model = crate::conformance_support::start_model();
    let real = server.client().expect("connect");
    let modeled = redis::Client::open(format!("redis://{}/", model.addr))
        .and_then(|c| c.get_connection())
        .expect("connect to the model");
    (Servers(server, model), real, modeled)
}

/// Deletes, on both sides, every pair of keys (`a[i]`, `b[i]`) of which either expires within
/// `ms`. The two sides of a comparison set their expiries up to a millisecond or two apart (a
/// script's clock stands still while it runs, a module command reads it as it writes), so a key
/// that expires just before the next request could be gone on one side and not on the other:
/// a race of the test's real time, not a difference of the two. Expiring such keys on both
/// sides first keeps the race out; a TTL that differs is still caught where it is written.
pub fn expire_both_soon(conn: &mut redis::Connection, a: &[String], b: &[String], ms: i64) {
    let mut pipe = redis::pipe();
    for key in a.iter().chain(b) {
        pipe.cmd("PTTL").arg(key);
    }
    let ttls: Vec<i64> = pipe.query(conn).expect("PTTL");
    let (ta, tb) = ttls.split_at(a.len());
    let soon = |t: i64| (0..=ms).contains(&t);
    let going: Vec<&String> = ta
        .iter()
        .zip(tb)
        .enumerate()
        .filter(|(_, (x, y))| soon(**x) || soon(**y))
        .flat_map(|(i, _)| [&a[i], &b[i]])
        .collect();
    if !going.is_empty() {
        let _: () = redis::cmd("DEL").arg(&going).query(conn).expect("DEL");
    }
}

/// Holds a script's reply `s` and its command's `m` to one another: equal, or errors of one
/// kind whose script error wraps the command's text (Redis prefixes a script's errors).
pub fn assert_same_reply(s: &Reply, m: &Reply, at: &str) {
    match (s, m) {
        (Err((s_code, s_text)), Err((m_code, m_text))) => {
            assert!(s_code == m_code && s_text.contains(m_text.as_str()), "{at}: {s:?} / {m:?}")
        }
        _ => assert_eq!(s, m, "{at}"),
    }
}

/// Sends `command` with `call`'s keys and arguments on `conn`: its reply, or its error.
pub fn send(conn: &mut redis::Connection, command: &str, call: &scripts::Invocation) -> Reply {
    let mut pipe = redis::pipe();
    pipe.ignore_errors().cmd(command).arg(&call.keys).arg(&call.args);
    let replies: Vec<Value> = pipe.query(conn).expect("a reply");
    read(&replies[0])
}

/// A quota for `algorithm` small enough that generated requests meet its limit often.
pub fn quota(rng: &mut SmallRng, algorithm: Algorithm) -> Quota {
    let q = Quota::new(rng.random_range(1..=6), Duration::from_millis(rng.random_range(100..=2_000)));
    if algorithm.is_bucket() {
        q.with_burst(rng.random_range(1..=6))
    } else {
        q
    }
}

/// A number someone else might have written where a count or time is kept, around `n`: text,
/// fractions, negatives, past what a double holds exactly, and `n` itself written in the forms
/// only Lua's `tonumber` reads (blanks, a fraction of zero, an exponent, hexadecimal).
pub fn foreign_number(rng: &mut SmallRng, n: u64) -> String {
    match rng.random_range(0..11) {
        0 => "abc".into(),
        1 => format!("{n}.5"),
        2 => "-1".into(),
        3 => String::new(),
        4 => "4503599627370496".into(),
        5 => format!(" {n}\t"),
        6 => format!("{n}.0"),
        7 if n % 10 == 0 && n > 0 => format!("{}e1", n / 10),
        8 => format!("0x{n:x}"),
        9 => format!("0{n}"),
        _ => n.to_string(),
    }
}

/// Leaves the same foreign state under each of `stems` on each of `conns`, in one transaction
/// per connection when `atomic` (so every copy's TTL starts at one instant there; the model has
/// no MULTI): a key of another type, or a value the algorithm's script might read.
pub fn plant(
    conns: &mut [&mut redis::Connection],
    rng: &mut SmallRng,
    algorithm: Algorithm,
    q: &Quota,
    now: u64,
    stems: &[&str],
    atomic: bool,
) {
    let keys = |stem: &str| scripts::state_keys(algorithm, q, stem, now);
    // A window algorithm's keys are windows N-2..=N+1 around now's N: mostly N and N-1, the two
    // a request reads.
    let pick = match keys(stems[0]).len() {
        1 => 0,
        n => {
            if rng.random_bool(0.8) {
                rng.random_range(1..=2)
            } else {
                rng.random_range(0..n)
            }
        }
    };
    let roll = rng.random_range(0..10);
    let value = match algorithm {
        Algorithm::Gcra => {
            let tat = (now + rng.random_range(0..2_000)) * 1_000;
            foreign_number(rng, tat)
        }
        Algorithm::TokenBucket => {
            let (units, ts) = (rng.random_range(0..=q.burst() * q.period_ms() + 5), rng.random_range(0..1_000));
            format!("{}:{}", foreign_number(rng, units), foreign_number(rng, now - 500 + ts))
        }
        _ => {
            let count = rng.random_range(0..=q.limit() + 1);
            foreign_number(rng, count)
        }
    };
    let member_at = now.saturating_add_signed(rng.random_range(-3_000..200));
    let mut pipe = redis::pipe();
    if atomic {
        pipe.atomic();
    }
    for stem in stems {
        let key = &keys(stem)[pick];
        pipe.cmd("DEL").arg(key).ignore();
        match (roll, algorithm) {
            (0, _) => pipe.cmd("HSET").arg(key).arg("u").arg(1).ignore(),
            (1, _) => pipe.cmd("RPUSH").arg(key).arg("x").ignore(),
            (2..=4, Algorithm::TokenBucket) => {
                // The hash this script once wrote, read once and replaced.
                let units = rng.clone().random_range(0..=q.burst() * q.period_ms());
                pipe.cmd("HSET").arg(key).arg("u").arg(units).arg("t").arg(now).ignore()
            }
            (_, Algorithm::SlidingLog) => {
                pipe.cmd("ZADD").arg(key).arg(member_at).arg(format!("{member_at}:7")).ignore()
            }
            _ => pipe.cmd("SET").arg(key).arg(&value).arg("PX").arg(60_000).ignore(),
        };
    }
    for conn in conns {
        let _: () = pipe.query(*conn).expect("plant");
    }
}

/// Everything under `keys`: each key's type, TTL and value, read by every command that reads
/// a type (the others answer WRONGTYPE, alike on both sides); in one transaction when `atomic`,
/// so every TTL is read at one instant.
pub fn state(conn: &mut redis::Connection, keys: &[String], atomic: bool) -> Vec<(Value, i64, Vec<Value>)> {
    let mut pipe = redis::pipe();
    if atomic {
        pipe.atomic();
    }
    pipe.ignore_errors();
    for key in keys {
        pipe.cmd("TYPE").arg(key).cmd("PTTL").arg(key);
        pipe.cmd("GET").arg(key).cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES");
        pipe.cmd("HGETALL").arg(key).cmd("LRANGE").arg(key).arg(0).arg(-1);
    }
    let replies: Vec<Value> = pipe.query(conn).expect("read the state");
    replies
        .chunks(6)
        .map(|r| {
            let ttl = redis::from_redis_value_ref(&r[1]).expect("PTTL");
            (r[0].clone(), ttl, r[2..].to_vec())
        })
        .collect()
}

/// A reply as integers, or a server error's code and text.
pub fn read(v: &Value) -> Result<Vec<i64>, (String, String)> {
    match v {
        Value::Array(items) => Ok(items.iter().map(|i| redis::from_redis_value_ref(i).expect("an integer")).collect()),
        Value::ServerError(e) => Err((e.code().to_owned(), e.details().unwrap_or_default().to_owned())),
        other => Err(("?".into(), format!("{other:?}"))),
    }
}

/// A reply: integers, or a server error's code and text.
pub type Reply = Result<Vec<i64>, (String, String)>;

/// The TTLs of two sides, compared pair by pair: within `slack` ms, the longest a step of the
/// sequence took (on a quiet machine, a millisecond or two). A loaded machine can also hand a
/// command a clock reading cached a few milliseconds before its transaction began, so a pair
/// past the slack is counted as late: a sequence may have a few, never one a tenth of a second
/// off, and never a key with an expiry on one side only. A TTL bug (a write without its
/// expiry, an expiry from the wrong instant) shows on every write it touches.
pub struct TtlCheck {
    slack: i64,
    pairs: u32,
    late: Vec<String>,
}

impl TtlCheck {
    pub fn new() -> Self {
        TtlCheck { slack: 2, pairs: 0, late: Vec::new() }
    }

    /// A step took `ms` (rounded up, with a millisecond for PTTL's own rounding).
    pub fn took(&mut self, ms: i64) {
        self.slack = self.slack.max(ms);
    }

    pub fn pair(&mut self, a: i64, b: i64, at: &str) {
        assert!((a < 0) == (b < 0) && (a - b).abs() <= 100, "{at}: TTLs {a} / {b}");
        if a < 0 {
            return;
        }
        self.pairs += 1;
        if (a - b).abs() > self.slack {
            self.late.push(format!("{at}: TTLs {a} / {b}, slack {}", self.slack));
        }
    }

    pub fn check(&self, what: &str) {
        let allowed = (self.pairs / 100).max(2) as usize;
        let (n, first) = (self.late.len(), &self.late[..self.late.len().min(5)]);
        assert!(n <= allowed, "{what}: {n} of {} expiries compared late, the first: {first:?}", self.pairs);
    }
}
