//! The tables `cargo xtask simulate` prints: one per scenario, one row per algorithm,
//! policy and time source, summed over seeds.

use std::fmt::Write;

use crate::results::RunResult;
use crate::run::is_failure;

struct Row<'a> {
    first: &'a RunResult,
    requests: u64,
    admitted: u64,
    oracle: u64,
    wrong_allow: u64,
    wrong_limit: u64,
    peak: u64,
    broken: usize,
    starved: usize,
    runs: usize,
    recover_ms: Option<u64>,
    failure: bool,
}

/// Renders every scenario's table.
pub fn render(results: &[RunResult]) -> String {
    let mut out = String::new();
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
                row.first.algorithm == r.algorithm
                    && row.first.policy == r.policy
                    && row.first.time_source == r.time_source
            };
            let row = match rows.iter().position(same) {
                Some(i) => &mut rows[i],
                None => {
                    rows.push(Row {
                        first: r,
                        requests: 0,
                        admitted: 0,
                        oracle: 0,
                        wrong_allow: 0,
                        wrong_limit: 0,
                        peak: 0,
                        broken: 0,
                        starved: 0,
                        runs: 0,
                        recover_ms: None,
                        failure: false,
                    });
                    rows.last_mut().expect("just pushed")
                }
            };
            row.requests += r.requests;
            row.admitted += r.admitted;
            row.oracle += r.oracle_admitted;
            row.wrong_allow += r.wrong_allow;
            row.wrong_limit += r.wrong_limit;
            row.peak = row.peak.max(r.peak_per_period);
            row.broken += (r.bound == "broken" || r.policy_check == "broken") as usize;
            row.starved += (r.liveness == "broken") as usize;
            row.runs += 1;
            row.recover_ms = match (row.recover_ms, r.recover_ms) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            row.failure |= is_failure(r);
        }
        let first = rows[0].first;
        let _ = writeln!(
            out,
            "\n== {scenario} ({} instances, {} per {} ms) ==",
            first.instances, first.limit, first.period_ms
        );
        let _ = writeln!(out, "{}", wrap(&first.description, 100));
        let _ = writeln!(
            out,
            "{:<15} {:<13} {:<6} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:<22} {:>8}",
            "algorithm",
            "policy",
            "time",
            "requests",
            "admitted",
            "oracle",
            "w.allow",
            "w.limit",
            "peak",
            "bound",
            "recover"
        );
        for row in &rows {
            let pct = |n: u64| if row.requests == 0 { 0.0 } else { 100.0 * n as f64 / row.requests as f64 };
            let (count, word) = if row.broken > 0 { (row.broken, "broken") } else { (row.starved, "starved") };
            let bound = if count == 0 {
                row.first.bound.clone()
            } else if row.failure {
                format!("{} {count}/{}", word.to_uppercase(), row.runs)
            } else {
                format!("{word} {count}/{} (expected)", row.runs)
            };
            let recover = row.recover_ms.map_or("-".to_owned(), |ms| format!("{ms} ms"));
            let _ = writeln!(
                out,
                "{:<15} {:<13} {:<6} {:>9} {:>9} {:>9} {:>6.2}% {:>6.2}% {:>6} {:<22} {:>8}",
                row.first.algorithm,
                row.first.policy,
                row.first.time_source,
                row.requests,
                row.admitted,
                row.oracle,
                pct(row.wrong_allow),
                pct(row.wrong_limit),
                row.peak,
                bound,
                recover
            );
        }
    }
    out
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
