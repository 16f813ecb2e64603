//! The scenarios a service is driven through, in real time, each a few seconds on a key of its
//! own: instances racing on one key, a window boundary, a steady trickle under the rate, a
//! steady load over it, and three faults under that load (one instance cut off from Redis,
//! Redis paused, Redis killed and restarted without its data).
//!
//! A scenario is a schedule: request i leaves at a fixed offset from the run's start, from a
//! fixed instance. Real time is not seeded, so a re-drive sends the same schedule again and
//! says whether the same break came back.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sim_real::clock::wall_us;
use sim_real::proxy::LinkFault;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::ask::{Answer, Asker};
use crate::file::ServiceFile;
use crate::fleet::Fleet;

/// A fault a scenario injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// One instance's link to Redis is cut both ways.
    CutOff {
        /// The instance.
        instance: usize,
    },
    /// Redis is stopped (SIGSTOP): connections stay open, nothing is answered.
    RedisPaused,
    /// Redis is killed, and started again empty at the fault's end.
    RedisDown,
}

impl Fault {
    /// Whether `instance` cannot reach Redis during the fault.
    pub fn affects(self, instance: usize) -> bool {
        match self {
            Fault::CutOff { instance: i } => i == instance,
            Fault::RedisPaused | Fault::RedisDown => true,
        }
    }

    /// In words.
    pub fn describe(self) -> String {
        match self {
            Fault::CutOff { instance } => format!("instance {instance} cut off from Redis"),
            Fault::RedisPaused => "Redis paused (SIGSTOP)".to_owned(),
            Fault::RedisDown => "Redis down, restarted without its data".to_owned(),
        }
    }
}

/// The load a scenario sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Twice the capacity at one instant, spread over every instance.
    Race,
    /// The capacity just before an aligned period boundary and again just after it.
    Boundary,
    /// Evenly spaced, at this multiple of the rate, round-robin over the instances.
    Steady {
        /// Offered, as a multiple of L/T.
        times_rate: f64,
    },
}

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scenario {
    /// Its name (`--service-scenario`).
    pub name: &'static str,
    /// In words.
    pub description: &'static str,
    /// What it sends.
    pub load: Load,
    /// What it breaks, if anything: from `FAULT_FROM` to `FAULT_TO` units into the run.
    pub fault: Option<Fault>,
    /// How far apart the instances' clocks are (ms), spread evenly around the true time; 0
    /// for none. A skewed scenario runs on instances of its own, started under libfaketime.
    pub skew_ms: u64,
}

/// The scenarios, in the order they run (Redis's death last of one fleet: it costs the most to
/// recover; the skewed clocks on a fleet of their own).
pub const ALL: [Scenario; 8] = [
    Scenario {
        name: "race",
        description: "every instance at once, twice the capacity",
        load: Load::Race,
        fault: None,
        skew_ms: 0,
    },
    Scenario {
        name: "boundary",
        description: "the capacity just before a period boundary and again just after",
        load: Load::Boundary,
        fault: None,
        skew_ms: 0,
    },
    Scenario {
        name: "trickle",
        description: "a steady 0.9x the rate, round-robin over the instances",
        load: Load::Steady { times_rate: 0.9 },
        fault: None,
        skew_ms: 0,
    },
    Scenario {
        name: "over",
        description: "a steady 1.5x the rate, round-robin over the instances",
        load: Load::Steady { times_rate: 1.5 },
        fault: None,
        skew_ms: 0,
    },
    Scenario {
        name: "cut-off",
        description: "2x the rate while instance 0 is cut off from Redis",
        load: Load::Steady { times_rate: 2.0 },
        fault: Some(Fault::CutOff { instance: 0 }),
        skew_ms: 0,
    },
    Scenario {
        name: "redis-paused",
        description: "2x the rate while Redis is paused",
        load: Load::Steady { times_rate: 2.0 },
        fault: Some(Fault::RedisPaused),
        skew_ms: 0,
    },
    Scenario {
        name: "redis-down",
        description: "2x the rate while Redis is down, then restarted without its data",
        load: Load::Steady { times_rate: 2.0 },
        fault: Some(Fault::RedisDown),
        skew_ms: 0,
    },
    Scenario {
        name: "skew",
        description: "2x the rate, the instances' clocks 500 ms apart",
        load: Load::Steady { times_rate: 2.0 },
        fault: None,
        skew_ms: 500,
    },
];

