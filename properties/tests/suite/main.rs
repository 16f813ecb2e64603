//! The property suites: every invariant holds for every correct algorithm
//! (`invariants`), every invariant catches the known-bad state machines fed to it (`mutants`),
//! the sliding-window counter's error is measured (`accuracy`), and the lock-free
//! `AtomicLimiter` decides like the GCRA twin (`atomic`), a reset or a refund on the Redis
//! model is its twin's (`key_ops`), and so are concurrency permits on Redis's clock (`permits`).

mod accuracy;
mod atomic;
mod invariants;
mod key_ops;
mod mutants;
mod permits;
