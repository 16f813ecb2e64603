//! Leases, the twins of `lua/lease_gcra.lua` and `lua/lease_token_bucket.lua`: one call
//! reserves up to `want` units of a key's budget for one instance, valid from a start `s` until
//! `s + lifetime`, after giving back the unspent units of that instance's previous lease.
//!
//! Both bucket algorithms admit cost `c` at time `x` exactly when a *queue end* `E` (GCRA's TAT;
//! the token bucket's deficit, read as time at `limit` units per ms) satisfies
//! `E + c * T <= x + tau`. A lease gives each of its units a slot in that queue after
//! `s + lifetime` and no later than `s + tau`: whenever in `[s, s + lifetime]` the unit is
//! spent, it holds a slot the algorithm would have given a request admitted at that very
//! moment, and no two admitted units share a slot. So the instances together keep the algorithm's own
//! bound, `B + L * d / T` in any interval `d`, however the instances spend their leases. What
//! it costs is under-admission: the slots between now and `now + lifetime` that a lease cannot
//! use when the queue is short, and units leased and never spent.
//!
//! A lease starts as soon as all the units it wants fit, if that is within the horizon, so
//! leases stay whole however busy the key is; otherwise as soon as the request's own cost fits.
//!
//! A give-back is credited only when the queue still ends where the previous lease left it, and
//! only for slots after `now + lifetime` (no lease can have used those): a late or lost
//! give-back only ever admits less.
//!
//! The sliding log cannot lease exactly: its promise is "at most L in any window of length T"
//! of admission times, and a leased unit is spent after Redis logged it, anywhere within the
//! lease, so two windows' worth could land in one. The window counters share that problem at
//! every window boundary. Only the two bucket algorithms lease.

// The twins themselves (`take`) run only in the harness: the library sends the scripts.
#[cfg(any(test, feature = "harness"))]
use super::{ceil_div, gcra::GcraState, token_bucket::BucketState, State};
use crate::quota::{Algorithm, Quota};

/// One lease call's arguments besides the quota and the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseArgs {
    /// How long a lease may be spent after it starts (ms).
    pub lifetime_ms: u64,
    /// How far ahead of now a lease may start (ms); further, nothing is reserved.
    pub horizon_ms: u64,
    /// Units asked for.
    pub want: u64,
    /// Units the lease must hold at least: the cost of the request that asks (1..=want).
    pub need: u64,
    /// Unspent units of the previous lease, given back (0 for none).
    pub give_back: u64,
    /// What the previous lease wrote ([`LeaseOutcome::written`]); ignored without a give-back.
    pub written: (u64, u64),
}

/// What a lease call answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseOutcome {
    /// Units leased; 0 when denied.
    pub granted: u64,
    /// Granted: µs from the decision until the lease starts. Denied: µs until asking again can
    /// succeed (0 when it never can under this configuration).
    pub start_us: u64,
    /// The state the lease wrote (GCRA: the TAT and 0; token bucket: units and time), to send
    /// back with a give-back.
    pub written: (u64, u64),
    /// Units of the give-back that were credited.
    pub credited: u64,
    /// Units of cost 1 the shared state still admits now.
    pub remaining: u64,
    /// Denied: ms until the request alone could be leased, if the state stays as it is.
    pub retry_after_ms: u64,
    /// Ms until the key's shared state is at rest.
    pub reset_after_ms: u64,
}

/// Whether `algorithm` can lease exactly (see the module docs).
pub const fn can_lease(algorithm: Algorithm) -> bool {
    match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra => true,
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => false,
    }
}

/// The most one request may cost under leases of `lifetime_ms`: the units that fit after the
/// slots a lease must leave unused (0 when none fit: the lifetime is too long for the burst).
pub fn capacity(algorithm: Algorithm, q: &Quota, lifetime_ms: u64) -> u64 {
    match algorithm {
        Algorithm::Gcra => {
            let t = q.gcra_interval_us();
            (q.burst() * t).saturating_sub(lifetime_ms * 1000) / t
        }
        Algorithm::TokenBucket => {
            (q.burst() * q.period_ms()).saturating_sub(lifetime_ms.saturating_mul(q.limit())) / q.period_ms()
        }
        _ => 0,
    }
}

/// Runs one lease call on `state` (None = no state yet), forgetting a state Redis would have
/// expired, as [`super::step`] does. None for an algorithm that cannot lease.
#[cfg(any(test, feature = "harness"))]
pub fn take(
    algorithm: Algorithm,
    q: &Quota,
    state: &mut Option<State>,
    now_ms: u64,
    args: LeaseArgs,
) -> Option<LeaseOutcome> {
    match algorithm {
        Algorithm::Gcra => {
            let mut own = match state.take() {
                Some(State::Gcra(s)) if !super::gcra::expired(q, &s, now_ms) => Some(s),
                _ => None,
            };
            let outcome = take_gcra(q, &mut own, now_ms * 1000, args);
            *state = own.map(State::Gcra);
            Some(outcome)
        }
        Algorithm::TokenBucket => {
            let mut own = match state.take() {
                Some(State::Bucket(s)) if !super::token_bucket::expired(q, &s, now_ms) => Some(s),
                _ => None,
            };
            let outcome = take_token_bucket(q, &mut own, now_ms, args);
            *state = own.map(State::Bucket);
            Some(outcome)
        }
        _ => None,
    }
}

