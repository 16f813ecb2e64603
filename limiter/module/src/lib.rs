//! A Redis module that decides rate limits as native commands: what the library's Lua scripts
//! decide, without Lua. A script pays Redis's Lua for every table it makes, every C function it
//! calls and every argument and reply it converts (the bench counts it: a GCRA decision is
//! about 51,000 instructions of Redis's, a `GET` and a `SET` run from a script 24,500, and an
//! `INCR` about 2,000). `RATELIMIT.GCRA` decides in about 15,000, most of them Redis's own
//! work of reading the key, writing it with its expiry and replicating the write; the
//! arithmetic is a few hundred.
//!
//! Each command takes exactly the KEYS and ARGV of its algorithm's script, in the same order,
//! answers the same reply, writes the same value with the same TTL, and is computed by the very
//! twin the script mirrors (`redis_ratelimit::harness::algo`), so there is no third copy of the
//! arithmetic. Writes are replicated by their effect (`SET key value PXAT instant`), not as the
//! command, so replicas and the AOF replay a plain write whatever the command decided.
//!
//! - `RATELIMIT.GCRA key now_ms interval_us burst cost`: GCRA, as `lua/gcra.lua`. `now_ms`
//!   empty decides on Redis's clock (in microseconds, as the script reads `TIME`).
//!
//! Load it with `redis-server --loadmodule path/to/libredis_ratelimit_module.so` or
//! `MODULE LOAD`; the commands declare their key, so Redis Cluster routes them by it.

#![forbid(unsafe_code)]

mod clock;
mod number;

use std::time::Duration;

use redis_module::{redis_module, Context, KeyType, RedisError, RedisResult, RedisString, RedisValue};
use redis_ratelimit::harness::algo::gcra::{self, GcraState};
use redis_ratelimit::{Algorithm, Quota};

pub use number::{argument, stored_int};

/// `RATELIMIT.GCRA key now_ms interval_us burst cost` (see the crate docs).
fn gcra_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, now, interval, burst, cost] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let interval_us = argument(interval.as_slice(), "RATELIMIT.GCRA interval_us")?;
    let burst = argument(burst.as_slice(), "RATELIMIT.GCRA burst")?;
    let cost = argument(cost.as_slice(), "RATELIMIT.GCRA cost")?;
    if interval_us == 0 {
        return Err(RedisError::Str("ERR RATELIMIT.GCRA interval_us must be at least 1"));
    }
    // The quota whose emission interval is `interval_us` (ceil(period * 1000 / limit) with a
    // limit of 1,000 is the period in ms, here `interval_us`), held to the limits the library
    // holds every quota to: within them the arithmetic is exact.
    let quota = Quota::new(1_000, interval_us).with_burst(burst);
    quota.validate(Algorithm::Gcra).map_err(|e| RedisError::String(format!("ERR RATELIMIT.GCRA: {e}")))?;
    if cost > burst {
        return Err(RedisError::String(format!("ERR RATELIMIT.GCRA: cost {cost} exceeds the burst {burst}")));
    }
    let now_us = match now.as_slice() {
        b"" => clock::now_us(),
        ms => argument(ms, "RATELIMIT.GCRA now_ms")?
            .checked_mul(1_000)
            .ok_or(RedisError::Str("ERR RATELIMIT.GCRA: now_ms is too large"))?,
    };

    let mut state = {
        // Read-only: a decision that writes nothing leaves the key exactly as it was (a key
        // opened for writing would have its value unshared to read it in place).
        let read = ctx.open_key(key);
        match read.key_type() {
            KeyType::Empty => None,
            // A value someone else left (text, a fraction, a negative) reads as no state, as
            // the script's `stored_int` reads it.
            KeyType::String => read.read()?.and_then(stored_int).map(|tat_us| GcraState { tat_us }),
            _ => return Err(RedisError::WrongType),
        }
    };
    let outcome = gcra::step_us(&quota, &mut state, now_us, cost);
    if outcome.allowed && cost > 0 {
        if let Some(GcraState { tat_us }) = state {
            // The script's `SET key tat PX ceil((tat - now) / 1000)`: the TTL is the reset.
            write(ctx, key, &tat_us.to_string(), outcome.reset_after_ms)?;
        }
    }
    Ok(RedisValue::Array(
        [u64::from(outcome.allowed), outcome.remaining, outcome.retry_after_ms, outcome.reset_after_ms, now_us / 1_000]
            .into_iter()
            .map(|n| RedisValue::Integer(n as i64))
            .collect(),
    ))
}

/// Sets `key` to `value` for `ttl_ms` and replicates the write as `SET key value PXAT instant`:
/// an absolute instant, as Redis itself propagates a relative expiry, so a replica or an AOF
/// replayed later expires the key when the primary does.
fn write(ctx: &Context, key: &RedisString, value: &str, ttl_ms: u64) -> RedisResult<()> {
    let k = ctx.open_key_writable(key);
    k.write(value)?;
    k.set_expire(Duration::from_millis(ttl_ms))?;
    let at = (clock::now_us() / 1_000 + ttl_ms).to_string();
    ctx.replicate("SET", &[key.as_slice(), value.as_bytes(), b"PXAT", at.as_bytes()][..]);
    Ok(())
}

redis_module! {
    name: "ratelimit",
    version: 1,
    // The system's allocator, not Redis's: a command allocates only what it frees before it
    // returns (its arguments' vector, a value's text), and with Redis's the crate's own tests
    // could not run outside a server.
    allocator: (std::alloc::System, std::alloc::System),
    data_types: [],
    commands: [
        ["ratelimit.gcra", gcra_command, "write deny-oom", 1, 1, 1, ""],
    ],
}
