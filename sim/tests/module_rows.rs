//! The library's algorithms and its enforcement point on the Redis module's commands
//! (`simulate --store module`: each algorithm's command, `RATELIMIT.RULES`), which
//! the model runs as a server that loaded the module: in every scenario, under every policy
//! and mode it runs in, each module row keeps its algorithm's promise, and its verdicts are its
//! script row's. Their counts are not held equal: the two rows send different commands, whose
//! replies reach the instances at other instants and interleave their requests otherwise (and
//! on Redis's clock the model's command clock moves on a microsecond for each command a script
//! calls), so a run parts from its script row's after a few requests; that the decisions
//! themselves are the scripts' is held against real Redis by `tests/tests/redis/module.rs`.

use redis_ratelimit::Algorithm;
use sim_engine::results::RunResult;
use sim_engine::run::{self, is_failure};
use sim_engine::scenario;
use sim_engine::subject::{RulesSubject, Subject};

#[test]
fn every_module_row_keeps_its_promise_and_its_script_row_s_verdicts_in_every_scenario() {
    let mut rows: Vec<Subject> =
        Algorithm::ALL.into_iter().flat_map(|a| [Subject::Library(a), Subject::Module(a)]).collect();
    // The enforcement point, every rule of a request in one script call or one RATELIMIT.RULES.
    rows.extend([Subject::Rules(RulesSubject::OneCall), Subject::Rules(RulesSubject::OneCallModule)]);
    let mut specs = Vec::new();
    for s in scenario::catalogue() {
        specs.extend(s.runs(&rows, &[5], None, 2_500));
    }
    let results = run::run_many(&specs, 2, &|| {}).expect("simulation runs");
    let failures: Vec<_> = results
        .iter()
        .filter(|r| is_failure(r))
        .map(|r| format!("{}: {} / {} / {}", r.replay, r.bound_detail, r.policy_detail, r.mode_detail))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    let same_run = |m: &RunResult, s: &RunResult| {
        (&m.scenario, &m.policy, &m.time_source, &m.mode, m.seed)
            == (&s.scenario, &s.policy, &s.time_source, &s.mode, s.seed)
    };
    let modules: Vec<&RunResult> = results.iter().filter(|r| r.subject.ends_with("-module")).collect();
    for m in &modules {
        let script_row = m.subject.trim_end_matches("-module");
        let s = results
            .iter()
            .find(|s| s.subject == script_row && same_run(m, s))
            .unwrap_or_else(|| panic!("{}: no script row beside it", m.replay));
        let verdicts = |r: &RunResult| (r.bound, r.policy_check, r.liveness, r.mode_check, r.errors);
        assert_eq!(verdicts(m), verdicts(s), "{} beside {}", m.replay, s.replay);
        // Leases are decided by Redis (the module's lease command) and spent by the instance.
        let from_redis = if m.mode == "lease" { m.sources.lease } else { m.sources.store };
        assert!(m.admitted > 0 && from_redis > 0, "{}: Redis decided nothing: {:?}", m.replay, m.sources);
    }
    // Every scenario of the library's algorithms, in every round-trip mode the scenarios run:
    // plain (which results name ""), batching, leases and the denial cache.
    assert!(modules.len() >= 100, "only {} module rows ran", modules.len());
    let modes: std::collections::BTreeSet<&str> = modules.iter().map(|r| r.mode.as_str()).collect();
    let names: Vec<&str> = sim_engine::mode::Mode::ALL.iter().map(|m| m.name()).collect();
    assert!(modes.iter().all(|m| m.is_empty() || names.contains(m)), "{modes:?}");
    assert!(modes.len() == names.len(), "every mode ran: {modes:?}");
    assert!(modules.iter().any(|r| r.subject == "rules-module"), "the enforcement point's module row ran");
    println!("module rows: {} runs, every promise kept, every verdict their script rows'", modules.len());
}
