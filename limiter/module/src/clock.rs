//! Redis's clock, as `TIME` reads it: the module runs inside the server, so the server's wall
//! clock is the one the scripts read on Redis's clock, and there is no other to inject.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now on Redis's clock, in microseconds since the epoch (what a script computes from `TIME`).
#[allow(clippy::disallowed_methods)] // Redis's own clock is the point
pub(crate) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}
