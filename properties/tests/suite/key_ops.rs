//! Operations on a key, on the Redis model, are their twins'. A reset is the twin's forgetting:
//! over generated sequences of requests and resets on a few keys, every algorithm's script
//! (client time) and `lua/reset.lua` on the keys `state_keys` names decide exactly as the twin
//! whose state for a reset key is dropped. A refund is `algo::refund`: over requests and
//! refunds, on either clock and with the clock sometimes stepping back, `lua/refund.lua`
//! answers as the twin and every later decision is the twin's; so is a debit, `algo::debit`
//! and `lua/debit.lua`, interleaved with both, into debt and up to the capacity a key may owe. A reset that left a window
//! behind, a refund that took from the wrong window, went past the burst, or left a sliding
//! log naming a new entry as an old one (the next admission overwriting it), would show as a
//! decision the twin does not make. A block is `algo::block`: over requests through a
//! blockable limiter's script (`lua/blockable.lua`) and blocks of every length (0 lifting
//! one), on either clock and with the clock sometimes stepping back, `lua/block.lua` answers the
//! instant the twin's block ends and every decision is the twin's: refused while blocked with
//! the twin's Retry-After and reset, the state untouched by what was refused.

use std::collections::BTreeMap;
use std::time::Duration;

use properties::debt::{debt_breach, debt_breach_of, uncapped_debit, DebtStep};
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

/// What a step of the refund property does to its key.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Units {
    /// A request of the step's cost.
    Request,
    /// A refund of that many units.
    Refund,
    /// A debit of that many units: charged whether they fit or not.
    Debit,
}

/// One step of the refund property: after `dt` ms (negative: the clock steps back), `op` on
/// key `key` with `cost` units.
#[derive(Debug, Clone)]
struct RefundStep {
    dt: i64,
    key: u8,
    cost: u64,
    op: Units,
}

fn refund_steps() -> impl Strategy<Value = Vec<RefundStep>> {
    let dt = prop_oneof![8 => 0i64..700, 1 => -300i64..0];
    let op = prop_oneof![5 => Just(Units::Request), 2 => Just(Units::Refund), 2 => Just(Units::Debit)];
    let step = (dt, 0u8..2, 0u64..=4, op).prop_map(|(dt, key, cost, op)| RefundStep { dt, key, cost, op });
    proptest::collection::vec(step, 1..80)
}

/// One step of the block property: after `dt` ms (negative: the clock steps back), a request of
/// `cost` on key `key`, or (`block`) a block of it lasting that many ms (0 lifts it).
#[derive(Debug, Clone)]
struct BlockStep {
    dt: i64,
    key: u8,
    cost: u64,
    block: Option<u64>,
}

fn block_steps() -> impl Strategy<Value = Vec<BlockStep>> {
    let dt = prop_oneof![8 => 0i64..700, 1 => -300i64..0];
    let block = prop_oneof![6 => Just(None), 1 => Just(Some(0)), 3 => (1u64..3_000).prop_map(Some)];
    let step = (dt, 0u8..2, 0u64..=4, block).prop_map(|(dt, key, cost, block)| BlockStep { dt, key, cost, block });
    proptest::collection::vec(step, 1..80)
}

