//! What a limiter answers: a value, never an exception. A denial carries an honest
//! Retry-After; a decision made without Redis says so.

use std::time::Duration;

/// Who made a decision. Anything but [`Source::Store`] means the shared state was not
/// consulted, so the caller (and metrics) can tell a real limit from a degraded guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The shared store (Redis, or the in-process store) decided.
    Store,
    /// The store was unavailable and the policy admitted the request unchecked.
    FailOpen,
    /// The store was unavailable and the policy denied the request.
    FailClosed,
    /// The store was unavailable and this instance's local static budget decided.
    LocalBudget,
    /// This instance decided from a lease of the key's shared budget (`crate::modes::Leases`): the
    /// units left the shared budget when Redis leased them, so this is a store decision made
    /// without a round trip.
    Lease,
    /// This instance repeated Redis's recent denial of the key (`crate::modes::DenialCache`): Redis
    /// would deny it too until its Retry-After.
    DenialCache,
}

impl Source {
    /// The name used in traces and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Source::Store => "store",
            Source::FailOpen => "fail-open",
            Source::FailClosed => "fail-closed",
            Source::LocalBudget => "local-budget",
            Source::Lease => "lease",
            Source::DenialCache => "denial-cache",
        }
    }
}

/// Why the store was not consulted, when it was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Degraded {
    /// The call did not finish within the configured timeout.
    Timeout,
    /// Connecting or talking to Redis failed (refused, reset, closed, garbled stream).
    Unavailable,
    /// The circuit breaker is open: recent calls failed, so this one did not try.
    BreakerOpen,
    /// Redis, or the TLS handshake with it, refused this client: a wrong user or password, a
    /// missing ACL permission, a certificate the client does not trust. An outage like any
    /// other until the setting is fixed (the store's events say which, once per change).
    Refused,
}

/// The outcome of one rate-limit check.
///
/// ```
/// use std::time::Duration;
/// use redis_ratelimit::{Decision, Source};
/// let d = Decision::store(false, 10, 0, Duration::from_millis(1500), Duration::from_secs(60), 1_700_000_000_000);
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after_secs(), 2); // HTTP Retry-After rounds up
/// assert_eq!(d.source, Source::Store);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[must_use = "a decision says whether the request may proceed: dropped unread, every request is admitted"]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The most one request may cost here: the window's limit for the window algorithms,
    /// the bucket's burst for the bucket algorithms ([`crate::Quota::capacity`]); what a lease
    /// leaves, under leases; the local budget's limit when that answered.
    pub capacity: u64,
    /// Units of cost 1 that would still be admitted right now.
    pub remaining: u64,
    /// When denied: how long until the same request, alone, is admitted; zero when allowed.
    /// Honest, in whole milliseconds: waiting exactly this long is enough, one millisecond
    /// less is not.
    pub retry_after: Duration,
    /// How long until the key is back to its idle state (full bucket, empty window).
    pub reset_after: Duration,
    /// Who decided.
    pub source: Source,
    /// Why the store was skipped, if it was.
    pub degraded: Option<Degraded>,
    /// The clock reading the decision was made at (ms since the Unix epoch): Redis's `TIME`
    /// in server-time mode, the instance's clock otherwise and for fallback decisions.
    /// `decided_at_ms + reset_after` is when the key is at rest, on the deciding clock.
    pub decided_at_ms: u64,
}

impl Decision {
    /// A decision made by the store at `decided_at_ms`.
    pub const fn store(
        allowed: bool,
        capacity: u64,
        remaining: u64,
        retry_after: Duration,
        reset_after: Duration,
        decided_at_ms: u64,
    ) -> Self {
        Decision {
            allowed,
            capacity,
            remaining,
            retry_after,
            reset_after,
            source: Source::Store,
            degraded: None,
            decided_at_ms,
        }
    }

    /// The store's decision `o` where one request may cost at most `capacity`, made at
    /// `decided_at_ms`.
    pub(crate) const fn from_store(o: crate::algo::Outcome, capacity: u64, decided_at_ms: u64) -> Self {
        Decision::store(
            o.allowed,
            capacity,
            o.remaining,
            Duration::from_millis(o.retry_after_ms),
            Duration::from_millis(o.reset_after_ms),
            decided_at_ms,
        )
    }

    /// Retry-After in whole seconds for HTTP, rounded up so a client that obeys it is not
    /// refused again for having come back a fraction of a second early.
    pub const fn retry_after_secs(&self) -> u64 {
        crate::duration::whole_ms(self.retry_after).div_ceil(1000)
    }
}