/// The twin of `lua/lease_gcra.lua`, time in µs (what Redis's `TIME` gives in server time).
#[cfg(any(test, feature = "harness"))]
pub fn take_gcra(q: &Quota, state: &mut Option<GcraState>, now_us: u64, a: LeaseArgs) -> LeaseOutcome {
    let t = q.gcra_interval_us();
    let tau = q.burst() * t;
    let (lifetime, horizon) = (a.lifetime_ms * 1000, a.horizon_ms * 1000);
    let stored = state.map(|s| s.tat_us);
    let mut tat = stored.map_or(now_us, |s| s.max(now_us));
    let mut credited = 0;
    if a.give_back > 0 && stored == Some(a.written.0) && tat > now_us + lifetime {
        credited = a.give_back.min((tat - now_us - lifetime) / t);
        tat -= credited * t;
    }
    let remaining_at = |end: u64| (now_us + tau).saturating_sub(end) / t;
    let denied = |state: &mut Option<GcraState>, start_us: u64, retry_after_ms: u64| {
        if credited > 0 {
            *state = Some(GcraState { tat_us: tat });
        }
        LeaseOutcome {
            granted: 0,
            start_us,
            written: (0, 0),
            credited,
            remaining: remaining_at(tat),
            retry_after_ms,
            reset_after_ms: ceil_div(tat - now_us, 1000),
        }
    };
    let start_for = |units: u64| (tat + units * t).saturating_sub(tau).max(now_us);
    let mut start = start_for(a.need);
    if lifetime + a.want * t <= tau && start_for(a.want) - now_us <= horizon {
        start = start_for(a.want);
    }
    if start - now_us > horizon {
        return denied(state, start - now_us - horizon, ceil_div(start - now_us, 1000));
    }
    let base = tat.max(start + lifetime);
    let granted = ((start + tau).saturating_sub(base) / t).min(a.want);
    if granted < a.need {
        return denied(state, 0, 0);
    }
    let written = base + granted * t;
    *state = Some(GcraState { tat_us: written });
    LeaseOutcome {
        granted,
        start_us: start - now_us,
        written: (written, 0),
        credited,
        remaining: remaining_at(written),
        retry_after_ms: 0,
        reset_after_ms: ceil_div(written - now_us, 1000),
    }
}

