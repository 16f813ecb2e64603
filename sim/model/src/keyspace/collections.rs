//! The values a key can hold, each with the encoding Redis 7.0 would have picked for it.
//!
//! Redis stores small collections compactly (listpack, intset) and converts them for good to a
//! hash table or skiplist past a size. The model keeps its own structures either way but tracks
//! the encoding Redis would be in, because clients can see it: OBJECT ENCODING names it, the
//! order of HGETALL, SMEMBERS and the SCAN family follows it, and a listpack stores a score of
//! -0 as 0.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use indexmap::IndexMap;

use super::super::num::parse_i64;

/// Redis converts a small hash or sorted set (listpack) to a big one (hashtable or skiplist)
/// past these sizes (`hash-max-listpack-entries`/`-value`, `zset-max-listpack-*`).
pub(crate) const LISTPACK_MAX_ENTRIES: usize = 128;
pub(crate) const LISTPACK_MAX_VALUE: usize = 64;

/// Redis keeps a set of integers as a sorted array of integers (intset) up to this many members.
pub(crate) const INTSET_MAX_ENTRIES: usize = 512;

/// Integers from 0 to this bound (exclusive) are one shared object in Redis (`OBJ_SHARED_INTEGERS`):
/// OBJECT REFCOUNT reports `INT_MAX` for them, and their idle time is the shared object's.
pub(crate) const SHARED_INTEGERS: i64 = 10_000;

/// Strings up to this length are stored in one allocation with their header (`embstr`).
const EMBSTR_SIZE_LIMIT: usize = 44;

/// How Redis encodes a string value: which one depends on how the value was made, not only on
/// its bytes (`SET k 5` is a shared integer, `INCRBYFLOAT k 5` an `embstr` "5", `APPEND` always
/// leaves a `raw` string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrEnc {
    /// One of the shared integers 0..10000.
    SharedInt,
    Int,
    Embstr,
    Raw,
}

impl StrEnc {
    /// `tryObjectEncoding` on an argument: what SET, MSET, GETSET, SETNX, SETEX and APPEND (of a
    /// new key) store.
    pub(crate) fn of_arg(s: &[u8]) -> StrEnc {
        match parse_i64(s) {
            Some(v) if s.len() <= 20 => StrEnc::of_int(v),
            _ => StrEnc::of_created(s.len()),
        }
    }

    /// `createStringObject`: a string built by a command (INCRBYFLOAT's result).
    pub(crate) fn of_created(len: usize) -> StrEnc {
        if len <= EMBSTR_SIZE_LIMIT {
            StrEnc::Embstr
        } else {
            StrEnc::Raw
        }
    }

    /// `createStringObjectFromLongLongForValue`: INCR's result.
    pub(crate) fn of_int(v: i64) -> StrEnc {
        if (0..SHARED_INTEGERS).contains(&v) {
            StrEnc::SharedInt
        } else {
            StrEnc::Int
        }
    }

    /// `dupStringObject` (COPY): an integer copy is a private object, never the shared one.
    pub(crate) fn duplicate(self) -> StrEnc {
        match self {
            StrEnc::SharedInt => StrEnc::Int,
            other => other,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            StrEnc::SharedInt | StrEnc::Int => "int",
            StrEnc::Embstr => "embstr",
            StrEnc::Raw => "raw",
        }
    }
}

/// A hash: fields in insertion order, like Redis's listpack, so HGETALL agrees with Redis for
/// small hashes. (Big Redis hashes iterate in hash order, which no client can rely on; the model
/// keeps insertion order there too.)
#[derive(Debug, Clone)]
pub(crate) struct Hash {
    fields: IndexMap<Bytes, Bytes>,
    listpack: bool,
}

impl Default for Hash {
    fn default() -> Self {
        Hash { fields: IndexMap::new(), listpack: true }
    }
}

