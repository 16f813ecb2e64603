//! Differential test for the round-trip modes' scripts (`lua/lease_gcra.lua`,
//! `lua/lease_token_bucket.lua`, `lua/batch.lua` around each algorithm's script): generated
//! calls go to a real `redis-server` and to the model, whose replies must be byte-identical, and
//! every reply must be what the Rust twin computes (`algo::lease` for leases; the algorithm's
//! own twin, request after request, for batches).
//!
//! Time: calls carry a generated client clock that starts at the real clock and only moves
//! ahead of it, so each server's own expiry (by its real clock) never drops a key the twin
//! still counts; a key the twin has already forgotten is at rest, which reads the same as no key.
//! Server time is compared by shape and decision only.
//!
//! `CONFORMANCE_CALLS=N` changes the calls per script (default 1500); `CONFORMANCE_SEED=S` the
//! seed (a failure prints the one to replay).

// The generated clock starts at the real one (see the module docs).
#![allow(clippy::disallowed_methods)]

use crate::conformance_support;

use std::collections::BTreeMap;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::harness::algo::lease::{self, LeaseArgs};
use redis_ratelimit::harness::algo::{self, State};
use redis_ratelimit::harness::mode_scripts::{self, BatchRequest, LeaseRequest};
use redis_ratelimit::harness::scripts::{self, Invocation};
use redis_ratelimit::{Algorithm, Quota};

use conformance_support::{show, show_cmd, Pair, V};

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn real_now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn eval(source: &str, call: &Invocation) -> Vec<Vec<u8>> {
    let mut cmd = vec![b"EVAL".to_vec(), source.as_bytes().to_vec(), call.keys.len().to_string().into_bytes()];
    cmd.extend(call.keys.iter().chain(&call.args).map(|a| a.as_bytes().to_vec()));
    cmd
}

fn ints(v: &V) -> Option<Vec<i64>> {
    match v {
        V::Array(Some(items)) => items.iter().map(|x| if let V::Int(n) = x { Some(*n) } else { None }).collect(),
        _ => None,
    }
}

/// Sends `cmd` to both servers; both replies must be the same bytes.
fn same(pair: &mut Pair, cmd: &[Vec<u8>], replay: &str) -> V {
    let (r, m) = pair.pipeline_both(std::slice::from_ref(&cmd.to_vec()));
    let ((rr, rv), (mr, _)) = (&r[0], &m[0]);
    assert!(
        rr == mr,
        "{}\nredis: {}\nmodel: {}\nreplay: {replay}",
        show_cmd(&cmd.iter().map(|a| a[..a.len().min(120)].to_vec()).collect::<Vec<_>>()),
        show(rr),
        show(mr)
    );
    rv.clone()
}

/// Quotas whose arithmetic stays small, with lifetimes that leave a lease something to hold.
fn quota(rng: &mut SmallRng) -> (Quota, u64) {
    loop {
        let limit = rng.random_range(1..=200);
        let period = *[100u64, 1_000, 5_000, 60_000].get(rng.random_range(0..4)).unwrap_or(&1_000);
        let burst = rng.random_range(1..=60);
        let lifetime = rng.random_range(1..=period);
        let q = Quota::new(limit, Duration::from_millis(period)).with_burst(burst);
        let fits = [Algorithm::TokenBucket, Algorithm::Gcra]
            .iter()
            .all(|&a| q.validate(a).is_ok() && lease::capacity(a, &q, lifetime) >= 1);
        if fits {
            return (q, lifetime);
        }
    }
}

