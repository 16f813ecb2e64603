//! The enforcement point's header values are honest, for any rules and any schedule:
//!
//! - `retry-after`: a denied request sent again exactly `Retry-After` seconds later (with no
//!   other traffic) is admitted: the header never points earlier than the end of the wait.
//! - `remaining`: for every policy of the `RateLimit` field, `r` is what the next request
//!   could really take under that rule: a request of cost `r` is admitted at once, and one of
//!   `r + 1` is not.
//! - `reset`: after the longest `t` of the last `RateLimit` field, every rule admits its whole
//!   capacity again.
//!
//! Each property runs per algorithm: the first rule of every case uses it, beside up to two
//! other rules of any algorithm (global or per key, shadow or not), over three API keys. The
//! values checked are the ones a client reads: the fields as the layer writes them
//! (`redis_ratelimit::http::headers::apply`), parsed back as structured fields.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{HeaderMap, Request};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use redis_ratelimit::enforce::{Enforcer, RulesDecision, Ruling};
use redis_ratelimit::http::headers;
use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};
use redis_ratelimit::{Algorithm, ManualClock, Quota};

const BASE_MS: u64 = 1_767_225_600_000;

/// The in-process enforcer never waits: its futures are ready on the first poll.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[derive(Debug, Clone)]
struct RuleSpec {
    algorithm: Algorithm,
    quota: Quota,
    cost: u64,
    per_key: bool,
    shadow: bool,
}

#[derive(Debug, Clone)]
struct Case {
    rules: Vec<RuleSpec>,
    /// (ms since the previous request, API key)
    steps: Vec<(u64, u8)>,
}

fn rule_spec(algorithms: Vec<Algorithm>, first: bool) -> impl Strategy<Value = RuleSpec> {
    (proptest::sample::select(algorithms), 1u64..=6, 1u64..=3, 1u64..=6, 0u64..=2, any::<bool>(), 0u8..4)
        .prop_filter_map("an enforceable rule", move |(algorithm, limit, secs, burst, cost, per_key, shadow)| {
            let quota = Quota::new(limit, Duration::from_millis(secs * 1000)).with_burst(burst);
            quota.validate(algorithm).ok()?;
            let cost = cost.min(quota.capacity(algorithm));
            // The first rule is the one under test: enforced, per key, costing at least 1.
            let (cost, per_key, shadow) = if first { (cost.max(1), true, false) } else { (cost, per_key, shadow == 0) };
            Some(RuleSpec { algorithm, quota, cost, per_key, shadow })
        })
}

fn cases(algorithm: Algorithm) -> impl Strategy<Value = Case> {
    let first = rule_spec(vec![algorithm], true);
    let others = proptest::collection::vec(rule_spec(Algorithm::ALL.to_vec(), false), 0..=2);
    let steps = proptest::collection::vec((prop_oneof![0u64..=50, 0u64..=3_000], 0u8..3), 1..=30);
    (first, others, steps).prop_map(|(first, others, steps)| {
        let mut rules = vec![first];
        rules.extend(others);
        Case { rules, steps }
    })
}

fn rule(i: usize, r: &RuleSpec, cost: u64) -> Rule {
    let key = if r.per_key { KeyPart::header("x-api-key") } else { KeyPart::Const("all".into()) };
    Rule::new(&format!("r{i}"), r.algorithm, r.quota).key([key]).cost(cost).shadow(r.shadow)
}

fn rule_set(rules: &[RuleSpec]) -> RuleSet {
    let mut b = RuleSet::builder();
    for (i, r) in rules.iter().enumerate() {
        b = b.rule(rule(i, r, r.cost));
    }
    b.build().expect("generated rules are valid")
}

fn request(key: u8) -> Request<()> {
    Request::builder().uri("/api").header("x-api-key", format!("k{key}")).body(()).expect("a request")
}

fn decide(e: &Enforcer, key: u8) -> Result<(RulesDecision, HeaderMap), TestCaseError> {
    match block_on(e.check(&request(key))) {
        Ok(Ruling::Decided(d)) => {
            let mut headers = HeaderMap::new();
            headers::apply(&mut headers, &d);
            Ok((d, headers))
        }
        other => Err(TestCaseError::fail(format!("expected a decision, got {other:?}"))),
    }
}

/// The `RateLimit` items as (policy, r, t).
fn ratelimit(headers: &HeaderMap) -> Vec<(String, u64, u64)> {
    let Some(value) = headers.get(headers::RATELIMIT) else { return Vec::new() };
    let list: sfv::List = sfv::Parser::new(value.to_str().expect("visible ASCII")).parse().expect("a structured list");
    list.iter()
        .filter_map(|entry| match entry {
            sfv::ListEntry::Item(item) => {
                let name = item.bare_item.as_string()?.as_str().to_owned();
                let int = |k: &str| item.params.get(k).and_then(|v| v.as_integer()).map(|i| i64::from(i) as u64);
                Some((name, int("r")?, int("t")?))
            }
            sfv::ListEntry::InnerList(_) => None,
        })
        .collect()
}