/// The scenario called `name`.
pub fn named(name: &str) -> Option<Scenario> {
    ALL.into_iter().find(|s| s.name == name)
}

/// The most requests per second a steady load sends, whatever the quota: a limit of thousands
/// per second is judged on a slice of its rate (the bound holds per any interval).
pub const MAX_RATE_PER_S: f64 = 400.0;

/// A steady run's length and its fault's start and end, in ms.
const STEADY_MS: u64 = 4_000;
const FAULTED_MS: u64 = 6_000;
const FAULT_FROM_MS: u64 = 1_000;
const FAULT_TO_MS: u64 = 4_500;

/// A fault as it happened, on the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    /// The fault.
    pub fault: Fault,
    /// When it began and ended (µs).
    pub from_us: u64,
    pub to_us: u64,
}

/// What a scenario's run recorded.
#[derive(Debug, Clone)]
pub struct Run {
    /// The scenario.
    pub scenario: Scenario,
    /// When it started (µs).
    pub start_us: u64,
    /// Every answer, in the order the requests were scheduled.
    pub answers: Vec<Answer>,
    /// Its fault, if any.
    pub fault: Option<Injected>,
    /// Each instance's clock offset (ms; empty when none was skewed).
    pub skew_ms: Vec<i64>,
    /// After a race: an obedient client's request at the Retry-After of the last denial.
    pub probe: Option<Probe>,
}

/// The Retry-After probe.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The Retry-After it obeyed (s).
    pub waited_s: f64,
    /// What it got.
    pub answer: Answer,
}

/// The requests of a scenario: offset from the start (µs) and instance.
pub fn schedule(s: &Scenario, file: &ServiceFile) -> Vec<(u64, usize)> {
    let n = file.start.instances;
    let q = &file.quota;
    let capacity = capacity(file);
    match s.load {
        Load::Race => (0..2 * capacity as usize).map(|i| (0, i % n)).collect(),
        Load::Boundary => {
            let period_us = q.period_ms() * 1000;
            // The start is aligned to a period: the boundary falls one period in.
            let before = period_us.saturating_sub(150_000.min(period_us / 4));
            let after = period_us + 150_000.min(period_us / 4);
            (0..capacity as usize)
                .map(|i| (before, i % n))
                .chain((0..capacity as usize).map(|i| (after, i % n)))
                .collect()
        }
        Load::Steady { times_rate } => {
            let per_s = (times_rate * q.limit() as f64 * 1000.0 / q.period_ms() as f64).min(MAX_RATE_PER_S);
            let gap_us = 1e6 / per_s;
            let length_ms = if s.fault.is_some() { FAULTED_MS } else { STEADY_MS.max(3 * q.period_ms()) };
            let count = (length_ms as f64 * 1000.0 / gap_us) as usize;
            (0..count).map(|i| ((i as f64 * gap_us) as u64, i % n)).collect()
        }
    }
}

/// Each instance's clock offset in `s` (ms), spread evenly over `s.skew_ms` around the true
/// time; empty when `s` skews nothing.
pub fn offsets(s: &Scenario, instances: usize) -> Vec<i64> {
    if s.skew_ms == 0 || instances < 2 {
        return Vec::new();
    }
    let span = s.skew_ms as f64;
    (0..instances).map(|i| (span * i as f64 / (instances - 1) as f64 - span / 2.0).round() as i64).collect()
}