#[test]
fn lease_scripts_answer_like_redis_and_like_their_twins() {
    let calls = env_number("CONFORMANCE_CALLS").unwrap_or(1_500) as usize;
    let seed = env_number("CONFORMANCE_SEED").unwrap_or(14);
    let replay = format!("CONFORMANCE_SEED={seed} cargo test -p redis-tests --test redis -- conformance_modes::");
    let mut pair = Pair::start();
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut granted, mut denied, mut credited) = (0, 0, 0);
    for script in mode_scripts::leases() {
        let algorithm = script.algorithm;
        let mut done = 0;
        while done < calls {
            let (q, lifetime) = quota(&mut rng);
            let cap = lease::capacity(algorithm, &q, lifetime);
            let prefix = format!("lease{done}{algorithm}");
            let mut states: BTreeMap<u32, Option<State>> = BTreeMap::new();
            // The last lease written per (key, instance), to give back.
            let mut last: BTreeMap<(u32, u32), (u64, (u64, u64))> = BTreeMap::new();
            let mut lead = rng.random_range(0..1_000);
            for _ in 0..60 {
                lead += match rng.random_range(0..10) {
                    0..=3 => 0,
                    4..=7 => rng.random_range(1..=lifetime.max(2)),
                    _ => rng.random_range(1..=3 * q.period_ms()),
                };
                let now = real_now_ms() + lead;
                let key = rng.random_range(0..2u32);
                let instance = rng.random_range(0..3u32);
                let need = rng.random_range(1..=cap);
                let want = rng.random_range(need..=cap.max(need) + 3);
                let (give_back, written) = match last.get(&(key, instance)) {
                    Some(&(units, written)) if rng.random_bool(0.6) => (rng.random_range(0..=units), written),
                    _ => (0, (0, 0)),
                };
                let horizon_ms = rng.random_range(0..=2 * lifetime);
                let args = LeaseArgs { lifetime_ms: lifetime, horizon_ms, want, need, give_back, written };
                let stem = format!("{prefix}:{{k{key}}}:");
                let request = LeaseRequest { algorithm, quota: &q, stem: &stem, now_ms: Some(now), args };
                let call = request.invocation().expect("a lease script");
                let reply = same(&mut pair, &eval(script.source, &call), &replay);
                let got = ints(&reply).and_then(|r| request.read_reply(&r));
                let want_outcome =
                    lease::take(algorithm, &q, states.entry(key).or_default(), now, args).map(|o| (o, now));
                assert_eq!(
                    got,
                    want_outcome,
                    "{} {q:?} lifetime {lifetime}: {args:?} at {now} answered {}\nreplay: {replay}",
                    script.file,
                    reply.render()
                );
                let (o, _) = want_outcome.expect("leases");
                if o.granted > 0 {
                    granted += 1;
                    last.insert((key, instance), (o.granted, o.written));
                } else {
                    denied += 1;
                }
                credited += (o.credited > 0) as usize;
                done += 1;
            }
        }
    }
    println!(
        "conformance: {} lease calls over {} scripts agreed with redis-server and the twins ({granted} granted, \
         {denied} denied, {credited} credited a give-back)",
        granted + denied,
        mode_scripts::leases().count()
    );
    assert!(granted > 0 && denied > 0 && credited > 0, "every path was reached");
}

#[test]
fn batch_scripts_answer_like_redis_and_like_one_call_after_another() {
    let calls = env_number("CONFORMANCE_CALLS").unwrap_or(1_500) as usize / 5;
    let seed = env_number("CONFORMANCE_SEED").unwrap_or(14);
    let replay = format!("CONFORMANCE_SEED={seed} cargo test -p redis-tests --test redis -- conformance_modes::");
    let mut pair = Pair::start();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xba7c);
    let (mut decided, mut errors, mut blocked) = (0, 0, 0);
    for algorithm in Algorithm::ALL {
        let source = mode_scripts::batch_source(algorithm);
        for batch_no in 0..calls {
            let (q, _) = quota(&mut rng);
            let q = if q.validate(algorithm).is_ok() { q } else { Quota::new(10, Duration::from_secs(1)) };
            let cap = q.capacity(algorithm);
            let prefix = format!("batch{batch_no}");
            // A key of the wrong type for the algorithm (where it has one key to spoil): its
            // requests fail alone.
            let poisoned = format!("{prefix}:{{k9}}:");
            let key = format!("{poisoned}{}", scripts::key_suffix(algorithm)).into_bytes();
            let poison = match algorithm {
                Algorithm::Gcra => Some(vec![b"HSET".to_vec(), key, b"u".to_vec(), b"1".to_vec()]),
                // A hash is the token bucket's old form (read and replaced), a list is no form of it.
                Algorithm::TokenBucket => Some(vec![b"RPUSH".to_vec(), key, b"x".to_vec()]),
                Algorithm::SlidingLog => Some(vec![b"SET".to_vec(), key, b"x".to_vec()]),
                _ => None,
            };
            if let Some(cmd) = &poison {
                same(&mut pair, cmd, &replay);
            }
            let mut states: BTreeMap<String, Option<State>> = BTreeMap::new();
            let now = real_now_ms() + rng.random_range(0..1_000);
            let n = rng.random_range(1..=24);
            let stems: Vec<String> = (0..n)
                .map(|_| {
                    if poison.is_some() && rng.random_bool(0.1) {
                        poisoned.clone()
                    } else {
                        format!("{prefix}:{{k{}}}:", rng.random_range(0..3))
                    }
                })
                .collect();
            let requests: Vec<(&str, Option<u64>, u64)> =
                stems.iter().map(|s| (s.as_str(), Some(now), rng.random_range(0..=cap))).collect();
            // Half the batches are a blockable limiter's, some of whose keys are blocked (for
            // at least a second of real time, or lifted), so each request runs behind its block.
            let blockable = rng.random_bool(0.5);
            let mut blocks: BTreeMap<String, Option<u64>> = BTreeMap::new();
            for k in 0..3 {
                if blockable && rng.random_bool(0.5) {
                    let stem = format!("{prefix}:{{k{k}}}:");
                    let duration = if rng.random_bool(0.2) { 0 } else { rng.random_range(1_000..=60_000) };
                    let block = scripts::block_key(algorithm, &stem);
                    same(
                        &mut pair,
                        &eval(scripts::BLOCK, &scripts::block_invocation(&block, Some(now), duration)),
                        &replay,
                    );
                    blocks.insert(stem, algo::block::ends(now, duration));
                    blocked += 1;
                }
            }
            let batch = BatchRequest { algorithm, quota: &q, requests: requests.clone(), blockable };
            let reply = same(&mut pair, &eval(&source, &batch.invocation()), &replay);
            let V::Array(Some(entries)) = &reply else { panic!("{algorithm}: {}\nreplay: {replay}", reply.render()) };
            assert_eq!(entries.len(), n, "{algorithm}: one entry per request\nreplay: {replay}");
            for (i, entry) in entries.iter().enumerate() {
                let (stem, _, cost) = requests[i];
                if stem == poisoned {
                    let V::Bulk(Some(text)) = entry else { panic!("{algorithm}: {}", entry.render()) };
                    assert!(String::from_utf8_lossy(text).contains("WRONGTYPE"), "{}", entry.render());
                    errors += 1;
                    continue;
                }
                let block = blocks.get(stem).copied().flatten();
                let twin =
                    algo::block::guarded(algorithm, &q, states.entry(stem.to_owned()).or_default(), block, now, cost);
                let got = ints(entry).and_then(|r| batch.read_entry(i, Ok(&r)));
                assert_eq!(got, Some(Ok((twin, now))), "{algorithm} {q:?} request #{i} of {n}\nreplay: {replay}");
                decided += 1;
            }
        }
    }
    println!(
        "conformance: {decided} batched decisions over {} algorithms agreed with redis-server and one call after \
         another ({errors} WRONGTYPE requests failed alone, {blocked} keys blocked or lifted before a blockable batch)",
        Algorithm::ALL.len()
    );
    assert!(errors > 0 && blocked > 0);
}

