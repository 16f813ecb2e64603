//! The data: one keyspace of strings, hashes, sorted sets, lists and sets, each key with an
//! optional expiry.
//!
//! Expiry works as in Redis: a key past its deadline is removed the moment a command touches it
//! (lazy), and [`Keyspace::expire_due`] removes every key past its deadline at once (the active
//! sweep). Redis's sweep samples keys at random; the model's host decides when to sweep and the
//! sweep takes all due keys in deadline order, so runs stay reproducible.
//!
//! The main table is a `HashMap` used only for lookups. Anything that walks keys in an order a
//! client could observe goes through the `BTreeSet` expiry index, which is ordered.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, VecDeque};

use bytes::Bytes;
use indexmap::IndexMap;

/// Redis converts a small hash or sorted set (listpack) to a big one (hashtable or skiplist)
/// past these sizes. The model keeps insertion order for hashes either way, but mirrors the
/// conversion for sorted sets because it changes how `-0` scores print.
pub(crate) const LISTPACK_MAX_ENTRIES: usize = 128;
pub(crate) const LISTPACK_MAX_VALUE: usize = 64;

/// A value stored under a key.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Str(Bytes),
    /// Insertion-ordered, like Redis's listpack encoding, so HGETALL agrees with Redis for
    /// small hashes. (Big Redis hashes iterate in hash order, which no client can rely on.)
    Hash(IndexMap<Bytes, Bytes>),
    ZSet(ZSet),
    /// A list (Redis's quicklist): pushes and pops at both ends.
    List(VecDeque<Bytes>),
    Set(Set),
}

impl Value {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::ZSet(_) => "zset",
            Value::List(_) => "list",
            Value::Set(_) => "set",
        }
    }

    /// A documented estimate of the bytes Redis would spend on this value, for MEMORY USAGE
    /// and INFO: payload bytes plus a fixed overhead per element (dict entry or listpack
    /// header). Good for comparing keys with each other, not for capacity planning.
    fn estimated_bytes(&self) -> usize {
        match self {
            Value::Str(s) => 16 + s.len(),
            Value::Hash(h) => 32 + h.iter().map(|(f, v)| 16 + f.len() + v.len()).sum::<usize>(),
            Value::ZSet(z) => 64 + z.scores.keys().map(|m| 48 + m.len()).sum::<usize>(),
            Value::List(l) => 32 + l.iter().map(|e| 8 + e.len()).sum::<usize>(),
            Value::Set(set) => 32 + set.members.iter().map(|m| 24 + m.len()).sum::<usize>(),
        }
    }
}

/// Redis keeps a set of integers as a sorted array of integers (intset) up to this many members.
pub(crate) const INTSET_MAX_ENTRIES: usize = 512;

/// A set. Redis 7.0 stores a set of integers (as `string2ll` reads them) as an *intset*, which
/// lists its members in numeric order, and converts it for good to a hash table at the first
/// other member or past [`INTSET_MAX_ENTRIES`]. The model lists an intset's members in numeric
/// order too, so SMEMBERS agrees with Redis there; a hash table's order comes from a seeded hash
/// no client can rely on, and the model lists those members in byte order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Set {
    members: BTreeSet<Bytes>,
    intset: bool,
}

impl Set {
    /// An empty set in the encoding Redis picks for a first member `first` (`setTypeCreate`).
    pub(crate) fn for_first(first: &[u8]) -> Self {
        Set { members: BTreeSet::new(), intset: super::num::parse_i64(first).is_some() }
    }

    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(crate) fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Adds `member`; false if it was there. Converts an intset as `setTypeAdd` does.
    pub(crate) fn insert(&mut self, member: &[u8]) -> bool {
        if self.intset && super::num::parse_i64(member).is_none() {
            self.intset = false;
        }
        let added = self.members.insert(Bytes::copy_from_slice(member));
        if added && self.intset && self.members.len() > INTSET_MAX_ENTRIES {
            self.intset = false;
        }
        added
    }

    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        self.members.remove(member)
    }

    /// The members in the order SMEMBERS lists them (see the type docs).
    pub(crate) fn members(&self) -> Vec<Bytes> {
        let mut all: Vec<Bytes> = self.members.iter().cloned().collect();
        if self.intset {
            all.sort_by_key(|m| super::num::parse_i64(m).unwrap_or(0));
        }
        all
    }
}

/// A score with a total order. NaN never gets in (Redis refuses it before storing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        // Plain comparison (as Redis's skiplist does), so -0 and 0 tie and members decide.
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// A sorted set: member -> score for lookups, (score, member) for order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ZSet {
    scores: HashMap<Bytes, f64>,
    order: BTreeSet<(Score, Bytes)>,
    /// Still in Redis's small (listpack) encoding. A listpack stores scores as text, so a
    /// score of -0 comes back as 0; the big (skiplist) encoding keeps -0.
    listpack: bool,
}

