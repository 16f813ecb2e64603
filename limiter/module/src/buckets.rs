//! The bucket algorithms, each state one string: `RATELIMIT.GCRA` (a theoretical arrival time
//! in microseconds, `lua/gcra.lua`) and `RATELIMIT.TB` (`units:ms`, `lua/token_bucket.lua`).

use redis_module::{Context, KeyType, RedisError, RedisResult, RedisString};
use redis_ratelimit::harness::algo::gcra::{self, GcraState};
use redis_ratelimit::harness::algo::token_bucket::{self, BucketState};
use redis_ratelimit::{Algorithm, Quota};

use crate::args::{checked, int, now_us};
use crate::keyspace::{read_string, set_with_ttl, OtherTypes};
use crate::number::stored_int;
use crate::reply;

/// `RATELIMIT.GCRA key now_ms interval_us burst cost`.
pub(crate) fn gcra_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    const NAME: &str = "RATELIMIT.GCRA";
    let [_, key, now, interval, burst, cost] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let interval_us = int(interval, NAME, "interval_us")?;
    let (burst, cost) = (int(burst, NAME, "burst")?, int(cost, NAME, "cost")?);
    if interval_us == 0 {
        return Err(RedisError::Str("ERR RATELIMIT.GCRA interval_us must be at least 1"));
    }
    // The quota whose emission interval is `interval_us` (ceil(period * 1000 / limit) with a
    // limit of 1,000 is the period in ms, here `interval_us`).
    let quota = checked(NAME, Algorithm::Gcra, Quota::new(1_000, interval_us).with_burst(burst), cost)?;
    let now_us = now_us(now, NAME)?;

    // A value someone else left (text, a fraction, a negative) reads as no state, as the
    // script's `stored_int` reads it.
    let mut state =
        read_string(ctx, key, OtherTypes::Refused, stored_int)?.flatten().map(|tat_us| GcraState { tat_us });
    let outcome = gcra::step_us(&quota, &mut state, now_us, cost);
    if let (true, Some(GcraState { tat_us })) = (outcome.allowed && cost > 0, state) {
        // The script's `SET key tat PX ceil((tat - now) / 1000)`: the TTL is the reset.
        set_with_ttl(ctx, key, &tat_us.to_string(), outcome.reset_after_ms)?;
    }
    Ok(reply(&outcome, now_us / 1_000))
}

/// `RATELIMIT.TB key now_ms limit period_ms burst cost`.
pub(crate) fn token_bucket_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    const NAME: &str = "RATELIMIT.TB";
    let [_, key, now, limit, period, burst, cost] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let quota =
        Quota::new(int(limit, NAME, "limit")?, int(period, NAME, "period_ms")?).with_burst(int(burst, NAME, "burst")?);
    let cost = int(cost, NAME, "cost")?;
    let quota = checked(NAME, Algorithm::TokenBucket, quota, cost)?;
    let now_ms = now_us(now, NAME)? / 1_000;

    let mut state = read_bucket(ctx, key)?;
    let outcome = token_bucket::step(&quota, &mut state, now_ms, cost);
    if let (true, Some(BucketState { units, ts_ms })) = (outcome.allowed && cost > 0, state) {
        // The script's TTL, `ahead + ceil((cap - units) / limit)`, is the reset; the SET
        // replaces an old hash as it does.
        set_with_ttl(ctx, key, &format!("{units}:{ts_ms}"), outcome.reset_after_ms)?;
    }
    Ok(reply(&outcome, now_ms))
}

/// A bucket as the script reads it: the string `units:ms`, or the hash `{u, t}` it once wrote;
/// either with a part that is no stored number is no bucket (full). WRONGTYPE on other types.
fn read_bucket(ctx: &Context, key: &RedisString) -> Result<Option<BucketState>, RedisError> {
    let bucket = |units: Option<u64>, ts: Option<u64>| Some(BucketState { units: units?, ts_ms: ts? });
    if crate::keyspace::key_type(ctx, key) == KeyType::Hash {
        let k = ctx.open_key(key);
        let field = |name: &str| -> Result<Option<u64>, RedisError> {
            Ok(k.hash_get(name)?.and_then(|v| stored_int(v.as_slice())))
        };
        return Ok(bucket(field("u")?, field("t")?));
    }
    let read = read_string(ctx, key, OtherTypes::Refused, |text| {
        // Split at the first colon, as the script's `string.find(state, ':', 1, true)`.
        let colon = text.iter().position(|&b| b == b':')?;
        bucket(stored_int(&text[..colon]), stored_int(&text[colon + 1..]))
    })?;
    Ok(read.flatten())
}
