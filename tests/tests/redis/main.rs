//! Every suite against real servers, as one test executable: each module is a suite (its docs
//! say what it holds), and a test's name starts with its suite's (`outage::...`), which is how
//! a run picks suites (`cargo test -p redis-tests --test redis -- outage:: permits::`). One
//! executable instead of one per suite: each would link and instantiate the whole dependency
//! tree again, most of what building the tests costs. The metrics suite is apart
//! (`tests/tests/metrics.rs`): it installs the process's one metrics recorder and counts what
//! every limiter in the process does, so it needs a process of its own.
//!
//! The servers are started by the tests themselves ([`redis_tests::RedisServer`]), on free
//! loopback ports, and stopped when dropped. `REDIS_TESTS_SERVER` makes the library's own
//! suites run against another program (the Redis model), `REDIS_TESTS_REAL=valkey` against
//! Valkey; the suites that compare something with Redis itself start the real server whatever
//! the first says (see `tests/src/lib.rs`).

// The library's behaviour on one server.
mod agreement;
mod bad_input;
mod in_flight_rules;
mod modes;
mod outage;
mod permits;
mod reconcile;
mod redis_store;
mod script_work;

// Ways of reaching Redis.
mod cluster;
mod sentinel;
mod tls_acl;

// The model and other servers compared with Redis.
mod conformance_commands;
mod conformance_lua;
mod conformance_modes;
mod conformance_scripts;
mod conformance_support;
mod conformance_user_scripts;
mod conformance_valkey;

// The Redis module.
mod module;
mod module_concurrency;
mod module_leases;
mod module_rules;
mod module_store;
mod module_support;

// The enforcement point and its example gateway.
mod attacks;
mod gateway;
mod gateway_support;
mod readme_gateway;
