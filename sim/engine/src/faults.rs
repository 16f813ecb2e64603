//! Faults on a schedule: what breaks, when, and when it heals.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// One fault, active from `at_ms` until `until_ms` (instant faults ignore `until_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// What breaks.
    pub kind: FaultKind,
    /// Start (simulated ms since the run began).
    pub at_ms: u64,
    /// Heal time.
    pub until_ms: u64,
}

/// The kinds of fault the simulator injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum FaultKind {
    /// Instance and Redis cannot reach each other.
    Partition {
        /// The instance cut off.
        instance: u32,
    },
    /// Only the instance's requests are lost (Redis's replies still flow).
    PartitionToRedis {
        /// The instance.
        instance: u32,
    },
    /// Only Redis's replies to the instance are lost.
    PartitionFromRedis {
        /// The instance.
        instance: u32,
    },
    /// The link holds every message until the fault heals, then delivers them all: a
    /// latency spike.
    Hold {
        /// The instance.
        instance: u32,
    },
    /// Redis crashes and restarts at `until_ms`, keeping its data or losing it.
    RedisCrash {
        /// Persistence on.
        keep_data: bool,
    },
    /// Redis accepts but answers nothing until `until_ms`.
    RedisPause,
    /// Redis forgets every script (`SCRIPT FLUSH`), at `at_ms`.
    ScriptFlush,
    /// The Redis primary dies at `at_ms` and its replica, `lag_ms` behind, is promoted and
    /// serves from `until_ms`: the writes of the last `lag_ms` before the death are lost, and
    /// the new primary has no scripts. (On a real cluster: a primary killed or paused.)
    Failover {
        /// How far the replica was behind (ms).
        lag_ms: u64,
    },
    /// An instance crashes and comes back at `until_ms`.
    InstanceCrash {
        /// The instance.
        instance: u32,
    },
}

impl FaultKind {
    /// A short name for tables and charts.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Partition { .. } => "partition",
            FaultKind::PartitionToRedis { .. } => "partition-to-redis",
            FaultKind::PartitionFromRedis { .. } => "partition-from-redis",
            FaultKind::Hold { .. } => "hold",
            FaultKind::RedisCrash { keep_data: false } => "redis-crash",
            FaultKind::RedisCrash { keep_data: true } => "redis-crash-persistent",
            FaultKind::RedisPause => "redis-pause",
            FaultKind::ScriptFlush => "script-flush",
            FaultKind::InstanceCrash { .. } => "instance-crash",
            FaultKind::Failover { .. } => "failover",
        }
    }

    /// Whether Redis is unreachable for this instance while the fault lasts.
    pub fn cuts_off(&self, instance: u32) -> bool {
        match *self {
            FaultKind::Partition { instance: i }
            | FaultKind::PartitionToRedis { instance: i }
            | FaultKind::PartitionFromRedis { instance: i }
            | FaultKind::Hold { instance: i } => i == instance,
            FaultKind::RedisCrash { .. } | FaultKind::RedisPause | FaultKind::Failover { .. } => true,
            FaultKind::ScriptFlush | FaultKind::InstanceCrash { .. } => false,
        }
    }

    /// The instance the fault is about, for instance faults.
    pub fn instance(&self) -> Option<u32> {
        match *self {
            FaultKind::Partition { instance }
            | FaultKind::PartitionToRedis { instance }
            | FaultKind::PartitionFromRedis { instance }
            | FaultKind::Hold { instance }
            | FaultKind::InstanceCrash { instance } => Some(instance),
            _ => None,
        }
    }

    /// Whether the fault is a state of network links (and so undone by any link repair).
    pub fn is_link_fault(&self) -> bool {
        matches!(
            self,
            FaultKind::Partition { .. }
                | FaultKind::PartitionToRedis { .. }
                | FaultKind::PartitionFromRedis { .. }
                | FaultKind::Hold { .. }
                | FaultKind::RedisPause
        )
    }

    /// Whether Redis loses its data.
    pub fn loses_data(&self) -> bool {
        matches!(self, FaultKind::RedisCrash { keep_data: false })
    }

    /// The replication lag of a failover: the writes it loses are those of that last stretch.
    pub fn failover_lag_ms(&self) -> Option<u64> {
        match *self {
            FaultKind::Failover { lag_ms } => Some(lag_ms),
            _ => None,
        }
    }
}

