//! The harness's suites on the Redis model, as modules of one executable (the suites on real
//! servers, `real_*.rs` and `verify_real.rs`, are executables of their own, run in the real
//! lanes): each module's docs say what it pins.

mod algorithms;
mod corpus;
mod families;
mod module_rows;
mod readme;
mod scenarios;
mod support;
mod verify;
mod verify_in_flight;
