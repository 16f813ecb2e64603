//! The simulator end to end on the Redis model: determinism, the known positives the
//! catalogue must show, and bounds that must hold in every scenario and swarm seed.

use redis_ratelimit::{FailurePolicy, TimeSource};
use sim_engine::mode::Mode;
use sim_engine::results::{RunResult, Verdict};
use sim_engine::run::{self, is_failure};
use sim_engine::scenario::{self, RunSpec};
use sim_engine::subject::Subject;

fn specs(name: &str, subjects: &[&str], seeds: &[u64], duration_ms: u64) -> Vec<RunSpec> {
    let subjects: Vec<Subject> = subjects.iter().map(|s| Subject::named(s).expect("a catalogue subject")).collect();
    scenario::find(name).expect("scenario exists").runs(&subjects, seeds, None, duration_ms)
}

fn run_all(specs: &[RunSpec]) -> Vec<RunResult> {
    run::run_many(specs, 2, &|| {}).expect("simulation runs")
}

fn one<'a>(results: &'a [RunResult], subject: &str, pred: impl Fn(&RunResult) -> bool) -> &'a RunResult {
    results.iter().find(|r| r.subject == subject && pred(r)).expect("result present")
}

#[test]
fn the_same_seed_replays_a_byte_identical_trace_and_another_seed_does_not() {
    let mut s = specs("swarm", &["token-bucket"], &[7], 4_000);
    s.truncate(1);
    let twice = run_all(&[s[0].clone(), s[0].clone()]);
    assert_eq!(twice[0].trace_hash, twice[1].trace_hash);
    let mut other = s[0].clone();
    other.seed = 8;
    let third = run_all(&[other]);
    assert_ne!(twice[0].trace_hash, third[0].trace_hash);
}

#[test]
fn naive_get_set_over_admits_under_concurrency_while_atomic_scripts_hold() {
    let results = run_all(&specs("get-set-race", &["naive", "fixed-window", "gcra"], &[1], 4_000));
    let naive = one(&results, "naive", |_| true);
    assert_eq!(naive.bound, Verdict::Broken, "{naive:?}");
    assert!(
        naive.admitted > naive.oracle_admitted + naive.oracle_admitted / 5,
        "naive {} vs oracle {}",
        naive.admitted,
        naive.oracle_admitted
    );
    for a in ["fixed-window", "gcra"] {
        let r = one(&results, a, |_| true);
        assert_eq!(r.bound, Verdict::Held, "{a}: {}", r.bound_detail);
        assert!(
            r.admitted <= r.oracle_admitted + r.oracle_admitted / 50,
            "{a}: {} vs {}",
            r.admitted,
            r.oracle_admitted
        );
    }
}

#[test]
fn adr002_starves_a_steady_trickle_that_a_correct_bucket_serves() {
    let results = run_all(&specs("steady-trickle", &["adr002", "token-bucket"], &[1], 6_000));
    let adr = one(&results, "adr002", |_| true);
    let tb = one(&results, "token-bucket", |_| true);
    assert!(adr.wrong_limit_pct > 30.0, "adr002 wrongly limited only {:.1}%", adr.wrong_limit_pct);
    assert!(tb.wrong_limit_pct < 2.0, "token bucket wrongly limited {:.1}%", tb.wrong_limit_pct);
    assert!(adr.admitted * 2 < tb.admitted, "adr002 {} vs token bucket {}", adr.admitted, tb.admitted);
}

#[test]
fn client_time_over_admits_under_skew_while_server_time_holds() {
    let results = run_all(&specs("clock-skew", &["token-bucket", "gcra", "adr002"], &[1], 12_000));
    for a in ["token-bucket", "gcra"] {
        let server = one(&results, a, |r| r.time_source == "server");
        let client = one(&results, a, |r| r.time_source == "client");
        assert_eq!(server.bound, Verdict::Held, "{a} server: {}", server.bound_detail);
        assert_eq!(client.bound, Verdict::Broken, "{a} client: {}", client.bound_detail);
        assert!(client.expected_finding && !is_failure(client));
        assert!(client.admitted > server.admitted, "{a}: client {} vs server {}", client.admitted, server.admitted);
    }
    let adr = one(&results, "adr002", |_| true);
    assert!(
        adr.wrong_allow_pct + adr.wrong_limit_pct > 5.0,
        "adr002 decided wrongly only {:.1}% + {:.1}%",
        adr.wrong_allow_pct,
        adr.wrong_limit_pct
    );
}

