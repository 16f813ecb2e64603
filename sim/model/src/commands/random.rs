//! Random picks for SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and RANDOMKEY.
//!
//! Redis picks with a generator seeded at startup, so which members a random command returns
//! differs from run to run and no model can match it. The model picks with a generator of its
//! own (splitmix64 from a fixed seed, one per model), so its runs are reproducible, and keeps
//! everything Redis does *not* leave to chance: which cases return the whole collection, which
//! repeat picks and which never do, the order of a whole collection, the reply's shape, and
//! the errors.

use super::super::num::parse_i64;
use super::super::resp::Reply;
use super::Db;

/// The generator's state when a model starts.
pub(crate) const SEED: u64 = 0x5DEE_CE66_D1CE_D00D;

/// Most picks with repetition one command may ask for. Redis would build a reply of any length
/// (`SRANDMEMBER k -1000000000` until memory runs out); the model refuses past this instead.
const MAX_REPEATED: u64 = 1 << 20;

impl Db {
    /// A uniform index below `n` (`n > 0`).
    pub(crate) fn random_below(&mut self, n: usize) -> usize {
        // splitmix64
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % n as u64) as usize
    }

    /// `count` distinct indexes below `size` (`count < size`), in ascending order: the order a
    /// listpack's members come in, and as good as any for a hash table's.
    pub(crate) fn random_distinct(&mut self, count: usize, size: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..size).collect();
        for i in 0..count {
            let j = i + self.random_below(size - i);
            all.swap(i, j);
        }
        let mut picked = all[..count].to_vec();
        picked.sort_unstable();
        picked
    }
}

/// What a count asks of SRANDMEMBER, HRANDFIELD and ZRANDMEMBER (`*WithCountCommand`).
pub(crate) enum Picks {
    /// `n` picks, repeats allowed, in pick order (a negative count, or 1).
    Repeated(Vec<usize>),
    /// The whole collection, in its order (a count at least its size).
    All,
    /// Distinct members (a count below its size).
    Distinct(Vec<usize>),
}

/// `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)`: the count argument.
pub(crate) fn count_arg(arg: &[u8]) -> Result<i64, Reply> {
    match parse_i64(arg) {
        Some(i64::MIN) => Err(Reply::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        )),
        Some(n) => Ok(n),
        None => Err(super::not_an_integer()),
    }
}

/// The picks for `count` from a collection of `size` members (`size > 0`).
pub(crate) fn picks(db: &mut Db, count: i64, size: usize) -> Result<Picks, Reply> {
    let n = count.unsigned_abs();
    if count < 0 || n == 1 {
        if n > MAX_REPEATED {
            return Err(Reply::error(format!(
                "ERR the Redis model repeats at most {MAX_REPEATED} random picks in one reply"
            )));
        }
        return Ok(Picks::Repeated((0..n).map(|_| db.random_below(size)).collect()));
    }
    if n >= size as u64 {
        return Ok(Picks::All);
    }
    Ok(Picks::Distinct(db.random_distinct(n as usize, size)))
}

#[cfg(test)]
mod tests {
    use crate::{ManualServerClock, ModelHandle, Reply};

    fn bulks(reply: Reply) -> Vec<Vec<u8>> {
        match reply {
            Reply::Array(items) | Reply::Set(items) => items
                .into_iter()
                .map(|r| match r {
                    Reply::Bulk(b) => b.to_vec(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn random_picks_are_reproducible_and_keep_redis_rules() {
        let run = || {
            let model = ModelHandle::new(ManualServerClock::from_millis(0));
            model.call(&[b"SADD", b"s", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8"]);
            let picks = bulks(model.call(&[b"SRANDMEMBER", b"s", b"3"]));
            let repeated = bulks(model.call(&[b"SRANDMEMBER", b"s", b"-20"]));
            let popped = bulks(model.call(&[b"SPOP", b"s", b"7"]));
            (picks, repeated, popped, model.call(&[b"OBJECT", b"ENCODING", b"s"]))
        };
        let (picks, repeated, popped, encoding) = run();
        assert_eq!(run(), (picks.clone(), repeated.clone(), popped.clone(), encoding.clone()), "a fixed seed");
        let mut distinct = picks.clone();
        distinct.dedup();
        assert_eq!((picks.len(), distinct.len()), (3, 3), "a positive count never repeats");
        assert_eq!(repeated.len(), 20, "a negative count repeats");
        assert_eq!(popped.len(), 7);
        assert_eq!(encoding, Reply::bulk(b"intset"), "SPOP rebuilt the set from the member it kept");
        let model = ModelHandle::new(ManualServerClock::from_millis(0));
        model.call(&[b"ZADD", b"z", b"1", b"a", b"2", b"b"]);
        assert_eq!(bulks(model.call(&[b"ZRANDMEMBER", b"z", b"5"])), [b"b".to_vec(), b"a".to_vec()], "highest first");
        model.call(&[b"SADD", b"s", b"m"]);
        assert!(model.call(&[b"SRANDMEMBER", b"s", b"-2000000"]).is_error(), "more repeats than the model builds");
        assert!(model.call(&[b"HRANDFIELD", b"nokey", b"-2000000"]) == Reply::Array(Vec::new()));
    }
}