/// A script's reply as integers.
fn integers(reply: &Reply) -> Option<Vec<i64>> {
    match reply {
        Reply::Array(items) => items.iter().map(|i| if let Reply::Integer(n) = i { Some(*n) } else { None }).collect(),
        _ => None,
    }
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
        let q = Quota::new(limit, Duration::from_millis(period)).with_burst(burst);
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
            let got = integers(&reply).and_then(|ints| req.read_reply(&ints));
            let twin = algo::step(algorithm, &q, twins.entry(s.key).or_default(), now, cost);
            prop_assert_eq!(got, Some((twin, now)), "{} {:?} step #{} ({:?})", algorithm, q, i, s);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/refund.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_refund_or_a_debit_on_the_model_is_the_twins(
        algorithm in proptest::sample::select(Algorithm::ALL.to_vec()),
        (limit, period, burst) in (1u64..=6, 100u64..=2_000, 1u64..=6),
        server_time in any::<bool>(),
        steps in refund_steps(),
    ) {
        let q = Quota::new(limit, Duration::from_millis(period)).with_burst(burst);
        prop_assume!(q.validate(algorithm).is_ok());
        // The model's TIME moves by a microsecond a command, as Redis's own clock moves while it
        // works, so on Redis's clock a script decides a few microseconds after the step's
        // instant. GCRA keeps microseconds, and a twin fed the step's instant could round a
        // reset the other way: it is compared on the caller's clock, where the instant is exact.
        let server_time = server_time && algorithm != Algorithm::Gcra;
        let clock = ManualServerClock::from_millis(BASE_MS);
        let model = ModelHandle::new(clock.clone());
        let mut twins: BTreeMap<u8, Option<State>> = BTreeMap::new();
        let mut now = BASE_MS;
        for (i, s) in steps.iter().enumerate() {
            // A window twin keeps the state of one window where Redis keeps a key per window, so
            // a clock stepping back into an earlier window is beyond what it models.
            let windowed = algorithm.is_windowed();
            now = now.saturating_add_signed(if windowed { s.dt.max(0) } else { s.dt });
            clock.set_micros(now * 1000);
            let stem = format!("ratelimiter:{{k{}}}:{}:", s.key, scripts::quota_state(algorithm, &q));
            let cost = s.cost.min(q.capacity(algorithm));
            let req = Request { algorithm, quota: &q, stem: &stem, now_ms: (!server_time).then_some(now), cost };
            let twin = twins.entry(s.key).or_default();
            if s.op == Units::Refund {
                let call = req.units_invocation();
                let given = eval(&model, scripts::REFUND, &call.keys, &call.args);
                let want = algo::refund(algorithm, &q, twin, now, cost);
                prop_assert_eq!(given, Reply::Integer(want.into()), "{} {:?} refund at step #{} ({:?})", algorithm, q, i, s);
                continue;
            }
            if s.op == Units::Debit {
                // Up to twice the capacity: a key owes at most one, so some are not charged.
                let req = Request { cost: 2 * s.cost.min(q.capacity(algorithm)), ..req };
                let call = req.units_invocation();
                let charged = eval(&model, scripts::DEBIT, &call.keys, &call.args);
                let want = algo::debit(algorithm, &q, twin, now, req.cost);
                prop_assert_eq!(charged, Reply::Integer(want as i64), "{} {:?} debit at step #{} ({:?})", algorithm, q, i, s);
                continue;
            }
            let call = req.invocation_of_stem();
            let reply = eval(&model, scripts::for_algorithm(algorithm).source, &call.keys, &call.args);
            let got = integers(&reply).and_then(|ints| req.read_reply(&ints));
            let want = algo::step(algorithm, &q, twin, now, cost);
            prop_assert_eq!(got, Some((want, now)), "{} {:?} step #{} ({:?})", algorithm, q, i, s);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/block.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_block_on_the_model_is_the_twins_block(
        algorithm in proptest::sample::select(Algorithm::ALL.to_vec()),
        (limit, period, burst) in (1u64..=6, 100u64..=2_000, 1u64..=6),
        server_time in any::<bool>(),
        steps in block_steps(),
    ) {
        let q = Quota::new(limit, Duration::from_millis(period)).with_burst(burst);
        prop_assume!(q.validate(algorithm).is_ok());
        // The model's TIME moves by a microsecond a command, as Redis's own clock moves while it
        // works, so on Redis's clock a script decides a few microseconds after the step's
        // instant. GCRA keeps microseconds, and a twin fed the step's instant could round a
        // reset the other way: it is compared on the caller's clock, where the instant is exact.
        let server_time = server_time && algorithm != Algorithm::Gcra;
        let clock = ManualServerClock::from_millis(BASE_MS);
        let model = ModelHandle::new(clock.clone());
        // Each key's state and the instant its block ends.
        let mut twins: BTreeMap<u8, (Option<State>, Option<u64>)> = BTreeMap::new();
        let mut now = BASE_MS;
        for (i, s) in steps.iter().enumerate() {
            // As for refunds: a window twin cannot follow a clock back into an earlier window.
            let windowed = algorithm.is_windowed();
            now = now.saturating_add_signed(if windowed { s.dt.max(0) } else { s.dt });
            clock.set_micros(now * 1000);
            let stem = format!("ratelimiter:{{k{}}}:{}:", s.key, scripts::quota_state(algorithm, &q));
            let block = scripts::block_key(algorithm, &stem);
            let client_now = (!server_time).then_some(now);
            let (state, ends) = twins.entry(s.key).or_default();
            if let Some(duration) = s.block {
                let call = scripts::block_invocation(&block, client_now, duration);
                let answered = eval(&model, scripts::BLOCK, &call.keys, &call.args);
                *ends = algo::block::ends(now, duration);
                prop_assert_eq!(answered, Reply::Integer(ends.unwrap_or(0) as i64), "{} block at step #{} ({:?})", algorithm, i, s);
                continue;
            }
            // Redis drops the block's key once its TTL has passed, when the guard reads it.
            if ends.is_some_and(|e| now > e) {
                *ends = None;
            }
            let cost = s.cost.min(q.capacity(algorithm));
            let req = Request { algorithm, quota: &q, stem: &stem, now_ms: client_now, cost };
            let call = req.blockable_invocation(&block);
            let reply = eval(&model, scripts::blockable_source(algorithm), &call.keys, &call.args);
            let got = integers(&reply).and_then(|ints| req.read_reply(&ints));
            let want = algo::block::guarded(algorithm, &q, state, *ends, now, cost);
            prop_assert_eq!(got, Some((want, now)), "{} {:?} step #{} ({:?})", algorithm, q, i, s);
        }
    }
}

fn debt_steps() -> impl Strategy<Value = Vec<DebtStep>> {
    let step = (0u64..700, 0u64..=12, proptest::bool::weighted(0.3)).prop_map(|(dt, units, debit)| DebtStep {
        dt,
        units,
        debit,
    });
    proptest::collection::vec(step, 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/debt.txt"))),
        ..ProptestConfig::default()
    })]

    /// Requests and excesses debited after them keep, together, within the promise of twice
    /// the capacity: the bound a reconciliation states (a key owes at most one capacity).
    #[test]
    fn requests_and_debits_keep_within_twice_the_capacity(
        algorithm in proptest::sample::select(Algorithm::ALL.to_vec()),
        (limit, period, burst) in (1u64..=6, 100u64..=2_000, 1u64..=6),
        steps in debt_steps(),
    ) {
        let q = Quota::new(limit, Duration::from_millis(period)).with_burst(burst);
        prop_assume!(q.validate(algorithm).is_ok());
        if let Some((at, why)) = debt_breach(algorithm, &q, BASE_MS, &steps) {
            prop_assert!(false, "{} {:?}: step #{}: {}", algorithm, q, at, why);
        }
    }
}

/// A post-hoc charge with no cap breaks the bound: a key one request deep in debt per
/// excess, as gateways that charge "toward the next request" let it go.
#[test]
fn an_uncapped_debit_breaks_the_bound() {
    let q = Quota::new(4, Duration::from_millis(1_000)).with_burst(4);
    let steps = [
        DebtStep { dt: 0, units: 4, debit: false },
        DebtStep { dt: 0, units: 12, debit: true },
        DebtStep { dt: 1, units: 12, debit: true },
    ];
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow, Algorithm::SlidingLog, Algorithm::Gcra] {
        assert_eq!(debt_breach(algorithm, &q, BASE_MS, &steps), None, "{algorithm}: the twin keeps the bound");
        let (at, why) = debt_breach_of(uncapped_debit, algorithm, &q, BASE_MS, &steps).expect("a breach");
        assert!(at >= 1 && why.contains("above"), "{algorithm}: step #{at}: {why}");
    }
}
