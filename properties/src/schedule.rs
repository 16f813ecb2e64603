//! Request schedules, running them, and printing them so a failure reads as a story: the
//! quota, then each `(t, cost) -> decision` line.

use std::fmt;

use redis_ratelimit::harness::algo::Outcome;
use redis_ratelimit::{Algorithm, Quota};

use crate::machine::MachineState;
use crate::subject::Subject;

/// One request: at `t_ms` (the clock reading the algorithm sees), of `cost` units (0 is a
/// peek).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Req {
    /// Clock reading, ms.
    pub t_ms: u64,
    /// Units asked for.
    pub cost: u64,
}

/// A quota and the requests of one client against one key, in arrival order.
#[derive(Clone, PartialEq, Eq)]
pub struct Case {
    /// The quota every request is checked against.
    pub quota: Quota,
    /// Requests in arrival order (times may step back where a suite asks for it).
    pub reqs: Vec<Req>,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} |", quota_text(&self.quota, None))?;
        let t0 = self.reqs.first().map_or(0, |r| r.t_ms);
        write!(f, " t0={t0} |")?;
        for r in &self.reqs {
            write!(f, " {}:{}", rel(r.t_ms, t0), r.cost)?;
        }
        Ok(())
    }
}

/// A request and what the state machine answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The request.
    pub req: Req,
    /// The decision.
    pub outcome: Outcome,
}

/// A schedule run through a state machine: each step and the state right after it.
#[derive(Debug, Clone)]
pub struct Run {
    /// Requests and decisions, in order.
    pub steps: Vec<Step>,
    /// `after[i]` is the key's state right after step `i`.
    pub after: Vec<Option<MachineState>>,
}

impl Run {
    /// Runs `reqs` through `subject`, starting from no state.
    pub fn new(subject: &Subject, quota: &Quota, reqs: &[Req]) -> Run {
        let mut state = None;
        let mut steps = Vec::with_capacity(reqs.len());
        let mut after = Vec::with_capacity(reqs.len());
        for &req in reqs {
            let outcome = subject.machine.step(quota, &mut state, req.t_ms, req.cost);
            steps.push(Step { req, outcome });
            after.push(state.clone());
        }
        Run { steps, after }
    }

    /// The state just before step `i`.
    pub fn before(&self, i: usize) -> Option<MachineState> {
        if i == 0 {
            None
        } else {
            self.after[i - 1].clone()
        }
    }
}

/// An invariant broken: which, by whom, why, and the schedule that shows it. Boxed, so a
/// passing check's `Result` stays one word.
#[derive(Clone)]
pub struct Violation(pub Box<Report>);

/// What a [`Violation`] holds.
#[derive(Clone)]
pub struct Report {
    /// The invariant's name (`safety`, `retry-after`, ...).
    pub invariant: &'static str,
    /// Who broke it.
    pub subject: String,
    /// The algorithm whose quota rules apply (whether to print the burst).
    pub base: Algorithm,
    /// The quota.
    pub quota: Quota,
    /// The schedule as run, with decisions.
    pub steps: Vec<Step>,
    /// The step the message is about, marked `>>`.
    pub at: Option<usize>,
    /// What went wrong, in one or two sentences.
    pub message: String,
}

impl std::ops::Deref for Violation {
    type Target = Report;
    fn deref(&self) -> &Report {
        &self.0
    }
}

impl Violation {
    /// A violation of `invariant` by `subject` at step `at` of `steps`.
    pub fn new(
        invariant: &'static str,
        subject: &Subject,
        quota: &Quota,
        steps: &[Step],
        at: Option<usize>,
        message: String,
    ) -> Violation {
        Violation(Box::new(Report {
            invariant,
            subject: subject.to_string(),
            base: subject.base,
            quota: *quota,
            steps: steps.to_vec(),
            at,
            message,
        }))
    }
}

