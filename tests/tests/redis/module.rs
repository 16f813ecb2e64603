//! The Redis module's commands are their scripts: on one `redis-server` with the module loaded,
//! every request of long generated sequences goes once to the algorithm's script and once to
//! its native command, on keys of their own, in one MULTI/EXEC (so Redis expires both sides'
//! keys at the same instant). The replies must be equal, and so must what each left in Redis:
//! every key's type, value (a string, a sorted set's members and scores, a hash's fields) and
//! TTL, to the millisecond or two the two calls lie apart. Before some requests both sides get
//! the same foreign state: text, fractions, negatives, counts in forms only Lua reads (`1e3`,
//! `0x10`, blanks around them), which `INCRBY` then refuses, an old token-bucket hash, a log's
//! stray member, or a key of another type (WRONGTYPE): each must read it as the other does.

// Real Redis keeps real time: a transaction's time bounds how far apart its expiries are set,
// and the replication test decides at the present.
#![allow(clippy::disallowed_methods)]

use crate::module_support;

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use redis_ratelimit::harness::algo::lease::LeaseArgs;
use redis_ratelimit::harness::mode_scripts::{lease_module_command, LeaseRequest};
use redis_ratelimit::harness::rules_script::{self, RuleCall, RulesRequest};
use redis_ratelimit::harness::scripts::{self, Request};
use redis_ratelimit::{Algorithm, Quota};
use redis_tests::RedisServer;

use module_support::{
    assert_same_reply, expire_both_soon, plant, quota, read, real_and_model, send, server, state, Reply, TtlCheck,
    BASE_MS,
};

/// One request to the script on `stems[0]` and to the command on `stems[1]`, in one
/// transaction: the two replies, and how long the transaction took to answer (ms, rounded up),
/// which bounds how far apart on Redis's clock the two set their keys' expiries.
fn both(conn: &mut redis::Connection, req: &Request<'_>, stems: [&str; 2]) -> ([Reply; 2], i64) {
    let [s, m] = stems.map(|stem| Request { stem, ..*req }.invocation_of_stem());
    let mut pipe = redis::pipe();
    pipe.atomic().ignore_errors();
    pipe.cmd("EVAL").arg(scripts::for_algorithm(req.algorithm).source).arg(1).arg(&s.keys).arg(&s.args);
    pipe.cmd(scripts::module_command(req.algorithm)).arg(&m.keys).arg(&m.args);
    let sent = std::time::Instant::now();
    let replies: Vec<Value> = pipe.query(conn).expect("EXEC");
    // Rounded up, and a millisecond more: each PTTL is rounded to its millisecond.
    ([read(&replies[0]), read(&replies[1])], sent.elapsed().as_millis() as i64 + 2)
}

/// Holds the two sides of one request equal: replies (an error on both sides, of the same kind,
/// the script's wrapping the command's text), and every key's type, value and TTL (`ttls`).
fn agree(
    conn: &mut redis::Connection,
    req: &Request<'_>,
    stems: [&str; 2],
    now: u64,
    ttls: &mut TtlCheck,
    at: &str,
) -> bool {
    let ([s, m], took) = both(conn, req, stems);
    ttls.took(took);
    assert_same_reply(&s, &m, at);
    let [s_keys, m_keys] = stems.map(|stem| scripts::state_keys(req.algorithm, req.quota, stem, now));
    let both_states = state(conn, &[s_keys, m_keys].concat(), true);
    let (s_state, m_state) = both_states.split_at(both_states.len() / 2);
    for (i, ((s_type, s_ttl, s_value), (m_type, m_ttl, m_value))) in s_state.iter().zip(m_state).enumerate() {
        assert_eq!((s_type, s_value), (m_type, m_value), "{at}: state key {i}");
        ttls.pair(*s_ttl, *m_ttl, &format!("{at}: key {i}"));
    }
    s.is_err()
}

/// One generated request: on key `key` (of three) at `now` (the caller's clock), costing
/// `cost`, with foreign state to plant under its key first when `plant`.
struct Step {
    key: u64,
    now: u64,
    cost: u64,
    plant: bool,
    /// Where it is, for messages.
    at: String,
}

