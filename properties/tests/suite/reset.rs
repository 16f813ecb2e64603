//! A reset on the Redis model is the twin's forgetting: over generated sequences of requests
//! and resets on a few keys, every algorithm's script (client time) and `lua/reset.lua` on the
//! keys `state_keys` names decide exactly as the twin whose state for a reset key is dropped.
//! A reset that left a window behind, or deleted another key's state, would show as a
//! decision the twin does not make.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use redis_model::{ManualServerClock, ModelHandle, Reply};
use redis_ratelimit::harness::algo::{self, State};
use redis_ratelimit::harness::scripts::{self, Request};
use redis_ratelimit::{Algorithm, Quota};

const BASE_MS: u64 = 1_767_225_600_000;

/// One step: after `dt` ms, a request of `cost` on key `key`, or (`reset`) a reset of it.
#[derive(Debug, Clone)]
struct Step {
    dt: u64,
    key: u8,
    cost: u64,
    reset: bool,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (0u64..700, 0u8..3, 0u64..=3, proptest::bool::weighted(0.15)).prop_map(|(dt, key, cost, reset)| Step {
        dt,
        key,
        cost,
        reset,
    });
    proptest::collection::vec(step, 1..80)
}

fn eval(model: &ModelHandle, source: &str, keys: &[String], args: &[String]) -> Reply {
    let n = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![b"EVAL", source.as_bytes(), n.as_bytes()];
    argv.extend(keys.iter().chain(args).map(|s| s.as_bytes()));
    model.call(&argv)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/reset.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_reset_on_the_model_is_the_twin_forgetting_the_key(
        algorithm in proptest::sample::select(Algorithm::ALL.to_vec()),
        (limit, period, burst) in (1u64..=6, 100u64..=2_000, 1u64..=6),
        steps in steps(),
    ) {
        let q = Quota::new(limit, period).with_burst(burst);
        prop_assume!(q.validate(algorithm).is_ok());
        let clock = ManualServerClock::from_millis(BASE_MS);
        let model = ModelHandle::new(clock.clone());
        let mut twins: BTreeMap<u8, Option<State>> = BTreeMap::new();
        let mut now = BASE_MS;
        for (i, s) in steps.iter().enumerate() {
            now += s.dt;
            clock.set_micros(now * 1000);
            let stem = format!("ratelimiter:{{k{}}}:{}:", s.key, scripts::quota_state(algorithm, &q));
            if s.reset {
                let deleted = eval(&model, scripts::RESET, &scripts::state_keys(algorithm, &q, &stem, now), &[]);
                prop_assert!(matches!(deleted, Reply::Integer(n) if n >= 0), "step #{}: {:?}", i, deleted);
                twins.remove(&s.key);
                continue;
            }
            let cost = s.cost.min(q.capacity(algorithm));
            let req = Request { algorithm, quota: &q, stem: &stem, now_ms: Some(now), cost };
            let call = req.invocation_of_stem();
            let reply = eval(&model, scripts::for_algorithm(algorithm).source, &call.keys, &call.args);
            let ints = match &reply {
                Reply::Array(items) => items.iter().map(|i| if let Reply::Integer(n) = i { Some(*n) } else { None }).collect(),
                _ => None,
            };
            let got = ints.and_then(|ints: Vec<i64>| req.read_reply(&ints));
            let twin = algo::step(algorithm, &q, twins.entry(s.key).or_default(), now, cost);
            prop_assert_eq!(got, Some((twin, now)), "{} {:?} step #{} ({:?})", algorithm, q, i, s);
        }
    }
}
