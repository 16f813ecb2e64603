//! Leases at run time: per key, the lease this instance holds (units, and the window of its own
//! clock in which it may spend them), when it may ask Redis again after a denial, and its own
//! recent demand, which sizes the next lease. Why the instances together keep the algorithm's bound is in
//! `algo::lease`; what leasing costs is in [`super`].
//!
//! A lease is valid on Redis's clock from its start `s` to `s + lifetime`. The instance only
//! knows that Redis decided between sending the call and reading the reply, so on its own clock
//! the lease starts `start` after the reply arrived and ends `start + lifetime` after the call
//! was sent, less the clock tolerance: inside Redis's window, whichever moment Redis decided.
//!
//! One call per key at a time: checks of a key wait while its lease call is in flight, then
//! spend from the new lease. The unspent units of the previous lease go back with the next
//! call, whatever becomes of it (a call that timed out may still have run, so its units are
//! never spent again).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::wire::LeaseRequest;
use super::Leases;
use crate::algo::lease::{LeaseArgs, LeaseOutcome};
use crate::charge::Charge;
use crate::clock::Clock;
use crate::decision::{Decision, Source};
use crate::error::Error;
use crate::health::{Guarded, Health};
use crate::quota::{Algorithm, Quota};
use crate::store::RedisStore;
use crate::table::Table;

/// What the leases of one limiter did, per user key: for the harness, which holds the instances
/// to the leases' cost (units leased and never spent) and survives a crashed instance.
#[derive(Debug, Default)]
pub struct LeaseLedger {
    keys: std::sync::Mutex<BTreeMap<String, LedgerEntry>>,
}

/// One key's lease accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Lease calls sent.
    pub calls: u64,
    /// Units granted by Redis.
    pub leased: u64,
    /// Units admitted from leases.
    pub spent: u64,
    /// Units given back and credited by Redis.
    pub credited: u64,
    /// Units asked for by lease calls whose reply never came (a timeout, a lost connection, an
    /// instance that crashed mid-call). Redis may have run such a call and granted up to what it
    /// asked for (a grant is never more), and nobody will spend those units.
    pub in_doubt: u64,
}

impl LedgerEntry {
    /// Units leased and neither spent nor credited back, counting every unanswered call as if
    /// Redis granted all it asked for: at most what leasing cost this key so far.
    #[cfg(feature = "harness")]
    pub fn unspent(&self) -> u64 {
        (self.leased + self.in_doubt).saturating_sub(self.spent + self.credited)
    }
}

impl LeaseLedger {
    /// An empty ledger.
    #[cfg(feature = "harness")]
    pub fn new() -> Self {
        LeaseLedger::default()
    }

