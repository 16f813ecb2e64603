//! [`ConcurrencyLimiter`]: at most `limit` requests in flight per key, where a rate limit counts
//! requests over time. Each request holds a [`Permit`] while its work runs; the permit goes back
//! when the work ends, however it ends:
//!
//! - explicitly, [`Permit::release`], which says whether the permit was still held;
//! - when the permit is dropped (the handler returned, panicked, or its future was cancelled):
//!   released in the background on the current Tokio runtime, or at once in process;
//! - when an acquire's own future is dropped mid-call, after Redis may have given the permit
//!   but before the answer arrived: the permit it may hold is released the same way;
//! - and in any case when its lease ends, on the store's clock: a holder that died (a crashed
//!   instance, a release lost in flight) keeps its permit for at most one lease. A request whose
//!   work outlasts the lease renews it ([`Permit::renew`]).
//!
//! Each permit is held under a token the library makes (random per limiter, a counter per
//! acquire), never one a client could name, so no client can release or renew another's permit,
//! and a retried acquire or a second release cannot take the count past its bounds.
//!
//! The promise: at any instant at most `limit` permits of a key are held, except permits of
//! holders that died, each for at most its lease. A Redis restart without its data forgets
//! the holders: it may admit one more `limit`. When Redis cannot be asked, an acquire is answered
//! by the failure policy: fail-open admits it and holds nothing (the count is not enforced
//! while Redis is away); fail-closed refuses it; a local budget of `limit` lends one of this
//! instance's own `limit` permits of the key, held in process with the same lease (its period is
//! not used). Every such answer says so ([`Decision::source`], [`Decision::degraded`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::algo::concurrency::{PermitOp, MAX_LEASE_MS};
use crate::breaker::BreakerState;
use crate::charge::Claim;
use crate::decision::{Decision, Degraded, Source};
use crate::error::{ConfigError, Error};
use crate::gate::Gate;
use crate::options::{store_setters, StoreOptions};

mod ticket;
pub use ticket::PermitTicket;
use ticket::TicketSource;

/// Builds a [`ConcurrencyLimiter`]; nothing is checked until
/// [`ConcurrencyLimiterBuilder::build`], which names the first field at fault.
#[must_use = "a builder does nothing until it is built"]
pub struct ConcurrencyLimiterBuilder {
    limit: u64,
    lease: Duration,
    store: StoreOptions,
}

impl ConcurrencyLimiterBuilder {
    store_setters!();

    /// Names the limiter's state in Redis (letters, digits, `.`, `_`, `-`; at most 64): its
    /// key becomes `prefix:{key}:NAME:permits` instead of carrying its limit
    /// (`prefix:{key}:c=10:permits`). Limiters of one prefix count the same holders exactly when
    /// they have the same name, so a name is how instances keep counting across a change of
    /// limit.
    pub fn name(mut self, name: &str) -> Self {
        self.store.name = Some(name.to_owned());
        self
    }

    /// Validates everything and builds the limiter.
    pub fn build(self) -> Result<ConcurrencyLimiter, ConfigError> {
        if self.limit == 0 {
            return Err(ConfigError::new("limit", "must be at least 1 permit, got 0".into()));
        }
        let lease_ms = crate::duration::whole_ms(self.lease);
        if !(1..=MAX_LEASE_MS).contains(&lease_ms) {
            return Err(ConfigError::new(
                "lease",
                format!("must be from 1 ms to {MAX_LEASE_MS} ms (a year), got {lease_ms} ms"),
            ));
        }
        let keys = self.store.validate()?;
        let state = self.store.name.clone().unwrap_or_else(|| crate::scripts::permits_state(self.limit));
        let (time_source, policy) = (self.store.time_source, self.store.policy);
        let gate = self.store.gate(keys, &state);
        Ok(ConcurrencyLimiter {
            inner: Arc::new(Core {
                gate,
                limit: self.limit,
                lease_ms,
                time_source,
                policy,
                counter: crate::metrics::DecisionCounter::new(&state),
                state,
                holders: Holders::new(),
            }),
        })
    }
}

