//! Faults on a schedule: what breaks, when, and when it heals.

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
        }
    }

    /// Whether Redis is unreachable for this instance while the fault lasts.
    pub fn cuts_off(&self, instance: u32) -> bool {
        match *self {
            FaultKind::Partition { instance: i }
            | FaultKind::PartitionToRedis { instance: i }
            | FaultKind::PartitionFromRedis { instance: i }
            | FaultKind::Hold { instance: i } => i == instance,
            FaultKind::RedisCrash { .. } | FaultKind::RedisPause => true,
            FaultKind::ScriptFlush | FaultKind::InstanceCrash { .. } => false,
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

#[cfg(test)]
mod tests {
    use super::*;

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