fn fail(what: String) -> TestCaseError {
    TestCaseError::fail(what)
}

/// Runs the schedule, applying `probe` after every decision.
fn run_case(
    case: &Case,
    mut probe: impl FnMut(&Enforcer, &ManualClock, u8, &RulesDecision, &HeaderMap) -> Result<(), TestCaseError>,
) -> Result<(Enforcer, ManualClock, HeaderMap), TestCaseError> {
    let clock = ManualClock::new(BASE_MS);
    let e = Enforcer::builder(rule_set(&case.rules)).clock(Arc::new(clock.clone())).build().expect("valid");
    let mut last = HeaderMap::new();
    for &(gap, key) in &case.steps {
        clock.advance(gap);
        let (d, headers) = decide(&e, key)?;
        probe(&e, &clock, key, &d, &headers)?;
        last = headers;
    }
    Ok((e, clock, last))
}

fn retry_after_is_never_early(case: &Case) -> Result<(), TestCaseError> {
    run_case(case, |e, clock, key, d, headers| {
        if d.allowed {
            return Ok(());
        }
        let secs: u64 = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .ok_or_else(|| fail("a denial without a Retry-After in seconds".into()))?;
        clock.advance(secs * 1000);
        let (again, _) = decide(e, key)?;
        if !again.allowed {
            return Err(fail(format!("denied again after waiting the {secs} s Retry-After said: {again:?}")));
        }
        Ok(())
    })
    .map(|_| ())
}

fn remaining_is_what_the_next_request_can_take(case: &Case) -> Result<(), TestCaseError> {
    let full = rule_set(&case.rules);
    run_case(case, |e, _clock, key, _d, headers| {
        for (name, r, _) in ratelimit(headers) {
            let i: usize = name[1..].parse().expect("rules are named rN");
            let spec = &case.rules[i];
            // The rule alone, asking for `cost`: same name and key, so the same state.
            let alone = |cost: u64| RuleSet::builder().rule(rule(i, spec, cost).shadow(false)).build().expect("valid");
            if r < spec.quota.capacity(spec.algorithm) {
                e.replace_rules(alone(r + 1));
                let (over, _) = decide(e, key)?;
                if over.allowed {
                    e.replace_rules(full.clone());
                    return Err(fail(format!("{name} said r={r}, but a request of {} was admitted", r + 1)));
                }
            }
            if r > 0 {
                e.replace_rules(alone(r));
                let (exact, _) = decide(e, key)?;
                if !exact.allowed {
                    e.replace_rules(full.clone());
                    return Err(fail(format!("{name} said r={r}, but a request of {r} was denied: {exact:?}")));
                }
            }
            e.replace_rules(full.clone());
        }
        Ok(())
    })
    .map(|_| ())
}

fn reset_restores_every_rule(case: &Case) -> Result<(), TestCaseError> {
    let (e, clock, last) = run_case(case, |_, _, _, _, _| Ok(()))?;
    let items = ratelimit(&last);
    let Some(longest) = items.iter().map(|&(_, _, t)| t).max() else { return Ok(()) };
    clock.advance(longest * 1000);
    for (name, _, t) in items {
        let i: usize = name[1..].parse().expect("rules are named rN");
        let spec = &case.rules[i];
        let capacity = spec.quota.capacity(spec.algorithm);
        e.replace_rules(RuleSet::builder().rule(rule(i, spec, capacity).shadow(false)).build().expect("valid"));
        let key = case.steps.last().map_or(0, |s| s.1);
        let (d, _) = decide(&e, key)?;
        if !d.allowed {
            return Err(fail(format!(
                "{name} said t={t}; {longest} s later it does not admit its capacity {capacity}"
            )));
        }
    }
    Ok(())
}

fn holds(property: &str, algorithm: Algorithm, check: fn(&Case) -> Result<(), TestCaseError>) {
    let file = format!("proptest-regressions/headers-{property}-{algorithm}.txt");
    let config = Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(Box::leak(file.into_boxed_str())))),
        ..Config::default()
    };
    let n = config.cases;
    let result = TestRunner::new(config).run(&cases(algorithm), |case| check(&case));
    match result {
        Ok(()) => println!("properties: {property} {algorithm} {n} cases"),
        Err(e) => panic!("properties: {property} {algorithm} FAILED\n{e}"),
    }
}

macro_rules! per_algorithm {
    ($($test:ident: $property:literal, $check:ident;)*) => {$(
        #[test]
        fn $test() {
            for algorithm in Algorithm::ALL {
                holds($property, algorithm, $check);
            }
        }
    )*};
}

per_algorithm! {
    retry_after_never_points_earlier_than_the_end_of_the_wait: "retry-after", retry_after_is_never_early;
    r_is_exactly_what_the_next_request_can_take: "remaining", remaining_is_what_the_next_request_can_take;
    t_is_when_every_rule_is_whole_again: "reset", reset_restores_every_rule;
}
