//! What the invariants run: a [`StateMachine`] (the real algorithms of `limiter::harness::algo`, a subject,
//! or a deliberately broken copy) together with the promise it is held to.

use std::fmt;

use limiter::harness::algo::{self, Outcome, State};
use limiter::{Algorithm, Quota};

/// Anything that decides like one of `limiter::harness::algo`'s pure twins: same state type, same
/// signature, time as an argument.
pub trait StateMachine: Sync {
    /// Decides one request of `cost` at `now_ms`, updating `state` (None = no state yet).
    fn step(&self, quota: &Quota, state: &mut Option<State>, now_ms: u64, cost: u64) -> Outcome;

    /// Whether `state` is at rest at `now_ms` (dropping it changes no later decision).
    fn is_idle(&self, quota: &Quota, state: &State, now_ms: u64) -> bool {
        algo::is_idle(quota, state, now_ms)
    }
}

impl StateMachine for Algorithm {
    fn step(&self, quota: &Quota, state: &mut Option<State>, now_ms: u64, cost: u64) -> Outcome {
        algo::step(*self, quota, state, now_ms, cost)
    }
}

/// A state machine under test and what it is held to.
#[derive(Clone, Copy)]
pub struct Subject {
    /// Short name, used in output and in regression file names.
    pub name: &'static str,
    /// The algorithm whose quota rules apply: which quotas are valid, what one request may
    /// cost at most.
    pub base: Algorithm,
    /// The algorithm whose promises the invariants check (usually `base`; a fixed window
    /// can be held to the sliding log's promise to show that it breaks it).
    pub promise: Algorithm,
    /// The decisions.
    pub machine: &'static dyn StateMachine,
}

impl Subject {
    /// One of the real algorithms (or subjects) of `limiter::harness::algo`, held to its own promise.
    /// The adr002 subject is held to the token bucket's promise, which it claims to keep.
    pub fn real(algorithm: Algorithm) -> Subject {
        static ALL: [Algorithm; Algorithm::ALL.len()] = Algorithm::ALL;
        let machine: &'static dyn StateMachine =
            ALL.iter().find(|a| **a == algorithm).expect("every algorithm is in Algorithm::ALL");
        let promise = match algorithm {
            Algorithm::Adr002 => Algorithm::TokenBucket,
            Algorithm::NaiveGetSet => Algorithm::FixedWindow,
            other => other,
        };
        Subject { name: algorithm.name(), base: algorithm, promise, machine }
    }

    /// The same state machine held to another algorithm's promise.
    pub fn held_to(self, promise: Algorithm) -> Subject {
        Subject { promise, ..self }
    }

    /// The most one request may cost (the limiter refuses more before deciding).
    pub fn capacity(&self, quota: &Quota) -> u64 {
        quota.capacity(self.base)
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)?;
        if self.name != self.promise.name() {
            write!(f, " (held to {}'s promise)", self.promise)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The five correct algorithms.
pub const CORRECT: [Algorithm; 5] =
    [Algorithm::FixedWindow, Algorithm::SlidingWindow, Algorithm::SlidingLog, Algorithm::TokenBucket, Algorithm::Gcra];