/// With `now` = "" each server reads its own TIME: only shapes and decisions are compared.
#[test]
fn server_time_leases_and_batches_agree_on_shape_and_decision() {
    let mut pair = Pair::start();
    let q = Quota::new(2, Duration::from_secs(600)).with_burst(4);
    for script in mode_scripts::leases() {
        let args = LeaseArgs { lifetime_ms: 1_000, horizon_ms: 0, want: 3, need: 1, give_back: 0, written: (0, 0) };
        let stem = "server:{lease}:";
        let request = LeaseRequest { algorithm: script.algorithm, quota: &q, stem, now_ms: None, args };
        let call = request.invocation().expect("a lease script");
        let (r, m) = pair.pipeline_both(&[eval(script.source, &call), eval(script.source, &call)]);
        for (replies, server) in [(&r, "redis"), (&m, "model")] {
            let first = ints(&replies[0].1).and_then(|x| request.read_reply(&x)).expect(server);
            let second = ints(&replies[1].1).and_then(|x| request.read_reply(&x)).expect(server);
            // 4 per burst less the lifetime's refill: 3 leased, then nothing within the horizon.
            assert_eq!((first.0.granted, second.0.granted), (3, 0), "{} on {server}", script.file);
            assert!(first.1 > 1_700_000_000_000, "{} on {server}: clock {}", script.file, first.1);
        }
    }
    let q = Quota::new(2, Duration::from_secs(600));
    for algorithm in Algorithm::ALL {
        let source = mode_scripts::batch_source(algorithm);
        let stem = format!("server:{{batch-{algorithm}}}:");
        let batch =
            BatchRequest { algorithm, quota: &q, requests: vec![(stem.as_str(), None, 1); 3], blockable: false };
        let (r, m) = pair.pipeline_both(&[eval(&source, &batch.invocation())]);
        for (replies, server) in [(&r, "redis"), (&m, "model")] {
            let V::Array(Some(entries)) = &replies[0].1 else { panic!("{algorithm} on {server}") };
            let allowed: Vec<bool> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| ints(e).and_then(|x| batch.read_entry(i, Ok(&x))).expect(server).expect(server).0.allowed)
                .collect();
            assert_eq!(allowed, [true, true, false], "{algorithm} on {server}: two of three admitted");
        }
    }
    println!("conformance: server-time leases and batches agreed on shape and decision");
}
