//! Concurrency: at most `limit` permits held at once, each by one holder until it releases the
//! permit or its lease ends (`lua/concurrency.lua`, whose twin this is). A rate limit counts what
//! was admitted over time; this counts what is running now, so what it keeps per key is the
//! set of holders, each with the instant its lease ends.
//!
//! A lease is over once the clock reaches its end: every reading counts only the holders
//! whose leases end after now, and every write first drops the others. So a holder that died
//! (a crashed worker, a killed connection) keeps its permit for at most one lease, and no permit
//! is leaked for good. A release or a renewal by a holder that holds nothing changes nothing:
//! a second release can never take the count below zero, as `INCR`/`DECR` counters do, nor
//! free another holder's permit. An acquire by a holder that already holds a permit renews it
//! instead of taking a second: a retry whose first reply was lost costs nothing.
//!
//! With callers' clocks, a caller whose clock runs ahead ends the others' leases early and
//! takes their permits: a concurrency limit should run on Redis's clock.

use std::collections::BTreeMap;

use super::Outcome;

/// What a holder asks of its key's permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermitOp {
    /// Take a permit (or renew the one the holder holds).
    Acquire,
    /// Move the end of the holder's lease to now plus the lease.
    Renew,
    /// Free the holder's permit.
    Release,
    /// Whether an acquire would take a permit now; changes nothing.
    Peek,
}

/// The longest lease a holder may be given (ms), a year: with a clock reading added it stays
/// exact in Redis's scores and TTLs. The library refuses longer ones when it is built, and the
/// module's command refuses them by name.
pub const MAX_LEASE_MS: u64 = 366 * 24 * 3_600 * 1_000;

impl PermitOp {
    /// Every operation.
    #[cfg(any(test, feature = "harness"))]
    pub const ALL: [PermitOp; 4] = [PermitOp::Acquire, PermitOp::Renew, PermitOp::Release, PermitOp::Peek];

    /// The operation whose wire name is `name`.
    #[cfg(any(test, feature = "harness"))]
    pub fn named(name: &[u8]) -> Option<PermitOp> {
        PermitOp::ALL.into_iter().find(|op| op.name().as_bytes() == name)
    }

    /// The operation's name on the script's wire (its `ARGV[5]`).
    pub fn name(self) -> &'static str {
        match self {
            PermitOp::Acquire => "acquire",
            PermitOp::Renew => "renew",
            PermitOp::Release => "release",
            PermitOp::Peek => "peek",
        }
    }
}

/// One key's holders: each holder's token and the instant (ms) its lease ends, as the
/// script's sorted set holds them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Permits {
    /// Token -> the end of its lease (ms).
    pub holders: BTreeMap<String, u64>,
}

impl Permits {
    /// The leases live at `now_ms`, ending after it.
    fn live(&self, now_ms: u64) -> impl Iterator<Item = u64> + '_ {
        self.holders.values().copied().filter(move |&end| end > now_ms)
    }

    /// Ms from `now_ms` until the last live lease ends: the key's TTL (0 when none is live).
    fn reset_after(&self, now_ms: u64) -> u64 {
        self.live(now_ms).max().map_or(0, |end| end - now_ms)
    }

    /// Ms from `now_ms` until the earliest live lease ends (0 when none is live).
    fn first_end(&self, now_ms: u64) -> u64 {
        self.live(now_ms).min().map_or(0, |end| end - now_ms)
    }
}

/// Runs `op` for `holder` on a key of `limit` permits whose leases last `lease_ms`. `allowed`
/// says whether the holder holds a permit afterwards (for a release: whether it held one it has
/// now freed; for a peek: whether an acquire would take one); `remaining` is the permits free;
/// `retry_after_ms`, for a refused acquire, the time until the earliest lease ends (the
/// longest the wait can be, since a release frees a permit sooner).
pub fn step(
    limit: u64,
    lease_ms: u64,
    state: &mut Option<Permits>,
    now_ms: u64,
    op: PermitOp,
    holder: &str,
) -> Outcome {
    // Redis drops the key once its TTL, the end of the last lease, has passed: the twin forgets
    // it at the same moment, so a clock that then steps back sees what Redis sees.
    if state.as_ref().is_some_and(|s| expired(s, now_ms)) {
        *state = None;
    }
    let permits = state.get_or_insert_with(Permits::default);
    if op != PermitOp::Peek {
        // Every write first drops the leases that have ended (ZREMRANGEBYSCORE -inf now).
        permits.holders.retain(|_, end| *end > now_ms);
    }
    let held = permits.holders.contains_key(holder);
    let count = permits.live(now_ms).count() as u64;
    let outcome = match op {
        PermitOp::Peek if count < limit => kept(true, limit, count, permits, now_ms),
        PermitOp::Release => {
            permits.holders.remove(holder);
            kept(held, limit, count - u64::from(held), permits, now_ms)
        }
        // A renewal, or an acquire retried by a holder whose first reply was lost: its own permit.
        PermitOp::Renew | PermitOp::Acquire if held => {
            permits.holders.insert(holder.to_owned(), now_ms + lease_ms);
            kept(true, limit, count, permits, now_ms)
        }
        PermitOp::Renew => kept(false, limit, count, permits, now_ms),
        PermitOp::Acquire if count < limit => {
            permits.holders.insert(holder.to_owned(), now_ms + lease_ms);
            kept(true, limit, count + 1, permits, now_ms)
        }
        PermitOp::Acquire | PermitOp::Peek => Outcome {
            allowed: false,
            remaining: 0,
            retry_after_ms: permits.first_end(now_ms),
            reset_after_ms: permits.reset_after(now_ms),
        },
    };
    if state.as_ref().is_some_and(|s| s.holders.is_empty()) {
        *state = None;
    }
    outcome
}

