//! The invariants, as plain functions `check_*(subject, case) -> Result<(), Violation>`.
//! The same function runs over the real algorithms (which must pass every case) and over
//! the known-bad state machines (which it must catch): see [`crate::runner`].
//!
//! | invariant | what it asserts | holds for |
//! |---|---|---|
//! | `safety` | admitted units in any interval stay within the promise's bound | all five |
//! | `within-rate` | a client within the rate is admitted, every time | all five |
//! | `no-lost-refill` | nothing is denied that an exact reference would admit | all five |
//! | `retry-after` | waiting exactly Retry-After is enough, 1 ms less is not | all five (exact to the ms) |
//! | `reset-after` | at `t + reset_after` the state is at rest, 1 ms earlier it is not | all five (exact to the ms; windows with forward time) |
//! | `peek` | a cost-0 request changes no later decision | all five |
//! | `cost-split` | cost N at one instant = N cost-1 requests at that instant | all five |
//! | `remaining` | `remaining` is exactly the cost-1 requests admissible right now | all five |
//! | `clock-back` | stepping back never makes a request admissible; one clock stepped back keeps the bound | all five (windows: within one window) |
//! | `clock-lag` | lagging readings (skewed instances) keep the bound on the leading clock's timeline | token bucket, GCRA (not the sliding log) |
//!
//! With debts ([`crate::debt::debt_breach`]: excesses charged whether they fit or not, as a
//! reconciliation charges them), requests and debits together keep within the bound of twice
//! the capacity.
//!
//! Bounds per promise (L = limit, W = period, B = burst, r = L / W):
//! - fixed window: <= L per aligned window, <= 2L in any `[s, s + W)`;
//! - sliding log: <= L in any `(t - W, t]`, exactly;
//! - sliding-window counter: <= L per aligned window, <= 2L in any `(t - W, t]` (the
//!   documented looseness; its real error is measured in `tests/suite/accuracy.rs`), and
//!   every admission satisfies the weighted estimate computed from the admitted history;
//! - token bucket: <= B + r * d units in any closed interval of length d;
//! - GCRA: <= B + r * d too, and the tighter `units * T <= B * T + d` with its emission
//!   interval T rounded up to whole µs (rounding up only makes it stricter).
//!
//! Clock steps. The token bucket and GCRA store a time that only moves forward, so a
//! reading behind it refills nothing and cannot move it back. The sliding log counts every
//! entry newer than `now - W` (entries from "the future" included) but scores an admission
//! at its own reading, so under lagging readings an entry leaves early (`clock-lag` finds
//! it). The fixed window and the sliding-window counter key their state by window index
//! `t / W`: a step back within a window changes nothing (the counter's estimate only gets
//! stricter); a step back into an earlier window counts that window afresh, so each
//! crossing can admit up to `limit` more, and `reset_after` there describes the earlier
//! window's empty key. The naive GET+SET subject is the fixed window at this level: its
//! flaw is the race between GET and SET, which the loom models and the simulator show.

use redis_ratelimit::harness::algo::Outcome;

use crate::machine::MachineState;
use redis_ratelimit::{Algorithm, Quota};

use crate::reference::{self, gcra_interval_us, ExactBucket, Point};
use crate::schedule::{rel, true_timeline, Case, Req, Run, Step, Violation};
use crate::strategy::Shape;
use crate::subject::Subject;

/// An invariant's check.
pub type Check = fn(&Subject, &Case) -> Result<(), Violation>;

/// A named invariant and the schedules it is fed.
#[derive(Clone, Copy)]
pub struct Invariant {
    /// Name, used in output and regression files.
    pub name: &'static str,
    /// The check.
    pub check: Check,
    /// What the schedules contain.
    pub shape: Shape,
}

/// Safety: admitted units stay within the promise's bound.
pub const SAFETY: Invariant = Invariant { name: "safety", check: check_safety, shape: Shape::FORWARD };
/// No starvation, part one: a client within the rate is always admitted.
pub const WITHIN_RATE: Invariant = Invariant { name: "within-rate", check: check_within_rate, shape: Shape::FORWARD };
/// No starvation, part two: however requests are spaced, nothing is denied that an exact
/// reference fed the same admissions would admit (refill is never lost to rounding).
pub const NO_LOST_REFILL: Invariant =
    Invariant { name: "no-lost-refill", check: check_no_lost_refill, shape: Shape::FORWARD };