/// What every clone of a limiter shares.
struct Core {
    gate: Gate,
    limit: u64,
    lease_ms: u64,
    time_source: crate::TimeSource,
    policy: crate::FailurePolicy,
    /// Its name, or its limit: its keys and its metrics label.
    state: String,
    counter: crate::metrics::DecisionCounter,
    holders: Holders,
}

impl Core {
    fn claim<'a>(&'a self, key: &'a str) -> Claim<'a> {
        Claim {
            name: self.state.as_str().into(),
            tag: key.into(),
            limit: self.limit,
            lease_ms: self.lease_ms,
            time_source: self.time_source,
            policy: self.policy,
        }
    }

    /// Runs `op` for `holder` on `key`'s permits where a permit from `source` is held: the
    /// store's (Redis or in process), or the local budget's; a fail-open permit is held nowhere
    /// (None).
    async fn on_holder(&self, key: &str, holder: &str, source: Source, op: PermitOp) -> Result<Option<bool>, Error> {
        let claim = self.claim(key);
        match source {
            Source::Store => Ok(Some(self.gate.permit(&claim, op, holder).await?.allowed)),
            Source::LocalBudget => {
                let now = self.gate.clock().now_ms();
                Ok(Some(self.gate.budget_permit(&claim, op, holder, now).allowed))
            }
            _ => Ok(None),
        }
    }
}

/// An in-flight limit per key, shared by every instance through Redis (or kept in process). See
/// the module docs; cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use redis_ratelimit::{Acquired, ConcurrencyLimiter};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // At most 2 requests of one client at once; a permit not released is reclaimed after 30 s.
/// let limiter = ConcurrencyLimiter::builder(2, Duration::from_secs(30)).build()?;
/// let first = limiter.acquire("client:7").await?;
/// let second = limiter.acquire("client:7").await?;
/// match limiter.acquire("client:7").await? {
///     Acquired::Held(_) => unreachable!("two are in flight"),
///     Acquired::Full(refused) => assert_eq!(refused.remaining, 0), // 429
/// }
/// drop(first); // the work ended: its permit goes back
/// let Acquired::Held(third) = limiter.acquire("client:7").await? else { unreachable!() };
/// assert!(third.release().await?);
/// # drop(second);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimiter {
    inner: Arc<Core>,
}

