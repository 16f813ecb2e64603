//! Synchronisation primitives, swapped for loom's under the feature `loom` so the loom
//! models explore every interleaving of the in-process concurrent pieces.

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "loom")]
pub(crate) use loom::sync::Mutex;
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::Mutex;

/// Locks, recovering from poisoning: a panic elsewhere while holding the lock must not
/// turn every later rate-limit check into a panic too. The guarded states are plain data
/// updated in one step, so they are never left half-written.
pub(crate) fn lock<T>(m: &Mutex<T>) -> crate::sync::Guard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(feature = "loom")]
pub(crate) type Guard<'a, T> = loom::sync::MutexGuard<'a, T>;
#[cfg(not(feature = "loom"))]
pub(crate) type Guard<'a, T> = std::sync::MutexGuard<'a, T>;
