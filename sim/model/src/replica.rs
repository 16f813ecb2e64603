//! A replica of the model, a configurable time behind its primary, and the failover that
//! promotes it.
//!
//! Redis replicates asynchronously: the primary answers the client first and streams the
//! write to its replicas after. Scripts are replicated by their effects (Redis 7), so what a
//! replica receives is, per write, the new state of each key the command touched. The model
//! keeps exactly that: after every command, the state of each key it touched (or its
//! deletion), stamped with the server clock, goes into a log; the replica applies an entry
//! once it is `lag_ms` old. When the primary dies, everything younger than the lag never
//! arrives: promoting the replica loses those writes, and only those. Its script cache is
//! empty (effects replication carries no scripts), so clients meet NOSCRIPT on it.
//!
//! Deterministic: keys are logged in byte order, stamps come from the model's injected clock.

use std::collections::VecDeque;

use bytes::Bytes;

use super::keyspace::{Entry, Keyspace};

/// A write as the replica receives it.
#[derive(Debug, Clone)]
enum Effect {
    /// The key's whole state after the write.
    Put(Bytes, Entry),
    /// The key is gone (DEL, expiry, a write that emptied it).
    Del(Bytes),
    /// FLUSHALL / FLUSHDB.
    Clear,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Replica {
    lag_ms: i64,
    data: Keyspace,
    /// Writes not yet applied, oldest first, with the server time they were made at (ms).
    in_flight: VecDeque<(i64, Effect)>,
}

/// What a failover did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Failover {
    /// Key writes the replica never received (lost with the primary).
    pub lost_writes: u64,
    /// Keys the promoted replica holds.
    pub keys: u64,
}

impl Replica {
    /// A replica `lag_ms` behind, starting as a copy of `primary` (a full sync).
    pub(crate) fn new(lag_ms: u64, primary: &Keyspace) -> Replica {
        let mut data = primary.clone();
        data.track_writes(false);
        Replica { lag_ms: lag_ms.min(i64::MAX as u64) as i64, data, in_flight: VecDeque::new() }
    }

    /// How far behind it is.
    pub(crate) fn lag_ms(&self) -> u64 {
        self.lag_ms as u64
    }

    /// Logs the writes `primary` noted since the last call, made at `now_ms`, and applies
    /// those now old enough.
    pub(crate) fn record(&mut self, primary: &mut Keyspace, now_ms: i64) {
        let (keys, cleared) = primary.take_touched();
        if cleared {
            self.in_flight.push_back((now_ms, Effect::Clear));
        }
        for key in keys {
            let effect = match primary.entry(&key) {
                Some(entry) => Effect::Put(key, entry),
                None => Effect::Del(key),
            };
            self.in_flight.push_back((now_ms, effect));
        }
        self.catch_up(now_ms);
    }

    /// Applies every write at least `lag_ms` old at `now_ms`.
    fn catch_up(&mut self, now_ms: i64) {
        while let Some((at, _)) = self.in_flight.front() {
            if now_ms - *at < self.lag_ms {
                break;
            }
            let Some((_, effect)) = self.in_flight.pop_front() else { break };
            match effect {
                Effect::Put(key, entry) => self.data.put(key, entry),
                Effect::Del(key) => {
                    self.data.remove(&key);
                }
                Effect::Clear => self.data.clear(),
            }
        }
    }

    /// The primary died at `now_ms`: the replica keeps what reached it and becomes the new
    /// primary's data; what was still in flight is lost. The replica then starts afresh as a
    /// copy of the new primary (the old one, restarted, syncs from it).
    pub(crate) fn promote(&mut self, now_ms: i64) -> (Keyspace, Failover) {
        self.catch_up(now_ms);
        let lost_writes = self.in_flight.len() as u64;
        self.in_flight.clear();
        let mut promoted = self.data.clone();
        promoted.track_writes(true);
        let keys = promoted.len() as u64;
        (promoted, Failover { lost_writes, keys })
    }
}

#[cfg(test)]
mod tests {
    use crate::{ManualServerClock, ModelHandle, Reply};

    #[test]
    fn promotion_keeps_what_reached_the_replica_and_loses_the_rest() {
        let clock = ManualServerClock::from_millis(1_700_000_000_000);
        let redis = ModelHandle::new(clock.clone());
        redis.call(&[b"SET", b"early", b"1"]);
        redis.enable_replication(250);
        redis.call(&[b"SET", b"a", b"1"]);
        redis.call(&[b"INCR", b"counter"]);
        clock.advance_millis(300);
        // Older than the lag at the failover: replicated. Younger: lost.
        redis.call(&[b"INCR", b"counter"]);
        redis.call(&[b"SET", b"b", b"2", b"PX", b"10000"]);
        redis.call(&[b"DEL", b"a"]);
        clock.advance_millis(100);
        let sha = redis.call(&[b"SCRIPT", b"LOAD", b"return 1"]);
        let report = redis.fail_over().expect("replication is on");
        assert_eq!(report.lost_writes, 3, "{report:?}");
        redis.restart(true);
        assert_eq!(redis.call(&[b"GET", b"early"]), Reply::Bulk("1".into()), "the full sync at the start");
        assert_eq!(redis.call(&[b"GET", b"a"]), Reply::Bulk("1".into()), "its DEL was lost");
        assert_eq!(redis.call(&[b"GET", b"counter"]), Reply::Bulk("1".into()), "the second INCR was lost");
        assert_eq!(redis.call(&[b"GET", b"b"]), Reply::Nil);
        let Reply::Bulk(sha) = sha else { panic!("{sha:?}") };
        assert!(redis.call(&[b"EVALSHA", &sha, b"0"]).is_error(), "a promoted replica has no scripts");
        // The new primary has a replica of its own, as far behind.
        redis.call(&[b"SET", b"c", b"3"]);
        clock.advance_millis(300);
        redis.call(&[b"PING"]);
        assert_eq!(redis.fail_over().map(|f| f.lost_writes), Some(0));
        redis.restart(true);
        assert_eq!(redis.call(&[b"GET", b"c"]), Reply::Bulk("3".into()));
    }

    #[test]
    fn without_replication_there_is_no_failover() {
        let redis = ModelHandle::new(ManualServerClock::from_millis(0));
        assert_eq!(redis.fail_over(), None);
    }
}