impl std::fmt::Debug for ConcurrencyLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrencyLimiter")
            .field("state", &self.inner.state)
            .field("limit", &self.inner.limit)
            .field("lease_ms", &self.inner.lease_ms)
            .field("time_source", &self.inner.time_source)
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl ConcurrencyLimiter {
    /// The longest lease a limiter takes (366 days).
    pub const MAX_LEASE: Duration = Duration::from_millis(MAX_LEASE_MS);

    /// Starts building a limiter of at most `limit` permits held at once per key, each reclaimed
    /// `lease` after it was taken or last renewed unless released before. Without a store it
    /// runs in process.
    pub fn builder(limit: u64, lease: Duration) -> ConcurrencyLimiterBuilder {
        ConcurrencyLimiterBuilder { limit, lease, store: StoreOptions::default() }
    }

    /// The most permits held at once per key.
    pub fn limit(&self) -> u64 {
        self.inner.limit
    }

    /// How long a permit is held without a renewal.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.inner.lease_ms)
    }

    /// What the limiter's Redis keys carry after the user key, `prefix:{key}:STATE:permits`:
    /// its name, or its limit (`c=10`). Its metrics are labelled by it.
    pub fn state_name(&self) -> &str {
        &self.inner.state
    }

    /// A snapshot of the circuit breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.gate.breaker_state()
    }

    /// Asks for one of `key`'s permits: [`Acquired::Held`] with the permit, to hold while the
    /// work runs, or [`Acquired::Full`] with the decision to answer (429; its `retry_after` is
    /// the longest the wait can be, when the earliest lease ends, since a release frees a permit
    /// sooner). `Err` is for a bad key or a Redis reply the caller must hear about
    /// ([`Error::kind`]). Dropping this future mid-call releases whatever permit it may have
    /// been given.
    pub async fn acquire(&self, key: &str) -> Result<Acquired, Error> {
        let inner = &self.inner;
        inner.gate.keys().check(key)?;
        let holder = inner.holders.next();
        // Until the answer is read, a permit may be held under `holder` that nobody knows of:
        // should this future be dropped, the guard gives it back.
        let mut pending = Permit {
            limiter: self.inner.clone(),
            key: key.to_owned(),
            holder,
            decision: Decision::from_store(NOTHING_YET, inner.limit, 0),
            held: true,
        };
        let decision = inner.gate.permit(&inner.claim(key), PermitOp::Acquire, &pending.holder).await;
        let decision = match decision {
            Ok(d) => d,
            // Redis answered with an error: nothing was taken.
            Err(e) => {
                pending.held = false;
                return Err(e);
            }
        };
        inner.counter.count(&decision, crate::metrics::DEFAULT_NEAR_LIMIT_RATIO);
        if matches!(decision.degraded, Some(Degraded::Timeout | Degraded::Unavailable)) {
            // A call that timed out or lost its connection may have reached Redis and taken a
            // permit there that no one holds: given back where Redis hears it, else by its lease.
            release_in_background(self.inner.clone(), key.to_owned(), pending.holder.clone());
        }
        pending.decision = decision;
        if !decision.allowed {
            pending.held = false;
            return Ok(Acquired::Full(decision));
        }
        if pending.held_somewhere() {
            inner.counter.permit_held(true);
        }
        Ok(Acquired::Held(pending))
    }

    /// Releases the permit a [`PermitTicket`] stands for: whether it was still held (`false`
    /// once its lease had ended, for a ticket already released, one from another limiter, or a
    /// fail-open permit, held nowhere). A permit lent by a local budget is released only on the
    /// instance that lent it; elsewhere its lease reclaims it. With Redis unreachable it is
    /// [`Error::Unavailable`], and the lease reclaims the permit.
    pub async fn release_ticket(&self, ticket: &PermitTicket) -> Result<bool, Error> {
        self.on_ticket(ticket, PermitOp::Release).await
    }

    /// Renews the permit a [`PermitTicket`] stands for, as [`Permit::renew`] does.
    pub async fn renew_ticket(&self, ticket: &PermitTicket) -> Result<bool, Error> {
        self.on_ticket(ticket, PermitOp::Renew).await
    }

    async fn on_ticket(&self, ticket: &PermitTicket, op: PermitOp) -> Result<bool, Error> {
        self.inner.gate.keys().check(&ticket.key)?;
        let source = match ticket.source {
            TicketSource::Store => Source::Store,
            TicketSource::LocalBudget => Source::LocalBudget,
            TicketSource::Nowhere => return Ok(op == PermitOp::Renew),
        };
        Ok(self.inner.on_holder(&ticket.key, &ticket.holder, source, op).await?.unwrap_or(false))
    }

    /// What an acquire on `key` would be answered now, without taking anything: for showing a
    /// client how many of its requests may start. No failure policy can stand in for the
    /// store's reading: with Redis unreachable it is [`Error::Unavailable`].
    pub async fn state(&self, key: &str) -> Result<Decision, Error> {
        let inner = &self.inner;
        inner.gate.keys().check(key)?;
        inner.gate.permit(&inner.claim(key), PermitOp::Peek, "").await
    }
}

/// What an acquire was answered.
#[must_use = "a refused acquire must be answered (429), and a held permit held while the work runs"]
#[derive(Debug)]
pub enum Acquired {
    /// A permit is held: do the work, then release it or drop it.
    Held(Permit),
    /// Every permit is held: answer the decision (429 with its Retry-After).
    Full(Decision),
}

