//! Deciding with the Redis module (`limiter/module`) instead of the scripts: each algorithm's
//! `RATELIMIT.*` command takes its script's KEYS and ARGV and answers its reply, at a fraction
//! of what Redis spends running the script (the bench measures both).
//!
//! A store built [`RedisStore::with_module`] sends the commands for every decision it has one
//! for, and never falls back to the scripts by itself: each new connection to a server asks
//! `COMMAND INFO` whether the commands are there (a failover can land on a primary without
//! the module), and a server that answers "unknown command" (a cluster node, a module
//! unloaded) is named in [`Error::ModuleNotLoaded`]. Several rules of one request go to its
//! `RATELIMIT.RULES`, and so does a request behind its key's block (as the command's one rule,
//! which it runs behind the block as the blockable script does); a lease goes to
//! `RATELIMIT.LEASE.GCRA` or `.LEASE.TB`, and a concurrency limit's acquire, renewal, release
//! or peek to `RATELIMIT.CONCURRENCY`. Resetting, refunding and blocking a key still run
//! their scripts: they decide nothing, and a module-only deployment still loads scripts for
//! them.

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, Value};

use super::eval::Sent;
use super::redis::{bad_reply, classify, integers, read_integers, Link};
use super::{RedisStore, StoreError};
use crate::algo::Outcome;
use crate::error::{ConfigError, Error};
use crate::modes::wire::{lease_module_command, BatchRequest};
use crate::quota::Algorithm;
use crate::rules_script::{self, RuleCall, RulesRequest};
use crate::scripts;

/// Whether `e` is Redis saying it has no such command: the module is not loaded there.
pub(super) fn unknown_command(e: &RedisError) -> bool {
    e.code() == Some("ERR") && e.detail().is_some_and(|d| d.starts_with("unknown command"))
}

/// Asks the server behind `conn` (`redis`, for messages) whether it has every command of the
/// module: `COMMAND INFO` answers nil for each it lacks.
pub(super) async fn check(conn: &mut impl ConnectionLike, redis: &str) -> Result<(), StoreError> {
    let leases = Algorithm::ALL.into_iter().filter_map(lease_module_command);
    let names: Vec<&str> = Algorithm::ALL
        .map(scripts::module_command)
        .into_iter()
        .chain([rules_script::MODULE_COMMAND])
        .chain(leases)
        .chain([scripts::CONCURRENCY_MODULE_COMMAND])
        .collect();
    let reply = redis::cmd("COMMAND").arg("INFO").arg(&names[..]).query_async::<Value>(conn).await;
    let missing: Vec<&str> = match reply {
        Ok(Value::Array(infos)) if infos.len() == names.len() => {
            names.iter().zip(&infos).filter(|(_, info)| matches!(info, Value::Nil)).map(|(n, _)| *n).collect()
        }
        Ok(other) => return Err(classify("module", redis, bad_reply(&other))),
        // A server that answers, but not this (an ACL without COMMAND): it cannot be checked,
        // and a store that cannot tell must not decide as if it could.
        Err(e) if e.kind() != ErrorKind::Io && e.code().is_some() => {
            return Err(not_loaded(redis, format!("COMMAND INFO, which checks for it, was refused: {e}")))
        }
        Err(e) => return Err(classify("module", redis, e)),
    };
    match missing.as_slice() {
        [] => Ok(()),
        _ => Err(not_loaded(redis, format!("COMMAND INFO knows no {}", missing.join(", ")))),
    }
}

/// The error naming the module as missing on `redis`.
pub(super) fn not_loaded(redis: &str, detail: String) -> StoreError {
    StoreError::Fatal(Error::ModuleNotLoaded { redis: redis.to_owned(), detail })
}

impl Link {
    /// The same link, checking for the module where it can: every new connection to one
    /// server. A cluster's connections are the cluster client's own, so a node without the
    /// module shows on its first decision ([`RedisStore::classify`]).
    fn requiring_module(self) -> Result<Self, ConfigError> {
        match self {
            Link::Node(node) => Ok(Link::Node(Box::new(node.requiring_module()?))),
            cluster @ Link::Cluster(_) => Ok(cluster),
        }
    }
}

