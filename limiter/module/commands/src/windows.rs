//! The window algorithms: `RATELIMIT.FW` (`lua/fixed_window.lua`: one counter per key, of the
//! window it counts in) and `RATELIMIT.SW` (`lua/sliding_window.lua`: one counter per aligned
//! window under the stem the caller names).

use redis_ratelimit::harness::algo::fixed_window::{self, WindowState};
use redis_ratelimit::harness::algo::sliding_window::{self, SlidingState};
use redis_ratelimit::{Algorithm, Quota};
use std::time::Duration;

use crate::args::{checked, int, now_us};
use crate::number::stored_int;
use crate::{reply, Keys, Refusal};

/// A window's counter as the script reads it: its count (`stored_int`, 0 for none or for
/// anything else someone left), and whether its text is one `INCRBY` takes.
#[derive(Clone, Copy)]
struct Counter {
    count: u64,
    incrementable: bool,
}

impl Counter {
    const NONE: Counter = Counter { count: 0, incrementable: false };

    fn read(text: &[u8]) -> Self {
        let count = stored_int(text).unwrap_or(0);
        // Redis's own integers: digits with no sign, blank or leading zero (a count above 0).
        let incrementable = text.first().is_some_and(|&b| b != b'0') && text.iter().all(u8::is_ascii_digit);
        Counter { count, incrementable }
    }

    /// The counter at `key`: a key of another type is an error (`GET`), or no counter when
    /// `others_absent` (`MGET`).
    fn at(keys: &mut impl Keys, key: &[u8], others_absent: bool) -> Result<Self, Refusal> {
        match keys.string(key, Counter::read) {
            Ok(counter) => Ok(counter.unwrap_or(Counter::NONE)),
            Err(_) if others_absent => Ok(Counter::NONE),
            Err(_) => Err(Refusal::WrongType),
        }
    }

    /// Admits `cost` at `key`: the window's first units with its expiry `ttl_ms` (a value
    /// someone else left, which reads as no count, is replaced); or `INCRBY`, which keeps the
    /// window's expiry, and like it refuses a count written in a form only Lua's `tonumber` reads.
    fn admit(self, keys: &mut impl Keys, key: &[u8], cost: u64, ttl_ms: u64) -> Result<(), Refusal> {
        if self.count == 0 {
            return keys.set(key, cost.to_string().as_bytes(), Some(ttl_ms));
        }
        if !self.incrementable {
            return keys.refused_write(Refusal::Error("ERR value is not an integer or out of range".into()));
        }
        keys.set(key, (self.count + cost).to_string().as_bytes(), None)
    }
}

/// `stem:index`: a window's key (the scripts' `KEYS[1] .. ':' .. index`), in the stem's hash tag.
fn window_key(stem: &[u8], index: i128) -> Vec<u8> {
    let mut name = stem.to_vec();
    name.push(b':');
    name.extend_from_slice(index.to_string().as_bytes());
    name
}

/// The stem, quota, cost and clock (ms) of a window command's `stem now_ms limit window_ms cost`.
fn window_args<'a>(
    keys: &mut impl Keys,
    name: &str,
    algorithm: Algorithm,
    args: &[&'a [u8]],
) -> Result<(&'a [u8], Quota, u64, u64), Refusal> {
    let &[stem, now, limit, window, cost] = args else {
        return Err(Refusal::Arity);
    };
    let quota = Quota::new(int(limit, name, "limit")?, Duration::from_millis(int(window, name, "window_ms")?));
    let cost = int(cost, name, "cost")?;
    Ok((stem, checked(name, algorithm, quota, cost)?, cost, now_us(keys, now, name)? / 1_000))
}

/// `RATELIMIT.FW key now_ms limit window_ms cost`: one counter per key, the string
/// `index:count` of the window it counts in (`lua/fixed_window.lua`).
pub(super) fn fixed_window(keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    let (key, quota, cost, now_ms) = window_args(keys, "RATELIMIT.FW", Algorithm::FixedWindow, args)?;
    let client_time = !args[1].is_empty();
    // A value someone else left (no colon, a part that is no stored number) reads as no
    // counter, as the script's `stored_int` reads it; another type is the script's WRONGTYPE.
    let read = keys.string(key, |text| {
        let colon = text.iter().position(|&b| b == b':')?;
        Some(WindowState { window: stored_int(&text[..colon])?, count: stored_int(&text[colon + 1..])? })
    });
    let mut state = match read {
        Ok(state) => state.flatten(),
        Err(_) => return Err(Refusal::WrongType),
    };
    let counted = state.filter(|s| s.window >= now_ms / quota.period_ms()).map_or(0, |s| s.count);
    let outcome = fixed_window::step(&quota, &mut state, now_ms, cost);
    if let (true, Some(WindowState { window, count })) = (outcome.allowed && cost > 0, state) {
        let value = format!("{window}:{count}");
        // Counted on in its window, the key keeps its expiry; a window's first units set it to
        // the window's end (the reset), and a period later fed the caller's clock.
        let ttl = match (counted, client_time) {
            (0, true) => Some(outcome.reset_after_ms + quota.period_ms()),
            (0, false) => Some(outcome.reset_after_ms),
            _ => None,
        };
        keys.set(key, value.as_bytes(), ttl)?;
    }
    Ok(reply(&outcome, now_ms))
}

/// `RATELIMIT.SW stem now_ms limit window_ms cost`.
pub(super) fn sliding_window(keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    let (stem, quota, cost, now_ms) = window_args(keys, "RATELIMIT.SW", Algorithm::SlidingWindow, args)?;
    let w = quota.period_ms();
    let index = now_ms / w;
    let cur_key = window_key(stem, index.into());
    // The script reads both with MGET, which reads a key of another type as no counter.
    let cur = Counter::at(keys, &cur_key, true)?;
    let prev = Counter::at(keys, &window_key(stem, i128::from(index) - 1), true)?;
    // A count past limit * window denies whatever else is counted, and every figure the twin
    // derives from it is the same as from limit * window + 1 (each is floored to 0 or compared
    // past the budget), so a foreign count up to 2^52 cannot overflow its products.
    let most = quota.limit() * w + 1;
    let (cur_count, prev_count) = (cur.count.min(most), prev.count.min(most));
    let mut state =
        (cur_count > 0 || prev_count > 0).then_some(SlidingState { window: index, cur: cur_count, prev: prev_count });
    let outcome = sliding_window::step(&quota, &mut state, now_ms, cost);
    if outcome.allowed && cost > 0 {
        // The counter is read as "previous" through the whole next window: its expiry is the
        // end of that one (the reset).
        cur.admit(keys, &cur_key, cost, outcome.reset_after_ms)?;
    }
    Ok(reply(&outcome, now_ms))
}
