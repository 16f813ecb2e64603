//! The checks on made-up runs: what breaks, what only the clocks explain, and which answers a
//! failure policy is judged on.

use std::path::Path;

use super::*;
use crate::ask::Answer;
use crate::scenario::{named, Fault, Injected};

fn file(promise: &str, clock: &str, failure: &str) -> ServiceFile {
    let text = format!(
        r#"
name = "made up"
[service]
command = ["svc", "{{port}}", "{{redis_url}}"]
ready = {{ port = true }}
clock = "{clock}"
[ask.http]
url = "http://127.0.0.1:{{port}}/"
headers = {{ k = "{{key}}" }}
[answer]
degraded_header = "degraded"
{failure}
[promise]
kind = "{promise}"
[quota]
limit = 10
period_ms = 1000
"#
    );
    ServiceFile::parse(Path::new("x.toml"), &text, &|_| None).expect("valid")
}

/// An answer of `instance`, sent and answered at these ms from the run's start.
fn answer(instance: usize, sent_ms: u64, answered_ms: u64, admitted: bool) -> Answer {
    Answer {
        instance,
        sent_us: START_US + sent_ms * 1000,
        answered_us: START_US + answered_ms * 1000,
        said: if admitted { Said::Admitted } else { Said::Denied },
        degraded: false,
        retry_after_s: None,
    }
}

/// A whole number of seconds since the epoch, as a run's start is.
const START_US: u64 = 1_800_000_000_000_000;

fn run(scenario: &str, answers: Vec<Answer>) -> Run {
    Run {
        scenario: named(scenario).expect("a scenario"),
        start_us: START_US,
        answers,
        fault: None,
        probe: None,
        skew_ms: Vec::new(),
    }
}

#[test]
fn a_bound_breaks_only_where_no_placement_inside_the_round_trips_explains_it() {
    let f = file("fixed-window", "redis", "");
    // Eleven admissions surely inside window 0: broken.
    let quick: Vec<Answer> = (0..11).map(|i| answer(i % 2, 100 + i as u64, 120 + i as u64, true)).collect();
    assert_eq!(judge(&f, &run("race", quick.clone()), Check::Bound).unwrap().verdict, Verdict::Broken);
    // The eleventh answered after the boundary may have been decided in window 1: held.
    let mut slow = quick;
    slow[10].answered_us = START_US + 1_200_000;
    assert_eq!(judge(&f, &run("race", slow), Check::Bound).unwrap().verdict, Verdict::Held);
}

#[test]
fn a_failure_policy_is_judged_on_answers_given_while_redis_was_away() {
    let f = file("token-bucket", "redis", "[failure]\npolicy = \"fail-closed\"\ntimeout_ms = 250");
    let with_fault = |answers: Vec<Answer>| Run {
        fault: Some(Injected { fault: Fault::RedisPaused, from_us: START_US + 1_000_000, to_us: START_US + 4_500_000 }),
        ..run("redis-paused", answers)
    };
    // Refused and marked: held.
    let mut refused = answer(0, 2_000, 2_010, false);
    refused.degraded = true;
    let held = judge(&f, &with_fault(vec![refused.clone()]), Check::FailurePolicy).unwrap();
    assert_eq!(held.verdict, Verdict::Held, "{}", held.detail);
    // Admitted while Redis was paused: fail-closed broken.
    let mut admitted = answer(1, 2_000, 2_010, true);
    admitted.degraded = true;
    let broken = judge(&f, &with_fault(vec![refused.clone(), admitted]), Check::FailurePolicy).unwrap();
    assert_eq!(broken.verdict, Verdict::Broken);
    assert!(broken.detail.contains("admitted under fail-closed"), "{}", broken.detail);
    // Refused but not marked degraded, though the file says how it marks: broken.
    let unmarked = judge(&f, &with_fault(vec![answer(0, 2_000, 2_010, false)]), Check::FailurePolicy).unwrap();
    assert!(unmarked.detail.contains("not marked degraded"), "{}", unmarked.detail);
    // Sent just before the end and answered by Redis just after it: not the policy's.
    let late = answer(0, 4_400, 4_600, true);
    let judged = judge(&f, &with_fault(vec![refused.clone(), late]), Check::FailurePolicy).unwrap();
    assert_eq!(judged.verdict, Verdict::Held, "{}", judged.detail);
    // Sent during the pause and kept waiting past the timeout and a second: broken.
    let mut hung = answer(0, 2_000, 3_500, false);
    hung.degraded = true;
    let waited = judge(&f, &with_fault(vec![hung]), Check::FailurePolicy).unwrap();
    assert!(waited.detail.contains("waited longer"), "{}", waited.detail);
}

#[test]
fn skewed_clocks_cost_a_service_on_its_own_clock_what_they_explain_and_no_more() {
    let f = file("fixed-window", "service", "");
    let skewed = |answers: Vec<Answer>| Run { skew_ms: vec![-250, 250], ..run("skew", answers) };
    // In true second 1, instance 0 (250 ms behind) fills its window 0 and instance 1 (250 ms
    // ahead) its window 1: 20 in one true second, 10 in each window of the clocks' readings.
    let mut answers: Vec<Answer> = (0..10).map(|i| answer(0, 1_100 + i * 10, 1_105 + i * 10, true)).collect();
    answers.extend((0..10).map(|i| answer(1, 1_100 + i * 10, 1_105 + i * 10, true)));
    let paid = judge(&f, &skewed(answers.clone()), Check::ClockTrust).unwrap();
    assert_eq!(paid.verdict, Verdict::Expected, "{}", paid.detail);
    // The bound's own check leaves a skewed run on the service's clocks to this one.
    assert!(judge(&f, &skewed(answers.clone()), Check::Bound).is_none());
    // Five more from instance 1 in the same stretch: no reading of the clocks explains 15 in
    // its window 1.
    answers.extend((0..5).map(|i| answer(1, 1_200 + i * 10, 1_205 + i * 10, true)));
    let beyond = judge(&f, &skewed(answers.clone()), Check::ClockTrust).unwrap();
    assert_eq!(beyond.verdict, Verdict::Broken, "{}", beyond.detail);
    // A service on Redis's clock has no clock trust to spend: its bound judges the run.
    let on_redis = file("fixed-window", "redis", "");
    assert!(judge(&on_redis, &skewed(answers.clone()), Check::ClockTrust).is_none());
    assert_eq!(judge(&on_redis, &skewed(answers), Check::Bound).unwrap().verdict, Verdict::Broken);
}
