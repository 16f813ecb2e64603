//! What decides in a property run: a [`StateMachine`], anything that decides like one of the
//! library's pure twins, and the [`MachineState`] it keeps per key. The library's algorithms
//! are state machines as they are; ADR-002's bucket and the mutants implement it their own way.

use redis_ratelimit::harness::algo::{self, Outcome, State};
use redis_ratelimit::{Algorithm, Quota};

/// One key's state in a state machine: a twin's, or the state a subject keeps its own way.
#[derive(Debug, Clone, PartialEq)]
pub enum MachineState {
    /// One of the library's twins (the mutants keep these too).
    Twin(State),
    /// ADR-002's hash.
    Adr002(Adr002State),
}

/// ADR-002's hash ([`crate::adr002`]): `tokens` and `lastRefillTime`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adr002State {
    /// `tokens` (a Lua number; integral here, possibly negative after a clock step back).
    pub tokens: f64,
    /// `lastRefillTime` in the caller's milliseconds.
    pub last_refill_ms: f64,
}

/// Anything that decides like one of `redis_ratelimit::harness::algo`'s pure twins: same state type, same
/// signature, time as an argument.
pub trait StateMachine: Sync {
    /// Decides one request of `cost` at `now_ms`, updating `state` (None = no state yet).
    fn step(&self, quota: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome;

    /// Whether `state` is at rest at `now_ms` (dropping it changes no later decision).
    fn is_idle(&self, quota: &Quota, state: &MachineState, now_ms: u64) -> bool {
        match state {
            MachineState::Twin(s) => algo::is_idle(quota, s, now_ms),
            MachineState::Adr002(_) => true,
        }
    }

    /// Whether Redis would have dropped `state`'s keys when touched at `now_ms`.
    fn expired(&self, quota: &Quota, state: &MachineState, now_ms: u64) -> bool {
        match state {
            MachineState::Twin(s) => algo::expired(quota, s, now_ms),
            MachineState::Adr002(_) => true,
        }
    }
}

impl StateMachine for Algorithm {
    fn step(&self, quota: &Quota, state: &mut Option<MachineState>, now_ms: u64, cost: u64) -> Outcome {
        let mut twin = match state.take() {
            Some(MachineState::Twin(s)) => Some(s),
            _ => None,
        };
        let outcome = algo::step(*self, quota, &mut twin, now_ms, cost);
        *state = twin.map(MachineState::Twin);
        outcome
    }
}
