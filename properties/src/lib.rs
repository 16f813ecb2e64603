//! Property suites over the pure algorithms of `redis_ratelimit::harness::algo`.
//!
//! Each invariant is a plain function `check_*(subject, case) -> Result<(), Violation>`
//! ([`invariants`]). The same function runs in two directions:
//! - over the five correct algorithms, for `PROPTEST_CASES` random cases (256 by default;
//!   `cargo xtask props --cases N`), where it must hold ([`runner::holds`]);
//! - over known-bad state machines, the two subjects and the small [`mutants`] of the correct
//!   algorithms, where it must find a violation within a fixed, seeded budget
//!   ([`runner::catches`]). An invariant no bad state machine breaks would be checking nothing.
//!
//! A failure prints the quota and the schedule as `(t, cost) -> decision` lines, shrunk by
//! proptest, with the offending request marked; the seed goes to
//! `proptest-regressions/<invariant>-<subject>.txt` (committed) and is replayed first.
//!
//! # Layout
//! - [`machine`]: what decides (a [`machine::StateMachine`]) and the state it keeps per key.
//! - [`subject`]: a state machine and what it is held to.
//! - [`schedule`]: requests, runs, and how they print.
//! - [`strategy`]: quotas over each algorithm's whole valid range, schedules around the
//!   quota's time scales.
//! - [`reference`](mod@reference): exact references written from the promises (window sums, the counter's
//!   estimate, an exact integer bucket, schedules within the rate).
//! - [`invariants`]: the checks, with a table of what each asserts; [`debt`], the bound
//!   requests and reconciled excesses keep together.
//! - [`mutants`]: one-bug copies of the correct algorithms.
//! - [`accuracy`]: the sliding-window counter's error against an exact sliding log.
//! - [`runner`]: proptest's `TestRunner`, case counts and readable failures.
//!
//! The suites themselves are `tests/suite/`: `invariants.rs` (correct algorithms pass),
//! `mutants.rs` (bad state machines are caught), `accuracy.rs`.

#![forbid(unsafe_code)]

pub mod accuracy;
pub mod adr002;
pub mod debt;
pub mod invariants;
pub mod machine;
pub mod mutants;
pub mod reference;
pub mod runner;
pub mod schedule;
pub mod strategy;
pub mod subject;

pub use invariants::{Check, Invariant};
pub use machine::{MachineState, StateMachine};
pub use schedule::{Case, Req, Run, Step, Violation};
pub use subject::Subject;
