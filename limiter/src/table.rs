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
//! - every entry lives in a slot of an array, with a `used` bit that each lookup sets;
//! - a full table advances a hand over the slots, clearing `used` bits, and takes the first slot
//!   whose bit was already clear: a key not asked for since the hand last passed it, the
//!   likeliest to be at rest. Each step of the hand clears a bit some lookup set or passes one of
//!   the free slots (a full array has at most one for every two keys), so the hand moves at most
//!   a few times per lookup and insertion: O(1) amortized, never a scan per request. If the key that goes was still live, that one key starts afresh (the cost of a
//!   bound, stated where each table is used).
//!
//! Why this and not a cache crate: `moka` evicts in background maintenance, so which key goes
//! depends on timing, where here it depends only on the order of requests (a simulated run stays
//! a function of its seed); `lru` keeps its entries on a linked list, and moving an entry to the
//! front touches both its neighbours, which with a million keys are three cache misses per
//! decision (measured: 7x the cost of a one-key decision).
//!
//! With a million live keys a table is far larger than the caches, so what a lookup costs is the
//! number of cache lines it must wait for. A map with a separate index (`hashbrown`'s control
//! bytes, its buckets, then the entry they point to) waits for three. Here a shard is one open-
//! addressed array whose slots each fill one 64-byte line, holding the key's hash, the key
//! (inline when short) and the value together: a key's hash names its slot, and a lookup reads
//! that line, and the next one on the rare collision (linear probing, the array at most two
//! thirds full, so most keys sit in their own slot and the rest in the lines just after it, which
//! the hardware fetches ahead). Keys longer than [`INLINE`] bytes are kept on the heap, and
//! comparing one costs a second line.
//!
//! Decisions on different keys should not wait for each other, so a large table is split into
//! shards, each behind its own mutex; a key's shard is picked by its hash. The locks are held for
//! one pure step, no I/O, so `std` mutexes are right (mini-redis argues the same for its `Db`).
//! Small tables keep one shard, so their eviction order spans all their keys.

use std::hash::BuildHasher;

use crate::sync::{lock, Guard, Mutex};

/// Where a table's hashes start: a secret drawn once per table, so no client can choose keys
/// that collide. A hash anyone can compute lets a client that chooses its keys (a raw header a
/// rule counts by) send keys that all land on neighbouring slots, and each lookup then probes
/// through all of them: a scan per request, which the bound on the table's size does not
/// prevent. With the feature `harness` the start is fixed instead, so which key a full table
/// drops is the same on every run, as the simulator needs (a simulated run is a function of
/// its seed); the library an application builds never has that feature.
#[derive(Debug, Clone, Copy)]
struct Hasher {
    seed: u64,
}

impl Hasher {
    fn new() -> Self {
        Hasher { seed: if cfg!(feature = "harness") { SEED } else { secret() } }
    }
}

/// A secret start: the standard library's random keys (drawn from the operating system once
/// per process, then varied per call), folded into one word.
fn secret() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(SEED)
}

impl BuildHasher for Hasher {
    type Hasher = FoldHasher;

    fn build_hasher(&self) -> FoldHasher {
        FoldHasher(self.seed)
    }
}

/// A folded-multiply hash (the mixing step of wyhash and foldhash): each 8-byte word is mixed
/// in by a 64 x 64 -> 128-bit multiply whose halves are xored, which spreads every input bit
/// over every output bit, and a last fold after the length. A key is hashed once per decision,
/// so its cost is on every request: SipHash took several times as long here. It starts from the
/// table's secret ([`Hasher`]), and every later step depends on it non-linearly, so where a key
/// lands cannot be worked out without the secret, as with the random state of the standard
/// library's maps (it is no cryptographic hash, and need not be: nothing is signed with it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FoldHasher(u64);

/// The multiplier of the mix (the 64-bit golden ratio, odd) and the starting value.
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
const SEED: u64 = 0x243f_6a88_85a3_08d3;

