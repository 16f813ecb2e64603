//! `RATELIMIT.SL key now_ms limit window_ms cost`: the sliding log, a sorted set of one member
//! per admitted unit scored by its admission time (`lua/sliding_log.lua`).

use std::collections::BTreeMap;
use std::time::Duration;

use redis_ratelimit::harness::algo::sliding_log::{self, LogState};
use redis_ratelimit::{Algorithm, Quota};

use crate::args::{checked, int, now_us};
use crate::{reply, Keys, Kind, Refusal};

const NAME: &str = "RATELIMIT.SL";

/// See the module docs.
pub(super) fn sliding_log(keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    let &[key, now, limit, window, cost] = args else {
        return Err(Refusal::Arity);
    };
    let quota = Quota::new(int(limit, NAME, "limit")?, Duration::from_millis(int(window, NAME, "window_ms")?));
    let cost = int(cost, NAME, "cost")?;
    let quota = checked(NAME, Algorithm::SlidingLog, quota, cost)?;
    let now_ms = now_us(keys, now, NAME)? / 1_000;
    let w = quota.period_ms();

    let existed = match keys.string(key, |_| ()) {
        Ok(None) => false,
        Err(Kind::ZSet) => true,
        _ => return Err(Refusal::WrongType),
    };
    // The entries scored after now - window: those that have left count for nothing in any
    // reading (the log's own time is never behind the reading), and the admission below trims
    // them. The newest of them is the log's time when the reading is behind it.
    let mut state = if existed { live(keys, key, now_ms, w)? } else { None };
    let at = state.as_ref().map_or(now_ms, |log| log.time(now_ms));
    // The members an admission names at `at` count on from those already scored there or later.
    let after: u64 = state.as_ref().map_or(0, |log| log.entries.range(at..).map(|(_, n)| n).sum());
    let outcome = sliding_log::step(&quota, &mut state, now_ms, cost);
    if outcome.allowed && cost > 0 {
        if existed && at >= w {
            keys.trim(key, at - w)?;
        }
        let members: Vec<String> = (1..=cost).map(|i| format!("{at}:{}", after + i)).collect();
        keys.add(key, at, &members)?;
        // The script's PEXPIRE to when the newest entry leaves: the reset.
        keys.expire(key, outcome.reset_after_ms)?;
    }
    Ok(reply(&outcome, now_ms))
}

/// The log's live entries (scored after `now_ms - w`) as the twin keeps them, a count per
/// score; None when there are none. A live member scored other than a whole number of ms
/// (no writer of this log's does that) is refused by name.
fn live(keys: &mut impl Keys, key: &[u8], now_ms: u64, w: u64) -> Result<Option<LogState>, Refusal> {
    let mut entries = BTreeMap::new();
    let mut total = 0;
    for text in keys.scores_above(key, i128::from(now_ms) - i128::from(w))? {
        let score = std::str::from_utf8(&text)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| *s >= 0.0 && s.fract() == 0.0 && *s < 4_503_599_627_370_496.0);
        let Some(score) = score else {
            return Err(Refusal::Error(format!(
                "ERR RATELIMIT.SL: the log {} holds a member scored {}, not a whole number of ms",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&text)
            )));
        };
        *entries.entry(score as u64).or_insert(0) += 1;
        total += 1;
    }
    Ok((total > 0).then(|| LogState { entries: Box::new(entries), total }))
}
