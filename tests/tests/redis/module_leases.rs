//! The module's lease commands are their scripts (`RATELIMIT.LEASE.GCRA` is
//! `lua/lease_gcra.lua`, `RATELIMIT.LEASE.TB` is `lua/lease_token_bucket.lua`): on one
//! `redis-server` with the module loaded, generated lease calls of several instances (each
//! giving back the unspent part of its previous lease, now and then late or never) go once to
//! the script and once to the command, on keys of their own, in one MULTI/EXEC. The replies
//! must be equal, and so must the key's type, value and TTL; some calls meet foreign state
//! first. The Redis model runs the commands as Redis does, on the same calls.

// Real Redis keeps real time: TTLs are compared within what a step took.
#![allow(clippy::disallowed_methods)]

use crate::module_support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use redis_ratelimit::harness::algo::lease::{self, LeaseArgs};
use redis_ratelimit::harness::mode_scripts::{lease_module_command, lease_script, LeaseRequest};
use redis_ratelimit::{Algorithm, Quota};

use module_support::{
    assert_same_reply, expire_both_soon, plant, quota, read, real_and_model, send, server, state, Reply, TtlCheck,
    BASE_MS,
};

/// The algorithms that lease.
fn leasing() -> impl Iterator<Item = Algorithm> {
    Algorithm::ALL.into_iter().filter(|&a| redis_ratelimit::harness::algo::lease::can_lease(a))
}

/// One generated lease call: its stem's key, the clock, the arguments, foreign state first.
struct Call {
    key: u64,
    now: u64,
    args: LeaseArgs,
    plant: bool,
    at: String,
}

/// 100 lease calls of `seed` under one quota of `algorithm` with room for leases: three
/// instances on two keys, each giving back what it did not spend of its last lease (the
/// written state its reply named) or nothing. `reply` is the previous call's reply for the
/// instance, as the side that goes first answered it.
fn generate(algorithm: Algorithm, seed: u64, mut on: impl FnMut(&mut SmallRng, &Quota, Call) -> Option<Vec<i64>>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (q, lifetime_ms) = loop {
        let q = quota(&mut rng, algorithm).with_burst(rng.random_range(2..=12));
        let lifetime_ms = rng.random_range(1..=q.period_ms().max(2) / 2);
        if lease::capacity(algorithm, &q, lifetime_ms) > 0 {
            break (q, lifetime_ms);
        }
    };
    let most = lease::capacity(algorithm, &q, lifetime_ms);
    let mut last: [Option<(u64, Vec<i64>)>; 3] = Default::default();
    let mut now = BASE_MS;
    for i in 0..100 {
        now = now.saturating_add_signed(if rng.random_bool(0.1) {
            -rng.random_range(0..50)
        } else {
            rng.random_range(0..q.period_ms() as i64 / 3 + 1)
        });
        let instance = rng.random_range(0..3);
        let key = instance as u64 % 2;
        let want = rng.random_range(1..=most);
        let need = rng.random_range(1..=want);
        // The unspent part of this instance's last lease on this key, given back (or not).
        let (give_back, written) = match &last[instance] {
            Some((k, r)) if *k == key && r[0] > 0 && rng.random_bool(0.7) => {
                (rng.random_range(0..=r[0] as u64), (r[2] as u64, r[3] as u64))
            }
            _ => (0, (0, 0)),
        };
        let horizon_ms = rng.random_range(0..=4 * lifetime_ms);
        let args = LeaseArgs { lifetime_ms, horizon_ms, want, need, give_back, written };
        let plant = rng.random_bool(0.06);
        let at = format!("{algorithm} seed {seed} call {i} instance {instance} {q:?} now {now} {args:?}");
        if let Some(reply) = on(&mut rng, &q, Call { key, now, args, plant, at }) {
            last[instance] = Some((key, reply));
        }
    }
}

fn request<'a>(algorithm: Algorithm, q: &'a Quota, stem: &'a str, c: &Call) -> LeaseRequest<'a> {
    LeaseRequest { algorithm, quota: q, stem, now_ms: Some(c.now), args: c.args }
}

