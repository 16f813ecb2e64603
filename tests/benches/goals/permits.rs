//! Goal 11: what a concurrency limit costs Redis per request, an acquire and its release (two
//! calls of `lua/concurrency.lua`, or of the module's `RATELIMIT.CONCURRENCY` on a server that
//! loaded it), against the least a stateful script costs, one `GET` and one `SET PX` (with a
//! `TIME` first on Redis's clock), measured the same way on the same server in the same run.
//!
//! redis-benchmark sends one command with random keys, so it cannot release the permit an
//! acquire took: this goal drives the calls itself, 16 pairs to a pipeline over 100,000 keys,
//! each pair an acquire and then the release of the same holder, and reads `INFO
//! commandstats`' µs per call. The floor goes through the same driver. The least of three
//! interleaved rounds counts (the machines are shared: the least is the least disturbed).
//!
//! The goal is judged on keys with no other holder, as the floor runs on keys it finds empty;
//! beside it the row gives the same pair on keys that hold 8 requests in flight already.

use redis_ratelimit::harness::algo::concurrency::PermitOp;

use super::cost::{FLOOR, FLOOR_TIME};
use super::support::*;
use super::*;

pub(super) const ROUNDS: usize = 3;
/// Requests to a pipeline.
const PIPELINE: usize = 16;
/// A fixed caller's time (ms) for the caller's-clock rows: every lease lives a minute, so one
/// instant serves the whole run.
pub(super) const NOW_MS: u64 = 1_700_000_000_000;

/// The key of request `i`: spread over [`KEYS`] keys, every request's own most of the time.
fn key_of(i: usize) -> String {
    format!("rl:{{k{}}}:c=1000:permits", i.wrapping_mul(7_919) % KEYS)
}

