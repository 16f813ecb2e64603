//! Shared by the report's integration tests.

pub mod sample;
pub mod verdicts;