#[test]
fn every_lease_command_is_its_script() {
    let server = server();
    let mut conn = server.client().expect("connect");
    for algorithm in leasing() {
        let (mut compared, mut granted, mut credited, mut refused) = (0, 0, 0, 0);
        let mut ttls = TtlCheck::new();
        let script = lease_script(algorithm).expect("a lease script").source;
        let command = lease_module_command(algorithm).expect("a lease command");
        for seed in 0..20u64 {
            generate(algorithm, seed, |rng, q, c| {
                let stems = [format!("s:{{l{seed}-{}}}:", c.key), format!("m:{{l{seed}-{}}}:", c.key)];
                if c.plant {
                    plant(&mut [&mut conn], rng, algorithm, q, c.now, &[&stems[0], &stems[1]], true);
                }
                let [s, m] =
                    [&stems[0], &stems[1]].map(|stem| request(algorithm, q, stem, &c).invocation().expect("leases"));
                expire_both_soon(&mut conn, &s.keys, &m.keys, 5);
                let mut pipe = redis::pipe();
                pipe.atomic().ignore_errors();
                pipe.cmd("EVAL").arg(script).arg(1).arg(&s.keys).arg(&s.args);
                pipe.cmd(command).arg(&m.keys).arg(&m.args);
                let sent = std::time::Instant::now();
                let replies: Vec<Value> = pipe.query(&mut conn).expect("EXEC");
                ttls.took(sent.elapsed().as_millis() as i64 + 2);
                let (s_reply, m_reply): (Reply, Reply) = (read(&replies[0]), read(&replies[1]));
                assert_same_reply(&s_reply, &m_reply, &c.at);
                let keys: Vec<String> = [s.keys[0].clone(), m.keys[0].clone()].to_vec();
                let both = state(&mut conn, &keys, true);
                assert_eq!((&both[0].0, &both[0].2), (&both[1].0, &both[1].2), "{}: state", c.at);
                ttls.pair(both[0].1, both[1].1, &c.at);
                compared += 1;
                match m_reply {
                    Ok(r) => {
                        granted += u32::from(r[0] > 0);
                        credited += u32::from(r[4] > 0);
                        Some(r)
                    }
                    Err(_) => {
                        refused += 1;
                        None
                    }
                }
            });
        }
        ttls.check(&format!("{algorithm} leases"));
        println!("module: {compared} {algorithm} lease calls agreed with the script ({granted} granted, {credited} credited a give-back, {refused} refused by both)");
        assert!(granted > 300 && credited > 20 && refused > 0, "{algorithm}: too few of each kind to test anything");
    }
}

/// The Redis model runs the lease commands as `redis-server --loadmodule` does.
#[test]
fn the_model_runs_the_lease_commands_as_redis_with_the_module_does() {
    let (_servers, mut real, mut modeled) = real_and_model();
    for algorithm in leasing() {
        let command = lease_module_command(algorithm).expect("a lease command");
        let mut ttls = TtlCheck::new();
        for seed in 50..56u64 {
            generate(algorithm, seed, |rng, q, c| {
                let stem = format!("c:{{l{seed}-{}}}:", c.key);
                let started = std::time::Instant::now();
                if c.plant {
                    plant(&mut [&mut real, &mut modeled], rng, algorithm, q, c.now, &[&stem], false);
                }
                let call = request(algorithm, q, &stem, &c).invocation().expect("leases");
                let (on_real, on_model) = (send(&mut real, command, &call), send(&mut modeled, command, &call));
                let (r, m) = (state(&mut real, &call.keys, false), state(&mut modeled, &call.keys, false));
                ttls.took(started.elapsed().as_millis() as i64 + 2);
                assert_eq!(on_real, on_model, "{}", c.at);
                assert_eq!((&r[0].0, &r[0].2), (&m[0].0, &m[0].2), "{}: state", c.at);
                ttls.pair(r[0].1, m[0].1, &c.at);
                on_real.ok()
            });
        }
        ttls.check(&format!("{algorithm} leases on the model"));
    }
}

/// Lease arguments the library never sends are refused by name, and nothing is written.
#[test]
fn the_lease_commands_refuse_what_the_library_never_sends() {
    let server = server();
    let mut conn = server.client().expect("connect");
    for (command, args, says) in [
        (
            "RATELIMIT.LEASE.GCRA",
            &["k", "", "1000", "10", "100000", "0", "2", "1", "0"][..],
            "wrong number of arguments",
        ),
        ("RATELIMIT.LEASE.GCRA", &["k", "", "1000", "10", "1500", "0", "2", "1", "0", "0"], "must be whole ms"),
        ("RATELIMIT.LEASE.GCRA", &["k", "", "1000", "10", "10000", "0", "2", "1", "0", "0"], "shorter than the burst"),
        ("RATELIMIT.LEASE.GCRA", &["k", "", "1000", "10", "1000", "0", "2", "0", "0", "0"], "1 <= need <= want"),
        ("RATELIMIT.LEASE.GCRA", &["k", "", "1000", "10", "1000", "0", "11", "1", "0", "0"], "want <= burst 10"),
        ("RATELIMIT.LEASE.TB", &["k", "", "5", "1000", "5", "1000", "0", "1", "1", "0", "0", "0"], "leaves no room"),
        ("RATELIMIT.LEASE.TB", &["k", "", "5", "1000", "5", "100", "0", "1", "2", "0", "0", "0"], "need <= want"),
        ("RATELIMIT.LEASE.TB", &["k", "", "5", "x", "5", "100", "0", "1", "1", "0", "0", "0"], "period_ms must be"),
    ] {
        let err = redis::cmd(command).arg(args).query::<Value>(&mut conn).expect_err("refused");
        assert!(err.to_string().contains(says), "{command} {args:?}: {err}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");
}
