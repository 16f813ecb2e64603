//! Every algorithm through every place it must be: the walk-through behind the change list in
//! `docs/ARCHITECTURE.md` ("Adding an algorithm"). `Algorithm::ALL` is the one list of
//! algorithms; each place below either iterates it or matches on `Algorithm` (the compiler
//! names those), and this test walks each algorithm of it through the places the compiler
//! cannot see: its script file, the model deciding by that script and by the module's command,
//! the twin, the all-or-nothing script, a refund, the blockable and batch scripts, the leases,
//! the promise every checker holds it to, and its subject file. A new algorithm that misses
//! one fails here, naming the algorithm and the place.

use std::path::Path;

use redis_model::{ManualServerClock, ModelHandle, Reply};
use redis_ratelimit::harness::algo::all_or_nothing::{self, RuleOnState};
use redis_ratelimit::harness::algo::{self, lease};
use redis_ratelimit::harness::mode_scripts;
use redis_ratelimit::harness::rules_script::{self, RulesRequest};
use redis_ratelimit::harness::scripts::{self, Invocation, Request};
use redis_ratelimit::{Algorithm, Quota};
use sim_engine::promise::Promise;
use sim_engine::subject::SubjectFile;

/// The repository's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ is in the repository")
}

/// The model's reply as the integers a decision's reply is made of.
fn integers(reply: Reply, what: &str) -> Vec<i64> {
    match reply {
        Reply::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Reply::Integer(n) => n,
                other => panic!("{what}: a reply element {other:?}, not an integer"),
            })
            .collect(),
        other => panic!("{what}: {other:?}"),
    }
}

/// Runs `source` by EVAL with `call` on `model`.
fn eval(model: &ModelHandle, source: &str, call: &Invocation) -> Reply {
    let count = call.keys.len().to_string();
    let mut args: Vec<&[u8]> = vec![b"EVAL", source.as_bytes(), count.as_bytes()];
    args.extend(call.keys.iter().chain(&call.args).map(|s| s.as_bytes()));
    model.call(&args)
}

/// Runs the module's `command` with `call`'s KEYS then ARGV on `model`.
fn command(model: &ModelHandle, command: &str, call: &Invocation) -> Reply {
    let mut args: Vec<&[u8]> = vec![command.as_bytes()];
    args.extend(call.keys.iter().chain(&call.args).map(|s| s.as_bytes()));
    model.call(&args)
}

/// The requests each algorithm is walked through: (ms, cost), a burst past the quota, a peek,
/// a wait, more.
const STEPS: [(u64, u64); 8] = [(0, 1), (10, 1), (20, 1), (30, 1), (40, 0), (400, 1), (1_500, 2), (1_510, 1)];

#[test]
fn every_algorithm_has_its_own_names_and_script_file() {
    let mut suffixes: Vec<&str> = Algorithm::ALL.iter().map(|&a| scripts::key_suffix(a)).collect();
    let mut names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
    let mut commands: Vec<&str> = Algorithm::ALL.iter().map(|&a| scripts::module_command(a)).collect();
    for list in [&mut suffixes, &mut names, &mut commands] {
        list.sort_unstable();
        list.dedup();
        assert_eq!(list.len(), Algorithm::ALL.len(), "each algorithm's own: {list:?}");
    }
    for a in Algorithm::ALL {
        let script = scripts::for_algorithm(a);
        assert_eq!(script.algorithm, a);
        let on_disk = std::fs::read_to_string(root().join("lua").join(script.file)).expect("the script's file");
        assert_eq!(on_disk, script.source, "{a}: lua/{} is what the library sends", script.file);
        assert_eq!(a.name().parse::<Algorithm>().ok(), Some(a), "{a}: its name reads back");
    }
}

#[test]
fn the_model_decides_every_algorithm_by_its_script_and_its_command_as_its_twin_does() {
    let quota = Quota::per_second(3);
    for a in Algorithm::ALL {
        let clock = ManualServerClock::new(1_000_000);
        let model = ModelHandle::new(clock.clone());
        let mut twin = None;
        for (i, &(t, cost)) in STEPS.iter().enumerate() {
            let now = 1_000_000 + t;
            clock.set_micros(now * 1000);
            let expected = algo::step(a, &quota, &mut twin, now, cost);
            for (side, stem) in [("script", "wt:{s}:"), ("module", "wt:{m}:")] {
                let request = Request { algorithm: a, quota: &quota, stem, now_ms: Some(now), cost };
                let call = request.invocation_of_stem();
                let reply = match side {
                    "script" => eval(&model, scripts::for_algorithm(a).source, &call),
                    _ => command(&model, scripts::module_command(a), &call),
                };
                let what = format!("{a} by its {side}, step {i}");
                let got = request.read_reply(&integers(reply, &what)).map(|(o, _)| o);
                assert_eq!(got, Some(expected), "{what}");
            }
        }
    }
}

