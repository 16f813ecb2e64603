//! What every loom model here shares.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

/// Runs `f` under loom (preemption bound from `LOOM_MAX_PREEMPTIONS`, 3 when unset) and
/// prints how many interleavings were explored.
pub fn explore(name: &str, f: impl Fn() + Send + Sync + 'static) {
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(move || {
        counted.fetch_add(1, Relaxed);
        f();
    });
    println!("loom: {name}: {} interleavings explored", runs.load(Relaxed));
}
