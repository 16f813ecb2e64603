//! What the invariants run: a [`StateMachine`] (the real algorithms of `redis_ratelimit::harness::algo`, a subject,
//! or a deliberately broken copy) together with the promise it is held to.

use std::fmt;

use redis_ratelimit::{Algorithm, Quota};

use crate::machine::StateMachine;

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
    /// One of the library's algorithms, held to its own promise.
    pub fn real(algorithm: Algorithm) -> Subject {
        static ALL: [Algorithm; Algorithm::ALL.len()] = Algorithm::ALL;
        let machine: &'static dyn StateMachine =
            ALL.iter().find(|a| **a == algorithm).expect("every algorithm is in Algorithm::ALL");
        Subject { name: algorithm.name(), base: algorithm, promise: algorithm, machine }
    }

    /// ADR-002's script, held to the token bucket's promise, which it claims to keep.
    pub fn adr002() -> Subject {
        Subject {
            name: "adr002",
            base: Algorithm::TokenBucket,
            promise: Algorithm::TokenBucket,
            machine: &crate::adr002::Adr002,
        }
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

/// The correct algorithms: every one of the library's.
pub const CORRECT: [Algorithm; Algorithm::ALL.len()] = Algorithm::ALL;
