//! A rate limit service any proxy can call: Envoy's rate limit service protocol
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`) over gRPC, in front of the
//! `redis-ratelimit` enforcer. `docs/RLS.md` is the guide: configuring Envoy, Envoy Gateway and
//! Istio to call it, migrating from envoyproxy/ratelimit, and the bound of quota grants.
//!
//! # Layout
//!
//! - [`config`]: envoyproxy/ratelimit's YAML configuration, read as it reads it, plus this
//!   project's optional fields; mistakes named by file, path, line and value.
//! - [`adapter`]: the one module that speaks the library's language (rules, direct limits,
//!   decisions, leases).
//! - [`service`]: `ShouldRateLimit`: matching, costs, per-request limits, all-or-nothing or
//!   charge-everything, quota grants, every field of the response.
//! - [`grpc`]: the tonic service, and the floor RPC the benchmark measures gRPC by.
//! - [`server`]: the listener (TLS, mutual TLS), health, reload, graceful shutdown.
//! - [`metrics`]: what is measured, per domain and descriptor.
//! - [`cli`]: the command line.

#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod adapter;
pub mod cli;
pub mod config;
pub mod grpc;
pub mod metrics;
pub mod server;
pub mod service;