impl Acquired {
    /// The decision, held or not.
    pub fn decision(&self) -> &Decision {
        match self {
            Acquired::Held(permit) => &permit.decision,
            Acquired::Full(decision) => decision,
        }
    }
}

/// One of a key's permits, held until it is released, dropped, or its lease ends. See the
/// module docs.
#[must_use = "a permit dropped at once releases at once: hold it while the work runs"]
pub struct Permit {
    limiter: Arc<Core>,
    key: String,
    /// The token it is held under: the library's, never shown to a client.
    holder: String,
    decision: Decision,
    /// Not yet released.
    held: bool,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out: it is what would let a reader release the permit.
        f.debug_struct("Permit")
            .field("key", &self.key)
            .field("decision", &self.decision)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// The acquire's decision: who gave the permit ([`Decision::source`]: a permit fail-open
    /// gave is held nowhere), how many are left, when the last lease ends.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The key it was acquired on.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Moves the end of its lease to the lease from now, for work that outlasts it: `false`
    /// when the lease had already ended (the permit was reclaimed and may be someone else's:
    /// the work should stop). A fail-open permit, held nowhere, renews as `true`.
    pub async fn renew(&mut self) -> Result<bool, Error> {
        let renewed = self.limiter.on_holder(&self.key, &self.holder, self.decision.source, PermitOp::Renew).await?;
        Ok(renewed.unwrap_or(true))
    }

    /// Gives the permit back now: whether it was still held (`false` once its lease had ended,
    /// or for a fail-open permit, held nowhere). With Redis unreachable it is
    /// [`Error::Unavailable`], and the lease reclaims the permit.
    pub async fn release(mut self) -> Result<bool, Error> {
        let released = self.limiter.on_holder(&self.key, &self.holder, self.decision.source, PermitOp::Release).await;
        // Answered, or not to be answered: nothing for the drop to send again. (Should this
        // future be dropped mid-call, `self` is still held, and the drop sends the release.)
        self.let_go();
        Ok(released?.unwrap_or(false))
    }

    /// Hands the permit over as a [`PermitTicket`], for work that ends somewhere else: another
    /// request, another process, a proxy's call at the end of a stream (the rate limit
    /// service's in-flight limits). Nothing releases it on drop any more; whoever holds the
    /// ticket releases it with [`ConcurrencyLimiter::release_ticket`], on any instance of the
    /// same limiter (a permit lent by a local budget only on this one), or its lease reclaims it.
    pub fn into_ticket(mut self) -> PermitTicket {
        self.let_go();
        let source = match self.decision.source {
            Source::Store => TicketSource::Store,
            Source::LocalBudget => TicketSource::LocalBudget,
            _ => TicketSource::Nowhere,
        };
        PermitTicket { source, holder: std::mem::take(&mut self.holder), key: std::mem::take(&mut self.key) }
    }

    /// Whether the acquire gave it from a store or a local budget: a fail-open permit (and an
    /// acquire's guard before its answer) is held nowhere.
    fn held_somewhere(&self) -> bool {
        self.decision.allowed && matches!(self.decision.source, Source::Store | Source::LocalBudget)
    }

    /// Marks it released: whether it was still held.
    fn let_go(&mut self) -> bool {
        let was = std::mem::replace(&mut self.held, false);
        if was && self.held_somewhere() {
            self.limiter.counter.permit_held(false);
        }
        was
    }
}

impl Drop for Permit {
    /// Releases the permit if it is still held: at once where it is kept in process, else in a
    /// task on the current Tokio runtime. Outside one (or should the release not reach Redis)
    /// the lease reclaims it.
    fn drop(&mut self) {
        if !self.let_go() {
            return;
        }
        let (inner, source) = (&self.limiter, self.decision.source);
        let now = inner.gate.clock().now_ms();
        let claim = inner.claim(&self.key);
        match source {
            Source::LocalBudget => {
                inner.gate.budget_permit(&claim, PermitOp::Release, &self.holder, now);
            }
            Source::Store => {
                if inner.gate.permit_in_process(&claim, PermitOp::Release, &self.holder, now).is_some() {
                    return;
                }
                release_in_background(inner.clone(), std::mem::take(&mut self.key), std::mem::take(&mut self.holder));
            }
            _ => {}
        }
    }
}

