//! Sliding log: one sorted-set member per admitted unit, scored by its admission time.
//! Entries at or before `now - W` no longer count; a request is admitted if the rest plus its
//! cost fit in `limit`. So every half-open interval `(t - W, t]` holds at most `limit`
//! admitted units, exactly, at O(limit) memory per key. As in the script, every reading
//! counts only live entries and an admission trims the rest: a denial changes nothing.
//!
//! The log decides by the latest reading it has seen: a reading behind its newest entry (a
//! caller whose clock is behind another's, or Redis's clock stepped back) is taken as that
//! entry's time, and the new units are scored there. Were each caller to trim and count by its
//! own reading, one whose clock runs ahead would drop entries that the others' readings still
//! count, and they would admit them again: callers at several clocks, taking turns, admit
//! far beyond the limit over any span of their readings. The waits it answers (Retry-After,
//! the reset, the key's TTL) are still counted from the caller's own reading: its own clock,
//! and Redis's, run on from there.

use std::collections::BTreeMap;

use super::Outcome;
use crate::quota::Quota;

/// Admission times with their multiplicity (a request of cost N adds N members).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogState {
    /// Admission time (ms) -> units admitted at that time. Boxed, so that every algorithm's
    /// state fits in 32 bytes and a key's slot in the in-process tables in one cache line
    /// (`crate::table`); a log's entries are on the heap in any case.
    #[allow(clippy::box_collection)] // boxed on purpose, as said above
    pub entries: Box<BTreeMap<u64, u64>>,
    /// Sum of `entries`' values.
    pub total: u64,
}

impl LogState {
    /// Entries scored after `now - W`: still in the window.
    fn live(&self, now_ms: u64, w: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        // `ZCOUNT key (now-W +inf`: a score of exactly now - W has left.
        let after = now_ms.checked_sub(w);
        self.entries.iter().filter(move |(&s, _)| after.is_none_or(|a| s > a)).map(|(&s, &n)| (s, n))
    }

    fn expire(&mut self, now_ms: u64, w: u64) {
        // ZREMRANGEBYSCORE -inf (now - W): scores <= now - W leave.
        let Some(cutoff) = now_ms.checked_sub(w) else { return };
        while let Some(entry) = self.entries.first_entry() {
            if *entry.key() > cutoff {
                break;
            }
            self.total -= entry.remove();
        }
    }

    /// The score of the k-th oldest live unit (1-based), as `ZRANGEBYSCORE ... LIMIT k-1 1`
    /// reads it.
    fn kth_oldest(&self, k: u64, now_ms: u64, w: u64) -> Option<u64> {
        let mut seen = 0;
        for (score, n) in self.live(now_ms, w) {
            seen += n;
            if seen >= k {
                return Some(score);
            }
        }
        None
    }

    fn newest(&self) -> Option<u64> {
        self.entries.last_key_value().map(|(&s, _)| s)
    }

    /// Scores `units` new entries at `at`, the log's time, trimming those that have left.
    fn add(&mut self, at: u64, w: u64, units: u64) {
        self.expire(at, w);
        *self.entries.entry(at).or_insert(0) += units;
        self.total += units;
    }

    /// The time the log decides by at `now_ms`: the reading, or its newest entry's time when
    /// the reading is behind it.
    pub fn time(&self, now_ms: u64) -> u64 {
        self.newest().map_or(now_ms, |newest| newest.max(now_ms))
    }

    /// The newest live entry's score.
    fn newest_live(&self, now_ms: u64, w: u64) -> Option<u64> {
        self.newest().filter(|&s| s + w > now_ms)
    }
}