#[test]
fn fixed_window_admits_up_to_twice_its_limit_across_a_boundary() {
    let results = run_all(&specs("window-boundary", &["fixed-window", "sliding-log"], &[1], 12_000));
    let fw = one(&results, "fixed-window", |_| true);
    let log = one(&results, "sliding-log", |_| true);
    assert!(fw.peak_per_period > fw.limit * 3 / 2, "fixed window peak {} for limit {}", fw.peak_per_period, fw.limit);
    assert!(fw.peak_per_period <= 2 * fw.limit);
    assert_eq!(fw.bound, Verdict::Held, "its promise allows the boundary double: {}", fw.bound_detail);
    assert!(log.peak_per_period <= log.limit, "sliding log peak {}", log.peak_per_period);
}

#[test]
fn fail_open_is_unbounded_during_an_outage_while_the_local_budget_holds() {
    let results = run_all(&specs("redis-outage", &["gcra"], &[1], 10_000));
    let open = one(&results, "gcra", |r| r.policy == FailurePolicy::FailOpen.name());
    let closed = one(&results, "gcra", |r| r.policy == FailurePolicy::FailClosed.name());
    let budget = one(&results, "gcra", |r| r.policy == "local-budget");
    assert!(open.sources.fail_open > 0 && open.wrong_allow > open.requests / 10, "{open:?}");
    assert_eq!(closed.policy_check, Verdict::Held, "{}", closed.policy_detail);
    assert!(closed.sources.fail_closed > 0);
    assert_eq!(budget.policy_check, Verdict::Held, "{}", budget.policy_detail);
    assert!(budget.sources.local_budget > 0);
    for r in [open, closed, budget] {
        assert!(r.recover_ms.is_some_and(|ms| ms < 2_000), "{} recovered in {:?}", r.policy, r.recover_ms);
    }
}

#[test]
fn incr_then_expire_leaves_counters_without_a_ttl_and_those_keys_limited_forever() {
    let results = run_all(&specs("client-crash", &["incr-expire", "fixed-window"], &[1], 12_000));
    let incr = one(&results, "incr-expire", |_| true);
    let redis = incr.redis.as_ref().expect("the run's cost to Redis");
    assert!(redis.keys_without_ttl > 0, "no counter was left without a TTL: {redis:?}");
    assert!(redis.keys_without_ttl_sample.iter().all(|k| k.starts_with("rl:{key-")), "{redis:?}");
    // Such a key keeps its count for ever: once it reaches the limit, nothing passes again.
    assert_eq!(incr.liveness, Verdict::Broken, "{}", incr.liveness_detail);
    assert!(!is_failure(incr), "a subject's finding, not the run's failure");
    let script = one(&results, "fixed-window", |_| true);
    assert_eq!(script.redis.as_ref().map(|r| r.keys_without_ttl), Some(0), "one script leaves nothing half done");
    assert_eq!(script.liveness, Verdict::Held, "{}", script.liveness_detail);
}

#[test]
fn leases_cut_a_busy_key_s_calls_within_their_bound_and_cached_denials_are_redis_s_own() {
    let mut all = specs("busy-key", &["gcra", "token-bucket", "sliding-log"], &[2], 12_000);
    all.retain(|s| s.mode != Mode::Batch);
    let results = run_all(&all);
    for a in ["gcra", "token-bucket"] {
        let plain = one(&results, a, |r| r.mode.is_empty());
        let leased = one(&results, a, |r| r.mode == "lease");
        assert!(!is_failure(leased), "{a}: {} / {}", leased.bound_detail, leased.mode_detail);
        assert_eq!((leased.bound, leased.mode_check), (Verdict::Held, Verdict::Held), "{}", leased.mode_detail);
        let per_call = 1.0 / leased.round_trips_per_decision();
        assert!(per_call >= 20.0, "{a}: only {per_call:.1} decisions per call with leases");
        assert!(plain.round_trips_per_decision() > 0.99, "{a} plain: {}", plain.round_trips_per_decision());
        assert!(leased.sources.lease == leased.requests, "{a}: every decision from a lease: {:?}", leased.sources);
        let under = 100.0 * leased.under_admitted as f64 / leased.requests as f64;
        assert!(under <= 1.0, "{a}: under-admitted {under:.2}%: {}", leased.mode_detail);
    }
    // The sliding log cannot lease; its denial cache answers many denials, each Redis's own.
    assert!(results.iter().all(|r| !(r.subject == "sliding-log" && r.mode == "lease")));
    let cached = one(&results, "sliding-log", |r| r.mode == "denial-cache");
    assert_eq!(cached.mode_check, Verdict::Held, "{}", cached.mode_detail);
    assert!(cached.sources.denial_cache > cached.requests / 4, "{:?}", cached.sources);
    assert!(cached.round_trips_per_decision() < 0.75);
}

