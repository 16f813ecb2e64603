//! What a run, and a row of runs, came to.
//!
//! A run is judged on the subject's bound (`bound`), the failure policy's promise while Redis
//! was unreachable (`policy_check`), liveness (`liveness`: no key starved where the exact oracle
//! admitted), and, when it ran one, the round-trip mode's own promise (`mode_check`). A broken
//! check is either a *finding* the run set out to show (an external subject, or client time
//! under clock skew) or a *failure* that makes `cargo xtask simulate` exit non-zero. This module
//! is the one place that decides which (the words are [`Verdict`]'s, in the schema): the
//! terminal table, the HTML tables, the chart titles and the findings list all take their
//! verdicts from here, so they cannot disagree.

use crate::schema::{RunResult, Verdict};

/// Whether a result fails the run: a bound-promising algorithm broke its promise where it
/// applies, a failure policy broke its own, or calls returned errors.
///
/// Starvation alone never fails a run: the checker reports it, and today only ADR-002's
/// floored refill starves, which is the finding its scenario exists to show.
pub fn is_failure(r: &RunResult) -> bool {
    (r.bound == Verdict::Broken && !r.expected_finding)
        || r.policy_check == Verdict::Broken
        || r.mode_check == Verdict::Broken
        || r.errors > 0
}

/// One of the checks a run is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The algorithm's promised bound.
    Bound,
    /// The failure policy's promise while Redis was unreachable.
    Policy,
    /// No key starved.
    Liveness,
    /// The round-trip mode's own promise (`mode_check`).
    Mode,
    /// Calls that returned an error.
    Errors,
}

impl Check {
    /// How the check is named on its own: "bound", "failure policy", "liveness", "errors".
    pub fn name(self) -> &'static str {
        match self {
            Check::Bound => "bound",
            Check::Policy => "failure policy",
            Check::Liveness => "liveness",
            Check::Mode => "round-trip mode",
            Check::Errors => "errors",
        }
    }
}

/// One check a run broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem<'a> {
    pub check: Check,
    /// True when it fails the run; false for an expected finding.
    pub failure: bool,
    /// The checker's evidence (empty if it gave none; for errors, empty too).
    pub detail: &'a str,
}

/// Every check `r` broke, bound first, each marked failure or expected finding. A run fails
/// ([`is_failure`]) exactly when one of its problems is a failure.
pub fn problems(r: &RunResult) -> Vec<Problem<'_>> {
    let mut out = Vec::new();
    if r.bound == Verdict::Broken {
        out.push(Problem { check: Check::Bound, failure: !r.expected_finding, detail: &r.bound_detail });
    }
    if r.policy_check == Verdict::Broken {
        out.push(Problem { check: Check::Policy, failure: true, detail: &r.policy_detail });
    }
    if r.liveness == Verdict::Broken {
        out.push(Problem { check: Check::Liveness, failure: false, detail: &r.liveness_detail });
    }
    if r.mode_check == Verdict::Broken {
        out.push(Problem { check: Check::Mode, failure: true, detail: &r.mode_detail });
    }
    if r.errors > 0 {
        out.push(Problem { check: Check::Errors, failure: true, detail: "" });
    }
    out
}

/// How a row of runs reads at a glance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Some run fails the simulation.
    Failure,
    /// Something broke, and it is an expected finding.
    Expected,
    /// Every check that applies held.
    Held,
    /// No check applied.
    Unchecked,
}

/// The verdict on a row of runs: one algorithm, failure policy and time source of one
/// scenario, over every seed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowVerdict {
    /// Runs in the row (one per seed).
    pub runs: usize,
    /// Runs whose bound, failure policy or round-trip mode broke (each run counted once).
    pub broken: usize,
    /// Runs whose bound broke.
    pub bound_broken: usize,
    /// Runs whose failure policy broke.
    pub policy_broken: usize,
    /// Runs in which a key starved.
    pub starved: usize,
    /// Calls that returned an error, over all runs.
    pub errors: u64,
    /// Whether any run fails the simulation ([`is_failure`]).
    pub failure: bool,
    /// The first run's bound verdict, shown when nothing broke (`held` or `none`).
    first_bound: Verdict,
}