#[test]
fn a_refund_a_debit_and_the_scripts_around_each_algorithm_cover_it() {
    let quota = Quota::per_minute(2);
    for a in Algorithm::ALL {
        let source = scripts::for_algorithm(a).source;
        assert!(rules_script::source().contains(source), "{a}: spliced into the all-or-nothing script");
        assert!(scripts::blockable_source(a).contains(source), "{a}: behind a block");
        assert!(mode_scripts::batch_source(a).contains(source), "{a}: batched");
        let suffix = scripts::key_suffix(a);
        assert!(
            scripts::REFUND.contains(&format!("function refund.{suffix}()")),
            "{a}: lua/refund.lua gives its units back"
        );
        // The script's branch for the algorithm (`if` or `elseif`), which opens with its ARGV.
        let branch = format!("if algorithm == '{suffix}' then\n  -- ARGV");
        assert!(scripts::DEBIT.contains(&branch), "{a}: lua/debit.lua charges it");
        // A refund on the model, as the twin gives it back.
        let clock = ManualServerClock::new(5_000_000_000);
        let model = ModelHandle::new(clock);
        let (now, stem) = (5_000_000, "wt:{r}:");
        let spend = Request { algorithm: a, quota: &quota, stem, now_ms: Some(now), cost: 2 };
        let mut twin = None;
        algo::step(a, &quota, &mut twin, now, 2);
        let _spent = eval(&model, source, &spend.invocation_of_stem());
        let refund = Request { cost: 1, ..spend };
        assert_eq!(eval(&model, scripts::REFUND, &refund.units_invocation()), Reply::Integer(1), "{a}: refunded");
        assert!(algo::refund(a, &quota, &mut twin, now, 1), "{a}: the twin refunds");
        let peek = Request { cost: 0, ..spend };
        let got = peek.read_reply(&integers(eval(&model, source, &peek.invocation_of_stem()), "peek"));
        assert_eq!(got.map(|(o, _)| o.remaining), Some(algo::step(a, &quota, &mut twin, now, 0).remaining), "{a}");
        // A debit past the limit on the model, as the twin charges it: the key is in debt.
        let debit = Request { cost: 2, ..spend };
        let want = algo::debit(a, &quota, &mut twin, now, 2);
        assert_eq!(want, 2, "{a}: one unit left, one owed");
        assert_eq!(eval(&model, scripts::DEBIT, &debit.units_invocation()), Reply::Integer(2), "{a}: debited");
        let got = peek.read_reply(&integers(eval(&model, source, &peek.invocation_of_stem()), "peek"));
        assert_eq!(got.map(|(o, _)| o.allowed), Some(algo::step(a, &quota, &mut twin, now, 0).allowed), "{a}");
    }
}

#[test]
fn every_algorithm_decides_all_or_nothing_beside_another_on_the_model_as_the_twin_does() {
    let quota = Quota::per_second(2);
    let other = Quota::per_second(5);
    for a in Algorithm::ALL {
        let clock = ManualServerClock::new(1_000_000);
        // The script on one model, the module's command on another, on one clock.
        let (script_model, module_model) = (ModelHandle::new(clock.clone()), ModelHandle::new(clock.clone()));
        let mut first = None;
        let mut second = None;
        for (i, &(t, cost)) in STEPS.iter().enumerate() {
            let now = 1_000_000 + t;
            clock.set_micros(now * 1000);
            let request = RulesRequest {
                items: [(a, &quota, "wt:{k}:a:"), (Algorithm::Gcra, &other, "wt:{k}:b:")]
                    .into_iter()
                    .map(|(algorithm, quota, stem)| rules_script::RuleCall {
                        request: Request { algorithm, quota, stem, now_ms: Some(now), cost },
                        shadow: false,
                        block: None,
                    })
                    .collect(),
                commit: true,
            };
            let mut items = [
                RuleOnState {
                    algorithm: a,
                    quota: &quota,
                    state: &mut first,
                    now_ms: now,
                    cost,
                    shadow: false,
                    block: None,
                },
                RuleOnState {
                    algorithm: Algorithm::Gcra,
                    quota: &other,
                    state: &mut second,
                    now_ms: now,
                    cost,
                    shadow: false,
                    block: None,
                },
            ];
            let expected = all_or_nothing::decide(&mut items, true);
            for (side, reply) in [
                ("script", eval(&script_model, rules_script::source(), &request.invocation())),
                ("module", command(&module_model, rules_script::MODULE_COMMAND, &request.module_invocation())),
            ] {
                let what = format!("{a} all-or-nothing by the {side}, step {i}");
                let got = request.read_reply(&integers(reply, &what)).map(|r| r.outcome());
                assert_eq!(got.as_ref(), Some(&expected), "{what}");
            }
        }
    }
}

#[test]
fn leases_promises_and_subject_files_know_every_algorithm() {
    for a in Algorithm::ALL {
        let leases = lease::can_lease(a);
        assert_eq!(mode_scripts::lease_script(a).is_some(), leases, "{a}: a lease script exactly when it leases");
        assert_eq!(mode_scripts::lease_module_command(a).is_some(), leases, "{a}: a lease command likewise");
        let promise = Promise::of(a);
        assert_eq!(promise.twin(), Some(a), "{a}: its promise is held by its twin");
        let path = root().join("sim/subjects/library").join(format!("{}.toml", a.name()));
        let file = SubjectFile::load(&path).unwrap_or_else(|e| panic!("{a}: its subject file: {e}"));
        assert_eq!(file.promise, promise, "{a}: its subject file states its promise");
        assert_eq!(file.source, scripts::for_algorithm(a).source, "{a}: its subject file runs its script");
    }
}