/// Retry-After honest and minimal.
pub const RETRY_AFTER: Invariant = Invariant { name: "retry-after", check: check_retry_after, shape: Shape::ANY };
/// Reset-After honest and minimal.
pub const RESET_AFTER: Invariant =
    Invariant { name: "reset-after", check: check_reset_after, shape: Shape::BACKWARD_BUT_WINDOWS };
/// Peeks change nothing.
pub const PEEK: Invariant = Invariant { name: "peek", check: check_peek, shape: Shape::FORWARD };
/// Cost N equals N requests of cost 1 at the same instant.
pub const COST_SPLIT: Invariant = Invariant { name: "cost-split", check: check_cost_split, shape: Shape::FORWARD };
/// `remaining` is exact and within the capacity.
pub const REMAINING: Invariant = Invariant { name: "remaining", check: check_remaining, shape: Shape::ANY };
/// A clock stepping back grants no extra admissions, per request and for one clock.
pub const CLOCK_BACK: Invariant = Invariant { name: "clock-back", check: check_clock_back, shape: Shape::ANY };
/// Lagging clock readings grant no extra admissions (token bucket, GCRA).
pub const CLOCK_LAG: Invariant = Invariant { name: "clock-lag", check: check_clock_lag, shape: Shape::ANY };

/// Every invariant.
pub const ALL: [Invariant; 10] =
    [SAFETY, WITHIN_RATE, NO_LOST_REFILL, RETRY_AFTER, RESET_AFTER, PEEK, COST_SPLIT, REMAINING, CLOCK_BACK, CLOCK_LAG];

fn points(run: &Run) -> Vec<Point> {
    run.steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.outcome.allowed && s.req.cost > 0)
        .map(|(i, s)| (i, s.req.t_ms, s.req.cost))
        .collect()
}

fn t0(steps: &[Step]) -> u64 {
    steps.first().map_or(0, |s| s.req.t_ms)
}

/// The promise's bound over `points` (admissions, at the times given), as `(step, why)`.
pub(crate) fn bound_breach(promise: Algorithm, q: &Quota, points: &[Point], t0: u64) -> Option<(usize, String)> {
    let (limit, w, burst) = (u128::from(q.limit()), q.period_ms(), u128::from(q.burst()));
    let aligned = |max: u128| {
        reference::aligned_sums(points, w).into_iter().find(|(_, (units, _))| *units > max).map(|(k, (units, at))| {
            (
                at,
                format!(
                    "{units} units admitted in the aligned window [{}, {}), above limit {max}",
                    rel(k * w, t0),
                    rel((k + 1) * w, t0)
                ),
            )
        })
    };
    let sliding = |max: u128, what: &str| {
        reference::heaviest_window(points, w).filter(|(units, _, _)| *units > max).map(|(units, t, at)| {
            (
                at,
                format!(
                    "{units} units admitted in ({}, {}], a window of {w} ms, above {what} {max}",
                    rel(t.saturating_sub(w), t0),
                    rel(t, t0)
                ),
            )
        })
    };
    let bucket = |unit: u128, gain: u128, what: &str| {
        reference::bucket_breach(points, unit, gain, burst * unit).map(|(units, a, b, at)| {
            (at, format!("{units} units admitted in [{}, {}] (d = {} ms), above {what}", rel(a, t0), rel(b, t0), b - a))
        })
    };
    match promise {
        Algorithm::FixedWindow => aligned(limit).or_else(|| sliding(2 * limit, "2 x limit")),
        Algorithm::SlidingLog => sliding(limit, "limit"),
        Algorithm::SlidingWindow => aligned(limit).or_else(|| sliding(2 * limit, "2 x limit")).or_else(|| {
            // Every admission must satisfy the weighted estimate over the real history.
            points.iter().enumerate().find_map(|(n, &(i, t, c))| {
                let (est, prev, cur) = reference::sliding_estimate(&points[..n], w, t, c);
                (est > limit * u128::from(w)).then(|| {
                    (
                        i,
                        format!(
                            "admitted with prev {prev} x ({w} - {}) / {w} + cur {cur} + cost {c} above limit {limit}",
                            t % w
                        ),
                    )
                })
            })
        }),
        Algorithm::TokenBucket => {
            bucket(u128::from(q.period_ms()), limit, &format!("burst {burst} + {limit}/{w} ms x d"))
        }
        Algorithm::Gcra => bucket(u128::from(q.period_ms()), limit, &format!("burst {burst} + {limit}/{w} ms x d"))
            .or_else(|| {
                let t = gcra_interval_us(q);
                bucket(u128::from(t), 1000, &format!("burst {burst} + d / {t} µs (GCRA's rounded-up interval)"))
            }),
        other => panic!("no promise is written down for {other}: add it here"),
    }
}

