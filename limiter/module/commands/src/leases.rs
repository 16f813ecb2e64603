//! The lease commands (`RATELIMIT.LEASE.GCRA`, `lua/lease_gcra.lua`; `RATELIMIT.LEASE.TB`,
//! `lua/lease_token_bucket.lua`): one call reserves up to `want` units of a bucket for one
//! instance, after crediting back the unspent units of its previous lease, computed by the
//! twins in `algo::lease`. Same key and state as the algorithm's own command.
//!
//! Beside the quota (held as every command holds it), a lease's arguments are held to what the
//! library sends: a lifetime that leaves room for a lease in the burst (the library refuses
//! others), at least one unit needed and no more wanted than the burst; within those the
//! twins' arithmetic cannot overflow.

use redis_ratelimit::harness::algo::gcra::GcraState;
use redis_ratelimit::harness::algo::lease::{self, LeaseArgs, LeaseOutcome};
use redis_ratelimit::{Algorithm, Quota};
use std::time::Duration;

use crate::args::{checked, int, now_us};
use crate::buckets::read_bucket;
use crate::number::stored_int;
use crate::{Keys, Refusal};

/// A lease command's reply: `[granted, start_us, written (two numbers), credited, remaining,
/// retry_after_ms, reset_after_ms, now_ms]`.
pub type LeaseReply = [u64; 9];

fn reply(o: &LeaseOutcome, now_ms: u64) -> LeaseReply {
    let (w0, w1) = o.written;
    [o.granted, o.start_us, w0, w1, o.credited, o.remaining, o.retry_after_ms, o.reset_after_ms, now_ms]
}

/// `want`, `need` and `give` held to the burst `burst` and to each other.
fn units(name: &str, want: u64, need: u64, give: u64, burst: u64) -> Result<(), Refusal> {
    if need == 0 || need > want || want > burst || give > burst {
        return Err(Refusal::Error(format!(
            "ERR {name}: want {want}, need {need} and give back {give} must satisfy 1 <= need <= want <= burst {burst} \
             and give back <= burst"
        )));
    }
    Ok(())
}

/// `RATELIMIT.LEASE.GCRA key now_ms interval_us burst lifetime_us horizon_us want need give
/// given_tat`.
pub(crate) fn lease_gcra(keys: &mut impl Keys, args: &[&[u8]]) -> Result<LeaseReply, Refusal> {
    const NAME: &str = "RATELIMIT.LEASE.GCRA";
    let &[key, now, interval, burst, lifetime, horizon, want, need, give, given] = args else {
        return Err(Refusal::Arity);
    };
    let field = |arg: &[u8], name: &str| int(arg, NAME, name);
    let (interval_us, burst) = (field(interval, "interval_us")?, field(burst, "burst")?);
    if interval_us == 0 {
        return Err(Refusal::Error(format!("ERR {NAME} interval_us must be at least 1")));
    }
    let quota =
        checked(NAME, Algorithm::Gcra, Quota::new(1_000, Duration::from_millis(interval_us)).with_burst(burst), 0)?;
    let (lifetime_us, horizon_us) = (field(lifetime, "lifetime_us")?, field(horizon, "horizon_us")?);
    // The twin takes whole milliseconds, as the library sends them; a lease must fit the burst.
    if lifetime_us % 1_000 != 0 || horizon_us % 1_000 != 0 || lifetime_us >= burst * interval_us {
        return Err(Refusal::Error(format!(
            "ERR {NAME} lifetime_us {lifetime_us} and horizon_us {horizon_us} must be whole ms, the lifetime \
             shorter than the burst's {} us",
            burst * interval_us
        )));
    }
    let (want, need, give) = (field(want, "want")?, field(need, "need")?, field(give, "give")?);
    units(NAME, want, need, give, burst)?;
    let a = LeaseArgs {
        lifetime_ms: lifetime_us / 1_000,
        horizon_ms: horizon_us / 1_000,
        want,
        need,
        give_back: give,
        written: (field(given, "given_tat")?, 0),
    };
    let now_us = now_us(keys, now, NAME)?;
    let mut state = match keys.string(key, stored_int) {
        Ok(tat) => tat.flatten().map(|tat_us| GcraState { tat_us }),
        Err(_) => return Err(Refusal::WrongType),
    };
    let outcome = lease::take_gcra(&quota, &mut state, now_us, a);
    if let (true, Some(GcraState { tat_us })) = (outcome.granted > 0 || outcome.credited > 0, state) {
        // The script's `SET key tat PX ceil((tat - now) / 1000)`: the reset.
        keys.set(key, tat_us.to_string().as_bytes(), Some(outcome.reset_after_ms))?;
    }
    Ok(reply(&outcome, now_us / 1_000))
}

/// `RATELIMIT.LEASE.TB key now_ms limit period_ms burst lifetime_ms horizon_ms want need give
/// given_units given_ms`.
pub(crate) fn lease_token_bucket(keys: &mut impl Keys, args: &[&[u8]]) -> Result<LeaseReply, Refusal> {
    const NAME: &str = "RATELIMIT.LEASE.TB";
    let &[key, now, limit, period, burst, lifetime, horizon, want, need, give, given_u, given_t] = args else {
        return Err(Refusal::Arity);
    };
    let field = |arg: &[u8], name: &str| int(arg, NAME, name);
    let quota = Quota::new(field(limit, "limit")?, Duration::from_millis(field(period, "period_ms")?))
        .with_burst(field(burst, "burst")?);
    let quota = checked(NAME, Algorithm::TokenBucket, quota, 0)?;
    let (lifetime_ms, horizon_ms) = (field(lifetime, "lifetime_ms")?, field(horizon, "horizon_ms")?);
    if lease::capacity(Algorithm::TokenBucket, &quota, lifetime_ms) == 0 {
        return Err(Refusal::Error(format!(
            "ERR {NAME} lifetime_ms {lifetime_ms} leaves no room for a lease in the burst"
        )));
    }
    let (want, need, give) = (field(want, "want")?, field(need, "need")?, field(give, "give")?);
    units(NAME, want, need, give, quota.burst())?;
    let a = LeaseArgs {
        lifetime_ms,
        horizon_ms,
        want,
        need,
        give_back: give,
        written: (field(given_u, "given_units")?, field(given_t, "given_ms")?),
    };
    let now_ms = now_us(keys, now, NAME)? / 1_000;
    let mut state = read_bucket(keys, key)?;
    let outcome = lease::take_token_bucket(&quota, &mut state, now_ms, a);
    if let (true, Some(bucket)) = (outcome.granted > 0 || outcome.credited > 0, state) {
        // The script's TTL: when the bucket written is full again, the reset.
        let value = format!("{}:{}", bucket.units, bucket.ts_ms);
        keys.set(key, value.as_bytes(), Some(outcome.reset_after_ms))?;
    }
    Ok(reply(&outcome, now_ms))
}
