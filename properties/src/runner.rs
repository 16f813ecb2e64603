//! Running an invariant with proptest's `TestRunner`: over a correct algorithm it must hold
//! for every case ([`holds`]); over a known-bad state machine it must be broken within a fixed
//! budget of cases ([`catches`]). Both print one line saying how many cases ran, and a
//! failure prints the shrunk schedule as `(t, cost) -> decision` lines.

use std::cell::{Cell, RefCell};

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner};

use crate::invariants::Invariant;
use crate::schedule::Violation;
use crate::strategy;
use crate::subject::Subject;

/// Cases a known-bad state machine gets before its invariant is declared toothless. The search is
/// seeded, so whether (and when) a mutant is caught is the same on every run.
pub const CATCH_BUDGET: u32 = 3_000;
/// The seed of that search.
pub const CATCH_SEED: u64 = 0x5eed_0fba_d5ed;

/// Shrinking steps allowed: enough to bring a 40-request schedule down to the few lines
/// that matter (proptest's default of 1024 often stops at 30).
pub const SHRINK_ITERS_MAX: u32 = 100_000;
/// ... and at most this long, in ms.
pub const SHRINK_TIME_MAX_MS: u32 = 20_000;

/// Runs `invariant` over `subject` for `PROPTEST_CASES` cases (proptest's default, 256,
/// when unset) and panics with the shrunk schedule if any case breaks it. Failures are
/// persisted in `proptest-regressions/<invariant>-<subject>.txt` and replayed first on the
/// next run.
pub fn holds(invariant: Invariant, subject: Subject) {
    let file = format!("proptest-regressions/{}-{}.txt", invariant.name, subject.name);
    let config = Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(Box::leak(file.into_boxed_str())))),
        max_shrink_iters: SHRINK_ITERS_MAX,
        max_shrink_time: SHRINK_TIME_MAX_MS,
        ..Config::default()
    };
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy::case(subject, invariant.shape), |case| {
        (invariant.check)(&subject, &case).map_err(|v| TestCaseError::fail(v.to_string()))
    });
    match result {
        Ok(()) => println!("properties: {} {} {} cases", invariant.name, subject.name, cases),
        Err(TestError::Fail(reason, case)) => panic!(
            "properties: {} {} FAILED\n{reason}\n  as a proptest case: {case:?}\n  (the case is saved under proptest-regressions/ and replayed first next time)",
            invariant.name, subject
        ),
        Err(TestError::Abort(why)) => panic!("properties: {} {} aborted: {why}", invariant.name, subject),
    }
}

/// Runs `invariant` over a known-bad `subject` with a fixed seed and requires a violation
/// within [`CATCH_BUDGET`] cases. Prints the shrunk counterexample and returns it.
pub fn catches(invariant: Invariant, subject: Subject) -> Violation {
    let config = Config {
        cases: CATCH_BUDGET,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(CATCH_SEED),
        max_shrink_iters: SHRINK_ITERS_MAX,
        max_shrink_time: SHRINK_TIME_MAX_MS,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let ran = Cell::new(0u32);
    let first_failure = Cell::new(None::<u32>);
    let last = RefCell::new(None::<Violation>);
    let result = runner.run(&strategy::case(subject, invariant.shape), |case| {
        if first_failure.get().is_none() {
            ran.set(ran.get() + 1);
        }
        (invariant.check)(&subject, &case).map_err(|v| {
            if first_failure.get().is_none() {
                first_failure.set(Some(ran.get()));
            }
            let reason = v.to_string();
            *last.borrow_mut() = Some(v);
            TestCaseError::fail(reason)
        })
    });
    match result {
        Ok(()) => panic!(
            "properties: {} did NOT catch {subject} in {CATCH_BUDGET} cases: the invariant cannot tell it from a correct algorithm",
            invariant.name
        ),
        Err(TestError::Abort(why)) => panic!("properties: {} over {subject} aborted: {why}", invariant.name),
        Err(TestError::Fail(reason, _)) => {
            let after = first_failure.get().unwrap_or(0);
            println!(
                "properties: {} catches {subject} after {after} cases; shrunk counterexample:\n{reason}",
                invariant.name
            );
            // The runner's last call is the shrunk case that still fails.
            match last.into_inner() {
                Some(v) => v,
                None => panic!("proptest reported a failure the check never returned"),
            }
        }
    }
}