/// The swarm's run of `subject` on 3 instances leasing and failing open, for `duration_ms`
/// under the fault schedule `faults` (as `--faults` takes it): what its replay command runs.
fn leasing_swarm(subject: &str, seed: u64, duration_ms: u64, faults: &str) -> RunSpec {
    let subject = Subject::named(subject).expect("a catalogue subject");
    let mut spec = scenario::find("swarm")
        .expect("swarm scenario")
        .runs(&[subject], &[seed], Some(3), duration_ms)
        .into_iter()
        .find(|s| s.mode == Mode::Lease && s.policy == FailurePolicy::FailOpen)
        .expect("the swarm runs leases failing open");
    spec.faults = sim_engine::faults::normalize(sim_engine::faults::parse_schedule(faults).expect("a schedule"));
    spec
}

/// Three instances crash in turn, so Redis's state for a key comes near rest more often than
/// the exact limiter fed every recorded request does; each time a lease leaves up to one
/// lifetime's refill unused. Judged on the exact limiter's rests, this run was flagged.
#[test]
fn leases_whose_instances_crash_in_turn_under_admit_within_their_bound() {
    let faults = "instance-crash:1@292..1654,instance-crash:2@1523..1839,instance-crash:0@2419..3025";
    let spec = leasing_swarm("token-bucket", 5_241_322_301_665_836_755, 3_000, faults);
    let r = &run_all(&[spec])[0];
    assert_eq!(r.mode_check, Verdict::Held, "{}", r.mode_detail);
    assert!(!is_failure(r), "{} / {}", r.bound_detail, r.mode_detail);
    // The case needs the refill term: the unspent units alone do not cover it.
    assert!(r.under_admitted > r.lease_unspent, "{}", r.mode_detail);
}

/// A lease call whose reply never comes (here Redis pauses past the call's timeout) may still
/// have run and granted what it asked for: the ledger keeps those units in doubt, as leased and
/// never spent, until a reply settles them.
#[test]
fn lease_calls_left_unanswered_count_what_they_asked_for_as_unspent() {
    let spec = leasing_swarm("gcra", 3, 2_000, "redis-pause@500..1900");
    let out = sim_engine::turmoil_run::run(&spec).expect("the run");
    let doubtful: Vec<_> = out.modes.ledger.values().filter(|e| e.in_doubt > 0).collect();
    assert!(!doubtful.is_empty(), "no call was left unanswered: {:?}", out.modes.ledger);
    for e in doubtful {
        assert!(e.unspent() >= e.in_doubt, "{e:?}");
    }
    let r = run::judge(&spec, out);
    assert!(!is_failure(&r), "{} / {}", r.bound_detail, r.mode_detail);
}

#[test]
fn every_scenario_keeps_every_bound_promising_algorithm_within_its_bound() {
    let promising: Vec<Subject> = redis_ratelimit::Algorithm::ALL.into_iter().map(Subject::Library).collect();
    let mut all = Vec::new();
    for s in scenario::catalogue() {
        all.extend(s.runs(&promising, &[3], None, 6_000));
    }
    let results = run_all(&all);
    let failures: Vec<_> = results
        .iter()
        .filter(|r| is_failure(r))
        .map(|r| format!("{}: {} / {} / {}", r.replay, r.bound_detail, r.policy_detail, r.mode_detail))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    println!("scenarios: {} runs, every promised bound held", results.len());
}

#[test]
fn two_hundred_swarm_seeds_hold_every_promised_bound() {
    let promising: Vec<Subject> = redis_ratelimit::Algorithm::ALL.into_iter().map(Subject::Library).collect();
    let swarm = scenario::find("swarm").expect("swarm");
    let mut specs = Vec::new();
    for seed in 1..=200u64 {
        // One algorithm and one policy per seed, drawn round-robin, so 200 seeds cover all.
        let subject = promising[seed as usize % promising.len()].clone();
        let mut runs = swarm.runs(&[subject], &[seed], None, 3_000);
        let policy = runs.remove((seed / promising.len() as u64) as usize % runs.len());
        specs.push(policy);
    }
    assert!(specs.iter().all(|s| s.time_source == TimeSource::Server));
    let results = run_all(&specs);
    let failures: Vec<_> = results
        .iter()
        .filter(|r| is_failure(r))
        .map(|r| format!("{}: {} / {} / {}", r.replay, r.bound_detail, r.policy_detail, r.mode_detail))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    println!("swarm: {} seeds, every promised bound held", results.len());
}

