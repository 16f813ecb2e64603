//! Invariants across the stack, not just the pure twins:
//! - every algorithm's Lua script, run by the Redis model, decides exactly as its Rust model
//!   for any generated sequence (the model's clock *is* the generated clock, so even key
//!   expiry is exact), and a mutated script is caught;
//! - under any generated fault schedule, every bound-promising algorithm holds its bound and
//!   every failure policy its own, and the naive subject is caught breaking its;
//! - the same seed gives the same trace.
//!
//! A failure prints a short readable schedule and, for the simulator, the
//! `cargo xtask simulate ... --faults ...` command that replays it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis_model::{ManualServerClock, ModelHandle, Reply};
use redis_ratelimit::harness::algo::{self, State};
use redis_ratelimit::harness::scripts;
use redis_ratelimit::{Algorithm, FailurePolicy, Quota};
use sim_engine::faults::{format_schedule, normalize, Fault, FaultKind};
use sim_engine::run::{self, is_failure};
use sim_engine::scenario::{self, RunSpec};
use sim_engine::subject::{ClientSubject, Subject};

const BASE_MS: u64 = 1_767_225_600_000;

fn cases(divisor: u32) -> u32 {
    let all = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256u32);
    (all / divisor).max(8)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

// ---------------------------------------------------------------- scripts on the model

#[derive(Debug, Clone)]
struct Sequence {
    algorithm: Algorithm,
    quota: Quota,
    /// (ms step, may be negative; key; cost)
    steps: Vec<(i64, u32, u64)>,
}

fn sequences(algorithms: Vec<Algorithm>) -> impl Strategy<Value = Sequence> {
    (proptest::sample::select(algorithms), 1u64..=40, 1u64..=5_000, 1u64..=40)
        .prop_filter_map("valid quota", |(algorithm, limit, period_ms, burst)| {
            let quota = Quota::new(limit, Duration::from_millis(period_ms)).with_burst(burst);
            quota.validate(algorithm).ok().map(|()| (algorithm, quota))
        })
        .prop_flat_map(|(algorithm, quota)| {
            let cap = quota.capacity(algorithm);
            // Window algorithms key by window index: a step back reads another key, which
            // the script and the model both treat as empty, but an older window's key may
            // still exist; the single-state algorithms take backward steps.
            let back: i64 = if algorithm.is_windowed() { 0 } else { 500 };
            let p = quota.period_ms() as i64;
            let step = prop_oneof![
                3 => Just(0i64),
                3 => 1i64..=20,
                2 => 1..=p,
                1 => p..=3 * p,
                1 => -back..=0,
            ];
            let cost = prop_oneof![1 => Just(0u64), 6 => Just(1u64), 2 => 0..=cap];
            proptest::collection::vec((step, 0u32..3, cost), 1..80).prop_map(move |steps| Sequence {
                algorithm,
                quota,
                steps,
            })
        })
}

fn ints(reply: &Reply) -> Option<Vec<i64>> {
    match reply {
        Reply::Array(items) => items.iter().map(|i| if let Reply::Integer(n) = i { Some(*n) } else { None }).collect(),
        _ => None,
    }
}

/// Runs `seq` through `source` on a fresh model and through the Rust twin; the first
/// difference comes back as a readable schedule.
fn script_agrees(source: &str, seq: &Sequence) -> Result<(), String> {
    let clock = ManualServerClock::from_millis(BASE_MS);
    let model = ModelHandle::new(clock.clone());
    let mut states: BTreeMap<u32, Option<State>> = BTreeMap::new();
    let mut now = BASE_MS as i64;
    let mut shown = format!("{} {:?}:\n", seq.algorithm, seq.quota);
    for (i, &(dt, key, cost)) in seq.steps.iter().enumerate() {
        now = (now + dt).max(0);
        let t = now as u64;
        clock.set_micros(t * 1000);
        let stem = format!("ratelimiter:{{k{key}}}:");
        let request =
            scripts::Request { algorithm: seq.algorithm, quota: &seq.quota, stem: &stem, now_ms: Some(t), cost };
        let call = request.invocation();
        let mut argv: Vec<Vec<u8>> =
            vec![b"EVAL".to_vec(), source.as_bytes().to_vec(), call.keys.len().to_string().into_bytes()];
        argv.extend(call.keys.iter().chain(&call.args).map(|a| a.as_bytes().to_vec()));
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let reply = model.call(&argv);
        let expected = algo::step(seq.algorithm, &seq.quota, states.entry(key).or_default(), t, cost);
        let got = ints(&reply).and_then(|r| request.read_reply(&r));
        let _ = writeln!(shown, "  t={:+} ms key {key} cost {cost}: model {expected:?}", now - BASE_MS as i64);
        if got != Some((expected, t)) {
            let _ = writeln!(shown, "  ^ request #{i}: the script on the Redis model answered {reply:?}");
            return Err(shown);
        }
    }
    Ok(())
}

fn source(a: Algorithm) -> &'static str {
    scripts::for_algorithm(a).source
}

