//! The window algorithms, one counter per aligned window under the stem the caller names:
//! `RATELIMIT.FW` (`lua/fixed_window.lua`) and `RATELIMIT.SW` (`lua/sliding_window.lua`).

use redis_module::{Context, RedisError, RedisResult, RedisString};
use redis_ratelimit::harness::algo::fixed_window::{self, WindowState};
use redis_ratelimit::harness::algo::sliding_window::{self, SlidingState};
use redis_ratelimit::{Algorithm, Quota};

use crate::args::{checked, int, now_us};
use crate::keyspace::{read_string, set_keeping_ttl, set_with_ttl, window_key, OtherTypes};
use crate::number::stored_int;
use crate::reply;

/// A window's counter as the script reads it: its count (`stored_int`, 0 for none or for
/// anything else someone left), and whether its text is one `INCRBY` takes.
#[derive(Clone, Copy)]
struct Counter {
    count: u64,
    incrementable: bool,
}

impl Counter {
    fn read(text: Option<&[u8]>) -> Self {
        let count = text.and_then(stored_int).unwrap_or(0);
        // Redis's own integers: digits with no sign, blank or leading zero (a count above 0).
        let incrementable =
            text.is_some_and(|t| t.first().is_some_and(|&b| b != b'0') && t.iter().all(u8::is_ascii_digit));
        Counter { count, incrementable }
    }

    /// Admitting `cost` more on a window that counted some: `INCRBY`, which keeps the window's
    /// expiry, and like it refuses a count written in a form only Lua's `tonumber` reads.
    fn add(self, ctx: &Context, key: &RedisString, after: u64) -> Result<(), RedisError> {
        if !self.incrementable {
            return Err(RedisError::Str("ERR value is not an integer or out of range"));
        }
        set_keeping_ttl(ctx, key, &after.to_string())
    }
}

/// `stem`'s window `index`, read as the script reads it.
fn counter(ctx: &Context, key: &RedisString, others: OtherTypes) -> Result<Counter, RedisError> {
    Ok(read_string(ctx, key, others, |text| Counter::read(Some(text)))?.unwrap_or(Counter::read(None)))
}

/// The quota, cost and clock (ms) of a window command's `now_ms limit window_ms cost`.
fn window_args(
    name: &str,
    algorithm: Algorithm,
    [now, limit, window, cost]: [&RedisString; 4],
) -> Result<(Quota, u64, u64), RedisError> {
    let quota = Quota::new(int(limit, name, "limit")?, int(window, name, "window_ms")?);
    let cost = int(cost, name, "cost")?;
    Ok((checked(name, algorithm, quota, cost)?, cost, now_us(now, name)? / 1_000))
}

/// `RATELIMIT.FW stem now_ms limit window_ms cost`.
pub(crate) fn fixed_window_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, stem, now, limit, window, cost] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let (quota, cost, now_ms) = window_args("RATELIMIT.FW", Algorithm::FixedWindow, [now, limit, window, cost])?;
    let index = now_ms / quota.period_ms();
    let key = window_key(ctx, stem, index.into());
    let counter = counter(ctx, &key, OtherTypes::Refused)?;
    let mut state = (counter.count > 0).then_some(WindowState { window: index, count: counter.count });
    let outcome = fixed_window::step(&quota, &mut state, now_ms, cost);
    if outcome.allowed && cost > 0 {
        if counter.count == 0 {
            // The window's first units, with its expiry (at the window's end, the reset); a
            // value someone else left, which reads as no count, is replaced.
            set_with_ttl(ctx, &key, &cost.to_string(), outcome.reset_after_ms)?;
        } else {
            counter.add(ctx, &key, counter.count + cost)?;
        }
    }
    Ok(reply(&outcome, now_ms))
}

/// `RATELIMIT.SW stem now_ms limit window_ms cost`.
pub(crate) fn sliding_window_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, stem, now, limit, window, cost] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let (quota, cost, now_ms) = window_args("RATELIMIT.SW", Algorithm::SlidingWindow, [now, limit, window, cost])?;
    let w = quota.period_ms();
    let index = now_ms / w;
    let cur_key = window_key(ctx, stem, index.into());
    // The script reads both with MGET, which reads a key of another type as no counter.
    let cur = counter(ctx, &cur_key, OtherTypes::Absent)?;
    let prev = counter(ctx, &window_key(ctx, stem, i128::from(index) - 1), OtherTypes::Absent)?;
    // A count past limit * window denies whatever else is counted, and every figure the twin
    // derives from it is the same as from limit * window + 1 (each is floored to 0 or compared
    // past the budget), so a foreign count up to 2^52 cannot overflow its products.
    let most = quota.limit() * w + 1;
    let (cur_count, prev_count) = (cur.count.min(most), prev.count.min(most));
    let mut state =
        (cur_count > 0 || prev_count > 0).then_some(SlidingState { window: index, cur: cur_count, prev: prev_count });
    let outcome = sliding_window::step(&quota, &mut state, now_ms, cost);
    if outcome.allowed && cost > 0 {
        if cur.count == 0 {
            // The counter is read as "previous" through the whole next window: its expiry is
            // the end of that one (the reset).
            set_with_ttl(ctx, &cur_key, &cost.to_string(), outcome.reset_after_ms)?;
        } else {
            cur.add(ctx, &cur_key, cur.count + cost)?;
        }
    }
    Ok(reply(&outcome, now_ms))
}