#[test]
fn the_shards_of_a_sweep_merge_back_into_the_unsharded_sweep() {
    use sim::cli::SimulateArgs;
    use sim_engine::results::{Results, SCHEMA};
    let subjects: Vec<Subject> = ["gcra", "fixed-window"].iter().filter_map(|s| Subject::named(s)).collect();
    let results_of = |extra: &[&str]| {
        let mut args = vec!["--scenario", "baseline", "--scenario", "swarm", "--seeds", "3", "--duration", "1500ms"];
        args.extend_from_slice(extra);
        let o = SimulateArgs::parse_args(args).expect("arguments").run;
        let specs = sim::campaign::specs(&o, &subjects).expect("runs");
        let results = run_all(&specs);
        Results {
            schema: SCHEMA.into(),
            backend: "model".into(),
            duration_ms: 1_500,
            results,
            shard: o.shard_name(),
            ..Results::default()
        }
    };
    let whole = results_of(&[]);
    // Shards given in any order; every run lands in exactly one.
    let shards: Vec<(String, Results)> =
        ["3/3", "1/3", "2/3"].iter().map(|s| (s.to_string(), results_of(&["--shard", s]))).collect();
    let sizes: Vec<usize> = shards.iter().map(|(_, r)| r.results.len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), whole.results.len(), "{sizes:?}");
    assert!(sizes.iter().all(|&n| n > 0 && n < whole.results.len()), "{sizes:?}");
    let merged = sim_engine::results::merge(shards).expect("the shards merge");
    let total = |r: &Results, f: fn(&RunResult) -> u64| r.results.iter().map(f).sum::<u64>();
    for (what, f) in [
        ("requests", (|r: &RunResult| r.requests) as fn(&RunResult) -> u64),
        ("admitted", |r| r.admitted),
        ("oracle admitted", |r| r.oracle_admitted),
        ("wrong allows", |r| r.wrong_allow),
    ] {
        assert_eq!(total(&merged, f), total(&whole, f), "{what}");
    }
    // More than the totals: the same runs in the same order, so the same tables, report and
    // trace hash.
    assert_eq!(merged.results, whole.results);
    println!("shards: {} runs in 3 shards of {sizes:?} merged into the unsharded sweep", whole.results.len());
}

#[test]
fn a_failover_costs_extra_admissions_within_the_stated_bound_and_replays_identically() {
    let results = run_all(&specs("failover", &["token-bucket", "gcra", "sliding-log", "fixed-window"], &[1, 2], 8_000));
    let extra = |r: &RunResult| -> u64 {
        r.bound_detail.split_whitespace().next().and_then(|n| n.parse().ok()).expect("the detail starts with the count")
    };
    for r in &results {
        assert_eq!(r.bound, Verdict::Held, "{} {}: {}", r.subject, r.policy, r.bound_detail);
        assert!(r.bound_detail.contains("extra admissions over the promise after the failover"), "{}", r.bound_detail);
        // One burst (20) plus 20/s x 300 ms.
        assert!(extra(r) <= 26, "{}: {}", r.subject, r.bound_detail);
        assert_ne!(r.policy_check, Verdict::Broken, "{}", r.policy_detail);
    }
    // The lost writes show: a bucket admits again what it admitted in the last 300 ms.
    for a in ["token-bucket", "gcra"] {
        assert!(results.iter().filter(|r| r.subject == a).any(|r| extra(r) > 0), "{a} lost nothing in a failover");
    }
    // Fail-closed answered the gap with denials that say why.
    let closed = one(&results, "gcra", |r| r.policy == FailurePolicy::FailClosed.name());
    assert!(closed.sources.fail_closed > 0, "{:?}", closed.sources);
    let again = run_all(&specs("failover", &["gcra"], &[1], 8_000));
    let first = one(&results, "gcra", |r| r.seed == 1 && r.policy == again[0].policy);
    assert_eq!(first.trace_hash, again[0].trace_hash, "a failover run replays byte for byte");
}

