//! A command's arguments as the module reads them: the quota the script's ARGV describe, held
//! to the limits the library holds every quota to (within them the twins' arithmetic is exact
//! and cannot overflow, which inside Redis would take the server down), the cost held to the
//! quota's capacity, and the clock.

use redis_module::{RedisError, RedisString};
use redis_ratelimit::{Algorithm, Quota};

use crate::clock;
use crate::number::{digits, not_an_integer};

/// The largest clock reading (ms) a command takes: past it a script's doubles are no longer
/// exact, and no clock reads it for another hundred thousand years.
const MAX_NOW_MS: u64 = 1 << 52;

/// `quota` for `algorithm` if the library would send it, and `cost` within its capacity, or an
/// error naming what was wrong.
pub(crate) fn checked(command: &str, algorithm: Algorithm, quota: Quota, cost: u64) -> Result<Quota, RedisError> {
    quota.validate(algorithm).map_err(|e| RedisError::String(format!("ERR {command}: {e}")))?;
    let capacity = quota.capacity(algorithm);
    if cost > capacity {
        let of = if algorithm.is_bucket() { "burst" } else { "limit" };
        return Err(RedisError::String(format!("ERR {command}: cost {cost} exceeds the {of} {capacity}")));
    }
    Ok(quota)
}

/// The integer argument `arg`, named `field` in an error.
pub(crate) fn int(arg: &RedisString, command: &str, field: &str) -> Result<u64, RedisError> {
    digits(arg.as_slice()).ok_or_else(|| not_an_integer(arg.as_slice(), &format!("{command} {field}")))
}

/// The clock a request decides by, in microseconds: the caller's `now_ms`, or when it is empty
/// Redis's own (as a script reads `TIME`).
pub(crate) fn now_us(arg: &RedisString, command: &str) -> Result<u64, RedisError> {
    match arg.as_slice() {
        b"" => Ok(clock::now_us()),
        _ => match int(arg, command, "now_ms")? {
            ms if ms < MAX_NOW_MS => Ok(ms * 1_000),
            ms => Err(RedisError::String(format!("ERR {command} now_ms {ms} is past 2^52"))),
        },
    }
}
