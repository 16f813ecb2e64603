//! The results file that `cargo xtask simulate` writes: the simulator's own definition
//! (`sim::results`), so writer and reader cannot drift apart. Missing fields read as their
//! defaults and unknown ones are ignored; the `schema` string refuses an outdated file.

pub use sim::results::{FaultWindow, RacePoint, RedisCost, Results, RunResult, Series, SkewPoint, Sources, SCHEMA};