/// 120 requests of `seed` under one generated quota of `algorithm`, each handed to `on` with
/// the generator (for planting) and the quota: bursts (the same key again in the same
/// millisecond), and otherwise a key of three at a time mostly later, sometimes earlier
/// (another instance's clock).
fn generate(algorithm: Algorithm, seed: u64, mut on: impl FnMut(&mut SmallRng, &Quota, Step)) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let q = quota(&mut rng, algorithm);
    let (mut now, mut key) = (BASE_MS, 0);
    for i in 0..120 {
        if !rng.random_bool(0.2) {
            now = now.saturating_add_signed(if rng.random_bool(0.1) {
                -rng.random_range(0..300)
            } else {
                rng.random_range(0..q.period_ms() as i64 / 2)
            });
            key = rng.random_range(0..3);
        }
        let plant = rng.random_bool(0.08);
        let cost = rng.random_range(0..=q.capacity(algorithm));
        let at = format!("{algorithm} seed {seed} step {i} key {key} {q:?} now {now} cost {cost}");
        on(&mut rng, &q, Step { key, now, cost, plant, at });
    }
}

#[test]
fn every_command_is_its_script_on_the_callers_clock() {
    let server = server();
    let mut conn = server.client().expect("connect");
    for algorithm in Algorithm::ALL {
        let (mut compared, mut planted, mut refused) = (0, 0, 0);
        let mut ttls = TtlCheck::new();
        for seed in 0..12u64 {
            generate(algorithm, seed, |rng, q, step| {
                let stems = [format!("s:{{k{seed}-{}}}:", step.key), format!("m:{{k{seed}-{}}}:", step.key)];
                let stems = [stems[0].as_str(), stems[1].as_str()];
                if step.plant {
                    plant(&mut [&mut conn], rng, algorithm, q, step.now, &stems, true);
                    planted += 1;
                }
                let req = Request { algorithm, quota: q, stem: "", now_ms: Some(step.now), cost: step.cost };
                let [s_keys, m_keys] = stems.map(|stem| scripts::state_keys(algorithm, q, stem, step.now));
                expire_both_soon(&mut conn, &s_keys, &m_keys, 5);
                refused += u32::from(agree(&mut conn, &req, stems, step.now, &mut ttls, &step.at));
                compared += 1;
            });
        }
        ttls.check(&format!("{algorithm}"));
        println!("module: {compared} {algorithm} requests agreed with the script ({planted} on foreign state, {refused} refused by both)");
        assert!(planted > 30 && refused > 0, "{algorithm}: foreign state met too rarely to test anything");
    }
}

/// The Redis model runs the module's commands (the module's own code, over the model's
/// commands) as `redis-server --loadmodule` does: on the same generated requests and foreign
/// state, the same replies, errors included, and the same keys, types, values and TTLs.
#[test]
fn the_model_runs_every_command_as_redis_with_the_module_does() {
    let (_servers, mut real, mut modeled) = real_and_model();
    for algorithm in Algorithm::ALL {
        let (mut compared, mut refused) = (0, 0);
        let mut ttls = TtlCheck::new();
        for seed in 0..6u64 {
            generate(algorithm, seed, |rng, q, step| {
                let stem = format!("c:{{k{seed}-{}}}:", step.key);
                let started = std::time::Instant::now();
                if step.plant {
                    plant(&mut [&mut real, &mut modeled], rng, algorithm, q, step.now, &[&stem], false);
                }
                let req = Request { algorithm, quota: q, stem: &stem, now_ms: Some(step.now), cost: step.cost };
                let (call, command) = (req.invocation_of_stem(), scripts::module_command(algorithm));
                let (on_real, on_model) = (send(&mut real, command, &call), send(&mut modeled, command, &call));
                let keys = scripts::state_keys(algorithm, q, &stem, step.now);
                let (real_state, model_state) = (state(&mut real, &keys, false), state(&mut modeled, &keys, false));
                // Each server sets and reads its expiries on its own clock: as far apart as
                // this step's calls took, or an earlier step's.
                ttls.took(started.elapsed().as_millis() as i64 + 2);
                assert_eq!(on_real, on_model, "{}", step.at);
                for (i, ((r_type, r_ttl, r_value), (m_type, m_ttl, m_value))) in
                    real_state.iter().zip(&model_state).enumerate()
                {
                    assert_eq!((r_type, r_value), (m_type, m_value), "{}: state key {i}", step.at);
                    ttls.pair(*r_ttl, *m_ttl, &format!("{}: key {i}", step.at));
                }
                refused += u32::from(on_real.is_err());
                compared += 1;
            });
        }
        ttls.check(&format!("{algorithm} on the model"));
        println!("module: {compared} {algorithm} requests alike on the model and on Redis ({refused} refused by both)");
        assert!(refused > 0, "{algorithm}: no error compared");
    }
}