/// A request behind its key's block, as the module decides it: `RATELIMIT.RULES` with it as
/// its one rule (which the command runs behind its block, as the blockable script runs it).
fn behind_block<'a>(request: scripts::Request<'a>, block: &'a str) -> RulesRequest<'a> {
    RulesRequest { items: vec![RuleCall { request, shadow: false, block: Some(block) }], commit: true }
}

/// The one rule's answer in `ints`, the reply of [`behind_block`]'s `req`, and its clock reading.
fn read_one(req: &RulesRequest<'_>, ints: &[i64]) -> Option<(Outcome, u64)> {
    let reply = req.read_reply(ints)?;
    reply.items.first().map(|i| (i.item.outcome, i.now_ms))
}

impl RedisStore {
    /// One request behind its key's block on the module (see [`behind_block`]).
    pub(super) async fn evaluate_behind_block_with_module(
        &self,
        req: scripts::Request<'_>,
        block: &str,
    ) -> Result<(Outcome, u64), StoreError> {
        let one = behind_block(req, block);
        let call = one.module_invocation();
        let sent = Sent::Command(rules_script::MODULE_COMMAND);
        self.run(req.algorithm.name(), sent, &call, |reply| read_integers(reply, |ints| read_one(&one, ints))).await
    }

    /// Decides with the Redis module's commands (`RATELIMIT.FW`, `.SW`, `.SL`, `.TB`,
    /// `.GCRA`, and `.RULES` for several rules of one request) instead of the scripts: the
    /// same decisions, keys and TTLs for a fraction of Redis's time. Every new connection to a
    /// server checks that the module is loaded (a cluster's nodes are checked by their first
    /// decision), and a store that finds it missing answers [`Error::ModuleNotLoaded`], never
    /// a script. A blockable limiter's requests go to `RATELIMIT.RULES` as its one rule, a
    /// leasing limiter's leases to `RATELIMIT.LEASE.GCRA` or `.LEASE.TB`, and a
    /// [`crate::ConcurrencyLimiter`]'s calls to `RATELIMIT.CONCURRENCY`.
    pub fn with_module(self) -> Result<Self, ConfigError> {
        Ok(RedisStore { link: self.link.requiring_module()?, module: true, ..self })
    }

    /// A batch (`crate::modes::batch`) as one pipeline of the module's commands, one per
    /// request in order, each answered or refused on its own as the batch script's entries are.
    pub(super) async fn evaluate_batch_with_module(
        &self,
        req: &BatchRequest<'_>,
    ) -> Result<Vec<Result<(Outcome, u64), StoreError>>, StoreError> {
        let blocks: Vec<String> = match req.blockable {
            true => req.requests.iter().map(|&(stem, ..)| scripts::block_key(req.algorithm, stem)).collect(),
            false => Vec::new(),
        };
        let one = |i: usize| {
            let (stem, now_ms, cost) = req.requests[i];
            scripts::Request { algorithm: req.algorithm, quota: req.quota, stem, now_ms, cost }
        };
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for i in 0..req.requests.len() {
            match blocks.get(i) {
                Some(block) => {
                    let call = behind_block(one(i), block).module_invocation();
                    pipe.cmd(rules_script::MODULE_COMMAND).arg(&call.keys).arg(&call.args);
                }
                None => {
                    let call = one(i).invocation_of_stem();
                    pipe.cmd(scripts::module_command(req.algorithm)).arg(&call.keys).arg(&call.args);
                }
            };
        }
        let none = scripts::Invocation { keys: Vec::new(), args: Vec::new() };
        let replies = self
            .run(req.algorithm.name(), Sent::Pipeline(&pipe), &none, |reply| match reply {
                Value::Array(entries) if entries.len() == req.requests.len() => Ok(entries),
                other => Err(bad_reply(&other)),
            })
            .await?;
        Ok(replies
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let read = match entry {
                    Value::ServerError(e) => {
                        let e = RedisError::from(e.clone());
                        return Err(self.classify(req.algorithm.name(), e));
                    }
                    other => integers(other).and_then(|ints| match blocks.get(i) {
                        Some(block) => read_one(&behind_block(one(i), block), &ints).map(Ok),
                        None => req.read_entry(i, Ok(&ints)),
                    }),
                };
                match read {
                    Some(Ok(decided)) => Ok(decided),
                    _ => Err(classify(req.algorithm.name(), &self.describe(), bad_reply(entry))),
                }
            })
            .collect())
    }
}