/// At most this many schedule lines are printed; longer schedules show their start, the
/// lines around the marked step, and their end.
const SHOWN_LINES_MAX: usize = 40;

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} violated by {}: {}", self.invariant, self.subject, self.message)?;
        let t0 = self.steps.first().map_or(0, |s| s.req.t_ms);
        writeln!(f, "  quota: {}", quota_text(&self.quota, Some(self.base)))?;
        writeln!(f, "  schedule ({} requests, t relative to t0 = {t0} ms):", self.steps.len())?;
        let n = self.steps.len();
        let shown = |i: usize| {
            n <= SHOWN_LINES_MAX || i < 8 || i + 4 >= n || self.at.is_some_and(|a| i + 10 >= a && i <= a + 10)
        };
        let mut skipped = false;
        for (i, step) in self.steps.iter().enumerate() {
            if !shown(i) {
                skipped = true;
                continue;
            }
            if skipped {
                writeln!(f, "         ...")?;
                skipped = false;
            }
            let mark = if self.at == Some(i) { ">>" } else { "  " };
            writeln!(f, "  {mark} #{i:<3} {}", step_text(step, t0))?;
        }
        Ok(())
    }
}

impl fmt::Debug for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `limit 3 per 1000 ms, burst 5` (the burst only where `base` uses it).
pub fn quota_text(q: &Quota, base: Option<Algorithm>) -> String {
    let show_burst = base.is_none_or(Algorithm::is_bucket);
    if show_burst {
        format!("limit {} per {} ms, burst {}", q.limit(), q.period_ms(), q.burst())
    } else {
        format!("limit {} per {} ms", q.limit(), q.period_ms())
    }
}

/// A time relative to `t0`, signed: `+12`, `-3`.
pub fn rel(t: u64, t0: u64) -> String {
    if t >= t0 {
        format!("+{}", t - t0)
    } else {
        format!("-{}", t0 - t)
    }
}

/// `t=+12 cost 1 -> allowed  remaining 4  reset 988 ms`.
pub fn step_text(step: &Step, t0: u64) -> String {
    let o = &step.outcome;
    let head = format!("t={:<10} cost {:<4} ->", rel(step.req.t_ms, t0), step.req.cost);
    if o.allowed {
        format!("{head} allowed  remaining {}  reset {} ms", o.remaining, o.reset_after_ms)
    } else {
        format!(
            "{head} denied   remaining {}  retry {} ms  reset {} ms",
            o.remaining, o.retry_after_ms, o.reset_after_ms
        )
    }
}

/// The schedule with every clock reading replaced by the largest reading so far: what the
/// state machine would have seen had the clock stood still instead of stepping back.
pub fn clamped(reqs: &[Req]) -> Vec<Req> {
    let mut max = 0;
    reqs.iter()
        .map(|r| {
            max = max.max(r.t_ms);
            Req { t_ms: max, cost: r.cost }
        })
        .collect()
}

/// The true time of each request if the clock is one clock that steps back now and then and
/// keeps running from where it landed (an NTP step): only its forward movement is elapsed
/// time, so `true[i] = t0 + sum of the forward steps up to i`.
pub fn true_timeline(reqs: &[Req]) -> Vec<u64> {
    let mut out = Vec::with_capacity(reqs.len());
    let mut prev: Option<u64> = None;
    let mut now = 0;
    for r in reqs {
        now = match prev {
            None => r.t_ms,
            Some(p) => now + r.t_ms.saturating_sub(p),
        };
        prev = Some(r.t_ms);
        out.push(now);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs(times: &[u64]) -> Vec<Req> {
        times.iter().map(|&t_ms| Req { t_ms, cost: 1 }).collect()
    }

    #[test]
    fn clamped_holds_the_largest_reading() {
        let t: Vec<u64> = clamped(&reqs(&[5, 9, 3, 12])).iter().map(|r| r.t_ms).collect();
        assert_eq!(t, [5, 9, 9, 12]);
    }

    #[test]
    fn true_timeline_counts_forward_steps_only() {
        // 100 -> 50 is a step back (no time), 50 -> 60 is 10 ms.
        assert_eq!(true_timeline(&reqs(&[100, 50, 60])), [100, 100, 110]);
    }
}