/// The race sweep's far end: 8 instances 20 ms from Redis (40 ms a round trip, against a
/// 100 ms call timeout). A handshake takes longer than one call may wait, so a store that
/// cancelled its dial on every timeout never connected and every decision went to the failure
/// policy (fail-open: 3.5-4x the limit). Redis decides them, and the atomic scripts hold: what
/// they admit beyond the oracle (which decides each request when it was sent) is what 20 ms of
/// travel moves across a window's edge, within the bound the checker allows.
#[test]
fn at_twenty_ms_to_redis_the_store_decides_and_atomic_scripts_hold() {
    let subjects: Vec<Subject> =
        ["fixed-window", "token-bucket"].iter().map(|s| Subject::named(s).expect("a catalogue subject")).collect();
    let specs: Vec<RunSpec> = run::race_sweep_specs(&subjects, 1, 4_000)
        .into_iter()
        .filter(|(s, latency)| *latency == 40.0 && s.instances == 8)
        .map(|(s, _)| s)
        .collect();
    assert_eq!(specs.len(), 2, "the sweep reaches 20 ms at 8 instances for each subject");
    for r in run_all(&specs) {
        let decided = r.sources.store + r.sources.fail_open + r.sources.fail_closed + r.sources.local_budget;
        // The first calls wait for the connection; after that Redis answers every one.
        assert!(r.sources.store * 100 >= decided * 97, "{}: {:?} of {} decisions", r.subject, r.sources, decided);
        assert_eq!(r.bound, Verdict::Held, "{}: {}", r.subject, r.bound_detail);
        assert!(r.admitted * 10 <= r.oracle_admitted * 11, "{}: {} vs {}", r.subject, r.admitted, r.oracle_admitted);
        println!("{}: {} admitted, the oracle {}, {:?}", r.subject, r.admitted, r.oracle_admitted, r.sources);
    }
}

/// The runs of the sweeps change their scenario (instances, latency, load, clocks, time
/// source): the replay command each prints must rerun exactly that run, byte for byte.
#[test]
fn every_sweep_run_replays_from_its_printed_command() {
    let subjects = [Subject::named("adr002").expect("a catalogue subject"), Subject::named("gcra").expect("one")];
    let race = run::race_sweep_specs(&subjects, 1, 1_500);
    let skew = run::skew_sweep_specs(&subjects, 1, 1_500);
    let chosen: Vec<RunSpec> = race
        .iter()
        .map(|(s, _)| s.clone())
        .filter(|s| s.instances == 32 || s.latency_ms == (20, 20))
        .chain(skew.iter().map(|(s, _)| s.clone()).filter(|s| s.skew.first() == Some(&(1_000, 0))))
        .collect();
    assert_eq!(chosen.len(), 2 * 2 + 3, "the runs this test replays: 32 instances, 20 ms, skew 1 s per subject");
    for spec in &chosen {
        let command = run::replay_command(spec);
        let prefix = format!("{} ", results::command::command("simulate"));
        let args = command.strip_prefix(&prefix).expect("a simulate command");
        let o =
            sim::cli::SimulateArgs::parse_args(args.split_whitespace()).unwrap_or_else(|e| panic!("{command}: {e}"));
        let replayed = sim::campaign::specs(&o.run, &o.subjects).expect("the replay selects runs");
        assert_eq!(replayed.len(), 1, "{command} selects one run, got {}", replayed.len());
        let (original, again) = (run_all(std::slice::from_ref(spec)), run_all(&replayed));
        assert_eq!(original[0].trace_hash, again[0].trace_hash, "{command} replays another run");
        assert_eq!(original[0].replay, again[0].replay, "the replay prints itself");
    }
}

/// A paused Redis runs, when it resumes, every script sent while it was stopped: each call the
/// limiter gave up on (and its failure policy answered) is counted by Redis too, at most once
/// per call given up on, and the bound on what Redis admitted still holds.
#[test]
fn calls_given_up_on_during_a_pause_run_later_once_each_and_are_counted() {
    let results = run_all(&specs("redis-pause", &["fixed-window", "gcra"], &[1], 8_000));
    assert!(!results.is_empty());
    for r in &results {
        let late = r.late_executions.expect("one script per decision");
        let given_up = r.sources.fail_open + r.sources.fail_closed + r.sources.local_budget;
        assert!(late > 0, "{} {}: nothing ran late: {:?}", r.subject, r.policy, r.sources);
        assert!(late <= given_up, "{} {}: {late} late executions of {given_up} calls given up on", r.subject, r.policy);
        assert!(r.policy_detail.contains("ran on Redis later"), "{}", r.policy_detail);
        assert_eq!(r.bound, Verdict::Held, "{} {}: {}", r.subject, r.policy, r.bound_detail);
    }
}
