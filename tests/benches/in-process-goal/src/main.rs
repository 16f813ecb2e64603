//! Bench goal 5's two sides: `Limiter` with its local store (GCRA) and governor's keyed limiter,
//! each warmed with every key, then asked in turn about keys in a stride order.
//!
//! The goals bench could decide in its own process, but its limiter is the test crate's: built
//! with the harness's and the metrics' features, so each decision would also count itself for a
//! metrics recorder nobody installed. Built as its own package, this executable gets the library
//! as an application does, with its default features. The bench starts it twice:
//!
//! - `in-process-goal time KEYS OPERATIONS` decides OPERATIONS times on each side, in
//!   interleaved rounds (`in_process_goal::interleaved`), and prints their
//!   `in_process_goal::Timing`;
//! - `in-process-goal count ours|governor` makes 100,000 decisions of one side on 100,000 keys
//!   in `counted_decisions`, the one function callgrind counts (`--toggle-collect`).

#![forbid(unsafe_code)]
#![allow(clippy::disallowed_methods)] // a benchmark measures real time

use std::num::NonZeroU32;
use std::process::ExitCode;
use std::time::Duration;

use futures::FutureExt;
use in_process_goal::{interleaved, ns_per, Timing};
use redis_ratelimit::{Algorithm, Limiter, Quota};

/// Every check admitted, on both sides: a million a second per key.
const RATE: u32 = 1_000_000;
const OPEN: Quota = Quota::new(RATE as u64, Duration::from_secs(1)).with_burst(RATE as u64);

/// Keys and decisions of `count`.
const COUNTED: usize = 100_000;

struct Sides {
    keys: Vec<String>,
    ours: Limiter,
    governor: governor::DefaultKeyedRateLimiter<String>,
}

impl Sides {
    /// The two sides on `n` keys, each warmed with every key (the goal is the time of a
    /// decision, not of inserts). The limiter's table has room for a tenth more than `n`, as
    /// governor's map has room for all: a table's bound is split among its shards, which
    /// hashing fills unevenly, so one bounded at exactly `n` would give up a few of them (about
    /// 0.5%).
    fn new(n: usize) -> Result<Self, String> {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i:012}")).collect();
        let ours = Limiter::builder(Algorithm::Gcra, OPEN)
            .max_local_keys(n + n / 10)
            .build()
            .map_err(|e| format!("the limiter: {e}"))?;
        let rate = NonZeroU32::new(RATE).ok_or("a zero rate")?;
        let governor = governor::RateLimiter::keyed(governor::Quota::per_second(rate));
        for k in &keys {
            match ours.check(k).now_or_never() {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("the limiter refused key {k}: {e}")),
                None => return Err("an in-process check was not ready at its first poll".into()),
            }
            let _ = governor.check_key(k);
        }
        Ok(Sides { keys, ours, governor })
    }

    fn key(&self, i: usize) -> &String {
        &self.keys[i.wrapping_mul(7_919) % self.keys.len()]
    }

    fn ours(&self, i: usize) {
        let _decided = std::hint::black_box(self.ours.check(self.key(i)).now_or_never());
    }

    fn governor(&self, i: usize) {
        let _ = std::hint::black_box(self.governor.check_key(self.key(i)));
    }
}

/// `n` decisions of one side: the function callgrind counts, so nothing else the process does
/// is counted.
#[inline(never)]
fn counted_decisions(sides: &Sides, ours: bool, n: usize) {
    for i in 0..n {
        if ours {
            sides.ours(i);
        } else {
            sides.governor(i);
        }
    }
}

const USAGE: &str = "usage: in-process-goal time KEYS OPERATIONS | in-process-goal count ours|governor";

fn run(args: &[String]) -> Result<(), String> {
    let number = |what: &str, arg: Option<&String>| -> Result<usize, String> {
        let arg = arg.ok_or_else(|| format!("{what} is missing; {USAGE}"))?;
        match arg.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{what} must be a positive whole number, not {arg:?}")),
        }
    };
    match args.first().map(String::as_str) {
        Some("time") => {
            let keys = number("KEYS", args.get(1))?;
            let operations = number("OPERATIONS", args.get(2))?;
            let sides = Sides::new(keys)?;
            let (ratio, ours_ns, governor_ns) = interleaved(
                operations.div_ceil(in_process_goal::ROUNDS),
                |from, n| ns_per(from, n, |i| sides.ours(i)),
                |from, n| ns_per(from, n, |i| sides.governor(i)),
            );
            println!("{}", Timing { ratio, ours_ns, governor_ns });
            Ok(())
        }
        Some("count") => {
            let ours = match args.get(1).map(String::as_str) {
                Some("ours") => true,
                Some("governor") => false,
                Some(other) => return Err(format!("count which side: ours or governor, not {other:?}")),
                None => return Err(format!("count which side: ours or governor; {USAGE}")),
            };
            counted_decisions(&Sides::new(COUNTED)?, ours, COUNTED);
            Ok(())
        }
        _ => Err(USAGE.into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("in-process-goal: {e}");
            ExitCode::from(2)
        }
    }
}
