//! A command's arguments as the module reads them: the quota the script's ARGV describe, held
//! to the limits the library holds every quota to (within them the twins' arithmetic is exact
//! and cannot overflow, which inside Redis would take the server down), the cost held to the
//! quota's capacity, and the clock.

use redis_ratelimit::{Algorithm, Quota};

use crate::number::{digits, not_an_integer};
use crate::{Keys, Refusal};

/// The largest clock reading (ms) a command takes: past it a script's doubles are no longer
/// exact, and no clock reads it for another hundred thousand years.
const MAX_NOW_MS: u64 = 1 << 52;

/// `quota` for `algorithm` if the library would send it, and `cost` within its capacity, or an
/// error naming what was wrong.
pub(super) fn checked(command: &str, algorithm: Algorithm, quota: Quota, cost: u64) -> Result<Quota, Refusal> {
    quota.validate(algorithm).map_err(|e| Refusal::Error(format!("ERR {command}: {e}")))?;
    let capacity = quota.capacity(algorithm);
    if cost > capacity {
        let of = if algorithm.is_bucket() { "burst" } else { "limit" };
        return Err(Refusal::Error(format!("ERR {command}: cost {cost} exceeds the {of} {capacity}")));
    }
    Ok(quota)
}

/// The integer argument `arg`, named `field` in an error.
pub(super) fn int(arg: &[u8], command: &str, field: &str) -> Result<u64, Refusal> {
    digits(arg).ok_or_else(|| not_an_integer(arg, &format!("{command} {field}")))
}

/// The clock a request decides by, in microseconds: the caller's `now_ms`, or when it is empty
/// Redis's own (as a script reads `TIME`).
pub(super) fn now_us(keys: &mut impl Keys, arg: &[u8], command: &str) -> Result<u64, Refusal> {
    match arg {
        b"" => Ok(keys.now_us()),
        _ => match int(arg, command, "now_ms")? {
            ms if ms < MAX_NOW_MS => Ok(ms * 1_000),
            ms => Err(Refusal::Error(format!("ERR {command} now_ms {ms} is past 2^52"))),
        },
    }
}
