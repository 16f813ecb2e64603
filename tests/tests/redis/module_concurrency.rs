//! The module's concurrency command is its script (`RATELIMIT.CONCURRENCY` is
//! `lua/concurrency.lua`): on one `redis-server` with the module loaded, generated acquires,
//! renewals, releases and peeks of a few holders on two keys, on a caller's clock that mostly
//! moves on and sometimes steps back, go once to the script and once to the command, on keys of
//! their own, in one MULTI/EXEC. The replies must be equal, and so must the key's type, members,
//! scores and TTL. Some calls meet foreign state first: a key of another type, or a holder no
//! one of these wrote. The Redis model runs the command as Redis does, on the same calls.

// Real Redis keeps real time: TTLs are compared within what a step took.
#![allow(clippy::disallowed_methods)]

use crate::module_support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use redis_ratelimit::harness::algo::concurrency::PermitOp;
use redis_ratelimit::harness::scripts::{self, Invocation};

use module_support::{assert_same_reply, expire_both_soon, read, real_and_model, send, server, state, Reply, TtlCheck};

const OPS: [PermitOp; 5] = [PermitOp::Acquire, PermitOp::Acquire, PermitOp::Renew, PermitOp::Release, PermitOp::Peek];
const HOLDERS: [&str; 5] = ["w1", "w2", "w3", "w4", "w5"];

/// One generated call.
struct Call {
    key: u64,
    now: u64,
    limit: u64,
    lease_ms: u64,
    holder: &'static str,
    op: PermitOp,
    /// Foreign state to leave under the key first: 1 a string, 2 a stranger holding a permit, 3
    /// one whose lease ended half a millisecond ago (the string and the ended one are taken
    /// away after the call: a clock stepping back would bring a fraction of a millisecond back
    /// to life, which the command refuses and the script reads).
    plant: u8,
    at: String,
}

impl Call {
    fn on(&self, key: &str) -> Invocation {
        scripts::permit_invocation(key, Some(self.now), self.limit, self.lease_ms, self.holder, self.op)
    }

    /// Leaves its foreign state under each of `keys` on `conn`, in one transaction when `atomic`
    /// (the model has no MULTI).
    fn plant(&self, conn: &mut redis::Connection, keys: &[&str], atomic: bool) {
        let mut pipe = redis::pipe();
        if atomic {
            pipe.atomic();
        }
        for key in keys {
            pipe.cmd("DEL").arg(key).ignore();
            match self.plant {
                1 => pipe.cmd("SET").arg(key).arg("busy").ignore(),
                2 => pipe.cmd("ZADD").arg(key).arg(self.now + self.lease_ms / 2).arg("stranger").ignore(),
                _ => pipe.cmd("ZADD").arg(key).arg(format!("{}.5", self.now - 1)).arg("late").ignore(),
            };
        }
        let _: () = pipe.query(conn).expect("plant");
    }

    /// Takes away what [`Call::plant`] left that must not outlive the call.
    fn unplant(&self, conn: &mut redis::Connection, keys: &[&str]) {
        for key in keys {
            let _: () = match self.plant {
                1 => redis::cmd("DEL").arg(key).query(conn),
                3 => redis::cmd("ZREM").arg(key).arg("late").query(conn),
                _ => Ok(()),
            }
            .expect("unplant");
        }
    }
}

/// 150 calls of `seed`: a limit of 1 to 4 and a lease of whole seconds (so a key's TTL is never
/// under a second of real time while the calls that touch it again come within milliseconds).
fn generate(seed: u64, mut on: impl FnMut(Call)) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (limit, lease_ms) = (rng.random_range(1..=4), 1_000 * rng.random_range(1..=6));
    let mut now = module_support::BASE_MS;
    for i in 0..150 {
        now = match rng.random_range(0..10) {
            0 => now - 1_000 * rng.random_range(1..=2),
            _ => now + 1_000 * rng.random_range(0..=2),
        };
        let (key, holder, op) = (rng.random_range(0..2), HOLDERS[rng.random_range(0..5)], OPS[rng.random_range(0..5)]);
        let plant = if rng.random_bool(0.06) { rng.random_range(1..=3) } else { 0 };
        let at =
            format!("seed {seed} call {i}: {holder} {op:?} on key {key} at {now}, limit {limit}, lease {lease_ms}");
        on(Call { key, now, limit, lease_ms, holder, op, plant, at });
    }
}

