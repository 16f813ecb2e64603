//! Slow (feature `slow-tests`; `cargo xtask test` runs it beside its other steps): every known
//! positive of the model lane over the whole catalogue shows on the real lanes too, on one
//! `redis-server`, on one `valkey-server` and on a Redis Cluster with replicas.
//!
//! The catalogue is expanded exactly as `cargo xtask simulate --backend redis` (or
//! `redis-cluster`) expands it, with the real lanes' own run lengths (each scenario past its
//! last fault, 12 s where clocks drift: `Scenario::real_duration_ms`). Every run is first run
//! on the model; each whose bound, failure policy or liveness broke there (a known positive:
//! the subjects' breaks, client time under skew) is run again on each real lane, where the
//! same check must break.

use sim::cli::SimulateArgs;
use sim_engine::results::{RunResult, Verdict};
use sim_engine::run;
use sim_engine::scenario::RunSpec;
use sim_engine::subject::Subject;

fn shaped_specs(backend: &str) -> Vec<RunSpec> {
    let o = SimulateArgs::parse_args(["--backend", backend, "--no-sweeps"]).expect("arguments").run;
    sim::campaign::specs(&o, &Subject::catalogue()).expect("the catalogue")
}

/// Which checks broke: bound, failure policy, liveness.
fn broke(r: &RunResult) -> [bool; 3] {
    [r.bound == Verdict::Broken, r.policy_check == Verdict::Broken, r.liveness == Verdict::Broken]
}

fn positives_hold_on(backend: &str, threads: usize, execute: &run::Executor) {
    if backend == "valkey" {
        sim_real::RealServer::Valkey.require_for_tests();
    } else {
        sim_real::process::require_for_tests("redis-server", "redis-server");
    }
    let specs = shaped_specs(backend);
    let model = run::run_many(&specs, 2, &|| {}).expect("model runs");
    // On one redis-server the `failover` fault is a crash that keeps every write (there is no
    // replica to lag behind), so what the model's lagging replica loses cannot be asked of it:
    // that scenario's positives are held on the cluster, where a replica really takes over.
    let comparable = |spec: &RunSpec| !(matches!(backend, "redis" | "valkey") && spec.scenario == "failover");
    let positives: Vec<(RunSpec, RunResult)> =
        specs.into_iter().zip(model).filter(|(spec, r)| comparable(spec) && broke(r).iter().any(|&b| b)).collect();
    assert!(positives.len() >= 10, "the model lane shows {} positives", positives.len());
    let real_specs: Vec<RunSpec> = positives.iter().map(|(s, _)| s.clone()).collect();
    #[allow(clippy::disallowed_methods)] // how long the lane took, printed for the README
    let started = std::time::Instant::now();
    let real = run::run_many_with(&real_specs, threads, &|| {}, execute).expect("real runs");
    let missed: Vec<&(RunSpec, RunResult)> =
        positives.iter().zip(&real).filter(|((spec, m), r)| !shown(backend, spec, m, r)).map(|(p, _)| p).collect();
    // A real lane runs in real time beside the other steps of `cargo xtask test`: a loaded
    // machine stretches the gaps a liveness positive needs (ADR-002's starvation wants requests
    // closer together than one token's refill), so a positive that did not show is run once
    // more, alone, and only one that does not show then either fails the lane.
    let again_specs: Vec<RunSpec> = missed.iter().map(|(s, _)| s.clone()).collect();
    let again = run::run_many_with(&again_specs, 1, &|| {}, execute).expect("real runs");
    let missing: Vec<String> = missed
        .iter()
        .zip(&again)
        .filter(|((spec, m), r)| !shown(backend, spec, m, r))
        .map(|((_, m), r)| format!("{}: model {:?} real {:?}: {}", r.replay, broke(m), broke(r), r.bound_detail))
        .collect();
    println!(
        "{backend}: {} known positives of the model lane, run in {:?} ({} run again)",
        positives.len(),
        started.elapsed(),
        missed.len()
    );
    assert!(missing.is_empty(), "positives the {backend} lane did not show, twice:\n{}", missing.join("\n"));
}

