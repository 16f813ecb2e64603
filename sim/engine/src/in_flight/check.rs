//! Judging an in-flight limit on true time. Each request's acquire and release are placed where
//! they really happened: an acquire took effect somewhere between its sending and its answer,
//! a release somewhere between its sending and its acknowledgement (or never, when nothing
//! acknowledged it). Two questions follow, one per half of the promise:
//!
//! - **At most N at once.** A holder works from the moment it heard "held" until it sends its
//!   release (or dies). Those intervals lie inside the slots a correct limiter held, whatever
//!   the placing, so more than N of them overlapping is a break: N more are allowed per loss
//!   of Redis's data.
//! - **No slot lost for longer than a lease.** A refusal is explained only if, at some instant
//!   between its sending and its answer, N slots could have been held: by holders that had not
//!   yet been acknowledged released, by dead holders and unacknowledged releases until their
//!   lease ended, and by acquires whose answer was lost until theirs would. A refusal nothing
//!   explains is capacity lost: a leaked slot, as a counter without a lease leaks one for good.

use crate::checker::{Check, Verdict};

/// How an acquire was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Acquire {
    /// The store gave a slot.
    Held,
    /// The store refused: every slot was taken.
    Full,
    /// No answer of the store's (a timeout, a lost connection, a failure policy's answer): the
    /// call may have taken a slot nobody holds.
    Unknown,
}

/// How a held slot's work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// No slot was held.
    NotHeld,
    /// The holder released it: the first release was sent at `sent_ms`, and the store
    /// acknowledged one at `acked_ms` (`None`: no attempt was acknowledged).
    Released {
        /// When the work ended and the first release was sent.
        sent_ms: u64,
        /// When a release was acknowledged.
        acked_ms: Option<u64>,
    },
    /// The holder died holding it (a crashed worker, a killed connection): nothing released it.
    Died {
        /// When.
        at_ms: u64,
    },
}

/// One request's life, in true ms since the run began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The instance that sent it.
    pub instance: u32,
    /// Its number on that instance.
    pub job: u32,
    /// When the acquire was sent.
    pub sent_ms: u64,
    /// When it was answered (or given up on).
    pub done_ms: u64,
    /// The answer.
    pub acquire: Acquire,
    /// How the work ended.
    pub end: End,
}

impl Hold {
    /// The interval the holder worked in, half-open: from "held" to its release or death.
    fn working(&self) -> Option<(u64, u64)> {
        let until = match (self.acquire, self.end) {
            (Acquire::Held, End::Released { sent_ms, .. }) => sent_ms,
            (Acquire::Held, End::Died { at_ms }) => at_ms,
            _ => return None,
        };
        Some((self.done_ms, until.max(self.done_ms)))
    }

    /// The longest interval, closed, in which the store may have counted a slot of this
    /// request's: from the acquire's sending until a release was acknowledged or, when none
    /// was, until a lease from the acquire's answer ended.
    fn possibly_held(&self, lease_ms: u64) -> Option<(u64, u64)> {
        let lease_end = self.done_ms + lease_ms + 1;
        let until = match (self.acquire, self.end) {
            (Acquire::Full, _) | (Acquire::Held, End::NotHeld) => return None,
            (Acquire::Held, End::Released { acked_ms: Some(at), .. }) => at,
            (Acquire::Held, _) | (Acquire::Unknown, _) => lease_end,
        };
        Some((self.sent_ms, until))
    }
}

/// What the two checks found.
#[derive(Debug, Clone)]
pub struct Judged {
    /// At most N at once (N more per loss of Redis's data).
    pub at_most: Check,
    /// No refusal that the slots possibly held do not explain.
    pub no_leak: Check,
    /// The most holders working at once, and when first.
    pub peak: (u32, u64),
    /// Refusals nothing explains.
    pub unexplained: u64,
    /// The first of them.
    pub first_leak: Option<Hold>,
    /// Holders working at once over time: the most in each bucket of `bucket_ms`.
    pub series: Vec<u32>,
}

impl Judged {
    /// Both checks held.
    pub fn held(&self) -> bool {
        self.at_most.verdict == Verdict::Held && self.no_leak.verdict == Verdict::Held
    }
}

