//! The data: one keyspace of strings, hashes, sorted sets, lists and sets, each key with an
//! optional expiry and the time it was last used (OBJECT IDLETIME). Each value carries the
//! encoding Redis would have given it (`collections`), since clients can see it.
//!
//! Expiry works as in Redis: a key past its deadline is removed the moment a command touches it
//! (lazy), and [`Keyspace::expire_due`] removes every key past its deadline at once (the active
//! sweep). Redis's sweep samples keys at random; the model's host decides when to sweep and the
//! sweep takes all due keys in deadline order, so runs stay reproducible.
//!
//! The main table is a `HashMap` used only for lookups. Anything that walks keys in an order a
//! client could observe goes through the `BTreeSet` expiry index, which is ordered.

use std::collections::{BTreeSet, HashMap, VecDeque};

use bytes::Bytes;

use super::num::parse_i64;

mod collections;

pub(crate) use collections::{Hash, Set, StrEnc, ZSet};

/// A value stored under a key.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// A string and the encoding Redis would give it (see [`StrEnc`]).
    Str(Bytes, StrEnc),
    Hash(Hash),
    ZSet(ZSet),
    /// A list (Redis 7.0's quicklist, whatever its size): pushes and pops at both ends.
    List(VecDeque<Bytes>),
    Set(Set),
}

impl Value {
    /// A string value as SET stores its argument (`tryObjectEncoding`).
    pub(crate) fn string(s: &[u8]) -> Value {
        Value::Str(Bytes::copy_from_slice(s), StrEnc::of_arg(s))
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Str(..) => "string",
            Value::Hash(_) => "hash",
            Value::ZSet(_) => "zset",
            Value::List(_) => "list",
            Value::Set(_) => "set",
        }
    }

    /// What OBJECT ENCODING reports.
    pub(crate) fn encoding(&self) -> &'static str {
        match self {
            Value::Str(_, enc) => enc.name(),
            Value::Hash(h) if h.is_listpack() => "listpack",
            Value::ZSet(z) if z.is_listpack() => "listpack",
            Value::Hash(_) => "hashtable",
            Value::ZSet(_) => "skiplist",
            Value::List(_) => "quicklist",
            Value::Set(s) if s.is_intset() => "intset",
            Value::Set(_) => "hashtable",
        }
    }

    /// A documented estimate of the bytes Redis would spend on this value, for MEMORY USAGE
    /// and INFO: payload bytes plus a fixed overhead per element (dict entry or listpack
    /// header). Good for comparing keys with each other, not for capacity planning.
    fn estimated_bytes(&self) -> usize {
        match self {
            Value::Str(s, _) => 16 + s.len(),
            Value::Hash(h) => 32 + h.iter().map(|(f, v)| 16 + f.len() + v.len()).sum::<usize>(),
            Value::ZSet(z) => 64 + z.scores.keys().map(|m| 48 + m.len()).sum::<usize>(),
            Value::List(l) => 32 + l.iter().map(|e| 8 + e.len()).sum::<usize>(),
            Value::Set(set) => 32 + set.members.iter().map(|m| 24 + m.len()).sum::<usize>(),
        }
    }
}

/// A key's value, its deadline in Unix milliseconds, and when it was last read or written.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    pub(crate) expire_at_ms: Option<i64>,
    /// Redis's `lru` field: when a command last looked the key up or stored its value (OBJECT
    /// IDLETIME). Commands that only inspect a key (TTL, TYPE, EXISTS, OBJECT) leave it alone.
    accessed_ms: i64,
}

/// The single database (db 0).
#[derive(Debug, Default, Clone)]
pub(crate) struct Keyspace {
    dict: HashMap<Bytes, Entry>,
    /// (deadline, key) for every key with a deadline: the ordered view used by the sweep.
    expiry: BTreeSet<(i64, Bytes)>,
    /// Keys removed because they expired (INFO `expired_keys`).
    pub(crate) expired_keys: u64,
    /// With replication on: the keys written since the last [`Keyspace::take_touched`] (a
    /// `BTreeSet`, so their effects are replicated in one order whatever the hash map does),
    /// and whether the whole keyspace was cleared.
    touched: Option<(BTreeSet<Bytes>, bool)>,
    /// When each shared integer object (0..10000) was last read, through any key holding it:
    /// Redis keeps one object per such integer, and OBJECT IDLETIME of a key holding one reports
    /// that object's idle time. Never read: since `started_ms`. Survives FLUSHALL, as the
    /// shared objects do.
    shared_access: HashMap<i64, i64>,
    started_ms: i64,
}

impl Keyspace {
    /// An empty keyspace of a server started at `now_ms`.
    pub(crate) fn started_at(now_ms: i64) -> Self {
        Keyspace { started_ms: now_ms, ..Keyspace::default() }
    }

