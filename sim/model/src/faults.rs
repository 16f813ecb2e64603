//! Fault state a host can switch on and off: crash, refusal, pause and latency.
//!
//! The switches are plain fields behind atomics and small mutexes so a simulator can flip them
//! between steps without awaiting anything. Connections read them; the model core never does.
//! Durations are measured with `tokio::time`, which turmoil (and a paused test runtime) make
//! virtual, so a one-second pause costs no wall time in a simulation.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The fault switches of one model.
#[derive(Debug)]
pub(crate) struct Faults {
    /// Crashed: no connection is served and new ones are closed on arrival.
    crashed: AtomicBool,
    /// Refusing new connections (existing ones keep working), like a full accept queue.
    rejecting: AtomicBool,
    /// Bumped on every crash; each connection watches it and drops itself when it moves.
    /// An epoch and one `Notify`, not a `watch` channel: `watch` spreads its waiters over
    /// eight `Notify`s chosen by the runtime's RNG, which tokio seeds at random, so the
    /// order connections learned of a crash (and so a simulation's trace) varied from run
    /// to run. One `Notify` wakes its waiters in the order they registered.
    crash_epoch: AtomicU64,
    crashed_signal: Notify,
    /// Commands wait until this instant before they run.
    pause_until: Mutex<Option<Instant>>,
    /// Added before every reply.
    latency: Mutex<Duration>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            crashed: AtomicBool::new(false),
            rejecting: AtomicBool::new(false),
            crash_epoch: AtomicU64::new(0),
            crashed_signal: Notify::new(),
            pause_until: Mutex::new(None),
            latency: Mutex::new(Duration::ZERO),
        }
    }
}

impl Faults {
    pub(crate) fn crash(&self) {
        self.crashed.store(true, Ordering::SeqCst);
        self.crash_epoch.fetch_add(1, Ordering::SeqCst);
        self.crashed_signal.notify_waiters();
    }

    pub(crate) fn restart(&self) {
        self.crashed.store(false, Ordering::SeqCst);
        // A restarted process is not paused.
        *lock(&self.pause_until) = None;
    }

    pub(crate) fn is_crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    pub(crate) fn set_rejecting(&self, reject: bool) {
        self.rejecting.store(reject, Ordering::SeqCst);
    }

    pub(crate) fn accepts_connections(&self) -> bool {
        !self.is_crashed() && !self.rejecting.load(Ordering::SeqCst)
    }

    pub(crate) fn subscribe_crashes(&self) -> CrashWatch<'_> {
        CrashWatch { faults: self, seen: self.crash_epoch.load(Ordering::SeqCst) }
    }

    pub(crate) fn pause_until(&self, until: Instant) {
        *lock(&self.pause_until) = Some(until);
    }

    pub(crate) fn resume(&self) {
        *lock(&self.pause_until) = None;
    }

    /// The instant commands may run again, if that is in the future.
    pub(crate) fn paused_until(&self) -> Option<Instant> {
        let until = *lock(&self.pause_until);
        until.filter(|&t| t > Instant::now())
    }

    pub(crate) fn set_latency(&self, latency: Duration) {
        *lock(&self.latency) = latency;
    }

    pub(crate) fn latency(&self) -> Duration {
        *lock(&self.latency)
    }
}

/// A connection's view of crashes: [`CrashWatch::changed`] completes once the model has
/// crashed since the watch was taken.
pub(crate) struct CrashWatch<'a> {
    faults: &'a Faults,
    seen: u64,
}

impl CrashWatch<'_> {
    /// Waits for a crash after the one last seen.
    pub(crate) async fn changed(&mut self) {
        loop {
            let notified = self.faults.crashed_signal.notified();
            tokio::pin!(notified);
            // Register before looking, so a crash between the look and the wait is not lost.
            notified.as_mut().enable();
            let now = self.faults.crash_epoch.load(Ordering::SeqCst);
            if now != self.seen {
                self.seen = now;
                return;
            }
            notified.await;
        }
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: every value guarded
/// here is a plain setting that is valid whatever the panic interrupted.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
