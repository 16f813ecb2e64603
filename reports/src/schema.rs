//! The results file that `cargo xtask simulate` writes: the `results` crate, the schema's one
//! definition that the simulator writes with, so writer and reader cannot drift apart. Missing
//! fields read as their defaults and unknown ones are ignored; the `schema` string names the
//! version, and an earlier version's file is read in this one's shape.

pub use results::{
    is_failure, FaultWindow, Profile, RacePoint, RatePoint, RedisCost, Results, RunResult, Series, SkewPoint, Sources,
    SubjectReport, Verdict, VerdictLine, Witness, WitnessFault, WitnessRequest, SCHEMA, SCHEMA_FAMILY, SCHEMA_VERSION,
};
