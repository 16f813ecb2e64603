//! A schedule: requests on one key at exact times, and faults between them. What the search
//! generates and shrinks, what a counterexample prints as a table, and what `--replay` reads
//! back: `0:1 0:1 250:2@+1000 lose-data@400 900:1` is a request of cost 1 at 0 ms, another at
//! 0 ms, one of cost 2 at 250 ms from an instance whose clock reads 1000 ms ahead, Redis losing
//! its data at 400 ms, and a request at 900 ms.

use std::fmt::{self, Write};

use super::direct::{Decided, Direct};

/// One event of a schedule, at ms after the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A request of `cost` units.
    Request {
        /// When.
        t_ms: u64,
        /// Its cost.
        cost: u64,
        /// How far the calling instance's clock is off (client-time subjects send it).
        skew_ms: i64,
    },
    /// Redis restarts without its data.
    LoseData {
        /// When.
        t_ms: u64,
    },
    /// `SCRIPT FLUSH`.
    FlushScripts {
        /// When.
        t_ms: u64,
    },
}

impl Event {
    /// When it happens.
    pub fn t_ms(&self) -> u64 {
        match *self {
            Event::Request { t_ms, .. } | Event::LoseData { t_ms } | Event::FlushScripts { t_ms } => t_ms,
        }
    }

    /// The same event `by_ms` later (earlier when negative, never before 0).
    pub fn moved(self, by_ms: i64) -> Event {
        let at = |t: u64| t.saturating_add_signed(by_ms);
        match self {
            Event::Request { t_ms, cost, skew_ms } => Event::Request { t_ms: at(t_ms), cost, skew_ms },
            Event::LoseData { t_ms } => Event::LoseData { t_ms: at(t_ms) },
            Event::FlushScripts { t_ms } => Event::FlushScripts { t_ms: at(t_ms) },
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Event::Request { t_ms, cost, skew_ms: 0 } => write!(f, "{t_ms}:{cost}"),
            Event::Request { t_ms, cost, skew_ms } => write!(f, "{t_ms}:{cost}@{skew_ms:+}"),
            Event::LoseData { t_ms } => write!(f, "lose-data@{t_ms}"),
            Event::FlushScripts { t_ms } => write!(f, "flush-scripts@{t_ms}"),
        }
    }
}

/// Events in time order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schedule(pub Vec<Event>);

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(Event::to_string).collect();
        f.write_str(&parts.join(" "))
    }
}

impl Schedule {
    /// Reads the text form; the error names the item at fault.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let mut events = Vec::new();
        for item in text.split([' ', ',']).filter(|s| !s.is_empty()) {
            let number = |s: &str, what: &str| {
                s.parse::<u64>().map_err(|_| format!("{item:?}: {what} must be a whole number, got {s:?}"))
            };
            let event = if let Some(t) = item.strip_prefix("lose-data@") {
                Event::LoseData { t_ms: number(t, "the time")? }
            } else if let Some(t) = item.strip_prefix("flush-scripts@") {
                Event::FlushScripts { t_ms: number(t, "the time")? }
            } else if let Some((t, rest)) = item.split_once(':') {
                let (c, skew) = rest.split_once('@').unwrap_or((rest, "0"));
                let skew_ms = skew.parse::<i64>().map_err(|_| {
                    format!("{item:?}: the clock offset after @ must be a whole number of ms, got {skew:?}")
                })?;
                Event::Request { t_ms: number(t, "the time")?, cost: number(c, "the cost")?, skew_ms }
            } else {
                return Err(format!(
                    "{item:?} is not an event: write T:COST (or T:COST@+SKEW) for a request, lose-data@T or \
                     flush-scripts@T"
                ));
            };
            if events.last().is_some_and(|e: &Event| e.t_ms() > event.t_ms()) {
                return Err(format!("{item:?} comes before the event it follows; times must not decrease"));
            }
            events.push(event);
        }
        if events.is_empty() {
            return Err("the schedule is empty".into());
        }
        Ok(Schedule(events))
    }

    /// The requests' events, with their index in the schedule.
    pub fn requests(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        self.0.iter().enumerate().filter_map(|(i, e)| match *e {
            Event::Request { t_ms, cost, .. } => Some((i, t_ms, cost)),
            _ => None,
        })
    }
}

/// A schedule as run: each event with the decision its request got.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The schedule.
    pub schedule: Schedule,
    /// Per event: the decision for a request, None for a fault.
    pub decided: Vec<Option<Decided>>,
}

/// The one key every schedule runs on.
pub const KEY: &str = "user-1";

impl Ran {
    /// Runs `schedule` on `direct` (which should be fresh).
    pub fn new(direct: &mut Direct, schedule: &Schedule) -> Ran {
        let decided = schedule
            .0
            .iter()
            .map(|e| match *e {
                Event::Request { t_ms, cost, skew_ms } => Some(direct.request(t_ms, skew_ms, KEY, cost)),
                Event::LoseData { .. } => {
                    direct.lose_data();
                    None
                }
                Event::FlushScripts { .. } => {
                    direct.flush_scripts();
                    None
                }
            })
            .collect();
        Ran { schedule: schedule.clone(), decided }
    }