/// On Redis's clock (no time argument) both read the server's clock: a burst is admitted and
/// the next refused by both, each reporting the same instant to within the transaction's time.
#[test]
fn every_command_decides_on_redis_clock_as_its_script_does() {
    let server = server();
    let mut conn = server.client().expect("connect");
    let q = Quota::new(3, Duration::from_secs(60)).with_burst(3);
    for algorithm in Algorithm::ALL {
        let req = Request { algorithm, quota: &q, stem: "", now_ms: None, cost: 1 };
        for n in 0..4 {
            let stems = [format!("s:{{{algorithm}}}:"), format!("m:{{{algorithm}}}:")];
            let ([s, m], took) = both(&mut conn, &req, [stems[0].as_str(), stems[1].as_str()]);
            let (s, m) = (s.expect("the script decides"), m.expect("the command decides"));
            assert_eq!((s[0], s[1]), (m[0], m[1]), "{algorithm} request {n}: allowed and remaining: {s:?} / {m:?}");
            assert_eq!(m[0], i64::from(n < 3), "{algorithm} request {n}: {m:?}");
            // As far apart as the transaction took (on a loaded machine, a few ms).
            let near = |a: i64, b: i64| (a - b).abs() <= took + 1;
            assert!(near(s[4], m[4]) && near(s[3], m[3]), "{algorithm} request {n}: {s:?} / {m:?} in {took} ms");
            assert!(m[4] > BASE_MS as i64, "{algorithm}: Redis's clock, in ms: {m:?}");
        }
    }
}

