//! The bucket algorithms, each state one string: `RATELIMIT.GCRA` (a theoretical arrival time
//! in microseconds, `lua/gcra.lua`) and `RATELIMIT.TB` (`units:ms`, `lua/token_bucket.lua`).

use redis_ratelimit::harness::algo::gcra::{self, GcraState};
use redis_ratelimit::harness::algo::token_bucket::{self, BucketState};
use redis_ratelimit::{Algorithm, Quota};
use std::time::Duration;

use crate::args::{checked, int, now_us};
use crate::number::stored_int;
use crate::{reply, Keys, Kind, Refusal};

/// `RATELIMIT.GCRA key now_ms interval_us burst cost`.
pub(super) fn gcra(keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    const NAME: &str = "RATELIMIT.GCRA";
    let &[key, now, interval, burst, cost] = args else {
        return Err(Refusal::Arity);
    };
    let interval_us = int(interval, NAME, "interval_us")?;
    let (burst, cost) = (int(burst, NAME, "burst")?, int(cost, NAME, "cost")?);
    if interval_us == 0 {
        return Err(Refusal::Error("ERR RATELIMIT.GCRA interval_us must be at least 1".into()));
    }
    // The quota whose emission interval is `interval_us` (ceil(period * 1000 / limit) with a
    // limit of 1,000 is the period in ms, here `interval_us`).
    let quota =
        checked(NAME, Algorithm::Gcra, Quota::new(1_000, Duration::from_millis(interval_us)).with_burst(burst), cost)?;
    let now_us = now_us(keys, now, NAME)?;

    // A value someone else left (text, a fraction, a negative) reads as no state, as the
    // script's `stored_int` reads it.
    let mut state = match keys.string(key, stored_int) {
        Ok(tat) => tat.flatten().map(|tat_us| GcraState { tat_us }),
        Err(_) => return Err(Refusal::WrongType),
    };
    let outcome = gcra::step_us(&quota, &mut state, now_us, cost);
    if let (true, Some(GcraState { tat_us })) = (outcome.allowed && cost > 0, state) {
        // The script's `SET key tat PX ceil((tat - now) / 1000)`: the TTL is the reset.
        keys.set(key, tat_us.to_string().as_bytes(), Some(outcome.reset_after_ms))?;
    }
    Ok(reply(&outcome, now_us / 1_000))
}

/// `RATELIMIT.TB key now_ms limit period_ms burst cost`.
pub(super) fn token_bucket(keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    const NAME: &str = "RATELIMIT.TB";
    let &[key, now, limit, period, burst, cost] = args else {
        return Err(Refusal::Arity);
    };
    let quota = Quota::new(int(limit, NAME, "limit")?, Duration::from_millis(int(period, NAME, "period_ms")?))
        .with_burst(int(burst, NAME, "burst")?);
    let cost = int(cost, NAME, "cost")?;
    let quota = checked(NAME, Algorithm::TokenBucket, quota, cost)?;
    let now_ms = now_us(keys, now, NAME)? / 1_000;

    let mut state = read_bucket(keys, key)?;
    let outcome = token_bucket::step(&quota, &mut state, now_ms, cost);
    if let (true, Some(BucketState { units, ts_ms })) = (outcome.allowed && cost > 0, state) {
        // The script's TTL, `ahead + ceil((cap - units) / limit)`, is the reset; the SET
        // replaces an old hash as it does.
        keys.set(key, format!("{units}:{ts_ms}").as_bytes(), Some(outcome.reset_after_ms))?;
    }
    Ok(reply(&outcome, now_ms))
}

/// A bucket as the script reads it: the string `units:ms`, or the hash `{u, t}` it once wrote;
/// either with a part that is no stored number is no bucket (full). WRONGTYPE on other types.
pub(crate) fn read_bucket(keys: &mut impl Keys, key: &[u8]) -> Result<Option<BucketState>, Refusal> {
    let bucket = |units: Option<u64>, ts: Option<u64>| Some(BucketState { units: units?, ts_ms: ts? });
    let read = keys.string(key, |text| {
        // Split at the first colon, as the script's `string.find(state, ':', 1, true)`.
        let colon = text.iter().position(|&b| b == b':')?;
        bucket(stored_int(&text[..colon]), stored_int(&text[colon + 1..]))
    });
    match read {
        Ok(read) => Ok(read.flatten()),
        Err(Kind::Hash) => {
            let mut field = |name: &[u8]| keys.hash_field(key, name).and_then(|v| stored_int(&v));
            let units = field(b"u");
            Ok(bucket(units, field(b"t")))
        }
        Err(_) => Err(Refusal::WrongType),
    }
}