/// What a row sends: a script (by EVALSHA) or a command of the module.
#[derive(Clone, Copy)]
pub(super) enum Sent {
    Script(&'static str),
    Command(&'static str),
}

/// Redis µs per call `sent` over `n` requests, each request the calls `calls(i)` makes (their
/// KEYS and ARGV), on keys that each hold `others` holders besides (see [`fill`]).
pub(super) fn usec_per_call(
    conn: &mut redis::Connection,
    sent: Sent,
    n: usize,
    others: usize,
    calls: impl Fn(usize) -> Vec<(Vec<String>, Vec<String>)>,
) -> f64 {
    flush(conn);
    fill(conn, others);
    let (name, stat) = match sent {
        Sent::Script(source) => {
            let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(source).query(conn).expect("SCRIPT LOAD");
            (sha, "evalsha".to_owned())
        }
        Sent::Command(command) => (command.to_owned(), command.to_lowercase()),
    };
    for start in (0..n).step_by(PIPELINE) {
        let mut pipe = redis::pipe();
        for i in start..(start + PIPELINE).min(n) {
            for (keys, args) in calls(i) {
                match sent {
                    Sent::Script(_) => pipe.cmd("EVALSHA").arg(&name).arg(keys.len()),
                    Sent::Command(_) => pipe.cmd(&name),
                };
                pipe.arg(keys).arg(args).ignore();
            }
        }
        pipe.query::<()>(conn).expect("the pipeline runs");
    }
    let stats = commandstats(conn);
    let (calls, usec) = stats.iter().find(|s| s.0 == stat).map_or((0.0, 0.0), |s| (s.1, s.2));
    assert!(calls > 0.0, "no {stat} was counted");
    usec / calls
}

/// Gives every permits key `others` holders whose leases outlast the run on either clock, as
/// the keys of a busy service hold the requests in flight (sorted-set commands, which
/// `commandstats` counts apart from the calls measured).
fn fill(conn: &mut redis::Connection, others: usize) {
    /// Past any clock a run reads (the year 2096), in ms.
    const FAR: u64 = 4_000_000_000_000;
    if others == 0 {
        return;
    }
    for start in (0..KEYS).step_by(1_000) {
        let mut pipe = redis::pipe();
        for k in start..(start + 1_000).min(KEYS) {
            let key = key_of(k);
            let members: Vec<(u64, String)> = (0..others).map(|h| (FAR, format!("other.{h}"))).collect();
            pipe.cmd("ZADD").arg(&key).arg(members).ignore();
            pipe.cmd("PEXPIRE").arg(&key).arg(3_600_000).ignore();
        }
        pipe.query::<()>(conn).expect("the holders are written");
    }
}

/// The floor's request: one call of the floor script on the request's key.
pub(super) fn floor(i: usize) -> Vec<(Vec<String>, Vec<String>)> {
    vec![(vec![key_of(i)], Vec::new())]
}

/// A pair's request: the acquire and the release of one holder, on `now_ms` (None: Redis's).
fn pair(now_ms: Option<u64>) -> impl Fn(usize) -> Vec<(Vec<String>, Vec<String>)> + Copy {
    move |i: usize| {
        let (key, holder) = (key_of(i), format!("holder.{i:x}"));
        [PermitOp::Acquire, PermitOp::Release]
            .map(|op| {
                let call = scripts::permit_invocation(&key, now_ms, 1_000, 60_000, &holder, op);
                (call.keys, call.args)
            })
            .to_vec()
    }
}

/// Holders already on each key in the busy measurement: requests in flight beside the pair's.
const BUSY: usize = 8;

/// The µs of the floor, of a pair on keys with no other holder and of a pair on keys with
/// [`BUSY`] others, per clock (the caller's, then Redis's) on `server`, the pair sent as `sent`.
/// The goal is the pair on free keys, which is what the floor is measured on (keys it finds
/// empty); the busy pair shows what holders beside it add (the trim, and reading the last lease
/// to keep the key's TTL).
fn measure(server: &RedisServer, sent: Sent) -> [[f64; 3]; 2] {
    let n = scaled(100_000);
    let mut conn = server.client().expect("connect");
    let mut us = [[f64::INFINITY; 3]; 2];
    for _ in 0..ROUNDS {
        for (row, (floor_source, now_ms)) in us.iter_mut().zip([(FLOOR, Some(NOW_MS)), (FLOOR_TIME, None)]) {
            row[0] = row[0].min(usec_per_call(&mut conn, Sent::Script(floor_source), n, 0, floor));
            // Two calls per request: the pair costs twice the µs per call.
            row[1] = row[1].min(2.0 * usec_per_call(&mut conn, sent, n, 0, pair(now_ms)));
            row[2] = row[2].min(2.0 * usec_per_call(&mut conn, sent, n, BUSY, pair(now_ms)));
        }
    }
    flush(&mut conn);
    us
}

pub(crate) fn permits(server: &RedisServer) -> Vec<Goal> {
    let mut rows = vec![("script", measure(server, Sent::Script(scripts::CONCURRENCY)))];
    match redis_tests::build_module("release") {
        Ok(module) => {
            let server = RedisServer::start_real_with_module(&module).expect("redis-server loads the module");
            rows.push(("module", measure(&server, Sent::Command(scripts::CONCURRENCY_MODULE_COMMAND))));
        }
        Err(e) => println!("  permits: no module row ({e})"),
    }
    let mut goals = Vec::new();
    for (by, us) in rows {
        for ([floor_us, pair_us, busy_us], (clock, label)) in
            us.into_iter().zip([("caller's clock", "GET+SET PX"), ("Redis's clock", "TIME+GET+SET PX")])
        {
            let ratio = pair_us / floor_us;
            goals.push(Goal {
                what: format!("Redis us per request, concurrency limit ({by}): acquire + release, {clock}"),
                measured: format!("{pair_us:.2} us per pair ({busy_us:.2} beside {BUSY} other holders)"),
                reference: format!("{label} script: {floor_us:.2} us"),
                ratio,
                goal: "<= 2.5x",
                met: ratio <= 2.5,
                note: match (ratio <= 2.5, by) {
                    (true, _) => String::new(),
                    (false, "script") => format!(
                        "{:.0}% over: two calls where the floor makes one, each converting 5 arguments and a \
                         5-integer reply; the acquire counts the holders (ZCARD), adds its own (ZADD, which \
                         makes the key) and gives the key a TTL (PEXPIRE), the release counts, trims the ended \
                         leases (ZREMRANGEBYSCORE) and removes its holder (ZREM, which drops the key): six \
                         commands where the floor runs two",
                        (ratio / 2.5 - 1.0) * 100.0
                    ),
                    (false, _) => format!(
                        "{:.0}% over: two commands where the floor makes one call, each reading the holders and \
                         writing through Redis's own sorted-set commands (ZRANGEBYSCORE, then ZADD or ZREM, and \
                         ZREMRANGEBYSCORE when a lease has ended), which the module API cannot do natively",
                        (ratio / 2.5 - 1.0) * 100.0
                    ),
                },
            });
        }
    }
    goals
}