/// Safety: see the module docs for each promise's bound. Times must not step back.
pub fn check_safety(s: &Subject, case: &Case) -> Result<(), Violation> {
    let run = Run::new(s, &case.quota, &case.reqs);
    match bound_breach(s.promise, &case.quota, &points(&run), t0(&run.steps)) {
        Some((at, msg)) => Err(Violation::new("safety", s, &case.quota, &run.steps, Some(at), msg)),
        None => Ok(()),
    }
}

/// Within the rate: the case's requests are first moved later (order and later gaps kept)
/// until the schedule is within the rate ([`reference::within_rate`]); then every request
/// must be admitted.
pub fn check_within_rate(s: &Subject, case: &Case) -> Result<(), Violation> {
    let reqs = reference::within_rate(s.promise, &case.quota, &case.reqs);
    let run = Run::new(s, &case.quota, &reqs);
    match run.steps.iter().position(|st| !st.outcome.allowed) {
        Some(i) => Err(Violation::new(
            "within-rate",
            s,
            &case.quota,
            &run.steps,
            Some(i),
            format!("request #{i} denied though the schedule is within the rate ({})", within_rate_meaning(s.promise)),
        )),
        None => Ok(()),
    }
}

fn within_rate_meaning(promise: Algorithm) -> &'static str {
    match promise {
        Algorithm::TokenBucket => "an exact token bucket holds every request's cost when it comes",
        Algorithm::Gcra => "an exact bucket at GCRA's rounded-up interval holds every request's cost when it comes",
        Algorithm::SlidingLog => "at most limit units in any window (t - W, t]",
        Algorithm::FixedWindow => "at most limit units per aligned window",
        Algorithm::SlidingWindow => "at most limit units across any two consecutive aligned windows",
        other => panic!("no promise is written down for {other}: add it here"),
    }
}

/// No lost refill: walking the run with an exact reference fed the subject's own
/// admissions, no request is denied that the reference admits. For the buckets the
/// reference is an exact integer bucket (so a refill floored away shows up here however
/// the requests are spaced); for the windows it is the exact count the window promises.
pub fn check_no_lost_refill(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let (limit, w) = (u128::from(q.limit()), q.period_ms());
    let mut bucket = ExactBucket::for_promise(s.promise, q);
    let mut history: Vec<Point> = Vec::new();
    for (i, st) in run.steps.iter().enumerate() {
        let (t, c) = (st.req.t_ms, st.req.cost);
        let fits_exactly = match s.promise {
            Algorithm::TokenBucket | Algorithm::Gcra => {
                bucket.advance(t);
                bucket.fits(c).then(|| format!("an exactly refilled bucket holds {:.3} tokens", bucket.tokens()))
            }
            Algorithm::FixedWindow => {
                let used = reference::aligned_sums(&history, w).get(&(t / w)).map_or(0, |x| x.0);
                (used + u128::from(c) <= limit)
                    .then(|| format!("its aligned window holds only {used} of {limit} units"))
            }
            Algorithm::SlidingLog => {
                let used = reference::window_units(&history, w, t);
                (used + u128::from(c) <= limit).then(|| format!("(t - W, t] holds only {used} of {limit} units"))
            }
            Algorithm::SlidingWindow => {
                let (est, prev, cur) = reference::sliding_estimate(&history, w, t, c);
                (est <= limit * u128::from(w))
                    .then(|| format!("the weighted estimate prev {prev}, cur {cur} leaves room for cost {c}"))
            }
            other => panic!("no promise is written down for {other}: add it here"),
        };
        if st.outcome.allowed {
            if c > 0 {
                bucket.take(c);
                history.push((i, t, c));
            }
        } else if let Some(why) = fits_exactly {
            return Err(Violation::new(
                "no-lost-refill",
                s,
                q,
                &run.steps,
                Some(i),
                format!("request #{i} (cost {c}) denied, yet {why}"),
            ));
        }
    }
    Ok(())
}

fn probe(s: &Subject, q: &Quota, state: &Option<MachineState>, t: u64, cost: u64) -> Outcome {
    let mut st = state.clone();
    s.machine.step(q, &mut st, t, cost)
}