impl ZSet {
    /// An empty set in the encoding Redis would pick for `hint_len` elements whose first
    /// member is `hint_member_len` bytes long (`zsetTypeCreate`).
    pub(crate) fn with_hint(hint_len: usize, hint_member_len: usize) -> Self {
        ZSet {
            listpack: hint_len <= LISTPACK_MAX_ENTRIES && hint_member_len <= LISTPACK_MAX_VALUE,
            ..Default::default()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.scores.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub(crate) fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Converts to the big encoding if about to hold `len` elements (`zsetTypeMaybeConvert`).
    pub(crate) fn maybe_convert(&mut self, len: usize) {
        if len > LISTPACK_MAX_ENTRIES {
            self.listpack = false;
        }
    }

    /// Inserts or moves `member` to `score`. The caller has ruled out NaN.
    pub(crate) fn insert(&mut self, member: &[u8], score: f64) {
        if self.listpack
            && (member.len() > LISTPACK_MAX_VALUE
                || (!self.scores.contains_key(member) && self.len() + 1 > LISTPACK_MAX_ENTRIES))
        {
            self.listpack = false;
        }
        let stored = if self.listpack && score == 0.0 { 0.0 } else { score };
        match self.scores.get_key_value(member) {
            Some((key, old)) => {
                let key = key.clone();
                self.order.remove(&(Score(*old), key.clone()));
                self.order.insert((Score(stored), key.clone()));
                self.scores.insert(key, stored);
            }
            None => {
                let key = Bytes::copy_from_slice(member);
                self.order.insert((Score(stored), key.clone()));
                self.scores.insert(key, stored);
            }
        }
    }

    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove_entry(member) {
            Some((key, score)) => {
                self.order.remove(&(Score(score), key));
                true
            }
            None => false,
        }
    }

    /// Members in ascending (score, member) order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> {
        self.order.iter().map(|(s, m)| (m, s.0))
    }

    /// Members scoring at least `min`, ascending: a range query on the ordered set, O(log n)
    /// to find the start, as Redis's skiplist does, instead of a scan from the lowest.
    pub(crate) fn iter_from(&self, min: f64) -> impl Iterator<Item = (&Bytes, f64)> {
        use std::ops::Bound;
        self.order.range((Bound::Included((Score(min), Bytes::new())), Bound::Unbounded)).map(|(s, m)| (m, s.0))
    }
}

/// A key's value and its deadline in Unix milliseconds.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    pub(crate) expire_at_ms: Option<i64>,
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
}

impl Keyspace {
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

    /// The live entry under `key`, expiring it first if due.
    pub(crate) fn get(&mut self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.expire_if_due(key, now_ms);
        self.dict.get(key)
    }

    /// The live entry under `key`, mutable. The caller must not touch `expire_at_ms` directly
    /// (use [`Keyspace::set_expire`], which keeps the index in step).
    pub(crate) fn get_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        self.expire_if_due(key, now_ms);
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

    /// Stores `value` under `key`. `keep_ttl` keeps an existing deadline (SET KEEPTTL, or any
    /// in-place update such as INCR); otherwise the key loses its deadline as SET does.
    pub(crate) fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        self.touch(key);
        match self.dict.get_mut(key) {
            Some(entry) => {
                entry.value = value;
                if !keep_ttl && entry.expire_at_ms.is_some() {
                    self.set_expire(key, None);
                }
            }
            None => {
                self.dict.insert(Bytes::copy_from_slice(key), Entry { value, expire_at_ms: None });
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

    /// Every key alive at `now_ms` whose name `matches`, in byte order. Keys past their
    /// deadline are skipped but not removed, as Redis's KEYS does (`keyIsExpired`, no delete).
    /// Redis lists keys in its hash table's seeded order; the model sorts them, so its output
    /// never depends on `HashMap` order.
    pub(crate) fn matching_keys(&self, now_ms: i64, matches: impl Fn(&[u8]) -> bool) -> Vec<Bytes> {
        let mut keys: Vec<Bytes> = self
            .dict
            .iter()
            .filter(|(k, e)| !Self::is_expired(e, now_ms) && matches(k))
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
        ks.set(b"k", Value::Str(Bytes::from_static(b"v")), false);
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
            ks.set(k, Value::Str(Bytes::new()), false);
            ks.set_expire(k, Some(at));
        }
        assert_eq!(ks.expire_due(25), 2);
        assert_eq!(ks.len(), 2);
        assert_eq!(ks.expires_len(), 2);
    }

    #[test]
    fn set_without_keepttl_clears_the_deadline() {
        let mut ks = Keyspace::default();
        ks.set(b"k", Value::Str(Bytes::new()), false);
        ks.set_expire(b"k", Some(5));
        ks.set(b"k", Value::Str(Bytes::new()), true);
        assert_eq!(ks.expires_len(), 1);
        ks.set(b"k", Value::Str(Bytes::new()), false);
        assert_eq!(ks.expires_len(), 0);
        assert!(ks.exists(b"k", 1_000_000));
    }

    #[test]
    fn small_sorted_sets_store_negative_zero_as_zero() {
        let mut z = ZSet::with_hint(1, 1);
        z.insert(b"m", -0.0);
        assert!(z.score(b"m").is_some_and(|s| s.is_sign_positive()));
        let mut big = ZSet::with_hint(1, 100);
        big.insert(b"m", -0.0);
        assert!(big.score(b"m").is_some_and(|s| s.is_sign_negative()));
    }

    #[test]
    fn a_set_of_integers_lists_them_in_numeric_order_until_it_becomes_a_hash_table() {
        let mut set = Set::for_first(b"10");
        for m in [&b"10"[..], b"-3", b"2"] {
            assert!(set.insert(m));
        }
        assert!(!set.insert(b"2"), "already a member");
        let listed =
            |set: &Set| set.members().iter().map(|m| String::from_utf8_lossy(m).into_owned()).collect::<Vec<_>>();
        assert_eq!(listed(&set), ["-3", "2", "10"]);
        set.insert(b"01");
        assert_eq!(listed(&set), ["-3", "01", "10", "2"], "a member that is not an integer converts it");
        set.remove(b"01");
        assert_eq!(listed(&set), ["-3", "10", "2"], "and the conversion is for good");
    }
}
