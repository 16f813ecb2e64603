//! The Redis store's calls for the round-trip modes (`crate::modes`): a lease call and a batch
//! call, sent, timed out and classified exactly as [`RedisStore::evaluate`]'s own.

use std::sync::LazyLock;

use redis::Value;

use super::eval::EvalScript;
use super::redis::{bad_reply, classify, integers};
use super::{RedisStore, StoreError};
use crate::algo::lease::LeaseOutcome;
use crate::algo::Outcome;
use crate::decision::Degraded;
use crate::error::Error;
use crate::metrics;
use crate::modes::wire::{self, BatchRequest, LeaseRequest};
use crate::quota::Algorithm;
use crate::scripts::Invocation;

static LEASES: LazyLock<Vec<(Algorithm, EvalScript)>> =
    LazyLock::new(|| wire::LEASES.iter().map(|s| (s.algorithm, EvalScript::new(s.source))).collect());

static BATCHES: LazyLock<Vec<(Algorithm, EvalScript)>> = LazyLock::new(|| {
    Algorithm::ALL.iter().filter_map(|&a| wire::batch_source(a).map(|source| (a, EvalScript::new(&source)))).collect()
});

fn find(scripts: &'static [(Algorithm, EvalScript)], algorithm: Algorithm) -> Option<&'static EvalScript> {
    scripts.iter().find(|(a, _)| *a == algorithm).map(|(_, s)| s)
}

impl RedisStore {
    /// One lease call (see `lua/lease_*.lua`), with the outcome and the clock reading Redis
    /// decided by (ms).
    pub(crate) async fn lease(&self, req: LeaseRequest<'_>) -> Result<(LeaseOutcome, u64), StoreError> {
        let (Some(script), Some(call)) = (find(&LEASES, req.algorithm), req.invocation()) else {
            let detail = format!("the {} algorithm has no lease script", req.algorithm);
            return Err(StoreError::Fatal(Error::Server { algorithm: req.algorithm.name(), detail }));
        };
        let reply = self.run_timed(req.algorithm, script, &call).await?;
        integers(&reply)
            .and_then(|ints| req.read_reply(&ints))
            .ok_or_else(|| classify(req.algorithm.name(), &self.describe(), bad_reply(&reply)))
    }

    /// One batch call (see `lua/batch.lua`): each request's outcome and clock reading, or the
    /// error its own call would have met, in order.
    pub(crate) async fn evaluate_batch(
        &self,
        req: &BatchRequest<'_>,
    ) -> Result<Vec<Result<(Outcome, u64), StoreError>>, StoreError> {
        let Some(script) = find(&BATCHES, req.algorithm) else {
            let detail = format!("the {} algorithm has no batch script", req.algorithm);
            return Err(StoreError::Fatal(Error::Server { algorithm: req.algorithm.name(), detail }));
        };
        let call = req.invocation();
        let reply = self.run_timed(req.algorithm, script, &call).await?;
        let entries = match &reply {
            Value::Array(entries) if entries.len() == req.requests.len() => entries,
            other => return Err(classify(req.algorithm.name(), &self.describe(), bad_reply(other))),
        };
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
                    Err(StoreError::Fatal(if detail.contains("WRONGTYPE") {
                        Error::WrongType { algorithm, detail }
                    } else {
                        Error::Server { algorithm, detail }
                    }))
                }
                None => Err(classify(req.algorithm.name(), &self.describe(), bad_reply(entry))),
            });
        }
        Ok(out)
    }

    /// Runs `script` with `call` on the store's connection, bounded by its timeout, dropping
    /// the connection on transport trouble as [`RedisStore::evaluate`] does.
    async fn run_timed(
        &self,
        algorithm: Algorithm,
        script: &EvalScript,
        call: &Invocation,
    ) -> Result<Value, StoreError> {
        let untimed = async {
            let mut conn = self.connection().await?;
            script.run(&mut conn.conn, &call.keys, &call.args).await.map_err(|e| {
                let error = classify(algorithm.name(), &self.describe(), e);
                if matches!(error, StoreError::Unavailable(_)) {
                    self.drop_connection(&conn);
                }
                error
            })
        };
        let timing = metrics::StoreCall::start(algorithm, || self.describe());
        let result = match timing.instrument(tokio::time::timeout(self.timeout(), untimed)).await {
            Ok(result) => result,
            Err(_elapsed) => {
                self.timed_out();
                Err(StoreError::Unavailable(Degraded::Timeout))
            }
        };
        timing.finish(&result);
        self.note_success(&result);
        result
    }
}
