//! Timing two things that each take a few hundred nanoseconds, on a shared machine whose speed
//! drifts from one second to the next: timed one after the other, a drift lands on one side
//! only and the ratio swings by half (runs of the same code gave 1.17x and 1.94x). So both
//! sides run in interleaved rounds, in alternating order, and the figure is the median of the
//! rounds' ratios: a disturbance skews the rounds it lands in, not the median.
//!
//! The goals bench (`tests/benches/goals`) times its in-process goals this way, and this
//! package's executable runs goal 5's two sides with it (see `main.rs`).

#![forbid(unsafe_code)]
#![allow(clippy::disallowed_methods)] // a benchmark measures real time

use std::time::Instant;

/// Interleaved rounds per figure.
pub const ROUNDS: usize = 15;

/// The median ratio of `ours` to `theirs` over [`ROUNDS`] rounds of `per_round` operations each
/// (each closure runs operations `from..from + per_round` of its own sequence and returns the
/// nanoseconds per operation), and each side's median nanoseconds.
pub fn interleaved(
    per_round: usize,
    mut ours: impl FnMut(usize, usize) -> f64,
    mut theirs: impl FnMut(usize, usize) -> f64,
) -> (f64, f64, f64) {
    let mut ratios = Vec::with_capacity(ROUNDS);
    let (mut a, mut b) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for round in 0..ROUNDS {
        let from = round * per_round;
        let (o, t) = if round % 2 == 0 {
            let o = ours(from, per_round);
            (o, theirs(from, per_round))
        } else {
            let t = theirs(from, per_round);
            (ours(from, per_round), t)
        };
        ratios.push(o / t);
        a.push(o);
        b.push(t);
    }
    (median(ratios), median(a), median(b))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds per call of `f(i)` for `i` in `from..from + n`.
pub fn ns_per(from: usize, n: usize, mut f: impl FnMut(usize)) -> f64 {
    let started = Instant::now();
    for i in from..from + n {
        f(i);
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

/// What the executable's `time` reports, one line `ratio=R ours_ns=A governor_ns=B`: the
/// median of the rounds' ratios and each side's median nanoseconds per decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub ratio: f64,
    pub ours_ns: f64,
    pub governor_ns: f64,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ratio={} ours_ns={} governor_ns={}", self.ratio, self.ours_ns, self.governor_ns)
    }
}

impl std::str::FromStr for Timing {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let field = |name: &str| -> Result<f64, String> {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .ok_or_else(|| format!("no {name} in the in-process goal's report {line:?}"))
        };
        Ok(Timing { ratio: field("ratio")?, ours_ns: field("ours_ns")?, governor_ns: field("governor_ns")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_the_median_of_the_rounds_and_each_side_runs_its_own_operations() {
        let (mut ours_ran, mut theirs_ran) = (Vec::new(), Vec::new());
        // Ours takes 2 ns per operation, theirs 1, except one disturbed round of theirs.
        let (ratio, ours, theirs) = interleaved(
            3,
            |from, n| {
                ours_ran.push(from..from + n);
                2.0
            },
            |from, n| {
                theirs_ran.push(from..from + n);
                if from == 6 {
                    100.0
                } else {
                    1.0
                }
            },
        );
        assert_eq!((ratio, ours, theirs), (2.0, 2.0, 1.0), "one disturbed round moves no median");
        let expected: Vec<_> = (0..ROUNDS).map(|r| r * 3..r * 3 + 3).collect();
        assert_eq!((ours_ran, theirs_ran), (expected.clone(), expected));
    }

    #[test]
    fn a_timing_reads_back_as_it_was_written_and_a_partial_one_is_refused() {
        let t = Timing { ratio: 0.95, ours_ns: 240.5, governor_ns: 253.0 };
        assert_eq!(t.to_string().parse::<Timing>(), Ok(t));
        let partial = "ratio=0.95 ours_ns=240.5".parse::<Timing>().expect_err("no governor_ns");
        assert!(partial.contains("no governor_ns"), "{partial}");
    }
}
