//! The Redis store's calls for the round-trip modes (`crate::modes`): a lease call and a batch
//! call, sent, timed out and classified exactly as [`RedisStore::evaluate`]'s own.

use std::sync::Arc;

use redis::{ErrorKind, RedisError, Value};

use super::eval::Sent;
use super::loaded;
use super::redis::{bad_reply, classify, integers, read_integers, script_error};
use super::{RedisStore, StoreError};
use crate::algo::lease::LeaseOutcome;
use crate::algo::Outcome;
use crate::error::Error;
use crate::modes::wire::{lease_module_command, BatchRequest, LeaseRequest};

impl RedisStore {
    /// One lease call (see `lua/lease_*.lua`, or the module's lease command), with the outcome
    /// and the clock reading Redis decided by (ms).
    pub(crate) async fn lease(&self, req: LeaseRequest<'_>) -> Result<(LeaseOutcome, u64), StoreError> {
        let sent = match self.module {
            true => lease_module_command(req.algorithm).map(Sent::Command),
            false => loaded::of(req.algorithm).lease.as_ref().map(Sent::Script),
        };
        let (Some(sent), Some(call)) = (sent, req.invocation()) else {
            let detail = format!("the {} algorithm has no lease script", req.algorithm);
            let cause = RedisError::from((ErrorKind::Client, "no lease script", detail.clone()));
            return Err(StoreError::Fatal(Error::Server {
                algorithm: req.algorithm.name(),
                detail,
                cause: Arc::new(cause),
            }));
        };
        self.run(req.algorithm.name(), sent, &call, |reply| read_integers(reply, |ints| req.read_reply(ints))).await
    }

    /// One batch call (see `lua/batch.lua`): each request's outcome and clock reading, or the
    /// error its own call would have met, in order.
    pub(crate) async fn evaluate_batch(
        &self,
        req: &BatchRequest<'_>,
    ) -> Result<Vec<Result<(Outcome, u64), StoreError>>, StoreError> {
        if self.module {
            return self.evaluate_batch_with_module(req).await;
        }
        let call = req.invocation();
        let script = Sent::Script(&loaded::of(req.algorithm).batch);
        let reply = self.run(req.algorithm.name(), script, &call, |reply| match reply {
            Value::Array(entries) if entries.len() == req.requests.len() => Ok(entries),
            other => Err(bad_reply(&other)),
        });
        let entries = reply.await?;
        let mut out = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let read = match entry {
                Value::BulkString(text) => req.read_entry(i, Err(&String::from_utf8_lossy(text))),
                Value::SimpleString(text) => req.read_entry(i, Err(text)),
                other => integers(other).and_then(|ints| req.read_entry(i, Ok(&ints))),
            };
            out.push(match read {
                Some(Ok(decided)) => Ok(decided),
                // The request's own call would have been refused with this text: the caller's
                // to hear about, as a refused single call is.
                Some(Err(detail)) => {
                    let algorithm = req.algorithm.name();
                    Err(StoreError::Fatal(script_error(algorithm, detail)))
                }
                None => Err(classify(req.algorithm.name(), &self.describe(), bad_reply(entry))),
            });
        }
        Ok(out)
    }
}
