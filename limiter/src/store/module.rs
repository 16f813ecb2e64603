//! Deciding with the Redis module (`limiter/module`) instead of the scripts: each algorithm's
//! `RATELIMIT.*` command takes its script's KEYS and ARGV and answers its reply, at a fraction
//! of what Redis spends running the script (the bench measures both).
//!
//! A store built [`RedisStore::with_module`] sends the commands for every decision it has one
//! for, and never falls back to the scripts by itself: each new connection to a server asks
//! `COMMAND INFO` whether the commands are there (a failover can land on a primary without
//! the module), and a server that answers "unknown command" (a cluster node, a module
//! unloaded) is named in [`Error::ModuleNotLoaded`]. What the module has no command for yet, a
//! key's block, leases and several rules in one call, is refused as a configuration error
//! rather than sent as a script. Resetting, refunding and blocking a key still run their
//! scripts: they decide nothing, and a module-only deployment still loads scripts for them.

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, Value};

use super::eval::Sent;
use super::redis::{bad_reply, classify, integers, Link};
use super::{RedisStore, StoreError};
use crate::algo::Outcome;
use crate::error::Error;
use crate::modes::wire::BatchRequest;
use crate::quota::Algorithm;
use crate::scripts;

/// Whether `e` is Redis saying it has no such command: the module is not loaded there.
pub(super) fn unknown_command(e: &RedisError) -> bool {
    e.code() == Some("ERR") && e.detail().is_some_and(|d| d.starts_with("unknown command"))
}

/// Asks the server behind `conn` (`redis`, for messages) whether it has every command of the
/// module: `COMMAND INFO` answers nil for each it lacks.
pub(super) async fn check(conn: &mut impl ConnectionLike, redis: &str) -> Result<(), StoreError> {
    let names = Algorithm::ALL.map(scripts::module_command);
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

/// What the module has no command for yet, asked of a store that decides with it: refused
/// when a limiter is built, and by the store if it is asked anyway.
pub(crate) fn no_command(what: &str) -> Error {
    Error::config(
        "with_module",
        format!("the Redis module has no command for {what} yet; build the store without with_module() to use it"),
    )
}

pub(super) fn no_command_for(what: &str) -> StoreError {
    StoreError::Fatal(no_command(what))
}

impl Link {
    /// The same link, checking for the module where it can: every new connection to one
    /// server. A cluster's connections are the cluster client's own, so a node without the
    /// module shows on its first decision ([`RedisStore::classify`]).
    fn requiring_module(self) -> Result<Self, Error> {
        match self {
            Link::Node(node) => Ok(Link::Node(Box::new(node.requiring_module()?))),
            cluster @ Link::Cluster(_) => Ok(cluster),
        }
    }
}

impl RedisStore {
    /// Decides with the Redis module's commands (`RATELIMIT.FW`, `.SW`, `.SL`, `.TB`,
    /// `.GCRA`) instead of the scripts: the same decisions, keys and TTLs for a fraction of
    /// Redis's time. Every new connection to a server checks that the module is loaded (a
    /// cluster's nodes are checked by their first decision), and a store that finds it missing
    /// answers [`Error::ModuleNotLoaded`], never a script. Blockable limiters,
    /// leases and several rules decided together have no command yet and are refused.
    pub fn with_module(self) -> Result<Self, Error> {
        Ok(RedisStore { link: self.link.requiring_module()?, module: true, ..self })
    }

    /// Whether the store decides with the module.
    pub(crate) fn uses_module(&self) -> bool {
        self.module
    }

    /// A batch (`crate::modes::batch`) as one pipeline of the module's commands, one per
    /// request in order, each answered or refused on its own as the batch script's entries are.
    pub(super) async fn evaluate_batch_with_module(
        &self,
        req: &BatchRequest<'_>,
    ) -> Result<Vec<Result<(Outcome, u64), StoreError>>, StoreError> {
        if req.blockable {
            return Err(no_command_for("a key's block"));
        }
        let command = scripts::module_command(req.algorithm);
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for &(stem, now_ms, cost) in &req.requests {
            let call = scripts::Request { algorithm: req.algorithm, quota: req.quota, stem, now_ms, cost }
                .invocation_of_stem();
            pipe.cmd(command).arg(&call.keys).arg(&call.args);
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
                    other => integers(other).and_then(|ints| req.read_entry(i, Ok(&ints))),
                };
                match read {
                    Some(Ok(decided)) => Ok(decided),
                    _ => Err(classify(req.algorithm.name(), &self.describe(), bad_reply(entry))),
                }
            })
            .collect())
    }
}