impl FoldHasher {
    fn mix(&mut self, word: u64) {
        let product = u128::from(self.0 ^ word) * u128::from(MIX);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

/// The last 1 to 7 bytes of what is hashed as one word, read in place: copied into a zeroed
/// buffer, they took a call to `memcpy` on every lookup. Four or more are read as their first
/// four and last four bytes (which overlap); fewer as the first, middle and last. Either way
/// every byte is read, so two tails of one length differ in their words (the length is mixed in
/// after them).
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    let four = |at: usize| rest.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes);
    if n >= 4 {
        u64::from(four(0)) | u64::from(four(n - 4)) << 32
    } else {
        u64::from(rest[0]) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16
    }
}

impl std::hash::Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.mix(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.mix(tail_word(rest));
        }
        // The length, so "a" and "a\0" differ.
        self.mix(bytes.len() as u64);
    }

    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        let mut last = *self;
        last.mix(MIX);
        last.0
    }
}

/// At most this many shards: enough for two to many cores deciding at once.
const MAX_SHARDS: usize = 16;
/// A table is split only when each shard keeps at least this many keys.
const MIN_KEYS_PER_SHARD: usize = 4_096;
/// Keys up to this many bytes are kept inside their slot (user keys, IPv4 addresses, short API
/// keys); longer ones (an IPv6 address, a rule's whole stem) on the heap. With a value of at
/// most 32 bytes (every algorithm's state, a lease, a cached denial) a slot is one cache line.
const INLINE: usize = 22;
/// A shard's array holds at most this many slots per key it may keep (3/2: at most two thirds
/// full), so linear probing stays short.
const SLOTS_PER_KEY: (usize, usize) = (3, 2);
/// A shard's first array, grown by doubling as keys come.
const FIRST_SLOTS: usize = 8;

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

/// One key's entry, aligned so that it starts a cache line.
#[derive(Debug)]
#[repr(align(64))]
struct Slot<V> {
    /// The key's hash with its lowest bit replaced by the clock's `used` bit (see the module
    /// docs): one word for both, so the slot stays one line.
    tag: u64,
    text: Text,
    value: V,
}

impl<V> Slot<V> {
    fn holds(&self, key: Key<'_>) -> bool {
        (self.tag ^ key.hash) & !1 == 0 && self.text.is(key.text)
    }

    fn used(&self) -> bool {
        self.tag & 1 == 1
    }

    fn mark(&mut self, used: bool) {
        self.tag = (self.tag & !1) | u64::from(used);
    }
}

/// Where a key with hash `hash` belongs in an array of `n` slots: the hash's bits above its
/// lowest (which a slot reuses) scaled to `0..n`, so `n` need not be a power of two.
fn home(hash: u64, n: usize) -> usize {
    (((hash >> 1) as u128 * n as u128) >> 63) as usize
}

/// One shard: its slots (`None` is free), how many hold a key, the clock's hand, and the most
/// keys it keeps.
#[derive(Debug)]
struct Shard<V> {
    slots: Vec<Option<Slot<V>>>,
    len: usize,
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
    fn new(capacity: usize) -> Self {
        Shard { slots: Vec::new(), len: 0, hand: 0, capacity }
    }