impl RowVerdict {
    /// The verdict on these runs.
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a RunResult>) -> Self {
        let mut v = RowVerdict {
            runs: 0,
            broken: 0,
            bound_broken: 0,
            policy_broken: 0,
            starved: 0,
            errors: 0,
            failure: false,
            first_bound: Verdict::None,
        };
        for r in runs {
            if v.runs == 0 {
                v.first_bound = r.bound;
            }
            v.runs += 1;
            v.broken += (r.bound == Verdict::Broken
                || r.policy_check == Verdict::Broken
                || r.mode_check == Verdict::Broken) as usize;
            v.bound_broken += (r.bound == Verdict::Broken) as usize;
            v.policy_broken += (r.policy_check == Verdict::Broken) as usize;
            v.starved += (r.liveness == Verdict::Broken) as usize;
            v.errors += r.errors;
            v.failure |= is_failure(r);
        }
        v
    }

    /// The verdict in words, as the terminal table's `bound` column prints it: the first
    /// run's bound verdict when nothing broke (`held`, `none`); else how many runs broke
    /// their bound or policy ("broken 1/3") or, if none did, starved a key ("starved 1/1");
    /// marked "(expected)" for a finding, in capitals for a failure ("BROKEN 2/3").
    pub fn text(&self) -> String {
        let (count, word) = if self.broken > 0 { (self.broken, "broken") } else { (self.starved, "starved") };
        if count == 0 {
            self.first_bound.word().to_owned()
        } else if self.failure {
            format!("{} {count}/{}", word.to_uppercase(), self.runs)
        } else {
            format!("{word} {count}/{} (expected)", self.runs)
        }
    }

    /// How the row reads at a glance (for colours and classes).
    pub fn kind(&self) -> Kind {
        if self.failure {
            Kind::Failure
        } else if self.broken > 0 || self.starved > 0 {
            Kind::Expected
        } else if self.first_bound == Verdict::Held {
            Kind::Held
        } else {
            Kind::Unchecked
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELD: Verdict = Verdict::Held;
    const BROKEN: Verdict = Verdict::Broken;
    const NONE: Verdict = Verdict::None;

    fn run(bound: Verdict, policy: Verdict, liveness: Verdict, expected: bool) -> RunResult {
        RunResult { bound, policy_check: policy, liveness, expected_finding: expected, ..RunResult::default() }
    }

    #[test]
    fn each_verdict_is_serialised_as_its_word_and_reads_back() {
        use Verdict::*;
        for v in [Held, Broken, None, Expected, NotJudged, NotApplicable] {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.word()));
            assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v);
        }
        assert!(serde_json::from_str::<Verdict>("\"Broken\"").is_err(), "only the words read");
    }

    #[test]
    fn nothing_broken_shows_the_first_runs_bound() {
        let v = RowVerdict::of(&[run(HELD, NONE, HELD, false), run(HELD, HELD, HELD, false)]);
        assert_eq!((v.text().as_str(), v.kind()), ("held", Kind::Held));
        let v = RowVerdict::of(&[run(NONE, NONE, HELD, true)]);
        assert_eq!((v.text().as_str(), v.kind()), ("none", Kind::Unchecked));
    }

    #[test]
    fn a_starved_key_shows_even_when_every_bound_held() {
        let v = RowVerdict::of(&[run(HELD, NONE, BROKEN, true)]);
        assert_eq!((v.text().as_str(), v.kind()), ("starved 1/1 (expected)", Kind::Expected));
        let v = RowVerdict::of(&[run(HELD, NONE, HELD, false), run(HELD, NONE, BROKEN, false)]);
        assert_eq!(v.text(), "starved 1/2 (expected)");
    }

    #[test]
    fn a_broken_bound_outranks_starvation_and_a_failure_is_in_capitals() {
        let v = RowVerdict::of(&[run(BROKEN, NONE, BROKEN, true), run(HELD, NONE, BROKEN, true)]);
        assert_eq!((v.text().as_str(), v.kind()), ("broken 1/2 (expected)", Kind::Expected));
        let v = RowVerdict::of(&[run(BROKEN, NONE, HELD, false), run(HELD, NONE, HELD, false)]);
        assert_eq!((v.text().as_str(), v.kind()), ("BROKEN 1/2", Kind::Failure));
        // A broken policy fails the run even for a subject; bound and policy count once per run.
        let v = RowVerdict::of(&[run(BROKEN, BROKEN, HELD, true)]);
        assert_eq!((v.text().as_str(), v.bound_broken, v.policy_broken), ("BROKEN 1/1", 1, 1));
    }

    #[test]
    fn a_broken_round_trip_mode_fails_the_run_even_when_the_bound_held() {
        let mut r = run(HELD, NONE, HELD, false);
        r.mode_check = BROKEN;
        r.mode_detail = "2 cached denials Redis would have admitted".into();
        assert!(is_failure(&r));
        assert_eq!(problems(&r).iter().map(|p| (p.check, p.failure)).collect::<Vec<_>>(), [(Check::Mode, true)]);
        let v = RowVerdict::of([&r]);
        assert_eq!((v.text().as_str(), v.kind()), ("BROKEN 1/1", Kind::Failure));
    }

    #[test]
    fn errors_fail_a_row_whose_checks_held() {
        let mut r = run(HELD, HELD, HELD, false);
        r.errors = 3;
        let v = RowVerdict::of([&r]);
        assert_eq!((v.text().as_str(), v.kind(), v.errors), ("held", Kind::Failure, 3));
    }

    #[test]
    fn a_run_fails_exactly_when_one_of_its_problems_is_a_failure() {
        for bound in [HELD, BROKEN, NONE] {
            for policy in [HELD, BROKEN, NONE] {
                for liveness in [HELD, BROKEN] {
                    for expected in [false, true] {
                        for errors in [0, 1] {
                            let mut r = run(bound, policy, liveness, expected);
                            r.errors = errors;
                            let p = problems(&r);
                            assert_eq!(is_failure(&r), p.iter().any(|p| p.failure), "{r:?}");
                            let broken = [bound, policy, liveness].iter().filter(|c| **c == BROKEN).count();
                            assert_eq!(p.len(), broken + errors as usize, "{r:?}");
                        }
                    }
                }
            }
        }
    }
}