#[test]
fn the_concurrency_command_is_its_script() {
    let server = server();
    let mut conn = server.client().expect("connect");
    let (mut compared, mut held, mut refused, mut wrong_type) = (0, 0, 0, 0);
    let mut ttls = TtlCheck::new();
    for seed in 0..16u64 {
        generate(seed, |c| {
            let keys = [format!("s:{{c{seed}-{}}}:permits", c.key), format!("m:{{c{seed}-{}}}:permits", c.key)];
            if c.plant > 0 {
                c.plant(&mut conn, &[&keys[0], &keys[1]], true);
            }
            expire_both_soon(&mut conn, &keys[..1], &keys[1..], 5);
            let [s, m] = [&keys[0], &keys[1]].map(|key| c.on(key));
            let mut pipe = redis::pipe();
            pipe.atomic().ignore_errors();
            pipe.cmd("EVAL").arg(scripts::CONCURRENCY).arg(1).arg(&s.keys).arg(&s.args);
            pipe.cmd(scripts::CONCURRENCY_MODULE_COMMAND).arg(&m.keys).arg(&m.args);
            let sent = std::time::Instant::now();
            let replies: Vec<Value> = pipe.query(&mut conn).expect("EXEC");
            ttls.took(sent.elapsed().as_millis() as i64 + 2);
            let (s_reply, m_reply): (Reply, Reply) = (read(&replies[0]), read(&replies[1]));
            assert_same_reply(&s_reply, &m_reply, &c.at);
            let both = state(&mut conn, &keys, true);
            assert_eq!((&both[0].0, &both[0].2), (&both[1].0, &both[1].2), "{}: state", c.at);
            ttls.pair(both[0].1, both[1].1, &c.at);
            c.unplant(&mut conn, &[&keys[0], &keys[1]]);
            compared += 1;
            match m_reply {
                Ok(r) if c.op == PermitOp::Acquire && r[0] == 1 => held += 1,
                Ok(r) if c.op == PermitOp::Acquire => refused += u32::from(r[0] == 0),
                Err((code, _)) => wrong_type += u32::from(code == "WRONGTYPE"),
                Ok(_) => {}
            }
        });
    }
    ttls.check("concurrency");
    println!(
        "module: {compared} concurrency calls agreed with the script ({held} acquires held, {refused} refused, \
         {wrong_type} WRONGTYPE by both)"
    );
    assert!(held > 300 && refused > 50 && wrong_type > 0, "too few of each kind to test anything");
}

/// The Redis model runs the concurrency command as `redis-server --loadmodule` does; and both
/// refuse the same bad arguments.
#[test]
fn the_model_runs_the_concurrency_command_as_redis_with_the_module_does() {
    let (_servers, mut real, mut modeled) = real_and_model();
    let mut ttls = TtlCheck::new();
    let mut compared = 0;
    for seed in 0..6u64 {
        generate(seed, |c| {
            let key = format!("c:{{c{seed}-{}}}:permits", c.key);
            let started = std::time::Instant::now();
            if c.plant > 0 {
                c.plant(&mut real, &[&key], false);
                c.plant(&mut modeled, &[&key], false);
            }
            let command = scripts::CONCURRENCY_MODULE_COMMAND;
            let (on_real, on_model) = (send(&mut real, command, &c.on(&key)), send(&mut modeled, command, &c.on(&key)));
            let keys = [key.clone()];
            let (real_state, model_state) = (state(&mut real, &keys, false), state(&mut modeled, &keys, false));
            ttls.took(started.elapsed().as_millis() as i64 + 2);
            assert_eq!(on_real, on_model, "{}", c.at);
            assert_eq!((&real_state[0].0, &real_state[0].2), (&model_state[0].0, &model_state[0].2), "{}", c.at);
            ttls.pair(real_state[0].1, model_state[0].1, &c.at);
            c.unplant(&mut real, &[&key]);
            c.unplant(&mut modeled, &[&key]);
            compared += 1;
        });
    }
    ttls.check("concurrency on the model");
    let mut bad = |args: &[&str]| {
        let call =
            Invocation { keys: vec!["c:{bad}:permits".into()], args: args.iter().map(|a| a.to_string()).collect() };
        let command = scripts::CONCURRENCY_MODULE_COMMAND;
        let (on_real, on_model) = (send(&mut real, command, &call), send(&mut modeled, command, &call));
        assert_eq!(on_real, on_model, "{args:?}");
        on_real.expect_err("refused")
    };
    for (args, named) in [
        (&["1000", "0", "500", "w", "acquire"][..], "limit 0"),
        (&["1000", "2", "0", "w", "acquire"], "lease_ms 0"),
        (&["1000", "2", "500", "w", "steal"], "unknown operation steal"),
        (&["soon", "2", "500", "w", "acquire"], "now_ms"),
        (&["1000", "2", "500", "w"], ""),
    ] {
        let (code, text) = bad(args);
        assert!(text.contains(named), "{args:?}: {code} {text}");
    }
    println!(
        "module: {compared} concurrency calls alike on the model and on Redis, and the same bad arguments refused"
    );
}
