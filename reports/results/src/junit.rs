//! A results file as JUnit XML, the test-report format CI systems show (GitLab, Jenkins,
//! GitHub Actions through a reporter, Buildkite): one `<testsuite>` per subject file verified,
//! one `<testcase>` per check, and one suite for the scenario runs, one case per run.
//!
//! A broken check or a failing run is a `<failure>` whose text carries the evidence and the
//! replay command; a check that could not be judged on the model is `<skipped>` with the
//! reason; a check that does not apply is left out. Expected findings (the price of a design
//! the subject file declares) pass, with what was seen in `<system-out>`.

use crate::schema::Verdict;
use crate::schema::{Results, RunResult, SubjectReport};
use crate::verdict::is_failure;

/// The JUnit XML document for `results`.
pub fn render(results: &Results) -> String {
    let mut suites = Vec::new();
    for report in &results.verify {
        suites.push(subject_suite(report));
    }
    if !results.results.is_empty() {
        suites.push(runs_suite(&results.results));
    }
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failures: usize = suites.iter().map(Suite::failures).sum();
    let skipped: usize = suites.iter().map(Suite::skipped).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
        escape(&results.command)
    ));
    for suite in &suites {
        suite.write(&mut out);
    }
    out.push_str("</testsuites>\n");
    out
}

struct Suite {
    name: String,
    cases: Vec<Case>,
}

struct Case {
    class: String,
    name: String,
    outcome: Outcome,
    /// What was seen, for every case.
    out: String,
}

enum Outcome {
    Passed,
    Failed { message: String, text: String },
    Skipped { message: String },
}

impl Suite {
    fn failures(&self) -> usize {
        self.cases.iter().filter(|c| matches!(c.outcome, Outcome::Failed { .. })).count()
    }

    fn skipped(&self) -> usize {
        self.cases.iter().filter(|c| matches!(c.outcome, Outcome::Skipped { .. })).count()
    }

    fn write(&self, out: &mut String) {
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
            escape(&self.name),
            self.cases.len(),
            self.failures(),
            self.skipped()
        ));
        for case in &self.cases {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">\n",
                escape(&case.class),
                escape(&case.name)
            ));
            match &case.outcome {
                Outcome::Passed => {}
                Outcome::Failed { message, text } => out.push_str(&format!(
                    "      <failure message=\"{}\" type=\"broken\">{}</failure>\n",
                    escape(message),
                    escape(text)
                )),
                Outcome::Skipped { message } => {
                    out.push_str(&format!("      <skipped message=\"{}\"/>\n", escape(message)))
                }
            }
            if !case.out.is_empty() {
                out.push_str(&format!("      <system-out>{}</system-out>\n", escape(&case.out)));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
}

fn subject_suite(report: &SubjectReport) -> Suite {
    let cases = report
        .verdicts
        .iter()
        .filter(|v| v.verdict != Verdict::NotApplicable)
        .map(|v| {
            let outcome = match v.verdict {
                Verdict::Broken => Outcome::Failed {
                    message: v.detail.clone(),
                    text: [v.detail.as_str(), v.evidence.as_str(), &format!("replay: {}", v.replay)]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join("\n"),
                },
                Verdict::NotJudged => Outcome::Skipped { message: v.detail.clone() },
                _ => Outcome::Passed,
            };
            Case {
                class: report.name.clone(),
                name: v.check.clone(),
                outcome,
                out: format!("{}: {}", v.verdict, v.detail),
            }
        })
        .collect();
    Suite { name: format!("{} ({})", report.name, report.file), cases }
}

fn runs_suite(runs: &[RunResult]) -> Suite {
    let cases =
        runs.iter()
            .map(|r| {
                let seen = format!(
                "bound {} ({}); failure policy {}; liveness {}; {} admitted of {} requests, the oracle {}; {} errors",
                r.bound, r.bound_detail, r.policy_check, r.liveness, r.admitted, r.requests, r.oracle_admitted, r.errors
            );
                let outcome = if is_failure(r) {
                    Outcome::Failed { message: seen.clone(), text: format!("{seen}\nreplay: {}", r.replay) }
                } else {
                    Outcome::Passed
                };
                Case {
                    class: format!("scenarios.{}", r.scenario),
                    name: format!("{} seed {}", r.subject, r.seed),
                    outcome,
                    out: seen,
                }
            })
            .collect();
    Suite { name: "scenarios".to_owned(), cases }
}

/// `text` as XML character data or an attribute value: the five special characters escaped,
/// and characters XML 1.0 cannot hold at all (control characters but tab and newline) dropped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::VerdictLine;

    fn line(check: &str, verdict: Verdict, detail: &str) -> VerdictLine {
        VerdictLine {
            check: check.into(),
            verdict,
            detail: detail.into(),
            evidence: if verdict == Verdict::Broken { "t=0 admitted".into() } else { String::new() },
            replay: if verdict == Verdict::Broken {
                "ratelimit-lab verify s.toml --replay \"0:1\"".into()
            } else {
                String::new()
            },
            witness: None,
        }
    }

    #[test]
    fn each_check_is_a_case_broken_ones_fail_with_their_replay_and_unjudged_ones_are_skipped() {
        let report = SubjectReport {
            name: "mine".into(),
            file: "scripts/mine.toml".into(),
            verdicts: vec![
                line("bound", Verdict::Broken, "admitted 7 > 5 in [0, 1000)"),
                line("no lost capacity", Verdict::Held, "delivered 1.00x"),
                line("failure policy", Verdict::NotApplicable, "no policy"),
                line("clock trust", Verdict::NotJudged, "needs OBJECT"),
            ],
            ..SubjectReport::default()
        };
        let results =
            Results { command: "ratelimit-lab verify <mine>".into(), verify: vec![report], ..Results::default() };
        let xml = render(&results);
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites "), "{xml}");
        assert!(xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""), "{xml}");
        assert!(xml.contains("name=\"ratelimit-lab verify &lt;mine&gt;\""), "{xml}");
        assert!(xml.contains("<testcase classname=\"mine\" name=\"bound\">"), "{xml}");
        assert!(xml.contains("replay: ratelimit-lab verify s.toml --replay &quot;0:1&quot;"), "{xml}");
        assert!(xml.contains("<skipped message=\"needs OBJECT\"/>"), "{xml}");
        assert!(!xml.contains("failure policy"), "a check that does not apply is no case: {xml}");
        assert_eq!(xml.matches("<testcase ").count(), xml.matches("</testcase>").count());
    }

    #[test]
    fn a_failing_run_fails_its_case_and_a_passing_one_passes() {
        let run = |seed, errors| RunResult {
            scenario: "steady".into(),
            subject: "gcra".into(),
            seed,
            bound: Verdict::Held,
            errors,
            replay: format!("ratelimit-lab simulate --seed {seed}"),
            ..RunResult::default()
        };
        let results = Results { results: vec![run(1, 0), run(2, 3)], ..Results::default() };
        let xml = render(&results);
        assert!(xml.contains("<testsuite name=\"scenarios\" tests=\"2\" failures=\"1\" skipped=\"0\">"), "{xml}");
        assert!(xml.contains("replay: ratelimit-lab simulate --seed 2</failure>"), "{xml}");
        assert!(!xml.contains("--seed 1</failure>"), "{xml}");
    }

    #[test]
    fn text_is_escaped_and_characters_xml_cannot_hold_are_dropped() {
        assert_eq!(escape("a<b>&\"c'\u{1}\n"), "a&lt;b&gt;&amp;&quot;c&apos;\n");
    }
}