    /// The most slots the shard's array ever has: two thirds full when it keeps `capacity`
    /// keys, and always one free slot, which ends every probe.
    fn most_slots(&self) -> usize {
        (self.capacity * SLOTS_PER_KEY.0).div_ceil(SLOTS_PER_KEY.1).max(self.capacity + 1)
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    fn find(&self, key: Key<'_>) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = home(key.hash, self.slots.len());
        // The array always has a free slot (see `most_slots`), so this ends.
        loop {
            match &self.slots[i] {
                None => return None,
                Some(slot) if slot.holds(key) => return Some(i),
                Some(_) => i = self.next(i),
            }
        }
    }

    /// Puts `slot` in the first free slot from its home. The caller has made sure there is one
    /// to spare.
    fn place(&mut self, slot: Slot<V>) -> usize {
        let mut i = home(slot.tag, self.slots.len());
        while self.slots[i].is_some() {
            i = self.next(i);
        }
        self.slots[i] = Some(slot);
        self.len += 1;
        i
    }

    /// Grows the array (doubling, up to [`Shard::most_slots`]) when one more key would fill it
    /// past two thirds, placing every key afresh: O(1) amortized per insertion.
    fn reserve_one(&mut self) {
        let n = self.slots.len();
        if (self.len + 1) * SLOTS_PER_KEY.0 <= n * SLOTS_PER_KEY.1 && self.len + 1 < n {
            return;
        }
        let grown = (2 * n).max(FIRST_SLOTS).min(self.most_slots());
        if grown <= n {
            return;
        }
        let old = std::mem::replace(&mut self.slots, (0..grown).map(|_| None).collect());
        self.len = 0;
        self.hand = 0;
        for slot in old.into_iter().flatten() {
            self.place(slot);
        }
    }

    /// Empties slot `i` and moves back the keys after it that probed past it (backward-shift
    /// deletion, so a probe still ends at the first free slot). `None` if `i` was free.
    fn take(&mut self, mut i: usize) -> Option<V> {
        let taken = self.slots[i].take()?;
        self.len -= 1;
        let n = self.slots.len();
        let mut j = i;
        loop {
            j = self.next(j);
            let Some(slot) = &self.slots[j] else { break };
            // The key at `j` may move to `i` if `i` lies on its probe path, from its home to `j`.
            let from_home = (j + n - home(slot.tag, n)) % n;
            if from_home >= (j + n - i) % n {
                self.slots[i] = self.slots[j].take();
                i = j;
            }
        }
        Some(taken.value)
    }

    /// The slot the clock gives up: the first held slot from the hand whose `used` bit is
    /// clear, clearing the bits it passes. Called on a full shard, which holds at least one key.
    fn victim(&mut self) -> usize {
        loop {
            let i = self.hand;
            self.hand = self.next(i);
            if let Some(slot) = &mut self.slots[i] {
                if !slot.used() {
                    return i;
                }
                slot.mark(false);
            }
        }
    }
}

impl<V> Locked<'_, V> {
    /// The value of `key`, marked as just used.
    pub(crate) fn get_mut(&mut self, key: Key<'_>) -> Option<&mut V> {
        let i = self.shard.find(key)?;
        let slot = self.shard.slots[i].as_mut()?;
        slot.mark(true);
        Some(&mut slot.value)
    }

    /// Takes `key`'s value out.
    pub(crate) fn remove(&mut self, key: Key<'_>) -> Option<V> {
        let i = self.shard.find(key)?;
        self.shard.take(i)
    }

    /// Keeps `value` for `key`, first giving up the clock's victim if the shard is full. O(1)
    /// amortized (see the module docs).
    pub(crate) fn insert(&mut self, key: Key<'_>, value: V) {
        let shard = &mut *self.shard;
        if let Some(slot) = shard.find(key).and_then(|i| shard.slots[i].as_mut()) {
            slot.value = value;
            slot.mark(true);
            return;
        }
        if shard.len >= shard.capacity {
            let i = shard.victim();
            shard.take(i);
        }
        shard.reserve_one();
        shard.place(Slot { tag: key.hash & !1, text: Text::new(key.text), value });
    }
}