/// Whether every check that broke on the model broke on the real lane too (printing the run).
fn shown(backend: &str, spec: &RunSpec, on_model: &RunResult, on_real: &RunResult) -> bool {
    let (m, mut r) = (broke(on_model), broke(on_real));
    // Liveness judges only windows in which Redis decided every request. Where the failure
    // policy answered more requests on the real lane than on the model (a Redis Cluster
    // takes longer to serve every slot again after a restart), the windows the model judged
    // may be the policy's there: judged, but not the same windows.
    let policy_answered = |x: &RunResult| x.sources.fail_open + x.sources.fail_closed + x.sources.local_budget;
    let longer_outage = policy_answered(on_real) > policy_answered(on_model);
    if m[2] && !r[2] && longer_outage {
        println!(
            "{backend}: {} {}: liveness not comparable: the policy answered {} requests here, {} on the model",
            spec.scenario,
            spec.subject,
            policy_answered(on_real),
            policy_answered(on_model)
        );
        r[2] = true;
    }
    println!(
        "{backend}: {} {} {} {} ({} ms): model {m:?}, real {r:?}: bound {} / policy {} / liveness {}",
        spec.scenario,
        spec.subject,
        spec.policy.name(),
        spec.effective_time_source().name(),
        spec.duration_ms,
        on_real.bound_detail,
        on_real.policy_detail,
        on_real.liveness_detail
    );
    m.iter().zip(r).all(|(&model_broke, real_broke)| !model_broke || real_broke)
}

#[test]
fn every_model_positive_of_the_catalogue_shows_on_one_real_redis() {
    positives_hold_on("redis", 6, &sim_real::execute);
}

/// The same on one Valkey server (`--backend valkey`): `cargo xtask test` runs it in its
/// Valkey lane, and the Redis lane skips it.
#[test]
fn every_model_positive_of_the_catalogue_shows_on_one_real_valkey() {
    positives_hold_on("valkey", 6, &sim_real::execute_valkey);
}

#[test]
fn every_model_positive_of_the_catalogue_shows_on_a_real_cluster() {
    sim_real::process::require_for_tests("redis-cli", "redis-tools");
    positives_hold_on("redis-cluster", 3, &sim_real::execute_cluster);
}

/// The module rows on the real lane (`--backend redis --module PATH`): every server the run
/// starts loads the module, again after a crash, and each row keeps its algorithm's promise
/// in every mode the scenarios run it in, with Redis deciding (a server without the module
/// would be an error on every request).
#[test]
fn module_rows_keep_their_promises_on_a_real_redis_that_loads_the_module() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let module = redis_tests::build_module("dev").expect("the Redis module builds");
    let module = module.to_str().expect("a path in UTF-8");
    let mut args = vec!["--backend", "redis", "--module", module, "--no-sweeps", "--threads", "3"];
    args.extend(["--scenario", "baseline", "--scenario", "redis-restart"]);
    args.extend(["--subject", "gcra-module", "--subject", "fixed-window-module", "--subject", "sliding-log-module"]);
    let o = SimulateArgs::parse_args(args).expect("arguments");
    let specs = sim::campaign::specs(&o.run, &o.subjects).expect("the runs");
    for scenario in ["baseline", "redis-restart"] {
        let rows = specs.iter().filter(|s| s.scenario == scenario).count();
        assert!(rows >= 3, "{scenario}: {rows} runs of three rows");
    }
    let execute = sim::campaign::executor(&o.run).expect("the redis lane");
    let results = sim::campaign::run(&o.run, &o.subjects, &specs, &*execute).expect("real runs").results;
    for r in &results {
        println!("redis, module: {} {}: {:?}", r.scenario, r.subject, r.sources);
        assert!(!run::is_failure(r), "{}: {} / {} / {}", r.replay, r.bound_detail, r.policy_detail, r.liveness_detail);
        assert!(r.replay.contains("--module "), "the replay loads the module too: {}", r.replay);
        // In lease mode Redis decides the leases (the module's lease command) the instances spend.
        let from_redis = if r.mode == "lease" { r.sources.lease } else { r.sources.store };
        assert!(from_redis > r.admitted / 2, "{}: Redis decided too little: {:?}", r.replay, r.sources);
    }
}
