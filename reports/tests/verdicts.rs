//! The report tells the verdict the terminal tells. For every row (scenario, algorithm,
//! failure policy, time source) the page's verdict text equals the terminal table's, read
//! back from both; every run the terminal lists as a finding or failure is in the page's
//! findings, with each check it broke. If the page dropped a check (liveness, say) a row
//! would read "held" where the terminal says "starved 1/1 (expected)", and this fails.
//!
//! Two inputs: the synthetic sample, and `fixtures/real-run.json`, written by a real run of the
//! simulator (`cargo xtask simulate --scenario steady-trickle --scenario redis-outage
//! --scenario clock-skew --no-sweeps --json real-run.json`, stored without whitespace).

use std::collections::BTreeMap;

use reports::{render_results, Results};
use results::verdict::{problems, Check};

mod support;
use support::verdicts::{self, Key};

struct Rendered {
    terminal: BTreeMap<Key, String>,
    page: BTreeMap<Key, String>,
    findings: BTreeMap<String, Vec<String>>,
}

fn render(r: &Results) -> Rendered {
    let dir = tempfile::tempdir().unwrap();
    let paths = render_results(r, dir.path()).unwrap();
    let html = std::fs::read_to_string(paths.index_html).unwrap();
    Rendered {
        terminal: verdicts::terminal(&results::table::render(&r.results)),
        page: verdicts::page(&html),
        findings: verdicts::findings(&html),
    }
}

fn real_run() -> Results {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/real-run.json");
    reports::load_results(path.as_ref()).unwrap()
}

/// Every row's verdict on the page is the terminal's, and the rows are the same.
fn assert_same_verdicts(name: &str, r: &Rendered) {
    let differ: Vec<String> = r
        .terminal
        .iter()
        .filter(|(k, v)| r.page.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k:?}: terminal {v:?}, page {:?}", r.page.get(k)))
        .chain(r.page.keys().filter(|k| !r.terminal.contains_key(*k)).map(|k| format!("{k:?}: only on the page")))
        .collect();
    assert!(differ.is_empty(), "{name}: the page's verdicts differ from the terminal's:\n{}", differ.join("\n"));
}

/// Every run with a broken check has one item in its scenario's findings, naming each check.
fn assert_findings_complete(name: &str, results: &Results, r: &Rendered) {
    let mut expected_items: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &results.results {
        let problems = problems(run);
        if problems.is_empty() {
            continue;
        }
        *expected_items.entry(&run.scenario).or_default() += 1;
        let items = r.findings.get(&run.scenario).map(Vec::as_slice).unwrap_or_default();
        let Some(item) = items.iter().find(|i| i.ends_with(&format!("replay: {}", run.replay))) else {
            panic!("{name}: no finding for {} on the page", run.replay);
        };
        for p in problems {
            let said = match (p.check, p.failure) {
                (Check::Errors, _) => format!("ERRORS {} call(s)", run.errors),
                (check, true) => format!("BROKEN {}", check.name()),
                (check, false) => format!("expected finding {} broken", check.name()),
            };
            assert!(item.contains(&said), "{name}: the finding for {} does not say {said:?}: {item}", run.replay);
        }
    }
    for (scenario, items) in &r.findings {
        let want = expected_items.get(scenario.as_str()).copied().unwrap_or(0);
        assert_eq!(items.len(), want, "{name}: findings of {scenario}: {items:#?}");
    }
}

#[test]
fn the_sample_reports_every_rows_terminal_verdict_and_every_finding() {
    let results = support::sample::sample_results();
    let r = render(&results);
    // The sample's subjects starve and break bounds: the comparison has something to catch.
    assert!(r.terminal.values().any(|v| v.starts_with("starved")), "{:#?}", r.terminal);
    assert!(r.terminal.values().any(|v| v.starts_with("broken")), "{:#?}", r.terminal);
    // Ten scenarios x seven algorithms, x3 where three policies run, +6 where both clocks do.
    assert_eq!(r.terminal.len(), 7 * 10 + 7 * 2 * 3 + 6, "rows of the sample");
    assert_same_verdicts("sample", &r);
    assert_findings_complete("sample", &results, &r);
}

#[test]
fn a_real_simulator_run_reports_every_rows_terminal_verdict_and_every_finding() {
    let results = real_run();
    let r = render(&results);
    let adr002_trickle = ("steady-trickle", "adr002", "fail-open", "client");
    let key = |(s, a, p, t): (&str, &str, &str, &str)| (s.to_string(), a.to_string(), p.to_string(), t.to_string());
    assert_eq!(r.terminal.get(&key(adr002_trickle)).map(String::as_str), Some("starved 1/1 (expected)"));
    assert_same_verdicts("real run", &r);
    assert_findings_complete("real run", &results, &r);
}

#[test]
fn a_failure_reads_as_one_on_the_page_as_in_the_terminal() {
    let mut results = real_run();
    let run = results
        .results
        .iter_mut()
        .find(|x| x.scenario == "redis-outage" && x.algorithm == "gcra" && x.policy == "local-budget")
        .unwrap();
    run.policy_check = "broken".into();
    run.policy_detail = "instance 0 admitted 9 in 500 ms; budget 2".into();
    let r = render(&results);
    let k = ("redis-outage".to_string(), "gcra".to_string(), "local-budget".to_string(), "server".to_string());
    assert_eq!(r.terminal.get(&k).map(String::as_str), Some("BROKEN 1/1"));
    assert_same_verdicts("real run with a broken policy", &r);
    assert_findings_complete("real run with a broken policy", &results, &r);
}
