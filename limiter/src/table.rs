//! The bounded tables the library keeps in process, one entry per key: the in-process store and
//! the local budgets (`store::local`), the denial cache (`modes::denial`) and the leases
//! (`modes::lease`).
//!
//! Clients choose the keys, so a table must stay bounded whatever they send, and making room
//! must cost the same with a million live keys as with ten: a table that scans its entries to
//! find one to drop turns a flood of new keys into a scan per request. Each table here holds at
//! most `capacity` keys, and a full table drops its **least recently used** key in O(1): the
//! [`lru`] crate's map threads its entries on a doubly linked list in order of use, so the
//! oldest is at the list's tail, and a lookup, an insertion and an eviction each touch a fixed
//! number of entries. The key that goes is the one that has gone longest without a request, the
//! likeliest to be at rest already; if it is not, that one key starts afresh (the cost of a
//! bound, stated where each table is used).
//!
//! Why `lru` and not `moka`: moka evicts by an approximate frequency sketch in background
//! maintenance, so which key goes depends on timing; here it depends only on the order of
//! requests, which keeps a simulated run a function of its seed. `lru` is small, has no
//! dependencies beyond `hashbrown`, and its eviction is exact LRU.
//!
//! Decisions on different keys should not wait for each other, so a large table is split into
//! shards, each a map of its own behind its own mutex; a key's shard is picked by its hash. The
//! locks are held for one pure step, no I/O, so `std` mutexes are right (mini-redis argues the
//! same for its `Db`). Small tables keep one shard, so their eviction is exactly LRU over all
//! their keys.

use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasher, BuildHasherDefault};

use lru::LruCache;

use crate::sync::{lock, Guard, Mutex};

/// The maps' hasher: SipHash with fixed keys, so which key a full table drops is the same on
/// every run, as the simulator needs.
type Hasher = BuildHasherDefault<DefaultHasher>;

/// One shard's map.
pub(crate) type Shard<V> = LruCache<String, V, Hasher>;

/// At most this many shards: enough for two to many cores deciding at once.
const MAX_SHARDS: usize = 16;
/// A table is split only when each shard keeps at least this many keys, so a small table is
/// one exact LRU.
const MIN_KEYS_PER_SHARD: usize = 4_096;

/// A bounded map from user keys to `V`; see the module docs.
pub(crate) struct Table<V> {
    shards: Box<[(Mutex<Shard<V>>, usize)]>,
    hasher: Hasher,
}

impl<V> std::fmt::Debug for Table<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("shards", &self.shards.len()).field("capacity", &self.capacity()).finish()
    }
}

/// One shard, locked, with room for `capacity` keys.
pub(crate) struct Locked<'a, V> {
    map: Guard<'a, Shard<V>>,
    capacity: usize,
}

impl<V> Locked<'_, V> {
    /// The value of `key`, marked as just used.
    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.map.get_mut(key)
    }

    /// Takes `key`'s value out.
    pub(crate) fn remove(&mut self, key: &str) -> Option<V> {
        self.map.pop(key)
    }

    /// Keeps `value` for `key` as the most recently used, first dropping the least recently
    /// used key if the shard is full. O(1).
    pub(crate) fn insert(&mut self, key: &str, value: V) {
        if let Some(v) = self.map.get_mut(key) {
            *v = value;
            return;
        }
        if self.map.len() >= self.capacity {
            self.map.pop_lru();
        }
        self.map.push(key.to_owned(), value);
    }
}

impl<V> Table<V> {
    /// A table of at most `capacity` keys (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let n = (capacity / MIN_KEYS_PER_SHARD).clamp(1, MAX_SHARDS);
        // The capacity split exactly: the first `capacity % n` shards take one more key.
        let shards = (0..n)
            .map(|i| {
                let room = capacity / n + usize::from(i < capacity % n);
                // Unbounded maps with the bound kept here: they grow as keys come, instead of
                // reserving the whole capacity up front for tables that may stay empty.
                (Mutex::new(LruCache::unbounded_with_hasher(Hasher::default())), room)
            })
            .collect();
        Table { shards, hasher: Hasher::default() }
    }

    /// The most keys the table holds.
    pub(crate) fn capacity(&self) -> usize {
        self.shards.iter().map(|(_, room)| room).sum()
    }

    /// The index of `key`'s shard. The shard is picked by the hash's upper half: the maps use
    /// the lower bits for buckets (and the top seven as tags), so keys of one shard still
    /// spread over all of its buckets.
    pub(crate) fn shard_of(&self, key: &str) -> usize {
        ((self.hasher.hash_one(key) >> 32) as usize) % self.shards.len()
    }

    /// Locks the shard with index `index` (from [`Table::shard_of`]).
    pub(crate) fn lock_shard(&self, index: usize) -> Locked<'_, V> {
        let (map, capacity) = &self.shards[index];
        Locked { map: lock(map), capacity: *capacity }
    }

    /// Locks `key`'s shard.
    pub(crate) fn lock(&self, key: &str) -> Locked<'_, V> {
        self.lock_shard(self.shard_of(key))
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|(map, _)| lock(map).len()).sum()
    }
}

#[cfg(all(test, not(limiter_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_drops_its_least_recently_used_key() {
        let t: Table<u32> = Table::new(3);
        for (i, k) in ["a", "b", "c"].into_iter().enumerate() {
            t.lock(k).insert(k, i as u32);
        }
        // "a" is used again, so "b" is now the least recently used.
        assert_eq!(t.lock("a").get_mut("a").copied(), Some(0));
        t.lock("d").insert("d", 3);
        assert_eq!(t.len(), 3);
        assert!(t.lock("b").get_mut("b").is_none());
        assert!(t.lock("a").get_mut("a").is_some() && t.lock("c").get_mut("c").is_some());
    }

    #[test]
    fn large_tables_are_sharded_and_never_hold_more_than_their_capacity() {
        let t: Table<()> = Table::new(100_003);
        assert_eq!((t.shards.len(), t.capacity()), (MAX_SHARDS, 100_003));
        for i in 0..250_000 {
            let k = format!("k{i}");
            t.lock(&k).insert(&k, ());
        }
        assert!(t.len() <= 100_003, "{}", t.len());
        // Every shard was used: keys spread over them.
        assert!(t.shards.iter().all(|(m, _)| !lock(m).is_empty()));
        assert_eq!(Table::<()>::new(5_000).shards.len(), 1);
    }
}
