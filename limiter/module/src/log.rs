//! `RATELIMIT.SL key now_ms limit window_ms cost`: the sliding log, a sorted set of one member
//! per admitted unit scored by its admission time (`lua/sliding_log.lua`). The module API has
//! no sorted-set reads of its own, so the log is read and written through Redis's commands
//! (still one call into Redis per command, not a script's conversions around each).

use std::collections::BTreeMap;

use redis_module::{Context, KeyType, RedisError, RedisResult, RedisString, RedisValue};
use redis_ratelimit::harness::algo::sliding_log::{self, LogState};
use redis_ratelimit::{Algorithm, Quota};

use crate::args::{checked, int, now_us};
use crate::keyspace::{call_write, expire, key_type};
use crate::reply;

const NAME: &str = "RATELIMIT.SL";

/// See the module docs.
pub(crate) fn sliding_log_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, now, limit, window, cost] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let quota = Quota::new(int(limit, NAME, "limit")?, int(window, NAME, "window_ms")?);
    let cost = int(cost, NAME, "cost")?;
    let quota = checked(NAME, Algorithm::SlidingLog, quota, cost)?;
    let now_ms = now_us(now, NAME)? / 1_000;
    let w = quota.period_ms();

    let existed = match key_type(ctx, key) {
        KeyType::Empty => false,
        KeyType::ZSet => true,
        _ => return Err(RedisError::WrongType),
    };
    // Only the live entries, scored after now - window: those that have left count for
    // nothing in any reading, and the admission below trims them.
    let mut state = if existed { live(ctx, key, now_ms, w)? } else { None };
    // The members an admission names at `now` count on from those already scored now or later.
    let after: u64 = state.as_ref().map_or(0, |log| log.entries.range(now_ms..).map(|(_, n)| n).sum());
    let outcome = sliding_log::step(&quota, &mut state, now_ms, cost);
    if outcome.allowed && cost > 0 {
        let k = key.as_slice();
        if existed && now_ms >= w {
            let cutoff = (now_ms - w).to_string();
            call_write(ctx, "ZREMRANGEBYSCORE", &[k, b"-inf", cutoff.as_bytes()])?;
        }
        let score = now_ms.to_string();
        let members: Vec<String> = (1..=cost).map(|i| format!("{score}:{}", after + i)).collect();
        let mut add: Vec<&[u8]> = Vec::with_capacity(1 + 2 * members.len());
        add.push(k);
        for member in &members {
            add.extend([score.as_bytes(), member.as_bytes()]);
        }
        call_write(ctx, "ZADD", &add)?;
        // The script's PEXPIRE to when the newest entry leaves: the reset.
        expire(ctx, key, outcome.reset_after_ms)?;
    }
    Ok(reply(&outcome, now_ms))
}

/// The log's live entries (scored after `now_ms - w`) as the twin keeps them, a count per
/// score; None when there are none. A live member scored other than a whole number of ms
/// (no writer of this log's does that) is refused by name.
fn live(ctx: &Context, key: &RedisString, now_ms: u64, w: u64) -> Result<Option<LogState>, RedisError> {
    let from = format!("({}", i128::from(now_ms) - i128::from(w));
    let reply = ctx.call("ZRANGEBYSCORE", &[key.as_slice(), from.as_bytes(), b"+inf", b"WITHSCORES"][..])?;
    let RedisValue::Array(items) = reply else {
        return Err(RedisError::Str("ERR RATELIMIT.SL: ZRANGEBYSCORE answered no array"));
    };
    let mut entries = BTreeMap::new();
    let mut total = 0;
    for pair in items.chunks(2) {
        let score = match pair.get(1) {
            Some(RedisValue::SimpleString(s)) => s.parse::<f64>().ok(),
            Some(RedisValue::StringBuffer(b)) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
            _ => None,
        }
        .filter(|s| *s >= 0.0 && s.fract() == 0.0 && *s < 4_503_599_627_370_496.0);
        let Some(score) = score else {
            return Err(RedisError::String(format!(
                "ERR RATELIMIT.SL: the log {} holds a member scored {:?}, not a whole number of ms",
                String::from_utf8_lossy(key.as_slice()),
                pair.get(1)
            )));
        };
        *entries.entry(score as u64).or_insert(0) += 1;
        total += 1;
    }
    Ok((total > 0).then(|| LogState { entries: Box::new(entries), total }))
}
