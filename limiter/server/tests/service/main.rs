//! The service's tests, one executable: each module a concern, all against real
//! `redis-server` processes and real gRPC listeners on loopback ports the tests start and
//! stop. One executable rather than one per file: each links the whole service and its
//! dependencies, and five of them cost CI a minute of compiling.

#![allow(clippy::disallowed_methods)] // real time against a real Redis

mod support;

mod attacks;
mod cluster;
mod in_flight;
mod operations;
mod reference;
mod rls;
mod settle;
