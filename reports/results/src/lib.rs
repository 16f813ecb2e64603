//! What one `cargo xtask simulate` or `cargo xtask verify` produces, and what it means.
//!
//! - [`schema`]: the results file (JSON, schema [`SCHEMA`]), re-exported at the crate root.
//!   This crate is its one definition: the simulator (`sim`) writes it and the report
//!   (`reports`) reads it.
//! - [`verdict`]: the one rule for what a run and a row of runs came to: whether a result
//!   fails the run ([`is_failure`]), and the words "held", "broken 1/3 (expected)",
//!   "starved 1/1 (expected)", "BROKEN 2/3" that the terminal table, the HTML tables, the
//!   chart titles and the findings list all show.
//! - [`table`]: the terminal tables `cargo xtask simulate` prints.
//! - [`subject`]: what a subject `cargo xtask verify` judged came to, in words.
//! - [`command`]: how a printed replay names the tool (`ratelimit-lab`, or `cargo xtask` here).
//! - [`junit`]: a results file as JUnit XML for CI systems.
//! - [`merge`](mod@merge): several results files (the shards of one sweep, or separate runs) as one.
//!
//! The crate depends on serde alone, so the report builds without the simulator.

#![forbid(unsafe_code)]

pub mod command;
pub mod junit;
pub mod merge;
pub mod schema;
pub mod subject;
pub mod table;
pub mod verdict;

pub use merge::merge;
pub use schema::{
    Charges, FaultWindow, InFlightRun, Profile, RacePoint, RatePoint, RedisCost, ReplayReport, Results, RuleBound,
    RulesResult, RunResult, Series, ServiceRun, SkewPoint, SlotsHeld, Sources, SubjectReport, Verdict, VerdictLine,
    Witness, WitnessFault, WitnessRequest, SCHEMA, SCHEMA_FAMILY, SCHEMA_VERSION,
};
pub use verdict::{is_failure, RowVerdict};