    /// The first command the script called that the Redis model does not implement, if any:
    /// then the run says nothing about the script.
    pub fn unknown_command(&self) -> Option<&str> {
        self.decided.iter().flatten().find_map(|d| d.unknown_command.as_deref())
    }

    /// Whether any request came from an instance whose clock was off.
    pub fn skewed(&self) -> bool {
        self.schedule.0.iter().any(|e| matches!(e, Event::Request { skew_ms, .. } if *skew_ms != 0))
    }

    /// The lowest and highest clock offsets of the requests, if any is off.
    pub fn clock_offsets(&self) -> Option<(i64, i64)> {
        let offsets = self.schedule.0.iter().filter_map(|e| match *e {
            Event::Request { skew_ms, .. } => Some(skew_ms),
            _ => None,
        });
        let (lo, hi) = offsets.fold((i64::MAX, i64::MIN), |(lo, hi), o| (o.min(lo), o.max(hi)));
        self.skewed().then_some((lo, hi))
    }

    /// The admitted requests as (index, time, units).
    pub fn admitted(&self) -> Vec<(usize, u64, u64)> {
        self.schedule.requests().filter(|&(i, ..)| self.allowed(i)).map(|(i, t, _)| (i, t, self.units(i))).collect()
    }

    /// Whether event `i` was an admitted request.
    pub fn allowed(&self, i: usize) -> bool {
        self.decided[i].as_ref().is_some_and(|d| d.allowed)
    }

    /// Units event `i` admitted or denied (a partial grant may cut the cost).
    pub fn units(&self, i: usize) -> u64 {
        self.decided[i].as_ref().map_or(0, |d| d.cost)
    }

    /// Data losses in `(from, to]`.
    pub fn losses_between(&self, from: u64, to: u64) -> u64 {
        self.schedule.0.iter().filter(|e| matches!(e, Event::LoseData { t_ms } if *t_ms > from && *t_ms <= to)).count()
            as u64
    }

    /// Data losses at or before `t_ms`.
    pub fn losses_until(&self, t_ms: u64) -> u64 {
        self.schedule.0.iter().filter(|e| matches!(e, Event::LoseData { t_ms: at } if *at <= t_ms)).count() as u64
    }

    /// The schedule as a table, the event at `mark` pointed at with `note`.
    pub fn table(&self, mark: usize, note: &str) -> String {
        let skewed = self.skewed();
        let mut out = String::from(if skewed {
            "      t (ms)  clock off  cost  decision\n"
        } else {
            "      t (ms)  cost  decision\n"
        });
        for (i, (e, d)) in self.schedule.0.iter().zip(&self.decided).enumerate() {
            let decision = match (e, d) {
                (Event::Request { .. }, Some(d)) => {
                    let mut text = if d.allowed { "allowed".to_owned() } else { "denied".to_owned() };
                    if let Some(ra) = d.retry_after_ms {
                        let _ = write!(text, ", retry after {ra} ms");
                    }
                    if let Some(e) = &d.error {
                        let _ = write!(text, " (script error: {e})");
                    }
                    text
                }
                (Event::LoseData { .. }, _) => "Redis loses its data".to_owned(),
                (Event::FlushScripts { .. }, _) => "SCRIPT FLUSH".to_owned(),
                (Event::Request { .. }, None) => "-".to_owned(),
            };
            let (cost, clock) = match e {
                Event::Request { cost, skew_ms, .. } => (cost.to_string(), format!("{skew_ms:+} ms")),
                _ => (String::new(), String::new()),
            };
            let pointer = if i == mark { format!("   <- {note}") } else { String::new() };
            let clock = if skewed { format!("  {clock:>9}") } else { String::new() };
            let _ = writeln!(out, "  {:>10}{clock}  {cost:>4}  {decision}{pointer}", e.t_ms());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_reads_back_what_it_prints() {
        let text = "0:1 0:20 250:2@+1000 lose-data@400 flush-scripts@400 900:1@-5";
        let s = Schedule::parse(text).expect("valid");
        assert_eq!(s.to_string(), text);
        assert_eq!(s.requests().map(|(i, ..)| i).collect::<Vec<_>>(), [0, 1, 2, 5]);
    }

    #[test]
    fn clock_offsets_span_the_requests_clocks() {
        let ran = |text: &str| Ran { schedule: Schedule::parse(text).expect("valid"), decided: Vec::new() };
        assert_eq!(ran("0:1@+500 10:1 30:2@-1500").clock_offsets(), Some((-1_500, 500)));
        assert_eq!(ran("0:1@+500 10:1@+60").clock_offsets(), Some((60, 500)));
        assert_eq!(ran("0:1 lose-data@5 10:1").clock_offsets(), None);
    }

    #[test]
    fn bad_schedules_are_refused_naming_the_item() {
        let err = |t: &str| Schedule::parse(t).expect_err(t);
        assert!(err("0:1 x:1").contains("\"x:1\""));
        assert!(err("0:1 5").contains("is not an event"));
        assert!(err("10:1 5:1").contains("\"5:1\" comes before"));
        assert!(err("lose-data@soon").contains("whole number"));
        assert!(err("0:1@x").contains("clock offset"));
        assert!(err("").contains("empty"));
    }
}