/// What a request of one unit may take at once: the burst or the limit.
pub fn capacity(file: &ServiceFile) -> u64 {
    file.promise.capacity(&file.quota).max(1)
}

/// Drives `s` on `fleet`, limiting `key`.
pub async fn drive(s: &Scenario, file: &Arc<ServiceFile>, fleet: &mut Fleet, key: &str) -> Result<Run> {
    let ports: Vec<u16> = fleet.instances.iter().map(|i| i.port).collect();
    let asker = Asker::new(file, &ports)?;
    // Aligned to the period on the wall clock, so a boundary falls where the schedule says
    // (services and Redis count aligned windows from the epoch).
    let period_ms = file.quota.period_ms().max(1);
    let now_us = wall_us();
    let start_ms = (now_us / 1000 + 200).div_ceil(period_ms) * period_ms;
    let start = Instant::now() + Duration::from_micros(start_ms * 1000 - now_us);
    let start_us = start_ms * 1000;

    let mut requests = JoinSet::new();
    for (i, (offset_us, instance)) in schedule(s, file).into_iter().enumerate() {
        let (asker, file, key, port) = (asker.clone(), file.clone(), key.to_owned(), ports[instance]);
        requests.spawn(async move {
            tokio::time::sleep_until(start + Duration::from_micros(offset_us)).await;
            (i, asker.ask(&file, instance, port, &key).await)
        });
    }
    let fault = match s.fault {
        Some(fault) => Some(inject(fault, fleet, start).await.with_context(|| format!("scenario {}", s.name))?),
        None => None,
    };
    let mut answers: Vec<(usize, Answer)> = Vec::new();
    while let Some(done) = requests.join_next().await {
        answers.push(done.context("a request's task failed")?);
    }
    answers.sort_by_key(|(i, _)| *i);
    let answers: Vec<Answer> = answers.into_iter().map(|(_, a)| a).collect();

    let probe = match s.load {
        Load::Race => probe(&answers, &asker, file, &ports, key).await,
        _ => None,
    };
    Ok(Run { scenario: *s, start_us, answers, fault, probe, skew_ms: offsets(s, file.start.instances) })
}

/// Breaks the link or Redis at `FAULT_FROM_MS`, repairs it at `FAULT_TO_MS`.
async fn inject(fault: Fault, fleet: &mut Fleet, start: Instant) -> Result<Injected> {
    tokio::time::sleep_until(start + Duration::from_millis(FAULT_FROM_MS)).await;
    let from_us = wall_us();
    match fault {
        Fault::CutOff { instance } => fleet.proxies[instance].set(LinkFault::Partition, true),
        Fault::RedisPaused => fleet.redis.pause().context("pausing Redis")?,
        Fault::RedisDown => fleet.redis.kill(),
    }
    tokio::time::sleep_until(start + Duration::from_millis(FAULT_TO_MS)).await;
    let to_us = wall_us();
    match fault {
        Fault::CutOff { instance } => fleet.proxies[instance].set(LinkFault::Partition, false),
        Fault::RedisPaused => fleet.redis.resume().context("resuming Redis")?,
        Fault::RedisDown => fleet.redis.restart(false).context("restarting Redis")?,
    }
    Ok(Injected { fault, from_us, to_us })
}

/// An obedient client: after the race, waits the Retry-After of the last denial (from when it
/// arrived) and asks once more, from instance 0.
async fn probe(answers: &[Answer], asker: &Asker, file: &ServiceFile, ports: &[u16], key: &str) -> Option<Probe> {
    let last = answers.iter().filter(|a| !a.admitted() && !a.degraded).max_by_key(|a| a.answered_us)?;
    let waited_s = last.retry_after_s?;
    let at_us = last.answered_us + (waited_s * 1e6) as u64 + 20_000;
    let now = wall_us();
    tokio::time::sleep(Duration::from_micros(at_us.saturating_sub(now))).await;
    let answer = asker.ask(file, 0, ports[0], key).await;
    Some(Probe { waited_s, answer })
}