/// See the module docs.
pub fn step(q: &Quota, state: &mut Option<LogState>, now_ms: u64, cost: u64) -> Outcome {
    let (limit, w) = (q.limit(), q.period_ms());
    let log = state.get_or_insert_with(LogState::default);
    let at = log.time(now_ms);
    let count: u64 = log.live(at, w).map(|(_, n)| n).sum();
    let newest = log.newest_live(at, w);
    let outcome = if count + cost <= limit {
        let newest = if cost > 0 {
            log.add(at, w, cost);
            Some(at)
        } else {
            newest
        };
        Outcome {
            allowed: true,
            remaining: limit - count - cost,
            retry_after_ms: 0,
            reset_after_ms: reset_after(newest, now_ms, w),
        }
    } else {
        // The oldest `count + cost - limit` units must leave first; the last of them leaves
        // when `now - W` reaches its score.
        let k = count + cost - limit;
        let retry = log.kth_oldest(k, at, w).map_or(0, |s| s + w - now_ms);
        Outcome {
            allowed: false,
            remaining: limit.saturating_sub(count),
            retry_after_ms: retry,
            reset_after_ms: reset_after(newest, now_ms, w),
        }
    };
    if log.total == 0 {
        *state = None;
    }
    outcome
}

/// Forgets the newest `units` live entries (entries that have left the window go too, as
/// an admission trims them).
pub fn refund(q: &Quota, state: &mut Option<LogState>, now_ms: u64, units: u64) -> bool {
    let w = q.period_ms();
    let Some(log) = state else { return false };
    let at = log.time(now_ms);
    if log.newest_live(at, w).is_none() {
        return false;
    }
    log.expire(at, w);
    let mut left = units;
    while left > 0 {
        let Some(mut newest) = log.entries.last_entry() else { break };
        let taken = (*newest.get()).min(left);
        *newest.get_mut() -= taken;
        if *newest.get() == 0 {
            newest.remove();
        }
        log.total -= taken;
        left -= taken;
    }
    if log.total == 0 {
        *state = None;
    }
    true
}

fn reset_after(newest: Option<u64>, now_ms: u64, w: u64) -> u64 {
    // Entries newer than now (a clock stepped back, or a caller's behind another's) last longer.
    newest.map_or(0, |newest| newest + w - now_ms)
}

/// Adds `units` entries whether they fit or not, up to twice the limit of live ones (see
/// `algo::debit`): the units charged.
pub fn debit(q: &Quota, state: &mut Option<LogState>, now_ms: u64, units: u64) -> u64 {
    let (limit, w) = (q.limit(), q.period_ms());
    let log = state.get_or_insert_with(LogState::default);
    let at = log.time(now_ms);
    let count: u64 = log.live(at, w).map(|(_, n)| n).sum();
    let charged = units.min((2 * limit).saturating_sub(count));
    if charged > 0 {
        log.add(at, w, charged);
    }
    if log.total == 0 {
        *state = None;
    }
    charged
}

/// Whether Redis has dropped the keys when touched at `now_ms`: their TTL ends when the
/// newest entry leaves the window.
pub fn expired(q: &Quota, s: &LogState, now_ms: u64) -> bool {
    s.newest().is_none_or(|newest| now_ms > newest + q.period_ms())
}

/// At rest once every entry has left the window.
#[cfg(feature = "harness")]
pub fn is_idle(q: &Quota, s: &LogState, now_ms: u64) -> bool {
    s.newest().is_none_or(|newest| newest + q.period_ms() <= now_ms)
}

#[cfg(test)]
mod tests {
    use super::super::worked::{walk, Line, ALLOW, DENY};
    use crate::quota::{Algorithm, Quota};

    /// Exactly 3 in any (t - 1000, t]: a unit leaves the window 1000 ms after it was admitted.
    const LINES: &[Line] = &[
        // t_ms  cost  allowed  remaining  retry_ms  reset_ms
        (0, 1, ALLOW, 2, 0, 1_000),
        (300, 2, ALLOW, 0, 0, 1_000),
        (999, 1, DENY, 0, 1, 301), // the unit of t=0 leaves at t=1000
        (1_000, 1, ALLOW, 0, 0, 1_000),
        (1_200, 2, DENY, 0, 100, 800), // two units must leave: both of t=300, at t=1300
        (1_300, 2, ALLOW, 0, 0, 1_000),
    ];

    #[test]
    fn worked_example() {
        walk(Algorithm::SlidingLog, Quota::new(3, std::time::Duration::from_secs(1)), LINES);
    }
}
