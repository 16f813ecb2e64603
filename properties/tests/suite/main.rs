//! The property suites: every invariant holds for every correct algorithm
//! (`invariants`), every invariant catches the known-bad state machines fed to it (`mutants`),
//! the sliding-window counter's error is measured (`accuracy`), and the lock-free
//! `AtomicLimiter` decides like the GCRA twin (`atomic`).

mod accuracy;
mod atomic;
mod invariants;
mod mutants;