/// Retry-After: after every denial of a lone client, the same request waiting exactly
/// `retry_after_ms` is admitted and waiting one millisecond less is denied. Every algorithm
/// here reports Retry-After exact to the millisecond (GCRA computes in µs and rounds up).
/// An admission reports 0.
pub fn check_retry_after(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let fail = |i: usize, msg: String| Err(Violation::new("retry-after", s, q, &run.steps, Some(i), msg));
    for (i, st) in run.steps.iter().enumerate() {
        let (t, c, ra) = (st.req.t_ms, st.req.cost, st.outcome.retry_after_ms);
        if st.outcome.allowed {
            if ra != 0 {
                return fail(i, format!("request #{i} admitted with Retry-After {ra} ms instead of 0"));
            }
            continue;
        }
        let later = probe(s, q, &run.after[i], t + ra, c);
        if !later.allowed {
            return fail(
                i,
                format!(
                    "request #{i} told to retry after {ra} ms, but retrying alone at t={} is denied again (retry {} ms)",
                    rel(t + ra, t0(&run.steps)),
                    later.retry_after_ms
                ),
            );
        }
        if ra >= 1 && probe(s, q, &run.after[i], t + ra - 1, c).allowed {
            return fail(
                i,
                format!(
                    "request #{i} told to retry after {ra} ms, but it is admitted 1 ms earlier at t={}: not minimal",
                    rel(t + ra - 1, t0(&run.steps))
                ),
            );
        }
    }
    Ok(())
}

