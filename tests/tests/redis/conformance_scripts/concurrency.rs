//! The concurrency script (`lua/concurrency.lua`) on both servers and beside its twin
//! (`algo::concurrency`): generated acquires, renewals, releases and peeks by a few holders
//! on a few keys, on a client clock that mostly moves on and sometimes steps back. Every reply
//! must be the same on both servers and what the twin answers, and after every call each
//! key's sorted set must hold exactly the twin's holders with the ends of their leases.
//!
//! Real time stays out of it by the units: the clock moves in whole seconds and leases last
//! whole seconds, so a key's TTL is never under a second of real time, and the calls that
//! touch it again come within milliseconds. Where the generated clock has passed a key's TTL,
//! the test deletes the key on both servers, as Redis would on that clock (the twin forgets
//! it then too).

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::harness::algo::concurrency::{self, step, PermitOp, Permits};
use redis_ratelimit::harness::algo::Outcome;
use redis_ratelimit::harness::scripts;

use super::generate::{cmd, s};
use super::runner::Servers;
use super::{env_number, sha1_of, BASE_MS};
use crate::conformance_support::{show, show_cmd, V};

const OPS: [PermitOp; 5] = [PermitOp::Acquire, PermitOp::Acquire, PermitOp::Renew, PermitOp::Release, PermitOp::Peek];
const HOLDERS: [&str; 5] = ["w1", "w2", "w3", "w4", "w5"];
const KEYS: [&str; 2] = ["permits:{a}", "permits:{b}"];

#[test]
fn the_concurrency_script_answers_like_redis_and_like_its_twin() {
    let seed = env_number("CONFORMANCE_SEED").unwrap_or(20_261_206);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut servers = Servers::start();
    let (mut calls, mut admitted, mut refused, mut reclaimed) = (0, 0, 0, 0);
    for _episode in 0..12 {
        servers.pair.reset();
        let sha = sha1_of(&mut servers, scripts::CONCURRENCY);
        let limit = rng.random_range(1..=4u64);
        let lease_ms = 1000 * rng.random_range(1..=6u64);
        let mut twins: BTreeMap<&str, Option<Permits>> = KEYS.iter().map(|k| (*k, None)).collect();
        let mut now = BASE_MS as u64;
        for _ in 0..150 {
            now = match rng.random_range(0..10) {
                0 => now - 1000 * rng.random_range(1..=2),
                _ => now + 1000 * rng.random_range(0..=2),
            };
            let (key, holder) = (KEYS[rng.random_range(0..KEYS.len())], HOLDERS[rng.random_range(0..HOLDERS.len())]);
            let op = OPS[rng.random_range(0..OPS.len())];
            let twin = twins.get_mut(key).expect("a key of KEYS");
            // Redis would have dropped the key by now on this clock (its TTL ends with its last
            // lease); the servers run on real time, so the test drops it, as the twin does.
            if twin.as_ref().is_some_and(|t| concurrency::expired(t, now)) {
                servers.both(&[cmd(&[b"DEL", key.as_bytes()])]);
            }
            // Leases that have ended by now, which a call that writes removes.
            let ended = twin.as_ref().map_or(0, |t| t.holders.values().filter(|&&end| end <= now).count());
            let want = step(limit, lease_ms, twin, now, op, holder);
            // The call the library sends.
            let sent = scripts::permit_invocation(key, Some(now), limit, lease_ms, holder, op);
            let mut call = vec![b"EVALSHA".to_vec(), sha.clone(), b"1".to_vec()];
            call.extend(sent.keys.iter().chain(&sent.args).map(|part| part.as_bytes().to_vec()));
            let state = cmd(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"]);
            let (r, m) = servers.both(&[call.clone(), state]);
            let context =
                || format!("seed {seed}, {}: redis {} / model {}", show_cmd(&call), show(&r[0].0), show(&m[0].0));
            assert_eq!(r, m, "the servers differ; {}", context());
            assert_eq!(r[0].1, reply(&want, now), "the twin differs; {}", context());
            let holders = twin.as_ref().map(|t| t.holders.clone()).unwrap_or_default();
            assert_eq!(r[1].1, zset(&holders), "the state differs from the twin's; {}", context());
            calls += 1;
            match (op, want.allowed) {
                (PermitOp::Acquire, true) => admitted += 1,
                (PermitOp::Acquire, false) => refused += 1,
                _ => {}
            }
            if op != PermitOp::Peek && ended > 0 {
                reclaimed += 1;
            }
        }
    }
    // Not one of the calls misread: a wrong operation and a key of the wrong type fail alike.
    for (name, setup) in [("an unknown operation", None), ("a key of the wrong type", Some("text"))] {
        servers.pair.reset();
        if let Some(value) = setup {
            servers.both(&[cmd(&[b"SET", b"permits:{a}", value.as_bytes()])]);
        }
        let op: &[u8] = if setup.is_some() { b"acquire" } else { b"grab" };
        let call =
            cmd(&[b"EVAL", scripts::CONCURRENCY.as_bytes(), b"1", b"permits:{a}", b"1000", b"2", b"500", b"w1", op]);
        let (r, m) = servers.both(&[call]);
        assert!(matches!(r[0].1, V::Error(_)), "{name}: redis answered {}", show(&r[0].0));
        assert_eq!(r, m, "{name}: redis {} / model {}", show(&r[0].0), show(&m[0].0));
    }
    println!(
        "conformance: concurrency script: {calls} calls agreed on both servers and with the twin \
         ({admitted} acquires admitted, {refused} refused, {reclaimed} calls reclaimed ended leases)"
    );
    assert!(
        admitted > 100 && refused > 50 && reclaimed > 20,
        "{admitted} admitted, {refused} refused, {reclaimed} reclaimed"
    );
}

/// The script's reply for `outcome` at `now`.
fn reply(outcome: &Outcome, now: u64) -> V {
    let ints = [u64::from(outcome.allowed), outcome.remaining, outcome.retry_after_ms, outcome.reset_after_ms, now];
    V::Array(Some(ints.into_iter().map(|n| V::Int(n as i64)).collect()))
}

/// `ZRANGE key 0 -1 WITHSCORES` of `holders`: by score, then by token.
fn zset(holders: &BTreeMap<String, u64>) -> V {
    let mut by_score: Vec<(&u64, &String)> = holders.iter().map(|(t, e)| (e, t)).collect();
    by_score.sort();
    let items = by_score.into_iter().flat_map(|(end, token)| [V::Bulk(Some(s(token))), V::Bulk(Some(s(end)))]);
    V::Array(Some(items.collect()))
}