    /// Starts (or stops) noting which keys each write touches, for replication.
    pub(crate) fn track_writes(&mut self, on: bool) {
        self.touched = on.then(Default::default);
    }

    /// The keys written since the last call (in byte order), and whether the keyspace was
    /// cleared first; empty when writes are not tracked.
    pub(crate) fn take_touched(&mut self) -> (Vec<Bytes>, bool) {
        match &mut self.touched {
            Some((keys, cleared)) => {
                let out = (std::mem::take(keys).into_iter().collect(), *cleared);
                *cleared = false;
                out
            }
            None => (Vec::new(), false),
        }
    }

    fn touch(&mut self, key: &[u8]) {
        if let Some((keys, _)) = &mut self.touched {
            if !keys.contains(key) {
                keys.insert(Bytes::copy_from_slice(key));
            }
        }
    }

    /// A copy of `key`'s entry as it is now, deadline and all (for a replica).
    pub(crate) fn entry(&self, key: &[u8]) -> Option<Entry> {
        self.dict.get(key).cloned()
    }

    /// Puts `entry` under `key` as it is (a replica applying its primary's write).
    pub(crate) fn put(&mut self, key: Bytes, entry: Entry) {
        self.remove(&key);
        if let Some(at) = entry.expire_at_ms {
            self.expiry.insert((at, key.clone()));
        }
        self.dict.insert(key, entry);
    }

    pub(crate) fn len(&self) -> usize {
        self.dict.len()
    }

    pub(crate) fn expires_len(&self) -> usize {
        self.expiry.len()
    }

    /// Redis's `keyIsExpired`: a key is gone once `now > deadline` (alive at the deadline).
    fn is_expired(entry: &Entry, now_ms: i64) -> bool {
        matches!(entry.expire_at_ms, Some(at) if now_ms > at)
    }

    /// Lazy expiry: drops `key` if it is past its deadline.
    fn expire_if_due(&mut self, key: &[u8], now_ms: i64) {
        if self.dict.get(key).is_some_and(|e| Self::is_expired(e, now_ms)) {
            self.remove(key);
            self.expired_keys += 1;
        }
    }

    /// Redis's `lookupKey` without `LOOKUP_NOTOUCH`: the key (or its shared integer) was used now.
    fn note_access(&mut self, key: &[u8], now_ms: i64) {
        if let Some(entry) = self.dict.get_mut(key) {
            entry.accessed_ms = now_ms;
            if let Value::Str(s, StrEnc::SharedInt) = &entry.value {
                if let Some(n) = parse_i64(s) {
                    self.shared_access.insert(n, now_ms);
                }
            }
        }
    }

    /// The live entry under `key`, expiring it first if due; the key counts as used now.
    pub(crate) fn get(&mut self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.expire_if_due(key, now_ms);
        self.note_access(key, now_ms);
        self.dict.get(key)
    }

    /// As [`Keyspace::get`], but without counting as a use (`LOOKUP_NOTOUCH`: TTL, TYPE,
    /// EXISTS, OBJECT).
    pub(crate) fn get_notouch(&mut self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.expire_if_due(key, now_ms);
        self.dict.get(key)
    }

    /// OBJECT IDLETIME: whole seconds of Redis's LRU clock since the value under `key` was last
    /// used (for a shared integer, since any key holding it was).
    pub(crate) fn idle_seconds(&self, key: &[u8], now_ms: i64) -> Option<i64> {
        let entry = self.dict.get(key)?;
        let last = match &entry.value {
            Value::Str(s, StrEnc::SharedInt) => {
                parse_i64(s).and_then(|n| self.shared_access.get(&n).copied()).unwrap_or(self.started_ms)
            }
            _ => entry.accessed_ms,
        };
        Some((now_ms.div_euclid(1000) - last.div_euclid(1000)).max(0))
    }

