//! Where the commands' words go. With `--format text` (the default) tables, verdicts and replay
//! lines are printed on standard output. With `--format json` standard output carries the
//! results JSON alone, for another tool to read (`ratelimit-lab verify s.toml --format json |
//! jq ...`), and the same words go to standard error, so a person watching still sees them.

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Chooses where [`say!`](crate::say) prints for the rest of the process: set once, as the
/// command line is read.
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// Whether standard output is kept for the results JSON.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// `println!` for the commands' words: standard output, or standard error under `--format json`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        if $crate::output::json() { eprintln!($($arg)*) } else { println!($($arg)*) }
    };
}

/// `print!` for the commands' words (text that brings its own newlines, such as a table).
#[macro_export]
macro_rules! say_text {
    ($($arg:tt)*) => {
        if $crate::output::json() { eprint!($($arg)*) } else { print!($($arg)*) }
    };
}