impl Hash {
    pub(crate) fn len(&self) -> usize {
        self.fields.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub(crate) fn is_listpack(&self) -> bool {
        self.listpack
    }

    pub(crate) fn get(&self, field: &[u8]) -> Option<&Bytes> {
        self.fields.get(field)
    }

    pub(crate) fn contains_key(&self, field: &[u8]) -> bool {
        self.fields.contains_key(field)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.fields.iter()
    }

    /// `hashTypeTryConversion`: HSET and HSETNX convert before writing when any of their fields
    /// or values is too long for a listpack, even if nothing ends up written.
    pub(crate) fn convert_for(&mut self, args: &[&[u8]]) {
        if args.iter().any(|a| a.len() > LISTPACK_MAX_VALUE) {
            self.listpack = false;
        }
    }

    /// `hashTypeSet`: sets `field`, converting for a long field or value or past the entry
    /// limit. An updated field keeps its place, as in a listpack. True if the field was new.
    pub(crate) fn set(&mut self, field: &[u8], value: Bytes) -> bool {
        if field.len() > LISTPACK_MAX_VALUE || value.len() > LISTPACK_MAX_VALUE {
            self.listpack = false;
        }
        let created = self.fields.insert(Bytes::copy_from_slice(field), value).is_none();
        if self.fields.len() > LISTPACK_MAX_ENTRIES {
            self.listpack = false;
        }
        created
    }

    /// Removes `field`, keeping the others in order (as deleting from a listpack does).
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        self.fields.shift_remove(field).is_some()
    }
}

/// A set. Redis 7.0 stores a set of integers (as `string2ll` reads them) as an *intset*, which
/// lists its members in numeric order, and converts it for good to a hash table at the first
/// other member or past [`INTSET_MAX_ENTRIES`]. The model lists an intset's members in numeric
/// order too, so SMEMBERS agrees with Redis there; a hash table's order comes from a seeded hash
/// no client can rely on, and the model lists those members in byte order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Set {
    pub(super) members: BTreeSet<Bytes>,
    intset: bool,
}

impl Set {
    /// An empty set in the encoding Redis picks for a first member `first` (`setTypeCreate`).
    pub(crate) fn for_first(first: &[u8]) -> Self {
        Set { members: BTreeSet::new(), intset: parse_i64(first).is_some() }
    }

    /// An empty intset (`createIntsetObject`): where SINTERSTORE, SUNIONSTORE and SDIFFSTORE
    /// collect their result, converting as members that are not integers arrive.
    pub(crate) fn intset() -> Self {
        Set { members: BTreeSet::new(), intset: true }
    }

    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(crate) fn is_intset(&self) -> bool {
        self.intset
    }

    pub(crate) fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Adds `member`; false if it was there. Converts an intset as `setTypeAdd` does.
    pub(crate) fn insert(&mut self, member: &[u8]) -> bool {
        if self.intset && parse_i64(member).is_none() {
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
            all.sort_by_key(|m| parse_i64(m).unwrap_or(0));
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
    pub(super) scores: HashMap<Bytes, f64>,
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

    /// `elements` as the set a store command (ZUNIONSTORE and its family) leaves behind: a
    /// skiplist, converted to a listpack at the end if it is small enough
    /// (`zsetConvertToListpackIfNeeded`), which turns a -0 score into 0.
    pub(crate) fn from_result(elements: Vec<(Bytes, f64)>) -> Self {
        let longest = elements.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        let mut z = ZSet::with_hint(elements.len(), longest);
        for (member, score) in elements {
            z.insert(&member, score);
        }
        z
    }

    pub(crate) fn len(&self) -> usize {
        self.scores.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub(crate) fn is_listpack(&self) -> bool {
        self.listpack
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_string_is_encoded_by_how_it_was_made() {
        assert_eq!(StrEnc::of_arg(b"9999"), StrEnc::SharedInt);
        assert_eq!(StrEnc::of_arg(b"10000"), StrEnc::Int);
        assert_eq!(StrEnc::of_arg(b"-1"), StrEnc::Int);
        assert_eq!(StrEnc::of_arg(b"01"), StrEnc::Embstr);
        assert_eq!(StrEnc::of_arg(&[b'x'; 44]), StrEnc::Embstr);
        assert_eq!(StrEnc::of_arg(&[b'x'; 45]), StrEnc::Raw);
        assert_eq!(StrEnc::of_created(1), StrEnc::Embstr, "INCRBYFLOAT's \"5\" is no integer object");
        assert_eq!(StrEnc::SharedInt.duplicate(), StrEnc::Int);
    }

    #[test]
    fn a_hash_converts_for_a_long_field_or_value_or_too_many_fields() {
        let mut h = Hash::default();
        h.set(b"f", Bytes::from_static(b"v"));
        assert!(h.is_listpack());
        h.convert_for(&[b"g", &[b'v'; 65]]);
        assert!(!h.is_listpack(), "HSET converts before writing");
        let mut h = Hash::default();
        for i in 0..=LISTPACK_MAX_ENTRIES {
            h.set(i.to_string().as_bytes(), Bytes::new());
        }
        assert!(!h.is_listpack());
    }
}
