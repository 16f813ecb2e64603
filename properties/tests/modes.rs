//! The round-trip modes' promises, as properties:
//! - leases, on the twins alone: however many instances lease, whenever Redis decides within
//!   each call and whenever within its window each instance spends, the units spent keep the
//!   algorithm's bound `B + L * d / T`, and a mutant that lets a lease start at once (no lifetime
//!   kept free) is caught breaking it;
//! - the batch script on the Redis model decides exactly as the requests' own calls, one after
//!   the other, for any batch;
//! - every mode, on the whole simulated stack, under generated fault schedules (partitions,
//!   crashes of instances holding leases, Redis restarts losing every key): the algorithm's
//!   bound, the failure policy's and the mode's own promise all hold.
//!
//! A failure prints the shrunk schedule and, for the simulator, the replay command.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use redis_model::{ManualServerClock, ModelHandle, Reply};
use redis_ratelimit::harness::algo::lease::{self, LeaseArgs};
use redis_ratelimit::harness::algo::{self, gcra::GcraState, State};
use redis_ratelimit::harness::mode_scripts::{self, BatchRequest};
use redis_ratelimit::{Algorithm, FailurePolicy, Quota};
use sim_engine::faults::{format_schedule, normalize, Fault, FaultKind};
use sim_engine::mode::Mode;
use sim_engine::run::{self, is_failure};
use sim_engine::scenario;
use sim_engine::subject::Subject;

fn cases(divisor: u32) -> u32 {
    let all = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256u32);
    (all / divisor).max(8)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

// ----------------------------------------------------------------------- leases, on the twins

/// One lease call: which instance, when sent, how long until Redis decides and until the reply
/// is read, and when after that the instance spends (offsets into its window, in ms).
#[derive(Debug, Clone)]
struct Call {
    instance: usize,
    gap_ms: u64,
    to_redis_ms: u64,
    back_ms: u64,
    want: u64,
    spends: Vec<u64>,
}

fn calls(cap: u64) -> impl Strategy<Value = Vec<Call>> {
    let call = (0usize..4, 0u64..40, 0u64..6, 0u64..6, 1u64..=cap, proptest::collection::vec(0u64..=300, 0..12))
        .prop_map(|(instance, gap_ms, to_redis_ms, back_ms, want, spends)| Call {
            instance,
            gap_ms,
            to_redis_ms,
            back_ms,
            want,
            spends,
        });
    proptest::collection::vec(call, 1..60)
}

/// Runs `calls` through `take` (the GCRA twin, or a mutant), each instance spending within the
/// window its own clock gives the lease (as `limiter`'s lease book computes it), and returns the
/// spend times: (ms, units).
fn spend_times(
    lifetime_ms: u64,
    calls: &[Call],
    take: &dyn Fn(&mut Option<GcraState>, u64, LeaseArgs) -> lease::LeaseOutcome,
) -> Vec<(u64, u64)> {
    let mut state = None;
    let mut now = 1_000_000u64;
    let mut spent = Vec::new();
    let mut busy_until = [0u64; 4];
    for c in calls {
        now += c.gap_ms;
        let sent = now.max(busy_until[c.instance]);
        let decided = sent + c.to_redis_ms;
        let received = decided + c.back_ms;
        busy_until[c.instance] = received;
        let args = LeaseArgs {
            lifetime_ms,
            horizon_ms: 4 * lifetime_ms,
            want: c.want,
            need: 1,
            give_back: 0,
            written: (0, 0),
        };
        let o = take(&mut state, decided * 1000, args);
        if o.granted == 0 {
            continue;
        }
        let start = received + o.start_us.div_ceil(1000);
        let end = sent + (o.start_us + lifetime_ms * 1000) / 1000;
        let mut left = o.granted;
        let mut times: Vec<u64> = c.spends.iter().map(|s| start + s).filter(|&t| t <= end).collect();
        times.sort_unstable();
        for t in times {
            if left == 0 {
                break;
            }
            left -= 1;
            spent.push((t, 1));
        }
    }
    spent.sort_unstable();
    spent
}

