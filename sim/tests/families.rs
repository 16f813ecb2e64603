//! The scenario families beside the catalogue (in-flight limits, costs known after the work):
//! what `simulate` selects for them, that every run replays from its printed command, and that
//! the report draws each with its own chart, laid out.

use sim::cli::SimulateArgs;
use sim::simulate::selection;
use sim_engine::families;

fn args(line: &str) -> SimulateArgs {
    SimulateArgs::parse_args(line.split_whitespace()).unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn simulate_runs_the_families_beside_the_catalogue_and_each_alone_when_named() {
    let (catalogue, all) = selection(&args(""), &[1]).expect("selects");
    assert!(catalogue, "no --scenario runs the catalogue");
    assert_eq!(all.len(), 3 * 2 + 6, "three in-flight scenarios of two subjects, post-hoc of six");
    let (catalogue, one) = selection(&args("--scenario in-flight-crashes --subject concurrency"), &[1, 2]).unwrap();
    assert!(!catalogue, "a family's scenario alone runs no catalogue scenario");
    assert_eq!(one.len(), 2, "one run per seed");
    // An algorithm's name selects its post-hoc run and its catalogue runs.
    let (catalogue, gcra) = selection(&args("--subject gcra"), &[1]).unwrap();
    assert!(catalogue);
    assert_eq!(gcra.len(), 1);
    // A family's subject alone runs nothing of the catalogue's; a catalogue scenario nothing of the families'.
    let (catalogue, _) = selection(&args("--subject incr-decr"), &[1]).unwrap();
    assert!(!catalogue);
    assert!(selection(&args("--scenario steady-trickle"), &[1]).unwrap().1.is_empty());
    // Their faults are the simulator's: no real backend runs them, and saying so beats silence.
    let e = selection(&args("--scenario post-hoc-over-estimate --backend redis"), &[1]).unwrap_err();
    assert!(e.to_string().contains("post-hoc-over-estimate run on the model"), "{e}");
    let e = selection(&args("--scenario in-flight-crashes --subject charge-after"), &[1]).unwrap_err();
    assert!(e.to_string().contains("nothing to run"), "{e}");
}

#[test]
fn every_family_run_replays_from_its_printed_command_and_the_report_draws_each() {
    let specs = families::specs(&[], &[], &[3]);
    let results = families::run_all(&specs, 2).expect("runs");
    let prefix = format!("{} ", results::command::command("simulate"));
    for r in &results {
        let line = r.replay.strip_prefix(&prefix).expect("a simulate command");
        let (catalogue, replayed) = selection(&args(line), &args(line).run.seed_list()).expect("selects");
        assert!(!catalogue && replayed.len() == 1, "{}: selects {} family run(s)", r.replay, replayed.len());
        let again = families::run(&replayed[0]).expect("runs");
        assert_eq!((&again.trace_hash, &again.replay), (&r.trace_hash, &r.replay), "{} replays another run", r.replay);
        // The library's subjects keep their promise; the others break it, as expected findings.
        assert_eq!(r.bound == results::Verdict::Held, r.library, "{}: {}", r.replay, r.bound_detail);
        assert!(!results::is_failure(r), "{}: {}", r.replay, r.bound_detail);
    }
    let dir = tempfile::tempdir().expect("a directory");
    let file = results::Results { seeds: vec![3], results, ..results::Results::default() };
    let report = reports::render_results(&file, dir.path()).expect("renders");
    let page = std::fs::read_to_string(&report.index_html).expect("the page");
    for (scenario, _) in families::scenarios() {
        let chart = report
            .charts
            .iter()
            .find(|c| c.path.to_string_lossy().contains(scenario))
            .unwrap_or_else(|| panic!("no chart for {scenario}"));
        assert!(!chart.text.iter().any(|t| t.text.starts_with("no data")), "{scenario}: a placeholder");
        assert!(reports::overlapping(&chart.text).is_empty(), "{scenario}: text overlaps");
        assert!(page.contains(&format!("Scenario {scenario}")), "{scenario}: no section on the page");
    }
    assert!(page.contains("most requests working at once"), "the in-flight charts say how to read them");
    assert!(page.contains("twice the capacity"), "the post-hoc chart says how to read it");
}