#[test]
fn every_script_on_the_redis_model_decides_as_its_rust_model() {
    let n = cases(2);
    let mut r = runner(n);
    let result = r.run(&sequences(scripts::ALL.iter().map(|s| s.algorithm).collect()), |seq| {
        script_agrees(source(seq.algorithm), &seq).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("stack: scripts on the Redis model agree with their models over {n} generated sequences");
}

#[test]
fn a_mutated_script_is_caught_disagreeing_with_its_model() {
    // GCRA admitting only strictly inside its tolerance: an off-by-one at the edge.
    let mutant = source(Algorithm::Gcra).replace("if new_tat <= now + tau then", "if new_tat < now + tau then");
    assert_ne!(mutant, source(Algorithm::Gcra), "the mutation applies");
    let mut r = runner(500);
    let found =
        r.run(&sequences(vec![Algorithm::Gcra]), |seq| script_agrees(&mutant, &seq).map_err(TestCaseError::fail));
    let Err(e) = found else { panic!("the off-by-one GCRA script went unnoticed") };
    println!("stack: mutated GCRA script caught, shrunk to:\n{e}");
}

// ---------------------------------------------------------------- the simulator

fn fault() -> impl Strategy<Value = Fault> {
    let kind = prop_oneof![
        (0u32..3).prop_map(|instance| FaultKind::Partition { instance }),
        (0u32..3).prop_map(|instance| FaultKind::PartitionToRedis { instance }),
        (0u32..3).prop_map(|instance| FaultKind::PartitionFromRedis { instance }),
        (0u32..3).prop_map(|instance| FaultKind::Hold { instance }),
        (0u32..3).prop_map(|instance| FaultKind::InstanceCrash { instance }),
        any::<bool>().prop_map(|keep_data| FaultKind::RedisCrash { keep_data }),
        Just(FaultKind::RedisPause),
        Just(FaultKind::ScriptFlush),
    ];
    (kind, 100u64..2_500, 20u64..1_500).prop_map(|(kind, at_ms, len)| Fault { kind, at_ms, until_ms: at_ms + len })
}

fn cluster_cases(subjects: Vec<Subject>) -> impl Strategy<Value = RunSpec> {
    let policy =
        proptest::sample::select(vec![FailurePolicy::FailOpen, FailurePolicy::FailClosed, scenario::LOCAL_BUDGET]);
    (proptest::sample::select(subjects), policy, any::<u64>(), proptest::collection::vec(fault(), 0..5)).prop_map(
        |(subject, policy, seed, faults)| {
            let swarm = scenario::find("swarm").expect("swarm scenario");
            let mut spec = swarm.runs(&[subject], &[seed], Some(3), 3_000).remove(0);
            spec.policy = spec.subject.effective_policy(policy);
            spec.faults = normalize(faults);
            spec
        },
    )
}

fn cluster_holds(spec: &RunSpec) -> Result<(), String> {
    let out = sim_engine::turmoil_run::run(spec).map_err(|e| e.to_string())?;
    let r = run::judge(spec, out);
    if is_failure(&r) {
        let why = [&r.bound_detail, &r.policy_detail, &r.liveness_detail].map(|s| s.as_str()).join("; ");
        return Err(format!(
            "{} / {} / seed {} under faults [{}]: {why}\n  replay: {}",
            r.subject,
            r.policy,
            r.seed,
            format_schedule(&spec.faults),
            r.replay
        ));
    }
    Ok(())
}

#[test]
fn every_promised_bound_holds_under_generated_fault_schedules() {
    let promising: Vec<Subject> = Algorithm::ALL.into_iter().map(Subject::Library).collect();
    let n = cases(16);
    let result = runner(n).run(&cluster_cases(promising), |spec| cluster_holds(&spec).map_err(TestCaseError::fail));
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("stack: {n} generated fault schedules, every promised bound and policy held");
}

#[test]
fn the_naive_subject_is_caught_breaking_its_bound_under_generated_schedules() {
    let found = runner(64).run(&cluster_cases(vec![Subject::Client(ClientSubject::NaiveGetSet)]), |spec| {
        // The subject is held to the fixed window's promise, as a correct algorithm would be.
        let out = sim_engine::turmoil_run::run(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let r = run::judge(&spec, out);
        if r.bound == sim_engine::checker::Verdict::Broken {
            return Err(TestCaseError::fail(format!("{}: {}\n  replay: {}", r.subject, r.bound_detail, r.replay)));
        }
        Ok(())
    });
    let Err(e) = found else { panic!("the GET+SET race went unnoticed in 64 generated runs") };
    println!("stack: naive GET+SET caught: {e}");
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let promising: Vec<Subject> = Algorithm::ALL.into_iter().map(Subject::Library).collect();
    let n = cases(32);
    let result = runner(n).run(&cluster_cases(promising), |spec| {
        let a = sim_engine::turmoil_run::run(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = sim_engine::turmoil_run::run(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&a.trace_hash, &b.trace_hash, "replay: {}", run::replay_command(&spec));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("stack: {n} generated runs replayed byte-identical");
}