/// Releases `holder`'s permit of `key` in the store, in a task on the current Tokio runtime;
/// outside one, or should the release not reach Redis, the lease reclaims it (the breaker's
/// events say why Redis was not reached).
fn release_in_background(inner: Arc<Core>, key: String, holder: String) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        let _ = inner.gate.permit(&inner.claim(&key), PermitOp::Release, &holder).await;
    });
}

/// The decision an acquire's guard starts with, before the store answers.
const NOTHING_YET: crate::algo::Outcome =
    crate::algo::Outcome { allowed: false, remaining: 0, retry_after_ms: 0, reset_after_ms: 0 };

/// Makes the tokens permits are held under: a random 128-bit prefix per limiter and a counter,
/// so no two acquires anywhere share one and no client can guess one.
struct Holders {
    prefix: u128,
    next: AtomicU64,
}

impl Holders {
    fn new() -> Self {
        use std::hash::{BuildHasher, RandomState};
        // Each `RandomState` is keyed from the operating system's randomness.
        let half = || u128::from(RandomState::new().hash_one(0_u8));
        Holders { prefix: half() << 64 | half(), next: AtomicU64::new(0) }
    }

    fn next(&self) -> String {
        format!("{:032x}.{:x}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed))
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::{ErrorKind, ManualClock};

    fn in_process(limit: u64, lease_ms: u64) -> (ConcurrencyLimiter, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_000));
        let limiter = ConcurrencyLimiter::builder(limit, Duration::from_millis(lease_ms))
            .clock(clock.clone())
            .build()
            .expect("valid");
        (limiter, clock)
    }

    async fn held(limiter: &ConcurrencyLimiter, key: &str) -> Permit {
        match limiter.acquire(key).await.expect("decides") {
            Acquired::Held(permit) => permit,
            Acquired::Full(d) => panic!("refused: {d:?}"),
        }
    }

    async fn refused(limiter: &ConcurrencyLimiter, key: &str) -> Decision {
        match limiter.acquire(key).await.expect("decides") {
            Acquired::Held(permit) => panic!("held: {:?}", permit.decision()),
            Acquired::Full(d) => d,
        }
    }

    #[tokio::test]
    async fn at_most_the_limit_are_held_and_each_way_of_ending_gives_one_back() {
        let (limiter, clock) = in_process(2, 1_000);
        let a = held(&limiter, "k").await;
        let b = held(&limiter, "k").await;
        assert_eq!((a.decision().remaining, b.decision().remaining, b.decision().capacity), (1, 0, 2));
        // Full: the wait is the earliest lease's end at most.
        clock.advance(100);
        let full = refused(&limiter, "k").await;
        assert_eq!((full.remaining, full.retry_after), (0, Duration::from_millis(900)));
        // Another key has its own permits.
        let other = held(&limiter, "other").await;
        // Released explicitly, then dropped: each frees one.
        assert!(a.release().await.expect("released"));
        let c = held(&limiter, "k").await;
        drop(b);
        let d = held(&limiter, "k").await;
        assert_eq!(refused(&limiter, "k").await.remaining, 0);
        assert!(!limiter.state("k").await.expect("reads").allowed);
        drop((c, d, other));
        assert_eq!(limiter.state("k").await.expect("reads").remaining, 2);
    }

