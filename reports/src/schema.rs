//! The results file that `cargo xtask simulate` writes: the `results` crate, the schema's one
//! definition that the simulator writes with, so writer and reader cannot drift apart. Missing
//! fields read as their defaults and unknown ones are ignored; the `schema` string refuses an
//! outdated file.

pub use results::{
    is_failure, FaultWindow, Profile, RacePoint, RatePoint, RedisCost, Results, RunResult, Series, SkewPoint, Sources,
    SubjectReport, Verdict, VerdictLine, SCHEMA,
};
