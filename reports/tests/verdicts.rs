//! The report tells the verdict the terminal tells. For every row (scenario, algorithm,
//! failure policy, time source) the page's verdict text equals the terminal table's, read
//! back from both, and so does each scenario chart's panel title (read from the text the
//! chart drew); every run the terminal lists as a finding or failure is in the page's
//! findings, with each check it broke. If the page dropped a check (liveness, say) a row
//! would read "held" where the terminal says "starved 1/1 (expected)", and this fails.
//!
//! Two inputs: the synthetic sample, and `fixtures/real-run.json`, written by a real run of the
//! simulator (`cargo xtask simulate --scenario steady-trickle --scenario redis-outage
//! --scenario clock-skew --no-sweeps --json real-run.json`, stored without whitespace).

use std::collections::{BTreeMap, BTreeSet};

use reports::{render_results, RenderedChart, Results, TextBox};
use results::verdict::{problems, Check};
use results::Verdict;

// Each test binary compiles all the shared support and uses part of it.
#[allow(dead_code)]
mod support;
use support::verdicts::{self, Key};

struct Rendered {
    terminal: BTreeMap<Key, String>,
    page: BTreeMap<Key, String>,
    findings: BTreeMap<String, Vec<String>>,
    /// Per scenario chart, per panel (its first title line): the rest of its title, joined.
    titles: BTreeMap<String, BTreeMap<String, String>>,
}

/// The panel titles of a scenario chart, read from the text it drew: a panel's first line
/// (the algorithm) and the lines centred under it, one title line apart.
fn panel_titles(chart: &RenderedChart, algorithms: &[&str]) -> BTreeMap<String, String> {
    let centre = |t: &TextBox| (t.left + t.right) / 2.0;
    let mut out = BTreeMap::new();
    for first in
        chart.text.iter().filter(|t| algorithms.iter().any(|a| t.text == *a || t.text.starts_with(&format!("{a} ("))))
    {
        let mut below: Vec<&TextBox> =
            chart.text.iter().filter(|t| t.top > first.top && (centre(t) - centre(first)).abs() <= 1.5).collect();
        below.sort_by(|a, b| a.top.total_cmp(&b.top));
        let mut lines = Vec::new();
        let mut top = first.top;
        for t in below {
            if t.top - top >= 24.0 {
                break;
            }
            lines.push(t.text.as_str());
            top = t.top;
        }
        out.insert(first.text.clone(), lines.join(" "));
    }
    out
}

fn render(r: &Results) -> Rendered {
    let dir = tempfile::tempdir().unwrap();
    let paths = render_results(r, dir.path()).unwrap();
    let html = std::fs::read_to_string(&paths.index_html).unwrap();
    let mut algorithms: Vec<&str> = r.results.iter().map(|x| x.subject.as_str()).collect();
    algorithms.dedup();
    let titles = paths
        .charts
        .iter()
        .filter_map(|c| {
            let file = c.path.file_name()?.to_str()?;
            let scenario =
                r.results.iter().map(|x| x.scenario.as_str()).find(|s| file.ends_with(&format!("-{s}.png")))?;
            Some((scenario.to_string(), panel_titles(c, &algorithms)))
        })
        .collect();
    Rendered {
        titles,
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

/// Every panel title of every scenario chart gives the terminal's verdict on each line it
/// draws: the verdict alone when all its lines have the same, else "line: verdict" for each.
fn assert_titles_tell_the_verdicts(name: &str, results: &Results, r: &Rendered) {
    let mut checked = 0;
    for (scenario, panels) in &r.titles {
        let rows: Vec<(&Key, &String)> = r.terminal.iter().filter(|(k, _)| &k.0 == scenario).collect();
        let policies: BTreeSet<&str> = rows.iter().map(|(k, _)| k.2.as_str()).collect();
        let clocks_vary = rows.iter().any(|(k, _)| rows.iter().any(|(o, _)| o.1 == k.1 && o.3 != k.3));
        for (first_line, rest) in panels {
            let algorithm = first_line.split(" (").next().unwrap();
            let mine: Vec<&(&Key, &String)> = rows.iter().filter(|(k, _)| k.1 == algorithm).collect();
            assert!(!mine.is_empty(), "{name}: {scenario}: a panel {first_line:?} with no row in the terminal");
            if mine.iter().all(|(_, v)| *v == mine[0].1) {
                assert_eq!(rest, mine[0].1, "{name}: {scenario}: the title of panel {first_line:?}");
            } else {
                // One "line: verdict" per line the panel draws, in the chart's order.
                let line = |k: &Key| match (policies.len() > 1, clocks_vary) {
                    (true, true) => format!("{}, {} time", k.2, k.3),
                    (true, false) => k.2.clone(),
                    (false, _) => format!("{} time", k.3),
                };
                let parts: Vec<String> = mine.iter().map(|(k, v)| format!("{}: {v}", line(k))).collect();
                for part in &parts {
                    assert!(
                        rest.contains(part.as_str()),
                        "{name}: {scenario}: panel {first_line:?} lacks {part:?}: {rest:?}"
                    );
                }
                let length = parts.iter().map(String::len).sum::<usize>() + parts.len() - 1;
                assert_eq!(rest.len(), length, "{name}: {scenario}: panel {first_line:?} says more: {rest:?}");
            }
            checked += 1;
        }
    }
    let scenarios: BTreeSet<&str> = results.results.iter().map(|x| x.scenario.as_str()).collect();
    assert_eq!(r.titles.len(), scenarios.len(), "{name}: a chart per scenario");
    assert!(checked >= 7 * scenarios.len(), "{name}: only {checked} panel titles found: {:#?}", r.titles);
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
    assert_titles_tell_the_verdicts("sample", &results, &r);
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
    assert_titles_tell_the_verdicts("real run", &results, &r);
    assert_findings_complete("real run", &results, &r);
}

#[test]
fn a_failure_reads_as_one_on_the_page_as_in_the_terminal() {
    let mut results = real_run();
    let run = results
        .results
        .iter_mut()
        .find(|x| x.scenario == "redis-outage" && x.subject == "gcra" && x.policy == "local-budget")
        .unwrap();
    run.policy_check = Verdict::Broken;
    run.policy_detail = "instance 0 admitted 9 in 500 ms; budget 2".into();
    let r = render(&results);
    let k = ("redis-outage".to_string(), "gcra".to_string(), "local-budget".to_string(), "server".to_string());
    assert_eq!(r.terminal.get(&k).map(String::as_str), Some("BROKEN 1/1"));
    assert_same_verdicts("real run with a broken policy", &r);
    assert_titles_tell_the_verdicts("real run with a broken policy", &results, &r);
    assert_findings_complete("real run with a broken policy", &results, &r);
}
