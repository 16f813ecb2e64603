//! The command line's parsing: every refusal names what was wrong, and replays parse back.

use super::*;

fn parse(s: &str) -> Result<SimulateArgs, clap::Error> {
    SimulateArgs::parse_args(s.split_whitespace())
}

/// The message for a bad command line, as the user sees it (without colours).
fn err(s: &str) -> String {
    match parse(s) {
        Ok(parsed) => panic!("{s:?} parsed: {parsed:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that the message for `args` names `option` and `value` and says `reason`.
#[track_caller]
fn refused(args: &str, option: &str, value: &str, reason: &str) {
    let e = err(args);
    for part in [option, value, reason] {
        assert!(e.contains(part), "the message for {args:?} does not say {part:?}:\n{e}");
    }
}

#[test]
fn bad_arguments_get_messages_naming_them() {
    // Unknown names: the option, the value and every valid name.
    let e = err("--scenario nope");
    assert!(e.contains("'nope'") && e.contains("--scenario"), "{e}");
    for s in scenario::catalogue() {
        assert!(e.contains(s.name), "the message does not list scenario {}: {e}", s.name);
    }
    let e = err("--subject nope");
    assert!(e.contains("'nope'") && e.contains("--subject"), "{e}");
    for s in Subject::catalogue() {
        assert!(e.contains(s.name()), "the message does not list subject {}: {e}", s.name());
    }
    refused("--policy maybe", "--policy", "'maybe'", "fail-open, fail-closed, local-budget");
    refused("--backend etcd", "--backend", "'etcd'", "model, redis, valkey, redis-cluster, mini-redis");
    refused("--mode turbo", "--mode", "'turbo'", "plain, denial-cache, lease, batch");

    // Numbers and their ranges.
    refused("--instances 0", "--instances", "'0'", "must be between 1 and 64, got 0");
    refused("--instances 65", "--instances", "'65'", "must be between 1 and 64, got 65");
    refused("--seeds x", "--seeds", "'x'", "expected a whole number from 1 to 100000");
    refused("--seeds 100001", "--seeds", "'100001'", "must be between 1 and 100000");
    refused("--seed -1", "--seed", "'-1'", "expected a whole number");
    refused("--threads 0", "--threads", "'0'", "must be between 1 and 256");
    refused("--instances -3", "--instances", "'-3'", "expected a whole number from 1 to 64");

    // Durations: the syntax and the bounds.
    refused("--duration 12000", "--duration", "'12000'", "has no unit: write e.g. \"12000s\" or \"12000ms\"");
    refused("--duration 5fortnights", "--duration", "'5fortnights'", "units: ms, s, m, h, d");
    refused("--duration 10ms", "--duration", "'10ms'", "must be between 100 ms and 1 h, got 10ms");
    refused("--duration 3601s", "--duration", "'3601s'", "between 100 ms and 1 h, got 3601s");
    refused("--duration 99999999999999999999s", "--duration", "'99999999999999999999s'", "too long");
    refused("--duration 18446744073709551615s", "--duration", "'18446744073709551615s'", "too long");

    // Faults: the schedule's own message, and the one-scenario rule.
    refused("--scenario swarm --faults hold@1", "--faults", "'hold@1'", "hold needs an instance");
    refused("--faults redis-pause@1..5", "--faults", "--scenario", "exactly one --scenario (got 0)");
    refused("--scenario baseline --scenario swarm --faults redis-pause@1..5", "--faults", "--scenario", "(got 2)");
    refused("--redis-url redis://x", "--redis-url", "redis://x", "only makes sense with --backend redis");
    for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
        refused(&format!("--shard {bad}"), "--shard", &format!("'{bad}'"), "expected I/N with 1 <= I <= N");
    }

    // clap's own: a missing value, an unknown option.
    refused("--seed", "--seed", "<N>", "a value is required");
    refused("--frobnicate", "--frobnicate", "'--frobnicate'", "unexpected argument");
}

#[test]
fn good_arguments_parse() {
    let o = parse("--scenario baseline --subject gcra --algorithm naive --subject gcra --seeds 3 --duration 5s")
        .expect("ok");
    assert_eq!(o.run.scenarios, vec!["baseline"]);
    let naive = Subject::Client(sim_engine::subject::ClientSubject::NaiveGetSet);
    assert_eq!(o.subjects, vec![Subject::Library(redis_ratelimit::Algorithm::Gcra), naive]);
    assert_eq!((o.run.seeds, o.run.duration_ms()), (3, 5_000));
    assert_eq!(o.run.seed_list(), vec![1, 2, 3]);

    let o =
        parse("--scenario swarm --faults hold:1@100..200 --duration 250ms --out x --policy fail-closed").expect("ok");
    assert_eq!(o.run.faults.as_ref().map(Vec::len), Some(1));
    assert_eq!((o.run.duration_ms(), o.run.json_path()), (250, PathBuf::from("x/results.json")));
    assert_eq!(o.run.policies, vec!["fail-closed"]);
    assert!(o.run.sweeps && !o.run.check_determinism && !o.list);
    assert!(!parse("--no-sweeps --list").expect("ok").run.sweeps);
    let o = parse("--shard 2/3").expect("ok").run;
    assert_eq!((o.shard, o.shard_name()), (Some((2, 3)), "2/3".to_owned()));
    assert_eq!((0..7).filter(|&i| o.in_shard(i)).collect::<Vec<_>>(), [1, 4]);
    assert!(parse("").expect("ok").run.in_shard(5));
}

#[test]
fn the_duration_defaults_to_the_backend_s_own() {
    assert_eq!(parse("").expect("ok").run.duration_ms(), DEFAULT_DURATION_MS);
    assert_eq!(parse("--backend redis").expect("ok").run.duration_ms(), sim_real::DEFAULT_DURATION_MS);
    assert_eq!(parse("--backend valkey").expect("ok").run.duration_ms(), sim_real::DEFAULT_DURATION_MS);
    assert_eq!(parse("--backend mini-redis --duration 9s").expect("ok").run.duration_ms(), 9_000);
    assert_eq!(parse("--duration 1m").expect("ok").run.duration_ms(), 60_000);
}

#[test]
fn module_rows_are_asked_for_by_store_or_by_name_and_run_where_the_module_is() {
    assert_eq!(parse("").expect("default").store, "scripts");
    let o = parse("--store module --subject gcra").expect("on the model");
    assert_eq!(
        (o.store.as_str(), o.subjects.as_slice()),
        ("module", &[Subject::Library(redis_ratelimit::Algorithm::Gcra)][..])
    );
    let named = parse("--subject gcra-module").expect("a module row by name");
    assert_eq!(named.subjects, [Subject::Module(redis_ratelimit::Algorithm::Gcra)]);
    for without in ["--store module --backend redis", "--subject gcra-module --backend redis"] {
        let e = err(without);
        assert!(e.contains("--module PATH") && e.contains("--backend redis was given neither"), "{without}: {e}");
    }
    let e = err("--store module --backend redis-cluster");
    assert!(e.contains("--backend redis-cluster starts servers without it"), "{e}");
    let loaded = parse("--store module --backend redis --module m.so").expect("a server loading the module");
    assert_eq!(loaded.run.module.as_deref(), Some(std::path::Path::new("m.so")));
    assert!(parse("--store module --backend redis --redis-url redis://h/").is_ok(), "a server that loaded it");
    let e = err("--module m.so");
    assert!(
        e.contains("--module m.so is loaded by the servers --backend redis (or valkey) starts (got --backend model)"),
        "{e}"
    );
    let e = err("--store module --backend valkey");
    assert!(e.contains("--backend valkey was given no --module"), "{e}");
    assert!(parse("--store module --backend valkey --module m.so").is_ok(), "Valkey loads the module too");
    let e = err("--redis-url redis://h/ --backend valkey");
    assert!(e.contains("only makes sense with --backend redis (got --backend valkey)"), "{e}");
    let e = err("--module m.so --backend redis --redis-url redis://h/");
    assert!(e.contains("with --redis-url, which starts none"), "{e}");
    assert!(err("--store lua").contains("'lua'"));
}

#[test]
fn replays_name_the_backend_they_ran_on() {
    for given in [
        "",
        "--backend mini-redis",
        "--backend redis",
        "--backend redis-cluster",
        "--backend redis --redis-url redis://127.0.0.1:6390",
        "--backend redis --module target/release/libredis_ratelimit_module.so",
        "--backend valkey",
        "--backend valkey --module target/release/libredis_ratelimit_module.so",
    ] {
        let o = parse(given).expect(given);
        let again = parse(&o.run.backend_args()).expect("replay arguments parse");
        let backend = |r: &RunArgs| (r.backend, r.redis_url.clone(), r.module.clone());
        assert_eq!(backend(&again.run), backend(&o.run), "{given}");
        assert_eq!(o.run.backend_args().trim(), given);
    }
}

#[test]
fn help_lists_every_option_scenario_and_subject() {
    let help = SimulateArgs::named_command().render_long_help().to_string();
    for option in [
        "--list",
        "--subject",
        "--algorithm",
        "--scenario",
        "--policy",
        "--mode",
        "--seed ",
        "--seeds",
        "--instances",
        "--duration",
        "--threads",
        "--backend",
        "--redis-url",
        "--module",
        "--faults",
        "--json",
        "--out",
        "--no-sweeps",
        "--check-determinism",
        "--shard",
        "--format",
        "--junit",
        "--store",
    ] {
        assert!(help.contains(option), "--help does not show {option}:\n{help}");
    }
    for s in scenario::catalogue() {
        assert!(help.contains(s.name), "--help does not list scenario {}", s.name);
    }
    for s in Subject::catalogue().into_iter().chain(Subject::modules()) {
        assert!(help.contains(s.name()), "--help does not list subject {}", s.name());
    }
    assert!(help.contains(&format!("Usage: {}", results::command::command("simulate"))), "{help}");
    let e = parse("--help").expect_err("--help is not a run");
    assert_eq!(e.kind(), ErrorKind::DisplayHelp);
}

#[test]
fn clap_s_own_consistency_checks_pass() {
    SimulateArgs::command().debug_assert();
}