/// A reply that is not a refused acquire: `allowed`, and the permits free once `count` are held.
fn kept(allowed: bool, limit: u64, count: u64, permits: &Permits, now_ms: u64) -> Outcome {
    Outcome {
        allowed,
        remaining: limit.saturating_sub(count),
        retry_after_ms: 0,
        reset_after_ms: permits.reset_after(now_ms),
    }
}

/// Whether Redis has dropped the key when it is touched at `now_ms`: every write leaves it a
/// TTL ending with its last lease, and Redis expires a key strictly after that instant.
pub fn expired(state: &Permits, now_ms: u64) -> bool {
    state.holders.values().max().is_none_or(|&end| now_ms > end)
}

/// How many permits are held at `now_ms`: the quantity the promise bounds.
#[cfg(any(test, feature = "harness"))]
pub fn count_held(state: &Permits, now_ms: u64) -> u64 {
    state.live(now_ms).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOW: bool = true;
    const DENY: bool = false;

    /// Two permits with leases of 500 ms: (t_ms, holder, op) -> (allowed, remaining, retry_ms,
    /// reset_ms). The same walk, sent to `redis-server`, answers the same (see the script's
    /// conformance suite).
    const LINES: &[(u64, &str, PermitOp, bool, u64, u64, u64)] = &[
        (1_000, "a", PermitOp::Acquire, ALLOW, 1, 0, 500),
        (1_001, "b", PermitOp::Acquire, ALLOW, 0, 0, 500),
        (1_002, "c", PermitOp::Acquire, DENY, 0, 498, 499), // a's lease ends at 1500
        (1_003, "a", PermitOp::Acquire, ALLOW, 0, 0, 500),  // a retry renews, takes no second permit
        (1_004, "a", PermitOp::Renew, ALLOW, 0, 0, 500),
        (1_005, "c", PermitOp::Renew, DENY, 0, 0, 499), // c holds nothing to renew
        (1_006, "a", PermitOp::Release, ALLOW, 1, 0, 495),
        (1_007, "a", PermitOp::Release, DENY, 1, 0, 494), // a second release frees nothing
        (1_008, "c", PermitOp::Peek, ALLOW, 1, 0, 493),
        (1_009, "c", PermitOp::Acquire, ALLOW, 0, 0, 500),
        (1_600, "x", PermitOp::Peek, ALLOW, 2, 0, 0), // b (1501) and c (1509) died holding theirs
        (2_000, "x", PermitOp::Acquire, ALLOW, 1, 0, 500),
    ];

    #[test]
    fn every_operation_is_found_by_its_wire_name_and_nothing_else_is() {
        for op in PermitOp::ALL {
            assert_eq!(PermitOp::named(op.name().as_bytes()), Some(op));
        }
        assert_eq!(PermitOp::named(b"ACQUIRE"), None);
        assert_eq!(PermitOp::named(b""), None);
    }

    #[test]
    fn worked_example() {
        let mut state = None;
        for (i, &(t, holder, op, allowed, remaining, retry_after_ms, reset_after_ms)) in LINES.iter().enumerate() {
            let want = Outcome { allowed, remaining, retry_after_ms, reset_after_ms };
            assert_eq!(step(2, 500, &mut state, t, op, holder), want, "line {} ({holder} {op:?} at {t})", i + 1);
        }
    }

    #[test]
    fn no_more_than_the_limit_are_held_at_any_instant_and_every_permit_comes_back() {
        // Every interleaving of acquires, renewals and releases by five holders on three
        // permits, the clock moving on by 0 to 3 steps of a third of a lease.
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let (limit, lease) = (3, 300);
        let (mut state, mut now) = (None, 0);
        for _ in 0..20_000 {
            now += next(4) * 100;
            let holder = ["h0", "h1", "h2", "h3", "h4"][next(5) as usize];
            let op = [PermitOp::Acquire, PermitOp::Acquire, PermitOp::Renew, PermitOp::Release, PermitOp::Peek]
                [next(5) as usize];
            let before = state.clone();
            let out = step(limit, lease, &mut state, now, op, holder);
            let count = state.as_ref().map_or(0, |s| count_held(s, now));
            assert!(count <= limit, "{count} held at {now}");
            if op == PermitOp::Peek {
                // A peek writes nothing; a key whose TTL has passed is gone on reading, as in Redis.
                assert_eq!(state, before.filter(|s| !expired(s, now)), "a peek changed the state");
            }
            if op == PermitOp::Acquire && !out.allowed {
                assert_eq!(count, limit, "refused with a permit free at {now}");
                assert!(out.retry_after_ms > 0 && out.retry_after_ms <= lease);
            }
        }
        // Everyone stops: once one lease has passed, every permit is free.
        let out = step(limit, lease, &mut state, now + lease, PermitOp::Peek, "late");
        assert_eq!((out.allowed, out.remaining, out.reset_after_ms), (true, limit, 0));
    }
}