    /// The live entry under `key`, mutable. The caller must not touch `expire_at_ms` directly
    /// (use [`Keyspace::set_expire`], which keeps the index in step).
    pub(crate) fn get_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        self.expire_if_due(key, now_ms);
        self.note_access(key, now_ms);
        // Whoever asks for a key mutably may change it: replicate its state afterwards.
        if self.dict.contains_key(key) {
            self.touch(key);
        }
        self.dict.get_mut(key)
    }

    /// The entry whether or not it is past its deadline (MEMORY USAGE looks without expiring).
    pub(crate) fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.dict.get(key)
    }

    pub(crate) fn exists(&mut self, key: &[u8], now_ms: i64) -> bool {
        self.get(key, now_ms).is_some()
    }

    /// Stores `value` under `key` at `now_ms`. `keep_ttl` keeps an existing deadline (SET
    /// KEEPTTL, or any in-place update such as INCR); otherwise the key loses its deadline as
    /// SET does.
    pub(crate) fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool, now_ms: i64) {
        self.touch(key);
        match self.dict.get_mut(key) {
            Some(entry) => {
                entry.value = value;
                entry.accessed_ms = now_ms;
                if !keep_ttl && entry.expire_at_ms.is_some() {
                    self.set_expire(key, None);
                }
            }
            None => {
                let entry = Entry { value, expire_at_ms: None, accessed_ms: now_ms };
                self.dict.insert(Bytes::copy_from_slice(key), entry);
            }
        }
    }

    /// Sets or clears the deadline of an existing key. Returns false if there is no such key.
    pub(crate) fn set_expire(&mut self, key: &[u8], at_ms: Option<i64>) -> bool {
        let Some((k, entry)) = self.dict.get_key_value(key) else {
            return false;
        };
        let k = k.clone();
        let old_deadline = entry.expire_at_ms;
        self.touch(key);
        if let Some(old) = old_deadline {
            self.expiry.remove(&(old, k.clone()));
        }
        if let Some(at) = at_ms {
            self.expiry.insert((at, k.clone()));
        }
        if let Some(entry) = self.dict.get_mut(key) {
            entry.expire_at_ms = at_ms;
        }
        true
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> bool {
        match self.dict.remove_entry(key) {
            Some((k, entry)) => {
                self.touch(&k);
                if let Some(at) = entry.expire_at_ms {
                    self.expiry.remove(&(at, k));
                }
                true
            }
            None => false,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.dict.clear();
        self.expiry.clear();
        if let Some((keys, cleared)) = &mut self.touched {
            keys.clear();
            *cleared = true;
        }
    }

    /// The active sweep: removes every key whose deadline has passed, earliest first.
    /// Returns how many keys it removed.
    pub(crate) fn expire_due(&mut self, now_ms: i64) -> usize {
        let mut removed = 0;
        while let Some((at, key)) = self.expiry.first().cloned() {
            if now_ms <= at {
                break;
            }
            self.remove(&key);
            self.expired_keys += 1;
            removed += 1;
        }
        removed
    }

    /// Every key whose name `matches`, in byte order: those alive at `now_ms`, or with `None`
    /// also those past their deadline (SCAN meets them and expires them itself). Nothing is
    /// removed, as Redis's KEYS does (`keyIsExpired`, no delete). Redis lists keys in its hash
    /// table's seeded order; the model sorts them, so its output never depends on `HashMap`
    /// order.
    pub(crate) fn matching_keys(&self, now_ms: Option<i64>, matches: impl Fn(&[u8]) -> bool) -> Vec<Bytes> {
        let mut keys: Vec<Bytes> = self
            .dict
            .iter()
            .filter(|(k, e)| now_ms.is_none_or(|now| !Self::is_expired(e, now)) && matches(k))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Estimated bytes for one key (see [`Value::estimated_bytes`]): the dict entry and key
    /// object (48 bytes) plus the key text, the value, and 24 bytes for a deadline.
    pub(crate) fn memory_usage(key: &[u8], entry: &Entry) -> usize {
        48 + key.len() + entry.value.estimated_bytes() + entry.expire_at_ms.map_or(0, |_| 24)
    }

    /// Sum of [`Keyspace::memory_usage`] over all keys (order-independent).
    pub(crate) fn estimated_bytes(&self) -> usize {
        self.dict.iter().map(|(k, e)| Self::memory_usage(k, e)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_expire_lazily_after_their_deadline_not_at_it() {
        let mut ks = Keyspace::default();
        ks.set(b"k", Value::string(b"v"), false, 0);
        assert!(ks.set_expire(b"k", Some(1_000)));
        assert!(ks.exists(b"k", 1_000), "alive at the deadline");
        assert!(!ks.exists(b"k", 1_001), "gone after it");
        assert_eq!(ks.expires_len(), 0);
        assert_eq!(ks.expired_keys, 1);
    }

    #[test]
    fn sweep_removes_due_keys_in_deadline_order() {
        let mut ks = Keyspace::default();
        for (k, at) in [(&b"a"[..], 30), (b"b", 10), (b"c", 20), (b"d", 99)] {
            ks.set(k, Value::string(b""), false, 0);
            ks.set_expire(k, Some(at));
        }
        assert_eq!(ks.expire_due(25), 2);
        assert_eq!(ks.len(), 2);
        assert_eq!(ks.expires_len(), 2);
    }

    #[test]
    fn set_without_keepttl_clears_the_deadline() {
        let mut ks = Keyspace::default();
        ks.set(b"k", Value::string(b""), false, 0);
        ks.set_expire(b"k", Some(5));
        ks.set(b"k", Value::string(b""), true, 0);
        assert_eq!(ks.expires_len(), 1);
        ks.set(b"k", Value::string(b""), false, 0);
        assert_eq!(ks.expires_len(), 0);
        assert!(ks.exists(b"k", 1_000_000));
    }
}