    #[tokio::test]
    async fn a_holder_that_never_ends_keeps_its_permit_one_lease_and_then_learns_it_lost_it() {
        let (limiter, clock) = in_process(1, 500);
        let mut stuck = held(&limiter, "k").await;
        clock.advance(499);
        assert!(stuck.renew().await.expect("renews"), "renewed within its lease");
        clock.advance(499);
        assert_eq!(refused(&limiter, "k").await.retry_after, Duration::from_millis(1));
        clock.advance(1);
        // The lease ended at 1499 + 500: reclaimed on the store's clock.
        let next = held(&limiter, "k").await;
        assert!(!stuck.renew().await.expect("answers"), "the lease had ended: the work should stop");
        assert!(!stuck.release().await.expect("answers"), "nothing left to release");
        // Its late release freed nothing of the new holder's.
        assert_eq!(refused(&limiter, "k").await.remaining, 0);
        drop(next);
        held(&limiter, "k").await.release().await.expect("released");
    }

    #[tokio::test]
    async fn every_acquire_holds_its_own_token_and_limiters_never_share_one() {
        let (one, _) = in_process(3, 1_000);
        let (two, _) = in_process(3, 1_000);
        let tokens: std::collections::BTreeSet<String> =
            (0..100).flat_map(|_| [one.inner.holders.next(), two.inner.holders.next()]).collect();
        assert_eq!(tokens.len(), 200);
        assert_ne!(one.inner.holders.prefix, two.inner.holders.prefix);
        // And a permit's token stays out of what it prints.
        let permit = held(&one, "k").await;
        assert!(!format!("{permit:?}").contains(&permit.holder), "{permit:?}");
    }

    #[tokio::test]
    async fn a_ticket_stands_for_its_permit_until_released_once() {
        let (limiter, _) = in_process(1, 1_000);
        let ticket = held(&limiter, "a:{b} c").await.into_ticket();
        let text = ticket.encode();
        assert_eq!(refused(&limiter, "a:{b} c").await.remaining, 0, "a ticket still holds its permit");
        let read = PermitTicket::decode(&text).expect("its own text");
        assert_eq!((&read, read.key()), (&ticket, "a:{b} c"));
        assert_eq!(format!("{read:?}"), "PermitTicket(..)");
        assert!(limiter.release_ticket(&read).await.expect("released"));
        assert!(!limiter.release_ticket(&read).await.expect("answers"), "once");
        assert!(limiter.release_ticket(&read).await.is_ok_and(|r| !r));
        held(&limiter, "a:{b} c").await.release().await.expect("free again");
        // A fail-open permit is held nowhere: its ticket releases nothing and renews as true.
        let open = PermitTicket { source: TicketSource::Nowhere, ..ticket.clone() };
        let open = PermitTicket::decode(&open.encode()).expect("reads");
        assert!(!limiter.release_ticket(&open).await.expect("answers"));
        assert!(limiter.renew_ticket(&open).await.expect("answers"));
        // The key is checked as an acquire's is.
        let empty = PermitTicket::decode(&format!("p1:s:{}.1:", "a".repeat(32))).expect("well formed");
        assert_eq!(limiter.release_ticket(&empty).await.expect_err("empty key").kind(), ErrorKind::Request);
    }

    #[tokio::test]
    async fn bad_settings_and_bad_keys_are_named() {
        let build = |limit, lease_ms| ConcurrencyLimiter::builder(limit, Duration::from_millis(lease_ms)).build();
        assert_eq!(build(0, 1_000).expect_err("no permits").field(), "limit");
        assert_eq!(build(1, 0).expect_err("no lease").field(), "lease");
        assert_eq!(build(1, MAX_LEASE_MS + 1).expect_err("too long").field(), "lease");
        assert!(build(1, MAX_LEASE_MS).is_ok());
        let named = |name: &str| ConcurrencyLimiter::builder(1, Duration::from_secs(1)).name(name).build();
        assert_eq!(named("a b").expect_err("a space").field(), "name");
        assert_eq!(named("jobs").expect("valid").state_name(), "jobs");
        assert_eq!(build(7, 1_000).expect("valid").state_name(), "c=7");
        let (limiter, _) = in_process(1, 1_000);
        assert_eq!(limiter.acquire("").await.expect_err("empty").kind(), ErrorKind::Request);
        assert_eq!(limiter.state(&"x".repeat(513)).await.expect_err("long").kind(), ErrorKind::Request);
    }
}