impl<V> Table<V> {
    /// A table of at most `capacity` keys (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let n = (capacity / MIN_KEYS_PER_SHARD).clamp(1, MAX_SHARDS);
        // The capacity split exactly: the first `capacity % n` shards take one more key. Arrays
        // grow as keys come, instead of reserving the whole capacity up front for tables that
        // may stay empty.
        let shards = (0..n).map(|i| Mutex::new(Shard::new(capacity / n + usize::from(i < capacity % n)))).collect();
        Table { shards, hasher: Hasher::new() }
    }

    /// `text` hashed.
    pub(crate) fn key<'k>(&self, text: &'k str) -> Key<'k> {
        Key { hash: self.hasher.hash_one(text), text }
    }

    /// `text` in the namespace `space`: another entry than `text` alone or in any other
    /// namespace, though the text is the same (its hash covers both; a slot compares the hash
    /// and the text). For state a user key keeps apart by what it is counted under.
    pub(crate) fn key_in<'k>(&self, space: impl std::hash::Hash, text: &'k str) -> Key<'k> {
        Key { hash: self.hasher.hash_one((space, text)), text }
    }

    /// The index of `key`'s shard. The shard is picked by the hash's lower half: a slot is
    /// picked by its upper bits ([`home`]), so the keys of one shard still spread over all of
    /// its slots. Scaled by a multiply, as [`home`] is: a remainder (`%`) is a division, whose
    /// latency was the largest single wait of an in-process decision with its keys in cache.
    pub(crate) fn shard_of(&self, key: Key<'_>) -> usize {
        ((u64::from((key.hash >> 1) as u32) * self.shards.len() as u64) >> 32) as usize
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
        self.shards.iter().map(|s| lock(s).len).sum()
    }
}

