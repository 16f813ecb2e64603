//! Batching's machinery: checks queue up; one task at a time sends what is queued as one call
//! of the batch script (`lua/batch.lua`) and hands each check its own entry of the reply.
//!
//! The flushing task is spawned, not run by whichever check came first, so a caller that gives
//! up on its check (drops the future) never strands the others. It keeps going while checks
//! queue up and ends when the queue is empty; the next check starts a new one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::slot::key_slot;
use super::wire::BatchRequest;
use super::Batching;
use crate::algo::Outcome;
use crate::decision::Degraded;
use crate::quota::{Algorithm, Quota};
use crate::store::{RedisStore, StoreError};
use crate::sync::{lock, Mutex};

type Reply = Result<(Outcome, u64), StoreError>;

struct Pending {
    stem: String,
    now_ms: Option<u64>,
    cost: u64,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    flushing: bool,
}

/// See the module docs.
pub(crate) struct Batcher {
    config: Batching,
    /// Its limiter is blockable: each request runs behind its key's block.
    blockable: bool,
    queue: Mutex<Queue>,
}

impl Batcher {
    pub(crate) fn new(config: Batching, blockable: bool) -> Self {
        Batcher { config, blockable, queue: Mutex::new(Queue::default()) }
    }

    /// Decides one request in the next batch.
    pub(crate) async fn evaluate(
        self: &Arc<Self>,
        store: &Arc<RedisStore>,
        algorithm: Algorithm,
        quota: Quota,
        stem: String,
        now_ms: Option<u64>,
        cost: u64,
    ) -> Reply {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = lock(&self.queue);
            queue.pending.push(Pending { stem, now_ms, cost, reply });
            !std::mem::replace(&mut queue.flushing, true)
        };
        if start {
            tokio::spawn(flush(self.clone(), store.clone(), algorithm, quota));
        }
        // The flusher answers every check it takes; a dropped answer means its task died.
        answer.await.unwrap_or(Err(StoreError::Unavailable(Degraded::Unavailable)))
    }

    fn next_batch(&self) -> Option<Vec<Pending>> {
        let mut queue = lock(&self.queue);
        if queue.pending.is_empty() {
            queue.flushing = false;
            return None;
        }
        let n = queue.pending.len().min(self.config.max_batch);
        Some(queue.pending.drain(..n).collect())
    }
}

async fn flush(batcher: Arc<Batcher>, store: Arc<RedisStore>, algorithm: Algorithm, quota: Quota) {
    if batcher.config.window_ms > 0 {
        tokio::time::sleep(Duration::from_millis(batcher.config.window_ms)).await;
    }
    while let Some(batch) = batcher.next_batch() {
        // Per slot, each group keeps its checks' order; a standalone Redis takes one group.
        let mut groups: BTreeMap<u16, Vec<Pending>> = BTreeMap::new();
        for p in batch {
            let slot = if batcher.config.per_slot { key_slot(p.stem.as_bytes()) } else { 0 };
            groups.entry(slot).or_default().push(p);
        }
        for group in groups.into_values() {
            let request = BatchRequest {
                algorithm,
                quota: &quota,
                requests: group.iter().map(|p| (p.stem.as_str(), p.now_ms, p.cost)).collect(),
                blockable: batcher.blockable,
            };
            let replies = store.evaluate_batch(&request).await;
            for (i, p) in group.into_iter().enumerate() {
                let reply = match &replies {
                    Ok(entries) => {
                        entries.get(i).cloned().unwrap_or(Err(StoreError::Unavailable(Degraded::Unavailable)))
                    }
                    Err(e) => Err(e.clone()),
                };
                // A check that gave up has dropped its receiver; nothing to tell it.
                let _ = p.reply.send(reply);
            }
        }
    }
}
