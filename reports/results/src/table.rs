//! The tables `cargo xtask simulate` prints: one per scenario, one row per subject,
//! round-trip mode, policy and time source, summed over seeds. The `bound` column is
//! [`RowVerdict::text`]; `rt/dec` is Redis calls per decision.

use std::fmt::Write;

use crate::schema::RunResult;
use crate::schema::Verdict;
use crate::verdict::RowVerdict;

struct Row<'a> {
    first: &'a RunResult,
    runs: Vec<&'a RunResult>,
    requests: u64,
    admitted: u64,
    oracle: u64,
    wrong_allow: u64,
    wrong_limit: u64,
    round_trips: u64,
    peak: u64,
    recover_ms: Option<u64>,
}

/// Renders every scenario's table. The subject column is as wide as the longest name (a
/// subject file can name its script anything), the same in every table.
pub fn render(results: &[RunResult]) -> String {
    let mut out = String::new();
    let w = results.iter().map(|r| r.subject.chars().count()).max().unwrap_or(0).max(15);
    let mut scenarios: Vec<&str> = Vec::new();
    for r in results {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    for scenario in scenarios {
        let mut rows: Vec<Row<'_>> = Vec::new();
        for r in results.iter().filter(|r| r.scenario == scenario) {
            let same = |row: &Row<'_>| {
                row.first.subject == r.subject
                    && row.first.mode == r.mode
                    && row.first.policy == r.policy
                    && row.first.time_source == r.time_source
            };
            let row = match rows.iter().position(same) {
                Some(i) => &mut rows[i],
                None => {
                    rows.push(Row {
                        first: r,
                        runs: Vec::new(),
                        requests: 0,
                        admitted: 0,
                        oracle: 0,
                        wrong_allow: 0,
                        wrong_limit: 0,
                        round_trips: 0,
                        peak: 0,
                        recover_ms: None,
                    });
                    rows.last_mut().expect("just pushed")
                }
            };
            row.requests += r.requests;
            row.admitted += r.admitted;
            row.oracle += r.oracle_admitted;
            row.wrong_allow += r.wrong_allow;
            row.wrong_limit += r.wrong_limit;
            row.round_trips += r.round_trips;
            row.peak = row.peak.max(r.peak_per_period);
            row.runs.push(r);
            row.recover_ms = match (row.recover_ms, r.recover_ms) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        let first = rows[0].first;
        let _ = match &first.held {
            Some(h) => writeln!(
                out,
                "\n== {scenario} ({} instances, {} in flight, leases of {} ms) ==",
                first.instances, h.limit, h.lease_ms
            ),
            None => writeln!(
                out,
                "\n== {scenario} ({} instances, {} per {} ms) ==",
                first.instances, first.limit, first.period_ms
            ),
        };
        let _ = writeln!(out, "{}", wrap(&first.description, 100));
        let _ = writeln!(
            out,
            "{:<w$} {:<12} {:<13} {:<6} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>6} {:<22} {:>8}",
            "subject",
            "mode",
            "policy",
            "time",
            "requests",
            "admitted",
            "oracle",
            "w.allow",
            "w.limit",
            "rt/dec",
            "peak",
            "bound",
            "recover"
        );
        for row in &rows {
            let pct = |n: u64| if row.requests == 0 { 0.0 } else { 100.0 * n as f64 / row.requests as f64 };
            let bound = RowVerdict::of(row.runs.iter().copied()).text();
            let recover = row.recover_ms.map_or("-".to_owned(), |ms| format!("{ms} ms"));
            let mode = if row.first.mode.is_empty() { "-" } else { &row.first.mode };
            let per_decision = if row.requests == 0 { 0.0 } else { row.round_trips as f64 / row.requests as f64 };
            // The in-flight and post-hoc runs have no exact limiter to replay: their checks are
            // their bounds.
            let unreplayed =
                |r: &RunResult| r.held.is_some() || r.series.as_ref().is_some_and(|s| s.oracle_admitted.is_empty());
            let replayed = !row.runs.iter().all(|r| unreplayed(r));
            let (oracle, wrong_allow, wrong_limit) = if replayed {
                (
                    row.oracle.to_string(),
                    format!("{:.2}%", pct(row.wrong_allow)),
                    format!("{:.2}%", pct(row.wrong_limit)),
                )
            } else {
                ("-".to_owned(), "-".to_owned(), "-".to_owned())
            };
            let _ = writeln!(
                out,
                "{:<w$} {:<12} {:<13} {:<6} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6.3} {:>6} {:<22} {:>8}",
                row.first.subject,
                mode,
                row.first.policy,
                row.first.time_source,
                row.requests,
                row.admitted,
                oracle,
                wrong_allow,
                wrong_limit,
                per_decision,
                row.peak,
                bound,
                recover
            );
        }
        rules_lines(&mut out, &rows);
    }
    out
}

/// For rows that enforced several rules per request: all-or-nothing and each rule's own
/// bound, over the row's runs (a rule is broken if it broke in any run).
fn rules_lines(out: &mut String, rows: &[Row<'_>]) {
    let with_rules: Vec<(&Row<'_>, Vec<&crate::schema::RulesResult>)> = rows
        .iter()
        .map(|row| (row, row.runs.iter().filter_map(|r| r.rules.as_ref()).collect::<Vec<_>>()))
        .filter(|(_, rules)| !rules.is_empty())
        .collect();
    if with_rules.is_empty() {
        return;
    }
    let _ = writeln!(out, "each request all-or-nothing across its rules, and each rule's own bound:");
    for (row, runs) in with_rules {
        let split: u64 = runs.iter().map(|r| r.split_requests).sum();
        let word = |broken: bool| if broken { Verdict::Broken } else { Verdict::Held };
        let aon = word(runs.iter().any(|r| r.all_or_nothing == Verdict::Broken));
        let names: Vec<&str> = runs[0].rules.iter().map(|b| b.name.as_str()).collect();
        let bounds: Vec<String> = names
            .iter()
            .map(|name| {
                let broken = runs.iter().flat_map(|r| &r.rules).any(|b| b.name == *name && b.bound == Verdict::Broken);
                format!("{name} {}", word(broken))
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<15} {:<13} all-or-nothing {aon} ({split} split); {}",
            row.first.subject,
            row.first.policy,
            bounds.join(", ")
        );
    }
}

fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + word.len() + 1 > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(subject: &str, seed: u64, admitted: u64, liveness: Verdict) -> RunResult {
        RunResult {
            scenario: "steady-trickle".into(),
            description: "One client sends every 30 ms.".into(),
            subject: subject.into(),
            policy: "fail-open".into(),
            time_source: "server".into(),
            seed,
            instances: 1,
            limit: 20,
            period_ms: 1000,
            requests: 400,
            admitted,
            oracle_admitted: 259,
            wrong_limit: 259 - admitted,
            round_trips: 400,
            peak_per_period: 20,
            bound: Verdict::Held,
            liveness,
            expected_finding: true,
            ..RunResult::default()
        }
    }

    #[test]
    fn rows_sum_over_seeds_and_the_bound_column_is_the_row_verdict() {
        let results = [
            run("gcra", 1, 259, Verdict::Held),
            run("adr002", 1, 20, Verdict::Broken),
            run("adr002", 2, 259, Verdict::Held),
        ];
        let text = render(&results);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "== steady-trickle (1 instances, 20 per 1000 ms) ==");
        assert_eq!(lines[2], "One client sends every 30 ms.");
        assert!(lines[3].starts_with("subject         mode         policy        time    requests"), "{}", lines[3]);
        assert_eq!(
            lines[4],
            "gcra            -            fail-open     server       400       259       259   0.00%   0.00%  1.000     20 held                          -"
        );
        assert_eq!(
            lines[5],
            "adr002          -            fail-open     server       800       279       518   0.00%  29.88%  1.000     20 starved 1/2 (expected)        -"
        );
        assert_eq!(lines.len(), 6);
    }

    #[test]
    fn a_long_subject_name_widens_the_subject_column_of_every_row() {
        let results = [run("gcra", 1, 259, Verdict::Held), run("a caller-timed bucket", 1, 259, Verdict::Held)];
        let text = render(&results);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[3].starts_with("subject               mode         policy"), "{}", lines[3]);
        assert!(lines[4].starts_with("gcra                  -            fail-open"), "{}", lines[4]);
        assert!(lines[5].starts_with("a caller-timed bucket -            fail-open"), "{}", lines[5]);
    }

    #[test]
    fn multi_rule_rows_add_all_or_nothing_and_each_rules_bound() {
        use crate::schema::{RuleBound, RulesResult};
        let with = |subject: &str, seed: u64, split: u64, global: Verdict| {
            let mut r = run(subject, seed, 100, Verdict::Held);
            r.scenario = "multi-rule".into();
            r.rules = Some(RulesResult {
                all_or_nothing: if split > 0 { Verdict::Broken } else { Verdict::Held },
                split_requests: split,
                all_or_nothing_detail: String::new(),
                rules: vec![
                    RuleBound { name: "per-user".into(), bound: Verdict::Held, ..RuleBound::default() },
                    RuleBound { name: "global".into(), bound: global, ..RuleBound::default() },
                ],
            });
            r
        };
        let results = [
            with("rules", 1, 0, Verdict::Held),
            with("rules-per-slot", 1, 7, Verdict::Held),
            with("rules-per-slot", 2, 5, Verdict::Broken),
        ];
        let text = render(&results);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[6], "each request all-or-nothing across its rules, and each rule's own bound:");
        assert_eq!(lines[7], "rules           fail-open     all-or-nothing held (0 split); per-user held, global held");
        assert_eq!(
            lines[8],
            "rules-per-slot  fail-open     all-or-nothing broken (12 split); per-user held, global broken"
        );
        // Runs without rules print no such lines.
        assert!(!render(&[run("gcra", 1, 259, Verdict::Held)]).contains("all-or-nothing"));
    }
}