#[cfg(all(test, not(feature = "loom")))]
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
        // "a" is asked for again, so it gets a second chance; "b" and "c" have none.
        assert_eq!(get(&t, "a"), Some(0));
        put(&t, "d", 3);
        assert_eq!(t.len(), 3);
        assert_eq!((get(&t, "a"), get(&t, "d")), (Some(0), Some(3)));
        assert_eq!([get(&t, "b"), get(&t, "c")].iter().flatten().count(), 1, "one of b and c went");
        // A flood of new keys pushes out the old ones in turn, never more than the capacity.
        for i in 0..100 {
            put(&t, &format!("new-{i}"), i);
        }
        assert_eq!(t.len(), 3);
        assert_eq!(get(&t, "new-99"), Some(99));
    }

    #[test]
    fn removing_keeps_every_other_key_findable() {
        // Short keys inline and long ones on the heap, in arrays small enough that many keys
        // probe past their home slot and removals shift them back.
        for base in [String::new(), "k".repeat(INLINE + 10)] {
            let t: Table<u32> = Table::new(100);
            for i in 0..100 {
                put(&t, &format!("{base}{i}"), i);
            }
            for i in (0..100).step_by(3) {
                let k = format!("{base}{i}");
                let key = t.key(&k);
                assert_eq!(t.lock(key).remove(key), Some(i));
                assert_eq!(t.lock(key).remove(key), None);
            }
            for i in 0..100 {
                let expected = (i % 3 != 0).then_some(i);
                assert_eq!(get(&t, &format!("{base}{i}")), expected, "{base}{i}");
            }
            assert_eq!(t.len(), 100 - 34);
        }
    }

    #[test]
    fn every_key_held_is_found_through_growth_eviction_and_removal() {
        // Against a model: a table never forgets a key it holds or invents one, whatever the
        // order of inserts, lookups and removals, while it grows and while it is full.
        let t: Table<u64> = Table::new(50);
        let mut held = std::collections::HashMap::new();
        let mut x: u64 = 1;
        for step in 0..20_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let k = format!("key-{}", (x >> 33) % 120);
            let key = t.key(&k);
            let mut shard = t.lock(key);
            let mut may_evict = false;
            match (x >> 20) % 3 {
                0 => assert_eq!(shard.remove(key), held.remove(&k), "{step}: remove {k}"),
                // The model holds exactly what the table does (see below), so a lookup finds
                // what the model has.
                1 => assert_eq!(shard.get_mut(key).copied(), held.get(&k).copied(), "{step}: get {k}"),
                _ => {
                    may_evict = !held.contains_key(&k) && held.len() == 50;
                    shard.insert(key, step);
                    assert_eq!(shard.get_mut(key).copied(), Some(step), "{step}: {k} just inserted");
                    held.insert(k, step);
                }
            }
            drop(shard);
            // A key given up to make room leaves the model too; only then may one have gone.
            let before = held.len();
            held.retain(|k, _| {
                let key = t.key(k);
                t.lock(key).get_mut(key).is_some()
            });
            assert!(before - held.len() <= usize::from(may_evict), "{step}: keys went missing");
            assert!(t.len() <= 50 && t.len() == held.len(), "{step}: {} held, {} in the model", t.len(), held.len());
        }
    }

    #[test]
    fn tables_outside_the_harness_hash_from_secrets_of_their_own() {
        let (a, b) = (Hasher { seed: secret() }, Hasher { seed: secret() });
        assert_ne!(a.seed, b.seed, "each table draws its own");
        // Where a key lands depends on the secret: the same keys, other homes.
        let homes = |h: &Hasher| (0..64).map(|i| home(h.hash_one(format!("k{i}")), 1024)).collect::<Vec<_>>();
        assert_ne!(homes(&a), homes(&b));
        // The harness fixes it, for runs a seed replays; an application's build never does.
        assert_eq!(Hasher::new().seed == SEED, cfg!(feature = "harness"));
    }

    #[test]
    fn every_byte_of_a_key_moves_its_hash() {
        use std::hash::Hasher as _;
        let hash = |bytes: &[u8]| {
            let mut h = FoldHasher(SEED);
            h.write(bytes);
            h.finish()
        };
        // Within one length, the tail's words never coincide: every byte of it is read.
        let alphabet = [0u8, 1, b'k', 0xff];
        for len in 1..=7u32 {
            let mut words = std::collections::HashSet::new();
            for n in 0..alphabet.len().pow(len) {
                let tail: Vec<u8> = (0..len).map(|i| alphabet[n / alphabet.len().pow(i) % alphabet.len()]).collect();
                assert!(words.insert(tail_word(&tail)), "{tail:?} reads as another tail of its length");
            }
        }
        // And one byte changed anywhere, in a whole word or in the tail, changes the hash.
        for len in 0..=24 {
            let key = vec![b'k'; len];
            for at in 0..len {
                let mut other = key.clone();
                other[at] = b'j';
                assert_ne!(hash(&key), hash(&other), "byte {at} of {len}");
            }
            assert_ne!(hash(&key), hash(&[key.as_slice(), &[0]].concat()), "a trailing zero byte, after {len}");
        }
    }

    #[test]
    fn a_slot_is_one_cache_line() {
        use crate::algo::State;
        assert_eq!(std::mem::size_of::<Option<Slot<Option<State>>>>(), 64);
        assert_eq!(std::mem::align_of::<Option<Slot<Option<State>>>>(), 64);
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
        // Every shard was used, and filled: keys spread over them.
        assert!(t.shards.iter().all(|s| {
            let s = lock(s);
            s.len == s.capacity && s.slots.len() == s.most_slots()
        }));
        assert_eq!(Table::<()>::new(5_000).shards.len(), 1);
    }

    #[test]
    fn keys_spread_evenly_over_the_shards_whatever_their_count() {
        for capacity in [3 * MIN_KEYS_PER_SHARD, 5 * MIN_KEYS_PER_SHARD, 100_000] {
            let t: Table<()> = Table::new(capacity);
            let n = t.shards.len();
            let per_shard = 20_000;
            let mut counts = vec![0usize; n];
            for i in 0..per_shard * n {
                counts[t.shard_of(t.key(&format!("user:{i}")))] += 1;
            }
            // 5% is seven standard deviations of a fair spread (about 140 keys of 20,000).
            assert!(counts.iter().all(|&c| c.abs_diff(per_shard) < per_shard / 20), "{n} shards: {counts:?}");
        }
    }
}