/// Judges `holds` against "at most `limit` at once, a dead holder's slot back within
/// `lease_ms`", with `data_losses` restarts of Redis without its data.
pub fn judge(holds: &[Hold], limit: u64, lease_ms: u64, data_losses: u64, bucket_ms: u64) -> Judged {
    let (peak, series) = working_at_once(holds, bucket_ms);
    let allowed = limit * (1 + data_losses);
    let at_most = Check {
        verdict: if u64::from(peak.0) > allowed { Verdict::Broken } else { Verdict::Held },
        detail: format!(
            "{} holders worked at once (first at {} ms), bound {allowed} ({limit} + {limit} per loss of Redis's data, \
             {data_losses} lost)",
            peak.0, peak.1
        ),
    };
    let spans: Vec<(u64, u64)> = holds.iter().filter_map(|h| h.possibly_held(lease_ms)).collect();
    let mut unexplained = 0u64;
    let mut first_leak = None;
    for h in holds.iter().filter(|h| h.acquire == Acquire::Full) {
        if most_held_within(&spans, h.sent_ms, h.done_ms) < limit {
            unexplained += 1;
            first_leak.get_or_insert(*h);
        }
    }
    let no_leak = Check {
        verdict: if unexplained > 0 { Verdict::Broken } else { Verdict::Held },
        detail: match first_leak {
            None => format!("every refusal had {limit} slots possibly held (leases of {lease_ms} ms)"),
            Some(h) => format!(
                "{unexplained} refusals with fewer than {limit} slots possibly held, first instance {} job {} at {} ms: \
                 slots leaked past their {lease_ms} ms lease",
                h.instance, h.job, h.sent_ms
            ),
        },
    };
    Judged { at_most, no_leak, peak, unexplained, first_leak, series }
}

/// The holds a check's evidence shows, as a table: those working at `at_ms` (the most at
/// once), or those that may have held a slot while `refused` was being decided (a leak).
pub fn evidence(holds: &[Hold], lease_ms: u64, at_ms: Option<u64>, refused: Option<&Hold>) -> String {
    let shown: Vec<&Hold> = holds
        .iter()
        .filter(|h| match (at_ms, refused) {
            (Some(t), _) => h.working().is_some_and(|(from, until)| from <= t && t < until),
            (None, Some(r)) => {
                (h.instance, h.job) == (r.instance, r.job)
                    || h.possibly_held(lease_ms).is_some_and(|(from, until)| from <= r.done_ms && r.sent_ms <= until)
            }
            (None, None) => false,
        })
        .collect();
    let mut out = String::from("instance  job  acquire sent..answered ms  answer    ended");
    for h in shown {
        let ended = match h.end {
            End::NotHeld => "-".to_owned(),
            End::Released { sent_ms, acked_ms: Some(a) } => format!("released at {sent_ms} ms, acknowledged at {a} ms"),
            End::Released { sent_ms, acked_ms: None } => format!("released at {sent_ms} ms, never acknowledged"),
            End::Died { at_ms } => format!("died at {at_ms} ms holding it"),
        };
        let answer = match h.acquire {
            Acquire::Held => "held",
            Acquire::Full => "refused",
            Acquire::Unknown => "no answer",
        };
        out.push_str(&format!(
            "\n{:>8}  {:>3}  {:>12}..{:<11}  {answer:<9} {ended}",
            h.instance, h.job, h.sent_ms, h.done_ms
        ));
    }
    out
}

/// The most holders working at once, when first, and the most in each bucket.
fn working_at_once(holds: &[Hold], bucket_ms: u64) -> ((u32, u64), Vec<u32>) {
    // Ends sort before starts at one instant: the intervals are half-open.
    let mut events: Vec<(u64, i32)> =
        holds.iter().filter_map(Hold::working).flat_map(|(from, until)| [(from, 1), (until, -1)]).collect();
    events.sort_unstable();
    let last = events.last().map_or(0, |e| e.0);
    let mut series = vec![0u32; (last / bucket_ms.max(1) + 1) as usize];
    let (mut now, mut peak) = (0i64, (0u32, 0u64));
    for (at, step) in events {
        now += i64::from(step);
        let n = now.max(0) as u32;
        let bucket = &mut series[(at / bucket_ms.max(1)) as usize];
        *bucket = (*bucket).max(n);
        if n > peak.0 {
            peak = (n, at);
        }
    }
    // A bucket also holds those working as it starts (all of them, where no event falls in it).
    for (i, b) in series.iter_mut().enumerate() {
        let start = i as u64 * bucket_ms;
        let open = holds.iter().filter_map(Hold::working).filter(|&(f, u)| f <= start && start < u).count() as u32;
        *b = (*b).max(open);
    }
    (peak, series)
}

