//! What the harness's integration tests share.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `work` on every item on two threads and returns the results in the items' order. Each
/// verification is single-threaded and independent of the others (its own models, its own
/// seed), so the loops over subjects and seeds, the longest tests of the workspace, use both
/// cores. A failed assertion inside `work` panics its thread and so the test, with its message.
pub fn on_two_threads<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = work(item);
                out.lock().expect("not poisoned").push((i, r));
            });
        }
    });
    let mut out = out.into_inner().expect("not poisoned");
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}
