//! The bounded tables the library keeps in process, one entry per key: the in-process store and
//! the local budgets (`store::local`), the denial cache (`modes::denial`) and the leases
//! (`modes::lease`).
//!
//! Clients choose the keys, so a table must stay bounded whatever they send, and a decision must
//! cost about the same with a million live keys as with one: a table that scans its entries to
//! find one to drop turns a flood of new keys into a scan per request. Each table here holds at
//! most `capacity` keys and makes room in constant amortized time by CLOCK (second chance), the
//! approximation of least-recently-used that operating systems use for pages:
//!
//! - every entry lives in a slot of a dense array, with a `used` bit that each lookup sets;
//! - a full table advances a hand over the slots, clearing `used` bits, and takes the first slot
//!   whose bit was already clear: a key not asked for since the hand last passed it, the
//!   likeliest to be at rest. Each step of the hand clears a bit some lookup set, so the hand
//!   moves at most once per lookup plus once per insertion: O(1) amortized, never a scan per
//!   request. If the key that goes was still live, that one key starts afresh (the cost of a
//!   bound, stated where each table is used).
//!
//! Why this and not a cache crate: `moka` evicts in background maintenance, so which key goes
//! depends on timing, where here it depends only on the order of requests (a simulated run stays
//! a function of its seed); `lru` keeps its entries on a linked list, and moving an entry to the
//! front touches both its neighbours, which with a million keys are three cache misses per
//! decision (measured: 7x the cost of a one-key decision). Here the index is a `hashbrown` table
//! of 4-byte slot numbers, small enough to stay in cache, and a slot holds its hash, the key
//! (inline when short) and the value together: a lookup reads one slot.
//!
//! Decisions on different keys should not wait for each other, so a large table is split into
//! shards, each behind its own mutex; a key's shard is picked by its hash. The locks are held for
//! one pure step, no I/O, so `std` mutexes are right (mini-redis argues the same for its `Db`).
//! Small tables keep one shard, so their eviction order spans all their keys.

use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasher, BuildHasherDefault};

use hashbrown::HashTable;

use crate::sync::{lock, Guard, Mutex};

/// The hasher: SipHash with fixed keys, so which key a full table drops is the same on every
/// run, as the simulator needs.
type Hasher = BuildHasherDefault<DefaultHasher>;

/// At most this many shards: enough for two to many cores deciding at once.
const MAX_SHARDS: usize = 16;
/// A table is split only when each shard keeps at least this many keys.
const MIN_KEYS_PER_SHARD: usize = 4_096;
/// Keys up to this many bytes are kept inside their slot (user keys, IP addresses, most API
/// keys); longer ones (a rule's whole stem) on the heap.
const INLINE: usize = 46;

/// A key's text as a slot keeps it.
#[derive(Debug)]
enum Text {
    Inline(u8, [u8; INLINE]),
    Heap(Box<str>),
}

impl Text {
    fn new(text: &str) -> Text {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                Text::Inline(len, bytes)
            }
            _ => Text::Heap(text.into()),
        }
    }

    fn is(&self, text: &str) -> bool {
        match self {
            Text::Inline(len, bytes) => bytes[..*len as usize] == *text.as_bytes(),
            Text::Heap(s) => **s == *text,
        }
    }
}

#[derive(Debug)]
struct Slot<V> {
    hash: u64,
    text: Text,
    value: V,
    used: bool,
}

/// One shard: the slots, the index from hash to slot number, and the clock's hand.
#[derive(Debug)]
struct Shard<V> {
    index: HashTable<u32>,
    slots: Vec<Slot<V>>,
    hand: usize,
    capacity: usize,
}

/// A key, hashed once for its shard and its slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'k> {
    hash: u64,
    text: &'k str,
}

/// A bounded map from user keys to `V`; see the module docs.
pub(crate) struct Table<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    hasher: Hasher,
}

impl<V> std::fmt::Debug for Table<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("shards", &self.shards.len()).finish_non_exhaustive()
    }
}

/// One shard, locked.
pub(crate) struct Locked<'a, V> {
    shard: Guard<'a, Shard<V>>,
}

impl<V> Shard<V> {
    fn find(&self, key: Key<'_>) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(key.hash, |&i| slots[i as usize].hash == key.hash && slots[i as usize].text.is(key.text))
            .map(|&i| i as usize)
    }

    /// Drops slot `i`'s entry from the index and moves the last slot into its place.
    fn take(&mut self, i: usize) -> V {
        if let Ok(entry) = self.index.find_entry(self.slots[i].hash, |&j| j as usize == i) {
            entry.remove();
        }
        let last = self.slots.len() - 1;
        if i != last {
            if let Some(moved) = self.index.find_mut(self.slots[last].hash, |&j| j as usize == last) {
                // Slot numbers fit in u32: a shard holds at most u32::MAX keys.
                *moved = i as u32;
            }
        }
        let slot = self.slots.swap_remove(i);
        if self.hand >= self.slots.len() {
            self.hand = 0;
        }
        slot.value
    }

    /// The slot the clock gives up: the first from the hand whose `used` bit is clear, clearing
    /// the bits it passes.
    fn victim(&mut self) -> usize {
        loop {
            let i = self.hand;
            self.hand = (i + 1) % self.slots.len();
            let slot = &mut self.slots[i];
            if !std::mem::replace(&mut slot.used, false) {
                return i;
            }
        }
    }
}

