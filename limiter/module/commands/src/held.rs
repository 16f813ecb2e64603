//! A command's keys with its writes held back: what `RATELIMIT.RULES` decides each rule
//! through (its writes happen only if every enforced rule fits), and what a blocked rule
//! decides through (its writes never happen). Reads go to the keys as they are; every command
//! reads all it needs before it writes (the all-or-nothing script's shim refuses a read after
//! a write), so a decision through this is the decision the command makes on the keys.
//!
//! Redis's clock is read once and kept: every rule of one call decides at the same instant, as
//! the script answers every `TIME` of its rules from one reading.

use crate::{Keys, Kind, Member, Refusal};

/// One write held back, as the command asked for it.
#[derive(Debug)]
enum Write {
    Set { key: Vec<u8>, value: Vec<u8>, ttl_ms: Option<u64> },
    Trim { key: Vec<u8>, through: u64 },
    Add { key: Vec<u8>, score: u64, members: Vec<String> },
    Remove { key: Vec<u8>, member: Vec<u8> },
    Expire { key: Vec<u8>, ttl_ms: u64 },
    Refused(Refusal),
}

/// See the module docs.
pub(crate) struct Held<'k, K> {
    keys: &'k mut K,
    now_us: Option<u64>,
    writes: Vec<Write>,
}

impl<'k, K: Keys> Held<'k, K> {
    /// `keys` with no write held, and the clock reading `now_us` if one was taken already.
    pub(crate) fn new(keys: &'k mut K, now_us: Option<u64>) -> Self {
        Held { keys, now_us, writes: Vec::new() }
    }

    /// The clock reading taken, if any, to hand to the next rule.
    pub(crate) fn reading(&self) -> Option<u64> {
        self.now_us
    }

    /// The writes held, to make later or never.
    pub(crate) fn into_writes(self) -> Writes {
        Writes(self.writes)
    }
}

/// The writes a decision held back.
#[derive(Debug)]
pub(crate) struct Writes(Vec<Write>);

impl Writes {
    /// Makes them on `keys`, in order; the first that fails stops the rest, as a script's
    /// failing `redis.call` stops it (what was written before stays, in Redis as here).
    pub(crate) fn make(self, keys: &mut impl Keys) -> Result<(), Refusal> {
        for write in self.0 {
            match write {
                Write::Set { key, value, ttl_ms } => keys.set(&key, &value, ttl_ms)?,
                Write::Trim { key, through } => keys.trim(&key, through)?,
                Write::Add { key, score, members } => keys.add(&key, score, &members)?,
                Write::Remove { key, member } => keys.remove(&key, &member)?,
                Write::Expire { key, ttl_ms } => keys.expire(&key, ttl_ms)?,
                Write::Refused(refusal) => return Err(refusal),
            }
        }
        Ok(())
    }
}

impl<K: Keys> Keys for Held<'_, K> {
    fn now_us(&mut self) -> u64 {
        *self.now_us.get_or_insert_with(|| self.keys.now_us())
    }

    fn string<T>(&mut self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Kind> {
        debug_assert!(self.writes.is_empty(), "a command read after it wrote");
        self.keys.string(key, read)
    }

    fn hash_field(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        debug_assert!(self.writes.is_empty(), "a command read after it wrote");
        self.keys.hash_field(key, field)
    }

    fn members_above(&mut self, key: &[u8], after: Option<i128>) -> Result<Vec<Member>, Refusal> {
        debug_assert!(self.writes.is_empty(), "a command read after it wrote");
        self.keys.members_above(key, after)
    }

    fn set(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> Result<(), Refusal> {
        self.writes.push(Write::Set { key: key.to_vec(), value: value.to_vec(), ttl_ms });
        Ok(())
    }

    fn trim(&mut self, key: &[u8], through: u64) -> Result<(), Refusal> {
        self.writes.push(Write::Trim { key: key.to_vec(), through });
        Ok(())
    }

    fn add(&mut self, key: &[u8], score: u64, members: &[String]) -> Result<(), Refusal> {
        self.writes.push(Write::Add { key: key.to_vec(), score, members: members.to_vec() });
        Ok(())
    }

    fn remove(&mut self, key: &[u8], member: &[u8]) -> Result<(), Refusal> {
        self.writes.push(Write::Remove { key: key.to_vec(), member: member.to_vec() });
        Ok(())
    }

    fn expire(&mut self, key: &[u8], ttl_ms: u64) -> Result<(), Refusal> {
        self.writes.push(Write::Expire { key: key.to_vec(), ttl_ms });
        Ok(())
    }

    fn refused_write(&mut self, refusal: Refusal) -> Result<(), Refusal> {
        self.writes.push(Write::Refused(refusal));
        Ok(())
    }
}