/// The text form of a schedule, for replay commands and `--faults`:
/// `kind[:instance]@at_ms[..until_ms]`, comma-separated, e.g.
/// `partition:0@3000..7000,redis-crash@4000..4200,script-flush@7000`. A failover names its
/// replication lag where an instance fault names the instance: `failover:250@4000..5000`.
pub fn format_schedule(faults: &[Fault]) -> String {
    faults.iter().map(Fault::to_string).collect::<Vec<_>>().join(",")
}

/// Parses [`format_schedule`]'s text; the message names the piece that is wrong.
pub fn parse_schedule(text: &str) -> Result<Vec<Fault>, String> {
    text.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::parse).collect()
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind.instance(), self.kind.failover_lag_ms()) {
            (Some(i), _) => write!(f, "{}:{i}@{}", self.kind.name(), self.at_ms)?,
            (None, Some(lag)) => write!(f, "{}:{lag}@{}", self.kind.name(), self.at_ms)?,
            (None, None) => write!(f, "{}@{}", self.kind.name(), self.at_ms)?,
        }
        if self.until_ms > self.at_ms {
            write!(f, "..{}", self.until_ms)?;
        }
        Ok(())
    }
}

impl FromStr for Fault {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("fault {text:?}: {why} (expected kind[:instance]@at_ms[..until_ms], e.g. partition:0@3000..7000)")
        };
        let (kind, times) = text.split_once('@').ok_or_else(|| bad("no @"))?;
        let (at, until) = match times.split_once("..") {
            Some((a, u)) => (a, Some(u)),
            None => (times, None),
        };
        let ms = |t: &str| t.trim().parse::<u64>().map_err(|_| bad(&format!("{t:?} is not a time in ms")));
        let at_ms = ms(at)?;
        let until_ms = until.map(ms).transpose()?.unwrap_or(at_ms);
        if until_ms < at_ms {
            return Err(bad("it heals before it starts"));
        }
        if let Some(lag) = kind.strip_prefix("failover") {
            let lag_ms = match lag.strip_prefix(':') {
                Some(l) => l.parse::<u64>().map_err(|_| bad(&format!("{l:?} is not a replication lag in ms")))?,
                None if lag.is_empty() => return Err(bad("failover needs its replication lag in ms, as failover:250")),
                None => return Err(bad(&format!("unknown kind {kind:?}"))),
            };
            return Ok(Fault { kind: FaultKind::Failover { lag_ms }, at_ms, until_ms });
        }
        let (name, instance) = match kind.split_once(':') {
            Some((n, i)) => (n, Some(i.parse::<u32>().map_err(|_| bad(&format!("{i:?} is not an instance number")))?)),
            None => (kind, None),
        };
        let need = |i: Option<u32>| i.ok_or_else(|| bad(&format!("{name} needs an instance, as {name}:0")));
        let kind = match name {
            "partition" => FaultKind::Partition { instance: need(instance)? },
            "partition-to-redis" => FaultKind::PartitionToRedis { instance: need(instance)? },
            "partition-from-redis" => FaultKind::PartitionFromRedis { instance: need(instance)? },
            "hold" => FaultKind::Hold { instance: need(instance)? },
            "instance-crash" => FaultKind::InstanceCrash { instance: need(instance)? },
            "redis-crash" => FaultKind::RedisCrash { keep_data: false },
            "redis-crash-persistent" => FaultKind::RedisCrash { keep_data: true },
            "redis-pause" => FaultKind::RedisPause,
            "script-flush" => FaultKind::ScriptFlush,
            other => return Err(bad(&format!("unknown kind {other:?}"))),
        };
        if instance.is_some() && kind.instance().is_none() {
            return Err(bad(&format!("{name} takes no instance")));
        }
        Ok(Fault { kind, at_ms, until_ms })
    }
}