    /// Every key's accounting, by user key.
    #[cfg(feature = "harness")]
    pub fn entries(&self) -> BTreeMap<String, LedgerEntry> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn note(&self, key: &str, f: impl FnOnce(&mut LedgerEntry)) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        match keys.get_mut(key) {
            Some(e) => f(e),
            None => f(keys.entry(key.to_owned()).or_default()),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Held {
    units: u64,
    start_ms: u64,
    end_ms: u64,
    written: (u64, u64),
}

/// Units requested in the current window of one lifetime and in the one before.
#[derive(Debug, Default, Clone, Copy)]
struct Demand {
    window_start: u64,
    current: u64,
    previous: u64,
}

impl Demand {
    fn add(&mut self, now: u64, cost: u64, lifetime: u64) {
        if now >= self.window_start + lifetime {
            self.previous = if now < self.window_start + 2 * lifetime { self.current } else { 0 };
            self.current = 0;
            self.window_start = now;
        }
        self.current += cost;
    }

    /// Units over half a lifetime at the rate of the last one to two lifetimes: a lease that
    /// size is usually spent well before it ends, rather than given back too late or lost.
    fn estimate(&self, now: u64, lifetime: u64) -> u64 {
        let span = lifetime + now.saturating_sub(self.window_start).min(lifetime);
        ((self.previous + self.current) * lifetime).div_ceil(2 * span.max(1))
    }
}

#[derive(Debug, Default)]
struct KeyLease {
    held: Option<Held>,
    ask_after_ms: u64,
    demand: Demand,
}

enum Step {
    Admit { left: u64, end_ms: u64 },
    Deny { retry_ms: u64 },
    Ask(LeaseArgs),
}

/// See the module docs.
pub(crate) struct LeaseBook {
    config: Leases,
    capacity: u64,
    max_units: u64,
    horizon_ms: u64,
    keys: Table<Arc<tokio::sync::Mutex<KeyLease>>>,
    ledger: Option<Arc<LeaseLedger>>,
}

impl LeaseBook {
    pub(crate) fn new(config: Leases, algorithm: Algorithm, quota: &Quota, max_keys: usize) -> Self {
        let capacity = config.capacity(algorithm, quota);
        LeaseBook {
            config,
            capacity,
            max_units: config.max_units.unwrap_or(capacity / 4).clamp(1, capacity.max(1)),
            horizon_ms: config.horizon_ms.unwrap_or(4 * config.lifetime_ms),
            keys: Table::new(max_keys),
            ledger: None,
        }
    }

    #[cfg(feature = "harness")]
    pub(crate) fn set_ledger(&mut self, ledger: Arc<LeaseLedger>) {
        self.ledger = Some(ledger);
    }

    /// Drops the lease held for `key` (its state was reset, and its units with it).
    pub(crate) fn forget(&self, key: &str) {
        let key = self.keys.key(key);
        self.keys.lock(key).remove(key);
    }

    /// The most one request may cost.
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    fn note(&self, key: &str, f: impl FnOnce(&mut LedgerEntry)) {
        if let Some(ledger) = &self.ledger {
            ledger.note(key, f);
        }
    }

    /// The key's lease. A full book gives up the lease of a key not checked lately, in O(1)
    /// amortized (`crate::table`): its units are never spent and its give-back is lost, which
    /// only admits less; if a call of that key was in flight, the key's next check leases beside
    /// it, and both leases left Redis's shared budget, so the bound holds.
    fn entry(&self, key: &str) -> Arc<tokio::sync::Mutex<KeyLease>> {
        let key = self.keys.key(key);
        let mut keys = self.keys.lock(key);
        if let Some(e) = keys.get_mut(key) {
            return e.clone();
        }
        let e = Arc::new(tokio::sync::Mutex::new(KeyLease::default()));
        keys.insert(key, e.clone());
        e
    }

    fn local(&self, k: &mut KeyLease, now: u64, cost: u64) -> Step {
        if let Some(h) = &mut k.held {
            if now <= h.end_ms && h.units >= cost {
                if now >= h.start_ms {
                    h.units -= cost;
                    return Step::Admit { left: h.units, end_ms: h.end_ms };
                }
                return Step::Deny { retry_ms: h.start_ms - now };
            }
        }
        if now < k.ask_after_ms {
            return Step::Deny { retry_ms: k.ask_after_ms - now };
        }
        let previous = k.held.take();
        Step::Ask(LeaseArgs {
            lifetime_ms: self.config.lifetime_ms,
            horizon_ms: self.horizon_ms,
            want: k.demand.estimate(now, self.config.lifetime_ms).clamp(cost, self.max_units.max(cost)),
            need: cost,
            give_back: previous.map_or(0, |h| h.units),
            written: previous.map_or((0, 0), |h| h.written),
        })
    }

    /// Takes the reply of a lease call sent at `sent` and read at `received` (this instance's
    /// clock), and decides the request of `cost` that made it.
    fn apply(&self, k: &mut KeyLease, o: &LeaseOutcome, sent: u64, received: u64, cost: u64) -> Step {
        if o.granted == 0 {
            // Asking again earlier than Redis said can only cost a round trip, never a decision.
            k.ask_after_ms = if o.start_us > 0 { sent + o.start_us / 1000 } else { received + o.retry_after_ms };
            return Step::Deny { retry_ms: o.retry_after_ms.max(1) };
        }
        let lifetime_us = self.config.lifetime_ms * 1000;
        let shave = (self.config.lifetime_ms * self.config.clock_tolerance_ppm).div_ceil(1_000_000);
        let start_ms = received + o.start_us.div_ceil(1000);
        let end_ms = (sent + (o.start_us + lifetime_us) / 1000).saturating_sub(shave);
        k.ask_after_ms = 0;
        if end_ms < start_ms {
            // The call took longer than the lease lives: nothing of it can be spent safely.
            return Step::Deny { retry_ms: 1 };
        }
        let mut held = Held { units: o.granted, start_ms, end_ms, written: o.written };
        let step = if received >= start_ms && held.units >= cost {
            held.units -= cost;
            Step::Admit { left: held.units, end_ms }
        } else {
            Step::Deny { retry_ms: start_ms.saturating_sub(received).max(1) }
        };
        k.held = Some(held);
        step
    }

    fn decision(&self, step: &Step, now: u64) -> Decision {
        match *step {
            Step::Admit { left, end_ms } => Decision {
                allowed: true,
                capacity: self.capacity,
                remaining: left,
                retry_after: Duration::ZERO,
                reset_after: Duration::from_millis(end_ms.saturating_sub(now)),
                source: Source::Lease,
                degraded: None,
                decided_at_ms: now,
            },
            // A call still to make is not a decision: callers make the call first.
            Step::Ask(_) => self.decision(&Step::Deny { retry_ms: 1 }, now),
            Step::Deny { retry_ms } => Decision {
                allowed: false,
                capacity: self.capacity,
                remaining: 0,
                retry_after: Duration::from_millis(retry_ms.max(1)),
                reset_after: Duration::from_millis(retry_ms.max(1)),
                source: Source::Lease,
                degraded: None,
                decided_at_ms: now,
            },
        }
    }

    /// Decides one request of `cost` (at least 1) on `key` under leases, for a limiter on
    /// `clock` and `health` whose charge for the key (its algorithm, quota, time source) is
    /// `charge`, and its state's stem `stem` (made only when a call goes out). When Redis
    /// cannot be asked the limiter's failure policy answers: that is the caller's, so it gets
    /// the outage back.
    #[allow(clippy::too_many_arguments)] // what the limiter holds, then what the request asks
    pub(crate) async fn check(
        &self,
        clock: &dyn Clock,
        health: &Health,
        charge: &Charge<'_>,
        stem: impl FnOnce() -> String,
        redis: &RedisStore,
        key: &str,
        cost: u64,
        now: u64,
    ) -> Result<Guarded<Decision>, Error> {
        let entry = self.entry(key);
        let mut k = entry.lock().await;
        // Another check of this key may have held the lock through a whole call.
        let now = clock.now_ms().max(now);
        k.demand.add(now, cost, self.config.lifetime_ms);
        let args = match self.local(&mut k, now, cost) {
            Step::Ask(args) => args,
            step => {
                if let Step::Admit { .. } = step {
                    self.note(key, |e| e.spent += cost);
                }
                return Ok(Guarded::Answered(self.decision(&step, now)));
            }
        };
        let stem = stem();
        let request = LeaseRequest {
            algorithm: charge.algorithm,
            quota: &charge.quota,
            stem: &stem,
            now_ms: charge.client_now(now),
            args,
        };
        let want = request.args.want;
        let call = || {
            self.note(key, |e| {
                e.calls += 1;
                e.in_doubt += want;
            });
            redis.lease(request)
        };
        Ok(match health.guard(clock, now, redis, call).await? {
            Guarded::Answered((outcome, _decided_at_ms)) => {
                let received = clock.now_ms().max(now);
                self.note(key, |e| {
                    e.in_doubt -= want;
                    e.leased += outcome.granted;
                    e.credited += outcome.credited;
                });
                let step = self.apply(&mut k, &outcome, now, received, cost);
                if let Step::Admit { .. } = step {
                    self.note(key, |e| e.spent += cost);
                }
                Guarded::Answered(self.decision(&step, received))
            }
            Guarded::Unavailable { at_ms, why, retry_after_ms } => Guarded::Unavailable { at_ms, why, retry_after_ms },
        })
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn book() -> LeaseBook {
        LeaseBook::new(
            Leases::default().with_clock_tolerance_ppm(0),
            Algorithm::Gcra,
            &Quota::new(100, std::time::Duration::from_secs(1)),
            10,
        )
    }

    fn granted(units: u64, start_us: u64) -> LeaseOutcome {
        LeaseOutcome { granted: units, start_us, written: (7, 0), ..LeaseOutcome::default() }
    }

    #[test]
    fn a_lease_is_spent_inside_redis_s_window_as_this_clock_sees_it() {
        let b = book();
        let mut k = KeyLease::default();
        // Sent at 1000, read at 1004, starting 2.5 ms after Redis decided.
        assert!(matches!(b.apply(&mut k, &granted(5, 2_500), 1_000, 1_004, 1), Step::Deny { retry_ms: 3 }));
        let h = k.held.expect("held");
        assert_eq!((h.start_ms, h.end_ms), (1_007, 1_102));
        assert!(matches!(b.local(&mut k, 1_006, 1), Step::Deny { retry_ms: 1 }));
        assert!(matches!(b.local(&mut k, 1_007, 2), Step::Admit { left: 3, .. }));
        assert!(matches!(b.local(&mut k, 1_102, 3), Step::Admit { left: 0, .. }));
        // Spent out: the next check asks, and gives nothing back.
        let Step::Ask(args) = b.local(&mut k, 1_102, 1) else { panic!("expected a call") };
        assert_eq!((args.give_back, args.need), (0, 1));
    }

    #[test]
    fn an_expired_lease_is_given_back_with_the_next_call_and_demand_sizes_it() {
        let b = book();
        let mut k = KeyLease::default();
        for t in 0..10 {
            k.demand.add(t * 10, 1, 100);
        }
        b.apply(&mut k, &granted(8, 0), 0, 1, 1);
        // Expired at 150: 10 units in the last lifetime and 1 now make the next lease half of 11.
        k.demand.add(150, 1, 100);
        let Step::Ask(args) = b.local(&mut k, 150, 1) else { panic!("expected a call") };
        assert_eq!((args.give_back, args.written, args.want), (7, (7, 0), 6));
        assert!(k.held.is_none(), "the units went back with the call");
    }

    #[test]
    fn a_denial_waits_until_redis_said_to_ask_again() {
        let b = book();
        let mut k = KeyLease::default();
        let denied = LeaseOutcome { start_us: 40_000, retry_after_ms: 140, ..LeaseOutcome::default() };
        assert!(matches!(b.apply(&mut k, &denied, 1_000, 1_002, 1), Step::Deny { retry_ms: 140 }));
        assert!(matches!(b.local(&mut k, 1_039, 1), Step::Deny { retry_ms: 1 }));
        assert!(matches!(b.local(&mut k, 1_040, 1), Step::Ask(_)));
    }
}
