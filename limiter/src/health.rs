//! The store's health as the circuit breaker sees it, and what an operator hears about it.
//!
//! Whatever keeps Redis from answering (down, slow, partitioned, or refusing this client's
//! password or certificate) is one outage to the limiter: the breaker counts the failure, the
//! failure policies answer, and every decision says why (`Decision::degraded`). An operator
//! needs to hear about it once, not once per request: a [`StoreEvent`] goes to the hook given
//! to the builder (`on_store_event`) when the breaker opens (with the cause), when it is still
//! open but for another cause (a password fixed but a certificate still wrong), and when it
//! closes again. The cause names the server and what it said, never a password.

use std::future::Future;
use std::sync::Arc;

use crate::breaker::{Attempt, BreakerConfig, BreakerState, CircuitBreaker};
use crate::clock::Clock;
use crate::decision::Degraded;
use crate::error::Error;
use crate::store::{RedisStore, StoreError};
use crate::sync::{lock, Mutex};

/// What changed in the store's health; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreEvent {
    /// The breaker opened: the failure policies answer until a probe gets through.
    Opened {
        /// Why the last call failed (the server and what it said, or that it timed out).
        cause: String,
        /// When the breaker lets the next probe through, from now (ms).
        next_probe_in_ms: u64,
    },
    /// A probe failed for another cause than the one last reported; still open.
    StillOpen {
        /// The new cause.
        cause: String,
        /// When the next probe goes (ms from now).
        next_probe_in_ms: u64,
    },
    /// A call got through: Redis decides again.
    Closed {
        /// How long the breaker was open (ms).
        after_ms: u64,
    },
}

impl std::fmt::Display for StoreEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreEvent::Opened { cause, next_probe_in_ms } => write!(
                f,
                "circuit breaker open: {cause}; the failure policies answer, next probe in {next_probe_in_ms} ms"
            ),
            StoreEvent::StillOpen { cause, next_probe_in_ms } => {
                write!(f, "circuit breaker still open, now because {cause}; next probe in {next_probe_in_ms} ms")
            }
            StoreEvent::Closed { after_ms } => {
                write!(f, "circuit breaker closed: Redis decides again after {after_ms} ms open")
            }
        }
    }
}

/// The hook that hears [`StoreEvent`]s.
pub(crate) type OnStoreEvent = Arc<dyn Fn(&StoreEvent) + Send + Sync>;

/// The cause last reported and when the breaker opened, while it is open.
#[derive(Debug)]
struct Outage {
    cause: String,
    since_ms: u64,
}

/// How a guarded store call came out ([`Health::guard`]).
pub(crate) enum Guarded<T> {
    /// Redis answered.
    Answered(T),
    /// Redis was not asked (the breaker is open) or did not answer (down, slow, refusing this
    /// client): the failure policy answers at `at_ms`, saying `why`; Redis may be asked again
    /// `retry_after_ms` from then.
    Unavailable { at_ms: u64, why: Degraded, retry_after_ms: u64 },
}

/// The breaker and its reporting; see the module docs.
pub(crate) struct Health {
    pub(crate) breaker: CircuitBreaker,
    report: Option<OnStoreEvent>,
    outage: Mutex<Option<Outage>>,
}

impl Health {
    /// The health of `label`'s store (its state name, `rules` for an enforcer: how the breaker's
    /// metrics name it).
    pub(crate) fn new(config: BreakerConfig, report: Option<OnStoreEvent>, label: &str) -> Self {
        Health { breaker: CircuitBreaker::labelled(config, label), report, outage: Mutex::new(None) }
    }

    /// The breaker's state.
    pub(crate) fn state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// The one way a decision calls Redis: `call` runs only if the breaker lets it, and its
    /// result is sorted. An answer, even Redis's own error about the data or the reply
    /// (`StoreError::Fatal`, returned as the error it is), tells the breaker that Redis is up;
    /// anything else is an outage that it counts, and the caller's failure policy answers.
    /// Times are read from `clock` after the call, since a slow call is part of the story.
    pub(crate) async fn guard<T, F>(
        &self,
        clock: &dyn Clock,
        now_ms: u64,
        redis: &RedisStore,
        call: impl FnOnce() -> F,
    ) -> Result<Guarded<T>, Error>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        let attempt = self.breaker.attempt(now_ms);
        if let Attempt::Reject { retry_after_ms } = attempt {
            return Ok(Guarded::Unavailable { at_ms: now_ms, why: Degraded::BreakerOpen, retry_after_ms });
        }
        match call().await {
            Ok(answer) => {
                self.succeeded(attempt, clock.now_ms());
                Ok(Guarded::Answered(answer))
            }
            Err(StoreError::Fatal(error)) => {
                // Redis answered, so it is up; the problem is the data or the reply.
                self.succeeded(attempt, clock.now_ms());
                Err(error)
            }
            Err(error) => {
                let at_ms = clock.now_ms();
                let (why, retry_after_ms) = self.failed(attempt, at_ms, &error, redis);
                Ok(Guarded::Unavailable { at_ms, why, retry_after_ms })
            }
        }
    }

    /// Tells the hook (and, with the `metrics` feature, `tracing`).
    fn emit(&self, event: &StoreEvent) {
        #[cfg(feature = "metrics")]
        match event {
            StoreEvent::Closed { .. } => tracing::info!(target: "redis_ratelimit", "{event}"),
            _ => tracing::warn!(target: "redis_ratelimit", "{event}"),
        }
        if let Some(report) = &self.report {
            report(event);
        }
    }

    /// A permitted call reached Redis (it answered, even with an error of its own).
    fn succeeded(&self, attempt: Attempt, now_ms: u64) {
        if self.breaker.on_success(attempt).is_some() {
            let outage = lock(&self.outage).take();
            if let Some(outage) = outage {
                self.emit(&StoreEvent::Closed { after_ms: now_ms.saturating_sub(outage.since_ms) });
            }
        }
    }

    /// A permitted call failed at `now_ms` with `error`, a failure policy's case: the reason for
    /// the decision and when Redis may be asked again (ms).
    fn failed(&self, attempt: Attempt, now_ms: u64, error: &StoreError, redis: &RedisStore) -> (Degraded, u64) {
        let why = error.degraded().unwrap_or(Degraded::Unavailable);
        let entered = self.breaker.on_failure(attempt, now_ms);
        let retry = self.breaker.next_attempt_in_ms(now_ms);
        if let Some(BreakerState::Open { .. }) = entered {
            let cause = cause(error, redis);
            let event = {
                let mut outage = lock(&self.outage);
                match outage.as_mut() {
                    None => {
                        *outage = Some(Outage { cause: cause.clone(), since_ms: now_ms });
                        Some(StoreEvent::Opened { cause, next_probe_in_ms: retry })
                    }
                    Some(o) if o.cause != cause => {
                        o.cause = cause.clone();
                        Some(StoreEvent::StillOpen { cause, next_probe_in_ms: retry })
                    }
                    Some(_) => None,
                }
            };
            if let Some(event) = event {
                self.emit(&event);
            }
        }
        (why, retry)
    }
}

/// What an operator reads about a failed call.
fn cause(error: &StoreError, redis: &RedisStore) -> String {
    match error {
        StoreError::Refused(e) | StoreError::Fatal(e) => crate::error::chain(e),
        StoreError::Unavailable(Degraded::Timeout) => {
            format!("a call to {} took longer than its {} ms timeout", redis.describe(), redis.timeout().as_millis())
        }
        StoreError::Unavailable(_) => format!("{} could not be reached", redis.describe()),
    }
}