/// Merges overlapping crashes of the same host into one outage: a host that is down cannot
/// crash again, and the inner crash's restart must not end the outer outage. A merged Redis
/// crash keeps its data only if every crash in it did. Link faults may overlap freely (the
/// simulator re-asserts active ones after any heal).
pub fn normalize(mut faults: Vec<Fault>) -> Vec<Fault> {
    faults.sort_by_key(|f| f.at_ms);
    let mut out: Vec<Fault> = Vec::with_capacity(faults.len());
    for f in faults {
        let host = |k: &FaultKind| match *k {
            FaultKind::RedisCrash { .. } => Some(u32::MAX),
            FaultKind::InstanceCrash { instance } => Some(instance),
            _ => None,
        };
        let merged = host(&f.kind)
            .and_then(|h| out.iter_mut().rev().find(|g| host(&g.kind) == Some(h) && f.at_ms <= g.until_ms));
        match merged {
            Some(g) => {
                g.until_ms = g.until_ms.max(f.until_ms);
                if let (FaultKind::RedisCrash { keep_data: a }, FaultKind::RedisCrash { keep_data: b }) =
                    (&mut g.kind, f.kind)
                {
                    *a = *a && b;
                }
            }
            None => out.push(f),
        }
    }
    out
}

/// Fault start and end events in time order: (at, fault, is_start); at equal times starts
/// come first. Both the simulator and the real lane apply faults in this order.
pub fn events(faults: &[Fault]) -> Vec<(u64, FaultKind, bool)> {
    let mut events = Vec::new();
    for f in faults {
        events.push((f.at_ms, f.kind, true));
        if f.until_ms > f.at_ms {
            events.push((f.until_ms, f.kind, false));
        }
    }
    events.sort_by_key(|e| (e.0, !e.2));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_round_trip_through_text_and_bad_text_is_named() {
        let text =
            "partition:0@3000..7000,redis-crash-persistent@100..500,script-flush@7000,hold:2@10..20,failover:250@1..9";
        let faults = parse_schedule(text).expect("valid");
        assert_eq!(faults.len(), 5);
        assert_eq!(faults[4].kind, FaultKind::Failover { lag_ms: 250 });
        assert_eq!(format_schedule(&faults), text);
        for (bad, says) in [
            ("partition@1..2", "needs an instance"),
            ("redis-pause:1@1..2", "takes no instance"),
            ("flood@1", "unknown kind \"flood\""),
            ("hold:x@1", "not an instance number"),
            ("hold:1@5..2", "heals before it starts"),
            ("hold:1", "no @"),
            ("failover@1..2", "needs its replication lag"),
            ("failover:x@1..2", "not a replication lag"),
        ] {
            let err = parse_schedule(bad).expect_err(bad);
            assert!(err.contains(says) && err.contains(bad), "{err}");
        }
    }

    #[test]
    fn events_come_in_time_order_with_starts_first_at_equal_times() {
        let faults = parse_schedule("hold:1@5..9,partition:0@0..5,script-flush@7").expect("valid");
        let (hold, partition) = (FaultKind::Hold { instance: 1 }, FaultKind::Partition { instance: 0 });
        assert_eq!(
            events(&faults),
            vec![
                (0, partition, true),
                (5, hold, true),
                (5, partition, false),
                (7, FaultKind::ScriptFlush, true),
                (9, hold, false),
            ]
        );
    }

    #[test]
    fn overlapping_crashes_of_one_host_become_one_outage() {
        let f = |kind, at_ms, until_ms| Fault { kind, at_ms, until_ms };
        let merged = normalize(vec![
            f(FaultKind::RedisCrash { keep_data: true }, 100, 500),
            f(FaultKind::RedisCrash { keep_data: false }, 200, 300),
            f(FaultKind::InstanceCrash { instance: 1 }, 250, 400),
            f(FaultKind::InstanceCrash { instance: 2 }, 260, 400),
            f(FaultKind::RedisCrash { keep_data: true }, 600, 700),
        ]);
        assert_eq!(
            merged,
            vec![
                f(FaultKind::RedisCrash { keep_data: false }, 100, 500),
                f(FaultKind::InstanceCrash { instance: 1 }, 250, 400),
                f(FaultKind::InstanceCrash { instance: 2 }, 260, 400),
                f(FaultKind::RedisCrash { keep_data: true }, 600, 700),
            ]
        );
    }
}