/// Bad arguments are refused with an error naming what was wrong, and nothing is written.
#[test]
fn the_commands_refuse_bad_arguments_by_name() {
    let server = server();
    let mut conn = server.client().expect("connect");
    for (command, args, says) in [
        ("RATELIMIT.GCRA", &["k", "", "1000"][..], "wrong number of arguments"),
        ("RATELIMIT.GCRA", &["k", "x", "1000", "3", "1"], "now_ms must be a non-negative integer"),
        ("RATELIMIT.GCRA", &["k", "", "-5", "3", "1"], "interval_us must be a non-negative integer"),
        ("RATELIMIT.GCRA", &["k", "", "1000", "3", "9"], "cost 9 exceeds the burst 3"),
        ("RATELIMIT.GCRA", &["k", "", "1000", "0", "1"], "burst"),
        ("RATELIMIT.GCRA", &["k", "", "0", "3", "1"], "interval_us must be at least 1"),
        ("RATELIMIT.GCRA", &["k", "4503599627370496", "1000", "3", "1"], "now_ms 4503599627370496 is past 2^52"),
        ("RATELIMIT.FW", &["k", "", "5", "1000"], "wrong number of arguments"),
        ("RATELIMIT.FW", &["k", "", "5", "0", "1"], "period must be at least 1 ms"),
        ("RATELIMIT.FW", &["k", "", "5", "1000", "6"], "cost 6 exceeds the limit 5"),
        ("RATELIMIT.SW", &["k", "", "1125899906842624", "1000", "1"], "exceeds 2^50"),
        ("RATELIMIT.SW", &["k", "", "5", "1000", "1.5"], "cost must be a non-negative integer"),
        ("RATELIMIT.SL", &["k", "", "1000001", "1000", "1"], "a sliding log stores one member per admitted unit"),
        ("RATELIMIT.SL", &["k", "", "0", "1000", "0"], "limit"),
        ("RATELIMIT.TB", &["k", "", "5", "1000", "0", "1"], "burst"),
        ("RATELIMIT.TB", &["k", "", "5", "1000", "3", "4"], "cost 4 exceeds the burst 3"),
        ("RATELIMIT.TB", &["k", "", "5", "x", "3", "1"], "period_ms must be a non-negative integer"),
    ] {
        let err = redis::cmd(command).arg(args).query::<Value>(&mut conn).expect_err("refused");
        assert!(err.to_string().contains(says), "{command} {args:?}: {err}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");
}

/// Writes are replicated as their effect (`SET ... PXAT`, `SET ... KEEPTTL`, `ZADD`,
/// `ZREMRANGEBYSCORE`, `PEXPIREAT`): a replica without the module holds every key with the
/// same value and expiry, after every command (the rules and lease commands among them).
#[test]
fn the_commands_replicate_their_writes_not_themselves() {
    let primary = server();
    let replica = RedisServer::start_real().expect("redis-server");
    let mut p = primary.client().expect("connect");
    let mut r = replica.client().expect("connect");
    // A full sync at once, not after the default 5 s a diskless primary waits for more replicas.
    let _: () = redis::cmd("CONFIG").arg("SET").arg("repl-diskless-sync-delay").arg(0).query(&mut p).expect("CONFIG");
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port()).query(&mut r).expect("REPLICAOF");
    let linked = (0..500).any(|_| {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap_or_default();
        std::thread::sleep(std::time::Duration::from_millis(10));
        info.contains("master_link_status:up")
    });
    assert!(linked, "the replica never linked");
    let q = Quota::new(3, Duration::from_secs(60)).with_burst(3);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis() as u64;
    for algorithm in Algorithm::ALL {
        let stem = format!("m:{{{algorithm}}}:");
        // A first write, a second on top of it (an increment, a member added), and one a
        // window later (a new window; the log trims what left it).
        for (at, cost) in [(now, 1), (now + 10, 1), (now + 60_020, 1)] {
            let call = Request { algorithm, quota: &q, stem: &stem, now_ms: Some(at), cost }.invocation_of_stem();
            let reply: Vec<i64> = redis::cmd(scripts::module_command(algorithm))
                .arg(&call.keys)
                .arg(&call.args)
                .query(&mut p)
                .expect("decides");
            assert_eq!(reply[0], 1, "{algorithm} at {at}: {reply:?}");
        }
        let keys = scripts::state_keys(algorithm, &q, &stem, now + 60_020);
        same_on_the_replica(&mut p, &mut r, &keys, &algorithm.to_string());
    }
    // The rules command (both rules consumed) and the lease commands write through the same
    // replicated writes.
    let stems = ["m:{rules}:a:", "m:{rules}:b:"];
    let items = [(Algorithm::FixedWindow, stems[0]), (Algorithm::Gcra, stems[1])]
        .map(|(algorithm, stem)| RuleCall {
            request: Request { algorithm, quota: &q, stem, now_ms: Some(now), cost: 1 },
            shadow: false,
            block: None,
        })
        .to_vec();
    let call = RulesRequest { items, commit: true }.module_invocation();
    let reply: Vec<i64> =
        redis::cmd(rules_script::MODULE_COMMAND).arg(&call.keys).arg(&call.args).query(&mut p).expect("decides");
    assert_eq!(reply[..2], [1, 2], "both rules admit: {reply:?}");
    let mut keys = scripts::state_keys(Algorithm::FixedWindow, &q, stems[0], now);
    keys.extend(scripts::state_keys(Algorithm::Gcra, &q, stems[1], now));
    for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
        let args = LeaseArgs { lifetime_ms: 100, horizon_ms: 400, want: 2, need: 1, give_back: 0, written: (0, 0) };
        let lease = LeaseRequest { algorithm, quota: &q, stem: "m:{lease}:", now_ms: Some(now), args };
        let call = lease.invocation().expect("it leases");
        let command = lease_module_command(algorithm).expect("a lease command");
        let reply: Vec<i64> = redis::cmd(command).arg(&call.keys).arg(&call.args).query(&mut p).expect("leases");
        assert_eq!(reply[0], 2, "{algorithm}: two units leased: {reply:?}");
        keys.extend(call.keys);
    }
    same_on_the_replica(&mut p, &mut r, &keys, "rules and leases");
}

/// Waits for the replica to acknowledge every write, then holds each of `keys` to the same
/// type, value and expiry (within 50 ms) there as on the primary.
fn same_on_the_replica(p: &mut redis::Connection, r: &mut redis::Connection, keys: &[String], what: &str) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5_000).query(p).expect("WAIT");
    assert_eq!(acked, 1, "{what}: the replica acknowledged the writes");
    let (on_primary, on_replica) = (state(p, keys, true), state(r, keys, true));
    assert!(on_primary.iter().any(|(_, ttl, _)| *ttl > 0), "{what}: something was written: {on_primary:?}");
    for ((p_type, p_ttl, p_value), (r_type, r_ttl, r_value)) in on_primary.iter().zip(&on_replica) {
        assert_eq!((p_type, p_value), (r_type, r_value), "{what}");
        assert!((p_ttl - r_ttl).abs() <= 50, "{what}: the replica's TTL {r_ttl} against the primary's {p_ttl}");
    }
}