/// Reset-After: after every request, at `t + reset_after_ms` the state is at rest
/// (`redis_ratelimit::harness::algo::is_idle`, and a probe of full capacity decides as on a fresh key), and
/// 1 ms earlier it is not (the same probe decides differently). Exact to the millisecond.
pub fn check_reset_after(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let cap = s.capacity(q);
    let fail = |i: usize, msg: String| Err(Violation::new("reset-after", s, q, &run.steps, Some(i), msg));
    for (i, st) in run.steps.iter().enumerate() {
        let (t, rs) = (st.req.t_ms, st.outcome.reset_after_ms);
        let state = &run.after[i];
        let at = t + rs;
        if let Some(x) = state {
            if !s.machine.is_idle(q, x, at) {
                return fail(
                    i,
                    format!("reset after {rs} ms, but at t={} the state is not at rest", rel(at, t0(&run.steps))),
                );
            }
        }
        if probe(s, q, state, at, cap) != probe(s, q, &None, at, cap) {
            return fail(
                i,
                format!(
                    "reset after {rs} ms, but at t={} a cost-{cap} request decides differently than on a fresh key",
                    rel(at, t0(&run.steps))
                ),
            );
        }
        if rs >= 1 {
            let early_idle = state.as_ref().is_none_or(|x| s.machine.is_idle(q, x, at - 1));
            if early_idle || probe(s, q, state, at - 1, cap) == probe(s, q, &None, at - 1, cap) {
                return fail(
                    i,
                    format!(
                        "reset after {rs} ms, but the state is already at rest 1 ms earlier (t={}): not minimal",
                        rel(at - 1, t0(&run.steps))
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Peeks: removing every cost-0 request changes no other decision (every field); a peek is
/// itself admitted with Retry-After 0; and where the algorithm writes nothing on a peek (all
/// but the sliding log, which drops expired entries as any call does) the state is the
/// same object before and after. Times must not step back: the sliding log's expiry of old
/// entries is then invisible.
pub fn check_peek(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let fail = |i: usize, msg: String| Err(Violation::new("peek", s, q, &run.steps, Some(i), msg));
    for (i, st) in run.steps.iter().enumerate() {
        if st.req.cost != 0 {
            continue;
        }
        if !st.outcome.allowed || st.outcome.retry_after_ms != 0 {
            return fail(i, format!("peek #{i} denied or told to retry"));
        }
        // A peek that touches an expired key drops it, as Redis does; that changes the
        // representation, not the state, so compare after forgetting expired states.
        let t = st.req.t_ms;
        let live = |state: Option<MachineState>| state.filter(|x| !s.machine.expired(q, x, t));
        if s.promise != Algorithm::SlidingLog && live(run.after[i].clone()) != live(run.before(i)) {
            return fail(i, format!("peek #{i} changed the state: {:?} -> {:?}", run.before(i), run.after[i]));
        }
    }
    let without: Vec<Req> = case.reqs.iter().copied().filter(|r| r.cost > 0).collect();
    let other = Run::new(s, q, &without);
    let kept = run.steps.iter().enumerate().filter(|(_, st)| st.req.cost > 0);
    for ((i, with), alone) in kept.zip(&other.steps) {
        if with.outcome != alone.outcome {
            return fail(
                i,
                format!("request #{i} decided {:?} after the peeks, {:?} without them", with.outcome, alone.outcome),
            );
        }
    }
    Ok(())
}

/// Splits `cost` into the unit requests it stands for, or (for large costs) a few parts
/// that start with single units.
fn split(cost: u64) -> Vec<u64> {
    if cost <= 32 {
        vec![1; cost as usize]
    } else {
        let third = (cost - 2) / 3;
        vec![1, 1, third, third, cost - 2 - 2 * third]
    }
}

/// Cost split: from the state before each request of cost N >= 2, one request of cost N and
/// N requests of cost 1 at the same instant agree: N is admitted iff all N units are, and
/// then both leave the same state and report the same `remaining`. Every algorithm here
/// promises this at one instant; none promises it for units spread over time.
pub fn check_cost_split(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let fail = |i: usize, msg: String| Err(Violation::new("cost-split", s, q, &run.steps, Some(i), msg));
    for (i, st) in run.steps.iter().enumerate() {
        let (t, c) = (st.req.t_ms, st.req.cost);
        if c < 2 {
            continue;
        }
        let before = run.before(i);
        let mut whole = before.clone();
        let one = s.machine.step(q, &mut whole, t, c);
        let mut parts = before.clone();
        let pieces = split(c);
        let decided: Vec<Outcome> = pieces.iter().map(|&p| s.machine.step(q, &mut parts, t, p)).collect();
        let all = decided.iter().all(|o| o.allowed);
        if one.allowed != all {
            return fail(
                i,
                format!(
                    "cost {c} {} but its parts {:?} at the same instant were {}",
                    if one.allowed { "admitted" } else { "denied" },
                    pieces.len(),
                    if all { "all admitted" } else { "not all admitted" }
                ),
            );
        }
        let last = decided.last().copied().unwrap_or(one);
        if one.allowed && (whole != parts || one.remaining != last.remaining) {
            return fail(
                i,
                format!(
                    "cost {c} and its {} parts leave different states or remaining: {whole:?} / {} vs {parts:?} / {}",
                    pieces.len(),
                    one.remaining,
                    last.remaining
                ),
            );
        }
    }
    Ok(())
}

/// Remaining: after every request, `remaining` is at most the capacity, a cost-1 request
/// right now is admitted iff `remaining >= 1`, a request of cost `remaining` is admitted
/// and one of cost `remaining + 1` (within the capacity) is denied.
pub fn check_remaining(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let cap = s.capacity(q);
    let fail = |i: usize, msg: String| Err(Violation::new("remaining", s, q, &run.steps, Some(i), msg));
    for (i, st) in run.steps.iter().enumerate() {
        let (t, r) = (st.req.t_ms, st.outcome.remaining);
        if r > cap {
            return fail(i, format!("remaining {r} above the capacity {cap}"));
        }
        let state = &run.after[i];
        let single = probe(s, q, state, t, 1).allowed;
        if single != (r >= 1) {
            return fail(
                i,
                format!(
                    "remaining {r}, but a cost-1 request right after is {}",
                    if single { "admitted" } else { "denied" }
                ),
            );
        }
        if r >= 1 && !probe(s, q, state, t, r).allowed {
            return fail(i, format!("remaining {r}, but a cost-{r} request right after is denied"));
        }
        if r < cap && probe(s, q, state, t, r + 1).allowed {
            return fail(i, format!("remaining {r}, but a cost-{} request right after is admitted", r + 1));
        }
    }
    Ok(())
}

/// Clock stepping back, per request and for one clock. Let R be the largest reading so far.
///
/// 1. *Per request.* A request at a reading behind R is admitted only if the same request,
///    from the same state, would be admitted at R: stepping back never makes a request
///    admissible. The window algorithms key their counters by window index, so a step
///    back into an *earlier* window counts that window afresh (up to `limit` more per
///    crossing, by design); for them this is checked within R's window.
/// 2. *One clock, stepped back and running on* (an NTP step; buckets and sliding log): the
///    true time elapsed is the clock's forward movement only, and the promise's safety
///    bound holds on that true timeline.
pub fn check_clock_back(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let windows = is_window(s.promise);
    let w = q.period_ms();
    let mut max: Option<u64> = None;
    for (i, st) in run.steps.iter().enumerate() {
        let (t, c) = (st.req.t_ms, st.req.cost);
        if let Some(r) = max.filter(|&r| t < r) {
            let comparable = !windows || t / w == r / w;
            if comparable && c > 0 && st.outcome.allowed && !probe(s, q, &run.before(i), r, c).allowed {
                return Err(Violation::new(
                    "clock-back",
                    s,
                    q,
                    &run.steps,
                    Some(i),
                    format!(
                        "request #{i} admitted at t={} behind the clock's largest reading t={}, where it would be denied",
                        rel(t, t0(&run.steps)),
                        rel(r, t0(&run.steps))
                    ),
                ));
            }
        }
        max = Some(max.map_or(t, |m| m.max(t)));
    }
    if !windows {
        let truth = true_timeline(&case.reqs);
        let on_truth: Vec<Point> = points(&run).into_iter().map(|(i, _, c)| (i, truth[i], c)).collect();
        if let Some((at, msg)) = bound_breach(s.promise, q, &on_truth, truth.first().copied().unwrap_or(0)) {
            return Err(Violation::new(
                "clock-back",
                s,
                q,
                &run.steps,
                Some(at),
                format!("on the true timeline of one clock that stepped back and ran on (forward steps only): {msg}"),
            ));
        }
    }
    Ok(())
}

/// Lagging readings (instances whose clocks are behind, the client-time case): the true
/// time is the largest reading that has changed the stored state so far, and the
/// promise's safety bound holds on that timeline, the admissions of lagging requests
/// counted at the true time they happened.
///
/// The token bucket and GCRA hold `B + r x (d + largest lag)`: their stored time only moves
/// forward (`ts = max`, `tat = max(tat, now)`), so a lagging reading can neither refill nor
/// recede while the state lives; but a peek writes nothing, and a key Redis expired is
/// re-created at the lagging reading, so time already seen can be refilled once more, up to
/// the lag. A peek counts as shown only when it dropped an expired key. The sliding log does *not* keep this: it scores a lagging
/// admission at the lagging reading, so the entry leaves the window up to the lag too early.
pub fn check_clock_lag(s: &Subject, case: &Case) -> Result<(), Violation> {
    let q = &case.quota;
    let run = Run::new(s, q, &case.reqs);
    let mut shown: Option<u64> = None;
    let mut truth = Vec::with_capacity(run.steps.len());
    for (i, st) in run.steps.iter().enumerate() {
        // A reading is shown when it changed the stored state: every request that costs
        // something, and a peek only when it dropped a key Redis had expired.
        if st.req.cost > 0 || run.after[i] != run.before(i) {
            shown = Some(shown.map_or(st.req.t_ms, |m| m.max(st.req.t_ms)));
        }
        truth.push(shown.unwrap_or(st.req.t_ms));
    }
    let on_truth: Vec<Point> = points(&run).into_iter().map(|(i, _, c)| (i, truth[i], c)).collect();
    let t0 = truth.first().copied().unwrap_or(0);
    let breach = if s.promise.is_bucket() {
        // A lagging reading re-creates an expired bucket at its own time, and a read-only
        // peek records nothing: either way a lagging client can be refilled for up to the
        // lag again. The promise under lag is B + r x (d + largest lag), no more.
        let lag = run.steps.iter().zip(&truth).map(|(st, &t)| t.saturating_sub(st.req.t_ms)).max().unwrap_or(0);
        let (unit, gain) = (u128::from(q.period_ms()), u128::from(q.limit()));
        let cap = u128::from(q.burst()) * unit + gain * u128::from(lag);
        reference::bucket_breach(&on_truth, unit, gain, cap).map(|(units, a, b, at)| {
            let bound = format!("burst {} + {}/{} ms x (d + lag {lag} ms)", q.burst(), q.limit(), q.period_ms());
            (
                at,
                format!("{units} units admitted in [{}, {}] (d = {} ms), above {bound}", rel(a, t0), rel(b, t0), b - a),
            )
        })
    } else {
        bound_breach(s.promise, q, &on_truth, t0)
    };
    match breach {
        Some((at, msg)) => Err(Violation::new(
            "clock-lag",
            s,
            q,
            &run.steps,
            Some(at),
            format!("with each request at the largest reading that changed the state so far: {msg}"),
        )),
        None => Ok(()),
    }
}

fn is_window(a: Algorithm) -> bool {
    a.is_windowed()
}