/// The most spent beyond the bucket's bound over any interval (positive: broken).
fn excess(q: &Quota, spent: &[(u64, u64)]) -> f64 {
    // GCRA's bound with its rounded-up emission interval T: B units, then one per T.
    let t_ms = (q.period_ms() * 1000).div_ceil(q.limit()) as f64 / 1000.0;
    let mut worst = f64::NEG_INFINITY;
    for i in 0..spent.len() {
        let mut n = 0;
        for j in i..spent.len() {
            n += spent[j].1;
            let d = (spent[j].0 - spent[i].0) as f64;
            worst = worst.max(n as f64 - (q.burst() as f64 + d / t_ms));
        }
    }
    worst
}

fn lease_cases() -> impl Strategy<Value = (Quota, u64, Vec<Call>)> {
    (1u64..=200, 1u64..=20, 1u64..=100)
        .prop_filter_map("leases fit", |(limit, burst, lifetime_ms)| {
            let q = Quota::new(limit, Duration::from_secs(1)).with_burst(burst);
            (lease::capacity(Algorithm::Gcra, &q, lifetime_ms) >= 1).then_some((q, lifetime_ms))
        })
        .prop_flat_map(|(q, lifetime)| {
            let cap = lease::capacity(Algorithm::Gcra, &q, lifetime);
            (Just(q), Just(lifetime), calls(cap))
        })
}