impl<V> Locked<'_, V> {
    /// The value of `key`, marked as just used.
    pub(crate) fn get_mut(&mut self, key: Key<'_>) -> Option<&mut V> {
        let i = self.shard.find(key)?;
        let slot = &mut self.shard.slots[i];
        slot.used = true;
        Some(&mut slot.value)
    }

    /// Takes `key`'s value out.
    pub(crate) fn remove(&mut self, key: Key<'_>) -> Option<V> {
        let i = self.shard.find(key)?;
        Some(self.shard.take(i))
    }

    /// Keeps `value` for `key`, first giving up the clock's victim if the shard is full. O(1)
    /// amortized (see the module docs).
    pub(crate) fn insert(&mut self, key: Key<'_>, value: V) {
        let shard = &mut *self.shard;
        if let Some(i) = shard.find(key) {
            shard.slots[i].value = value;
            shard.slots[i].used = true;
            return;
        }
        let slot = Slot { hash: key.hash, text: Text::new(key.text), value, used: false };
        let i = if shard.slots.len() < shard.capacity {
            shard.slots.push(slot);
            shard.slots.len() - 1
        } else {
            let i = shard.victim();
            if let Ok(entry) = shard.index.find_entry(shard.slots[i].hash, |&j| j as usize == i) {
                entry.remove();
            }
            shard.slots[i] = slot;
            i
        };
        let slots = &shard.slots;
        shard.index.insert_unique(key.hash, i as u32, |&j| slots[j as usize].hash);
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
                let room = (capacity / n + usize::from(i < capacity % n)).min(u32::MAX as usize);
                // Grown as keys come, instead of reserving the whole capacity up front for tables
                // that may stay empty.
                Mutex::new(Shard { index: HashTable::new(), slots: Vec::new(), hand: 0, capacity: room })
            })
            .collect();
        Table { shards, hasher: Hasher::default() }
    }

    /// `text` hashed.
    pub(crate) fn key<'k>(&self, text: &'k str) -> Key<'k> {
        Key { hash: self.hasher.hash_one(text), text }
    }

    /// The index of `key`'s shard. The shard is picked by the hash's upper half: the index uses
    /// the lower bits for buckets (and the top seven as tags), so the keys of one shard still
    /// spread over all of its buckets.
    pub(crate) fn shard_of(&self, key: Key<'_>) -> usize {
        ((key.hash >> 32) as usize) % self.shards.len()
    }

    /// Locks the shard with index `index` (from [`Table::shard_of`]).
    pub(crate) fn lock_shard(&self, index: usize) -> Locked<'_, V> {
        Locked { shard: lock(&self.shards[index]) }
    }

    /// Locks `key`'s shard.
    pub(crate) fn lock(&self, key: Key<'_>) -> Locked<'_, V> {
        self.lock_shard(self.shard_of(key))
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).slots.len()).sum()
    }
}

#[cfg(all(test, not(limiter_loom)))]
mod tests {
    use super::*;

    fn get(t: &Table<u32>, k: &str) -> Option<u32> {
        let key = t.key(k);
        t.lock(key).get_mut(key).copied()
    }

    fn put(t: &Table<u32>, k: &str, v: u32) {
        let key = t.key(k);
        t.lock(key).insert(key, v);
    }

    #[test]
    fn a_full_table_gives_up_a_key_not_asked_for_since_the_hand_passed() {
        let t: Table<u32> = Table::new(3);
        for (i, k) in ["a", "b", "c"].into_iter().enumerate() {
            put(&t, k, i as u32);
        }
        // "a" is asked for again, so it gets a second chance; "b" has none.
        assert_eq!(get(&t, "a"), Some(0));
        put(&t, "d", 3);
        assert_eq!(t.len(), 3);
        assert_eq!(get(&t, "b"), None);
        assert_eq!((get(&t, "a"), get(&t, "c"), get(&t, "d")), (Some(0), Some(2), Some(3)));
        // A flood of new keys pushes out the old ones in turn, never more than the capacity.
        for i in 0..100 {
            put(&t, &format!("new-{i}"), i);
        }
        assert_eq!(t.len(), 3);
        assert_eq!(get(&t, "new-99"), Some(99));
    }

    #[test]
    fn removing_keeps_every_other_key_findable() {
        let t: Table<u32> = Table::new(100);
        let long = "k".repeat(INLINE + 10);
        for i in 0..50 {
            put(&t, &format!("{long}{i}"), i);
        }
        for i in (0..50).step_by(3) {
            let k = format!("{long}{i}");
            let key = t.key(&k);
            assert_eq!(t.lock(key).remove(key), Some(i));
        }
        for i in 0..50 {
            let expected = (i % 3 != 0).then_some(i);
            assert_eq!(get(&t, &format!("{long}{i}")), expected, "{i}");
        }
        assert_eq!(t.len(), 50 - 17);
    }

    #[test]
    fn large_tables_are_sharded_and_never_hold_more_than_their_capacity() {
        let t: Table<()> = Table::new(100_003);
        assert_eq!(t.shards.len(), MAX_SHARDS);
        assert_eq!(t.shards.iter().map(|s| lock(s).capacity).sum::<usize>(), 100_003);
        for i in 0..250_000 {
            let k = format!("k{i}");
            let key = t.key(&k);
            t.lock(key).insert(key, ());
        }
        assert!(t.len() <= 100_003, "{}", t.len());
        // Every shard was used: keys spread over them.
        assert!(t.shards.iter().all(|s| !lock(s).slots.is_empty()));
        assert_eq!(Table::<()>::new(5_000).shards.len(), 1);
    }
}