/// The twin of `lua/lease_token_bucket.lua`.
#[cfg(any(test, feature = "harness"))]
pub fn take_token_bucket(q: &Quota, state: &mut Option<BucketState>, now_ms: u64, a: LeaseArgs) -> LeaseOutcome {
    let (limit, period) = (q.limit(), q.period_ms());
    let cap = q.burst() * period;
    let same = a.give_back > 0 && state.is_some_and(|s| (s.units, s.ts_ms) == a.written);
    let BucketState { units, ts_ms } = state.unwrap_or(BucketState { units: cap, ts_ms: now_ms });
    let units = units.min(cap);
    let mut deficit = if now_ms >= ts_ms {
        let elapsed = now_ms - ts_ms;
        if elapsed >= ceil_div(cap - units, limit) {
            0
        } else {
            cap - units - elapsed * limit
        }
    } else {
        (ts_ms - now_ms) * limit + cap - units
    };
    // A deficit above cap (debt) is stored as a later time holding at most cap.
    let ahead_of = |d: u64| -> Option<u64> {
        if d <= cap {
            return Some(0);
        }
        let ahead = ceil_div(d - cap, limit);
        (d >= ahead * limit).then_some(ahead)
    };
    let floor_units = a.lifetime_ms * limit;
    let mut credited = 0;
    if same && deficit > floor_units {
        let c = a.give_back.min((deficit - floor_units) / period);
        if ahead_of(deficit - c * period).is_some() {
            credited = c;
            deficit -= c * period;
        }
    }
    let remaining_of = |d: u64| cap.saturating_sub(d) / period;
    let write = |state: &mut Option<BucketState>, d: u64, at: u64| {
        *state = Some(BucketState { units: cap - d, ts_ms: at });
    };
    let denied = |state: &mut Option<BucketState>, start_us: u64, retry_after_ms: u64| {
        if credited > 0 {
            let ahead = ahead_of(deficit).unwrap_or(0);
            write(state, deficit - ahead * limit, now_ms + ahead);
        }
        LeaseOutcome {
            granted: 0,
            start_us,
            written: (0, 0),
            credited,
            remaining: remaining_of(deficit),
            retry_after_ms,
            reset_after_ms: ceil_div(deficit, limit),
        }
    };
    let wait_for = |units: u64| {
        if deficit + units * period > cap {
            ceil_div(deficit + units * period - cap, limit)
        } else {
            0
        }
    };
    let mut wait = wait_for(a.need);
    if floor_units + a.want * period <= cap && wait_for(a.want) <= a.horizon_ms {
        wait = wait_for(a.want);
    }
    if wait > a.horizon_ms {
        return denied(state, (wait - a.horizon_ms) * 1000, wait);
    }
    let at_start = deficit.saturating_sub(wait * limit).max(floor_units);
    let granted = (cap.saturating_sub(at_start) / period).min(a.want);
    if granted < a.need {
        return denied(state, 0, 0);
    }
    let written = at_start + granted * period;
    write(state, written, now_ms + wait);
    LeaseOutcome {
        granted,
        start_us: wait * 1000,
        written: (cap - written, now_ms + wait),
        credited,
        remaining: remaining_of(written + wait * limit),
        retry_after_ms: 0,
        reset_after_ms: wait + ceil_div(written, limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(want: u64, need: u64) -> LeaseArgs {
        LeaseArgs { lifetime_ms: 100, horizon_ms: 100, want, need, give_back: 0, written: (0, 0) }
    }

    #[test]
    fn gcra_leases_leave_the_lifetime_s_slots_unused_and_keep_the_burst_otherwise() {
        // 10 per second (T = 100 ms), burst 5: a 100 ms lease leaves one slot unused.
        let q = Quota::new(10, std::time::Duration::from_secs(1)).with_burst(5);
        assert_eq!(capacity(Algorithm::Gcra, &q, 100), 4);
        let mut s = None;
        let first = take_gcra(&q, &mut s, 0, args(10, 1));
        assert_eq!((first.granted, first.start_us, first.written), (4, 0, (500_000, 0)));
        // The queue now ends at 500 ms: one more unit starts when its slot is within tau.
        let second = take_gcra(&q, &mut s, 0, args(1, 1));
        assert_eq!((second.granted, second.start_us), (1, 100_000));
        // A third cannot start within the 100 ms horizon: ask again in 100 ms.
        let third = take_gcra(&q, &mut s, 0, args(1, 1));
        assert_eq!((third.granted, third.start_us, third.retry_after_ms), (0, 100_000, 200));
    }

    #[test]
    fn a_give_back_is_credited_only_at_the_queue_s_end_and_beyond_the_lifetime() {
        let q = Quota::new(10, std::time::Duration::from_secs(1)).with_burst(5);
        let mut s = None;
        let lease = take_gcra(&q, &mut s, 0, args(4, 1));
        // 3 unspent at 150 ms: the queue ends at 500 ms, slots after 250 ms can come back (2).
        let back = LeaseArgs { give_back: 3, written: lease.written, ..args(1, 1) };
        let next = take_gcra(&q, &mut s, 150_000, back);
        assert_eq!(next.credited, 2);
        // Once someone else has leased after it, a give-back of the first lease is lost.
        let mut s = None;
        let a = take_gcra(&q, &mut s, 0, args(2, 1));
        take_gcra(&q, &mut s, 0, args(1, 1));
        let late = take_gcra(&q, &mut s, 0, LeaseArgs { give_back: 2, written: a.written, ..args(1, 1) });
        assert_eq!(late.credited, 0);
    }

    #[test]
    fn token_bucket_leases_match_gcra_s_on_a_whole_millisecond_interval() {
        // 10 per second, burst 5: one token is 100 ms of refill, as GCRA's emission interval.
        let q = Quota::new(10, std::time::Duration::from_secs(1)).with_burst(5);
        assert_eq!(capacity(Algorithm::TokenBucket, &q, 100), 4);
        let (mut g, mut b) = (None, None);
        for (t, want) in [(0, 10), (0, 1), (0, 1), (50, 2), (420, 3), (2_000, 1)] {
            let x = take_gcra(&q, &mut g, t * 1000, args(want, 1));
            let y = take_token_bucket(&q, &mut b, t, args(want, 1));
            let strip = |o: LeaseOutcome| (o.granted, o.start_us, o.remaining, o.retry_after_ms, o.reset_after_ms);
            assert_eq!(strip(x), strip(y), "at {t} ms");
        }
    }

    #[test]
    fn only_the_bucket_algorithms_lease() {
        let q = Quota::new(10, std::time::Duration::from_secs(1));
        for a in Algorithm::ALL {
            assert_eq!(take(a, &q, &mut None, 0, args(1, 1)).is_some(), can_lease(a), "{a}");
        }
    }
}