#[test]
fn units_spent_from_leases_keep_the_bucket_s_bound_however_instances_spend_them() {
    let n = cases(1);
    let result = runner(n).run(&lease_cases(), |(q, lifetime, calls)| {
        let spent = spend_times(lifetime, &calls, &|s, now, a| lease::take_gcra(&q, s, now, a));
        let over = excess(&q, &spent);
        prop_assert!(over <= 1e-9, "{q:?} lifetime {lifetime} ms: {over:.3} units beyond the bound; spent {spent:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("modes: leases kept GCRA's bound over {n} generated schedules of calls and spends");
}

#[test]
fn a_lease_that_starts_its_slots_at_once_is_caught_over_admitting() {
    // The mutant reserves from the queue's end without keeping the lease's lifetime free: a unit
    // spent late in the lease then holds a slot the bucket had already refilled.
    let mutant = |q: &Quota, s: &mut Option<GcraState>, now_us: u64, a: LeaseArgs| {
        lease::take_gcra(q, s, now_us, LeaseArgs { lifetime_ms: 0, ..a })
    };
    // From a fixed seed: drawn afresh each run, 3,000 cases missed the mutant about one run in
    // twenty, failing CI on code that had not changed. A seed that finds it finds it every time.
    let config = Config { cases: 3_000, failure_persistence: None, ..Config::default() };
    let mut fixed = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let found = fixed.run(&lease_cases(), |(q, lifetime, calls)| {
        let spent = spend_times(lifetime, &calls, &|s, now, a| mutant(&q, s, now, a));
        let over = excess(&q, &spent);
        prop_assert!(over <= 1e-9, "{q:?} lifetime {lifetime}: {over:.3} beyond the bound");
        Ok(())
    });
    let Err(e) = found else { panic!("leases without a free lifetime went unnoticed") };
    println!("modes: a lease without its free lifetime caught: {e}");
}

// ------------------------------------------------------------------ batches, on the model

fn ints(reply: &Reply) -> Option<Vec<i64>> {
    match reply {
        Reply::Array(items) => items.iter().map(|i| if let Reply::Integer(n) = i { Some(*n) } else { None }).collect(),
        _ => None,
    }
}

#[test]
fn a_batch_on_the_redis_model_decides_as_its_requests_one_after_the_other() {
    let base_ms = 1_767_225_600_000u64;
    let strategy = (
        proptest::sample::select(Algorithm::ALL.to_vec()),
        1u64..=20,
        1u64..=3_000,
        proptest::collection::vec(proptest::collection::vec((0u32..3, 0u64..=5), 1..20), 1..6),
        proptest::collection::vec(0u64..500, 6),
    );
    let n = cases(2);
    let result = runner(n).run(&strategy, |(algorithm, limit, period, batches, gaps)| {
        let q = Quota::new(limit, Duration::from_millis(period));
        prop_assume!(q.validate(algorithm).is_ok());
        let clock = ManualServerClock::from_millis(base_ms);
        let model = ModelHandle::new(clock.clone());
        let source = mode_scripts::batch_source(algorithm);
        let mut states: BTreeMap<u32, Option<State>> = BTreeMap::new();
        let mut now = base_ms;
        for (batch, gap) in batches.iter().zip(&gaps) {
            now += gap;
            clock.set_micros(now * 1000);
            let stems: Vec<String> = batch.iter().map(|(k, _)| format!("ratelimiter:{{k{k}}}:")).collect();
            let requests = batch
                .iter()
                .zip(&stems)
                .map(|((_, cost), stem)| (stem.as_str(), Some(now), (*cost).min(q.capacity(algorithm))))
                .collect();
            let req = BatchRequest { algorithm, quota: &q, requests, blockable: false };
            let call = req.invocation();
            let n = call.keys.len().to_string();
            let mut argv: Vec<&[u8]> = vec![b"EVAL", source.as_bytes(), n.as_bytes()];
            argv.extend(call.keys.iter().chain(&call.args).map(|s| s.as_bytes()));
            let Reply::Array(entries) = model.call(&argv) else { return Err(TestCaseError::fail("not an array")) };
            for (i, ((key, _), entry)) in batch.iter().zip(&entries).enumerate() {
                let cost = req.requests[i].2;
                let twin = algo::step(algorithm, &q, states.entry(*key).or_default(), now, cost);
                let got = ints(entry).and_then(|r| req.read_entry(i, Ok(&r)));
                prop_assert_eq!(got, Some(Ok((twin, now))), "{} {:?} request #{} of {:?}", algorithm, q, i, batch);
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("modes: batches on the Redis model decided as their requests one by one over {n} generated cases");
}

// ------------------------------------------------------------------ every mode, the whole stack

fn fault() -> impl Strategy<Value = Fault> {
    let kind = prop_oneof![
        2 => (0u32..3).prop_map(|instance| FaultKind::Partition { instance }),
        1 => (0u32..3).prop_map(|instance| FaultKind::PartitionFromRedis { instance }),
        1 => (0u32..3).prop_map(|instance| FaultKind::Hold { instance }),
        2 => (0u32..3).prop_map(|instance| FaultKind::InstanceCrash { instance }),
        2 => any::<bool>().prop_map(|keep_data| FaultKind::RedisCrash { keep_data }),
        1 => Just(FaultKind::RedisPause),
        1 => Just(FaultKind::ScriptFlush),
    ];
    (kind, 100u64..2_500, 20u64..1_500).prop_map(|(kind, at_ms, len)| Fault { kind, at_ms, until_ms: at_ms + len })
}

#[test]
fn every_mode_keeps_its_promise_under_generated_fault_schedules() {
    let subjects: Vec<(Subject, Mode)> = Algorithm::ALL
        .into_iter()
        .flat_map(|a| [Mode::DenialCache, Mode::Lease, Mode::Batch].map(|m| (Subject::Library(a), m)))
        .filter(|(s, m)| s.runs_in(*m))
        .collect();
    let policy =
        proptest::sample::select(vec![FailurePolicy::FailOpen, FailurePolicy::FailClosed, scenario::LOCAL_BUDGET]);
    let strategy = (proptest::sample::select(subjects), policy, any::<u64>(), proptest::collection::vec(fault(), 0..5))
        .prop_map(|((subject, mode), policy, seed, faults)| {
            let swarm = scenario::find("swarm").expect("swarm scenario");
            let mut spec = swarm.runs(&[subject], &[seed], Some(3), 3_000).remove(0);
            spec.mode = mode;
            spec.policy = policy;
            spec.faults = normalize(faults);
            spec
        });
    let n = cases(16);
    let result = runner(n).run(&strategy, |spec| {
        let out = sim_engine::turmoil_run::run(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let r = run::judge(&spec, out);
        if is_failure(&r) {
            let why = [&r.bound_detail, &r.policy_detail, &r.mode_detail].map(|s| s.as_str()).join("; ");
            return Err(TestCaseError::fail(format!(
                "{} {} / {} / seed {} under faults [{}]: {why}\n  replay: {}",
                r.subject,
                spec.mode,
                r.policy,
                r.seed,
                format_schedule(&spec.faults),
                r.replay
            )));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("modes: {n} generated fault schedules, every mode's promise, bound and policy held");
}