/// The most spans (closed intervals) covering one instant of `[from, to]`.
fn most_held_within(spans: &[(u64, u64)], from: u64, to: u64) -> u64 {
    // The count only rises where a span starts, so its largest value within [from, to] is at
    // `from` or at a start inside.
    let count_at = |t: u64| spans.iter().filter(|&&(a, b)| a <= t && t <= b).count() as u64;
    spans.iter().map(|&(a, _)| a).filter(|&a| from < a && a <= to).chain([from]).map(count_at).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(sent: u64, done: u64, end: End) -> Hold {
        Hold { instance: 0, job: 0, sent_ms: sent, done_ms: done, acquire: Acquire::Held, end }
    }

    fn full(sent: u64, done: u64) -> Hold {
        Hold { instance: 1, job: 9, sent_ms: sent, done_ms: done, acquire: Acquire::Full, end: End::NotHeld }
    }

    #[test]
    fn back_to_back_holders_are_not_at_once_but_overlapping_ones_are() {
        let released = |at| End::Released { sent_ms: at, acked_ms: Some(at + 2) };
        let one = [held(0, 1, released(10)), held(9, 10, released(20))];
        assert_eq!(judge(&one, 1, 100, 0, 10).peak.0, 1);
        let two = [held(0, 1, released(10)), held(8, 9, released(20))];
        let j = judge(&two, 1, 100, 0, 10);
        assert_eq!(j.at_most.verdict, Verdict::Broken, "{}", j.at_most.detail);
        assert_eq!(j.peak, (2, 9));
        // One loss of Redis's data allows one more limit.
        assert_eq!(judge(&two, 1, 100, 1, 10).at_most.verdict, Verdict::Held);
        assert_eq!(j.series, vec![2, 1, 0]);
    }

    #[test]
    fn a_refusal_is_explained_by_a_dead_holder_only_within_its_lease() {
        let dead = held(0, 1, End::Died { at_ms: 5 });
        let within = judge(&[dead, full(50, 52)], 1, 100, 0, 10);
        assert_eq!(within.no_leak.verdict, Verdict::Held, "{}", within.no_leak.detail);
        let after = judge(&[dead, full(150, 152)], 1, 100, 0, 10);
        assert_eq!(after.no_leak.verdict, Verdict::Broken);
        assert_eq!(after.unexplained, 1);
        assert!(after.no_leak.detail.contains("instance 1 job 9 at 150 ms"), "{}", after.no_leak.detail);
    }

    #[test]
    fn a_refusal_is_explained_by_any_moment_of_its_call() {
        // The holder released at 30, acknowledged at 40: a refusal sent at 35 may have been
        // decided before the release took effect, one sent at 41 may not.
        let h = held(0, 1, End::Released { sent_ms: 30, acked_ms: Some(40) });
        assert_eq!(judge(&[h, full(35, 45)], 1, 100, 0, 10).unexplained, 0);
        assert_eq!(judge(&[h, full(41, 45)], 1, 100, 0, 10).unexplained, 1);
        // A call whose answer was lost may hold a slot until its lease would end.
        let lost = Hold { acquire: Acquire::Unknown, end: End::NotHeld, ..held(0, 10, End::NotHeld) };
        assert_eq!(judge(&[lost, full(100, 105)], 1, 100, 0, 10).unexplained, 0);
        assert_eq!(judge(&[lost, full(112, 115)], 1, 100, 0, 10).unexplained, 1);
        // An unacknowledged release holds the slot until the lease ends too.
        let unacked = held(0, 1, End::Released { sent_ms: 5, acked_ms: None });
        assert_eq!(judge(&[unacked, full(90, 95)], 1, 100, 0, 10).unexplained, 0);
    }
}
