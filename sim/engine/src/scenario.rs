//! The scenario catalogue: each scenario is a group of instances, a load, a fault schedule and clocks;
//! it runs every selected subject (the library's algorithms among them) on the same seeds and
//! the same load.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

use redis_ratelimit::{FailurePolicy, Quota, TimeSource};

use crate::faults::{Fault, FaultKind};
use crate::mode::Mode;
use crate::subject::Subject;
use crate::workload::{Spread, Workload};

/// The quota every scenario limits to unless it says otherwise: 20 per second per key.
pub const QUOTA: Quota = Quota::new(20, Duration::from_secs(1));
/// The quota of the busy-key scenario: one key busy enough for leases to pay.
pub const BUSY_QUOTA: Quota = Quota::new(1_000, Duration::from_secs(1));
/// The local budget per instance used by the `local-budget` policy: a quarter of the limit.
pub const LOCAL_BUDGET: FailurePolicy = FailurePolicy::LocalBudget { limit: 5, period: Duration::from_secs(1) };

/// A scenario: everything but the algorithm, the policy and the seed.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Catalogue name.
    pub name: &'static str,
    /// What it shows, for tables and the report.
    pub description: &'static str,
    /// Instances (overridable with `--instances`).
    pub instances: u32,
    /// The quota.
    pub quota: Quota,
    /// The load.
    pub workload: Workload,
    /// Fixed faults (the swarm draws its own per seed).
    pub faults: Vec<Fault>,
    /// Clock offset (ms) and drift (ppm) per instance, cycled over instances.
    pub skew: Vec<(i64, i64)>,
    /// Failure policies to run.
    pub policies: Vec<FailurePolicy>,
    /// Time sources to run (the subjects always use client time).
    pub time_sources: Vec<TimeSource>,
    /// One-way network latency range between instances and Redis (ms).
    pub latency_ms: (u64, u64),
    /// Draw a random fault mix per seed.
    pub swarm: bool,
    /// Every request matches several rules (the per-user, per-route and global rules of
    /// `crate::multi_rule`): only the multi-rule subjects run here, and only here.
    pub rules: bool,
    /// The library's round-trip modes to run beside the plain library (plain first).
    pub modes: Vec<Mode>,
}

fn poisson(rate_x: f64, keys: u32) -> Workload {
    Workload::Poisson { rate_x, keys, hot_share: 0.5, max_cost: 1, spread: Spread::Random }
}

/// The whole catalogue, in the order the report shows it: races first.
pub fn catalogue() -> Vec<Scenario> {
    let all_policies = vec![FailurePolicy::FailOpen, FailurePolicy::FailClosed, LOCAL_BUDGET];
    let base = Scenario {
        name: "",
        description: "",
        instances: 4,
        quota: QUOTA,
        workload: poisson(2.0, 3),
        faults: vec![],
        skew: vec![(0, 0)],
        policies: vec![FailurePolicy::FailOpen],
        time_sources: vec![TimeSource::Server],
        latency_ms: (1, 3),
        swarm: false,
        rules: false,
        modes: vec![Mode::Plain],
    };
    let with_modes = |modes: &[Mode]| [Mode::Plain].iter().chain(modes).copied().collect::<Vec<_>>();
    vec![
        Scenario {
            name: "get-set-race",
            description: "8 instances share one hot key at 5x its limit with 2-10 ms to Redis: a GET-then-SET counter \
                          loses updates between its read and its write and over-admits; atomic scripts cannot.",
            instances: 8,
            workload: Workload::Poisson { rate_x: 5.0, keys: 1, hot_share: 1.0, max_cost: 1, spread: Spread::Random },
            latency_ms: (2, 10),
            ..base.clone()
        },
        Scenario {
            name: "baseline",
            description: "No faults: Poisson load at 2x the limit over 3 keys, costs 1 to 3. Every algorithm should \
                          match its oracle closely.",
            workload: Workload::Poisson { rate_x: 2.0, keys: 3, hot_share: 0.5, max_cost: 3, spread: Spread::Random },
            ..base.clone()
        },
        Scenario {
            name: "clock-skew",
            description: "Instance clocks are off by up to 1.5 s and drift by up to 2%. Algorithms fed the instances' \
                          clocks (client time) over-admit; the same algorithms on Redis's clock hold.",
            workload: poisson(3.0, 1),
            skew: vec![(1_500, 20_000), (-1_500, -20_000), (700, 5_000), (0, 0)],
            time_sources: vec![TimeSource::Server, TimeSource::Client],
            ..base.clone()
        },
        Scenario {
            name: "partition",
            description: "Instance 0 is cut off from Redis from 3 s to 7 s, then one-way partitions and a held link \
                          follow. Its failure policy answers; the others keep using Redis.",
            faults: vec![
                Fault { kind: FaultKind::Partition { instance: 0 }, at_ms: 3_000, until_ms: 7_000 },
                Fault { kind: FaultKind::PartitionToRedis { instance: 1 }, at_ms: 8_000, until_ms: 9_000 },
                Fault { kind: FaultKind::Hold { instance: 2 }, at_ms: 9_500, until_ms: 10_000 },
            ],
            policies: all_policies.clone(),
            modes: with_modes(&[Mode::DenialCache, Mode::Lease]),
            ..base.clone()
        },
        Scenario {
            name: "redis-outage",
            description: "Redis is down from 3 s to 7 s (it keeps its data). Fail-open admits everything, unbounded; \
                          fail-closed admits nothing; the local budget holds instances x budget.",
            workload: poisson(3.0, 2),
            faults: vec![Fault { kind: FaultKind::RedisCrash { keep_data: true }, at_ms: 3_000, until_ms: 7_000 }],
            policies: all_policies.clone(),
            ..base.clone()
        },
        Scenario {
            name: "redis-pause",
            description: "Redis stops answering from 3 s to 5 s (a long fork, a stopped process) and keeps its data. \
                          Calls time out and the failure policy answers; when Redis resumes it runs every script \
                          sent meanwhile, so each call given up on is counted by Redis too (late executions).",
            workload: poisson(3.0, 2),
            faults: vec![Fault { kind: FaultKind::RedisPause, at_ms: 3_000, until_ms: 5_000 }],
            policies: all_policies.clone(),
            ..base.clone()
        },
        Scenario {
            name: "redis-restart",
            description:
                "Redis restarts at 4 s losing every key and every script. Each key may admit one extra burst, \
                          no more; scripts come back through EVAL after NOSCRIPT.",
            workload: poisson(3.0, 3),
            faults: vec![
                Fault { kind: FaultKind::RedisCrash { keep_data: false }, at_ms: 4_000, until_ms: 4_200 },
                Fault { kind: FaultKind::ScriptFlush, at_ms: 7_000, until_ms: 7_000 },
            ],
            policies: vec![FailurePolicy::FailClosed],
            modes: with_modes(&[Mode::DenialCache, Mode::Lease, Mode::Batch]),
            ..base.clone()
        },
        Scenario {
            name: "failover",
            description: "The primary dies at 4 s; 100 ms later its replica, 300 ms behind, takes over without the \
                          writes of those last 300 ms and without scripts. Each key may admit at most one extra burst \
                          plus rate x lag over its promise; the failure policy answers the gap.",
            workload: poisson(3.0, 3),
            faults: vec![Fault { kind: FaultKind::Failover { lag_ms: 300 }, at_ms: 4_000, until_ms: 4_100 }],
            policies: all_policies.clone(),
            ..base.clone()
        },
        Scenario {
            name: "window-boundary",
            description:
                "Bursts of the full limit just before and just after window boundaries. A fixed window admits \
                          twice its limit within a few ms of the boundary; the others do not.",
            instances: 2,
            workload: Workload::BoundaryBursts { size: QUOTA.limit() as u32 },
            ..base.clone()
        },
        Scenario {
            name: "steady-trickle",
            description: "One client sends every 30 ms, faster than one token's 50 ms refill. A correct bucket admits \
                          the rate; ADR-002's floored refill throws the fraction away on every call and starves it.",
            instances: 1,
            workload: Workload::Trickle { gap_ms: 30 },
            ..base.clone()
        },
        Scenario {
            name: "hot-key",
            description: "20 keys pinned to instances, 90% of the load on one of them (many clients behind one \
                          instance), at 3x the limit.",
            workload: Workload::Poisson {
                rate_x: 3.0,
                keys: 20,
                hot_share: 0.9,
                max_cost: 1,
                spread: Spread::PinnedKeys,
            },
            modes: with_modes(&[Mode::DenialCache, Mode::Lease, Mode::Batch]),
            ..base.clone()
        },
        Scenario {
            name: "busy-key",
            description:
                "8 instances share one key at 2x its limit of 1000 per second. Plain, every decision is a call \
                          to Redis; with leases most are made from units leased in advance, within the same bound, \
                          under-admitting no more than the units leased and never spent.",
            instances: 8,
            quota: BUSY_QUOTA,
            workload: Workload::Poisson { rate_x: 2.0, keys: 1, hot_share: 1.0, max_cost: 1, spread: Spread::Random },
            modes: with_modes(&[Mode::DenialCache, Mode::Lease, Mode::Batch]),
            ..base.clone()
        },
        Scenario {
            name: "client-crash",
            description: "Instances crash and come back while 400 keys are in use. A client that dies between INCR \
                          and EXPIRE (two commands) leaves a counter with no TTL: once it reaches the limit, that \
                          key is limited forever. One script per decision leaves nothing half done.",
            workload: Workload::Poisson {
                rate_x: 0.25,
                keys: 400,
                hot_share: 0.0,
                max_cost: 1,
                spread: Spread::Random,
            },
            faults: (0..4)
                .map(|i| Fault {
                    kind: FaultKind::InstanceCrash { instance: i },
                    at_ms: 1_500 + 1_500 * u64::from(i),
                    until_ms: 1_800 + 1_500 * u64::from(i),
                })
                .collect(),
            latency_ms: (2, 10),
            modes: with_modes(&[Mode::Lease]),
            ..base.clone()
        },
        Scenario {
            name: "multi-rule",
            description: "Every request matches three rules: per user (token bucket), per route (sliding log, 2x) and \
                          global (GCRA, 3x), each binding at the load, 6 instances racing on hot keys with 2-10 ms to \
                          Redis, a partition and an outage. One script call decides all three or none; deciding them \
                          slot by slot (as across Redis Cluster slots) charges requests another rule denied.",
            instances: 6,
            workload: Workload::Poisson { rate_x: 1.5, keys: 6, hot_share: 0.4, max_cost: 1, spread: Spread::Random },
            faults: vec![
                Fault { kind: FaultKind::Partition { instance: 0 }, at_ms: 3_000, until_ms: 5_000 },
                Fault { kind: FaultKind::RedisCrash { keep_data: true }, at_ms: 7_000, until_ms: 8_000 },
            ],
            latency_ms: (2, 10),
            policies: all_policies.clone(),
            rules: true,
            ..base.clone()
        },
        Scenario {
            name: "swarm",
            description: "A random mix of faults per seed: partitions, held links, Redis crashes with and without \
                          data, pauses, script flushes, instance crashes. Bounds must hold whatever the mix.",
            workload: Workload::Poisson { rate_x: 2.5, keys: 3, hot_share: 0.6, max_cost: 2, spread: Spread::Random },
            policies: all_policies,
            swarm: true,
            modes: with_modes(&[Mode::DenialCache, Mode::Lease, Mode::Batch]),
            ..base
        },
    ]
}

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<Scenario> {
    catalogue().into_iter().find(|s| s.name == name)
}

/// The swarm's faults for `seed`: 2 to 5 faults drawn over the run.
pub fn swarm_faults(seed: u64, instances: u32, duration_ms: u64) -> Vec<Fault> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_f417);
    let n = rng.random_range(2..=5);
    let mut faults = Vec::new();
    for _ in 0..n {
        let at_ms = rng.random_range(duration_ms / 10..duration_ms * 7 / 10);
        let until_ms = at_ms + rng.random_range(200..=duration_ms / 4);
        let instance = rng.random_range(0..instances);
        let kind = match rng.random_range(0..8) {
            0 => FaultKind::Partition { instance },
            1 => FaultKind::PartitionToRedis { instance },
            2 => FaultKind::PartitionFromRedis { instance },
            3 => FaultKind::Hold { instance },
            4 => FaultKind::RedisCrash { keep_data: rng.random_bool(0.5) },
            5 => FaultKind::RedisPause,
            6 => FaultKind::ScriptFlush,
            _ => FaultKind::InstanceCrash { instance },
        };
        faults.push(Fault { kind, at_ms, until_ms });
    }
    crate::faults::normalize(faults)
}

/// One simulation run: a scenario with its subject, policy, time source and seed chosen.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Scenario name.
    pub scenario: &'static str,
    /// What runs: one of the library's algorithms or a subject.
    pub subject: Subject,
    /// The library's round-trip mode (plain for subjects).
    pub mode: Mode,
    /// Its failure policy.
    pub policy: FailurePolicy,
    /// Its time source.
    pub time_source: TimeSource,
    /// The seed.
    pub seed: u64,
    /// Instances.
    pub instances: u32,
    /// Quota.
    pub quota: Quota,
    /// Simulated duration (ms).
    pub duration_ms: u64,
    /// Load.
    pub workload: Workload,
    /// Faults.
    pub faults: Vec<Fault>,
    /// Per-instance clock offset and drift.
    pub skew: Vec<(i64, i64)>,
    /// One-way latency range (ms).
    pub latency_ms: (u64, u64),
    /// The limiter's per-call timeout (ms).
    pub timeout_ms: u64,
}

impl RunSpec {
    /// Clock offset and drift of `instance`.
    pub fn skew_of(&self, instance: u32) -> (i64, i64) {
        self.skew[instance as usize % self.skew.len().max(1)]
    }

    /// Whether any instance's clock is off.
    pub fn skewed(&self) -> bool {
        self.skew.iter().any(|&(o, d)| o != 0 || d != 0)
    }

    /// The time source the subject really uses.
    pub fn effective_time_source(&self) -> TimeSource {
        if self.subject.forces_client_time() {
            TimeSource::Client
        } else if self.subject.has_time_source_choice() {
            self.time_source
        } else {
            TimeSource::Server
        }
    }
}

impl Scenario {
    /// How long a run of this scenario lasts on a real backend when `--duration` is not given:
    /// `default_ms`, or longer where the scenario needs it to show what it is about: every
    /// fixed fault starts and heals, followed by two whole liveness windows (two periods
    /// each: a key starving after the fault needs them to show), since a run that ends before
    /// its fault tests nothing; and 12 s where clocks drift (client time breaks a bucket's
    /// bound only once the drift has added up, as in the model lane's 12 s runs).
    pub fn real_duration_ms(&self, default_ms: u64) -> u64 {
        let after = 4 * self.quota.period_ms();
        let faults_end = self.faults.iter().map(|f| f.until_ms.max(f.at_ms) + after).max().unwrap_or(0);
        let drift = if self.skew.iter().any(|&(_, drift_ppm)| drift_ppm != 0) { 12_000 } else { 0 };
        default_ms.max(faults_end).max(drift)
    }

    /// The faults a run of this scenario gets: the swarm draws them from the seed.
    pub fn faults_for(&self, seed: u64, instances: u32, duration_ms: u64) -> Vec<Fault> {
        if self.swarm {
            swarm_faults(seed, instances, duration_ms)
        } else {
            crate::faults::normalize(self.faults.clone())
        }
    }

    /// Expands the scenario into runs for the selected subjects and seeds. A subject that
    /// chooses its own time source or failure policy runs once, with its own.
    pub fn runs(&self, subjects: &[Subject], seeds: &[u64], instances: Option<u32>, duration_ms: u64) -> Vec<RunSpec> {
        let instances = instances.unwrap_or(self.instances).max(1);
        let mut out = Vec::new();
        for &seed in seeds {
            for subject in subjects {
                if subject.is_rules() != self.rules {
                    continue;
                }
                for &mode in self.modes.iter().filter(|&&m| subject.runs_in(m)) {
                    for &policy in &self.policies {
                        if !subject.has_failure_policy_choice() && policy != self.policies[0] {
                            continue;
                        }
                        for &time_source in &self.time_sources {
                            if !subject.has_time_source_choice() && time_source != self.time_sources[0] {
                                continue;
                            }
                            out.push(RunSpec {
                                scenario: self.name,
                                subject: subject.clone(),
                                mode,
                                policy: subject.effective_policy(policy),
                                time_source,
                                seed,
                                instances,
                                quota: subject.quota(self.quota),
                                duration_ms,
                                workload: self.workload.with_max_cost(subject.max_cost(&subject.quota(self.quota))),
                                faults: self.faults_for(seed, instances, duration_ms),
                                skew: self.skew.clone(),
                                latency_ms: self.latency_ms,
                                timeout_ms: 100,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

/// What a run may change of its scenario besides the instances, the duration and the faults
/// (which have options of their own): the one-way latency, the offered load, the instances'
/// clocks and the library's time source. The sweeps change these; a replay command names every
/// one that differs from its scenario's, so it reruns exactly the run that showed a finding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// One-way latency range to Redis (ms).
    pub latency_ms: Option<(u64, u64)>,
    /// Offered load of a Poisson workload, as a multiple of the limit.
    pub load_x: Option<f64>,
    /// Clock offset (ms) and drift (ppm) per instance, cycled over instances.
    pub skew: Option<Vec<(i64, i64)>>,
    /// The library's time source (subjects keep their own).
    pub time_source: Option<TimeSource>,
}

impl Overrides {
    /// Applies the overrides to `spec`.
    pub fn apply(&self, spec: &mut RunSpec) {
        if let Some(latency) = self.latency_ms {
            spec.latency_ms = latency;
        }
        if let (Some(x), Workload::Poisson { rate_x, .. }) = (self.load_x, &mut spec.workload) {
            *rate_x = x;
        }
        if let Some(skew) = &self.skew {
            spec.skew = skew.clone();
        }
        if let Some(source) = self.time_source {
            spec.time_source = source;
        }
    }

    /// What `spec` changes of its scenario, as command-line options (empty when nothing).
    pub fn of(spec: &RunSpec, scenario: &Scenario) -> String {
        let mut out = String::new();
        if spec.latency_ms != scenario.latency_ms {
            out.push_str(&format!(" --latency {}", format_latency(spec.latency_ms)));
        }
        if let (Workload::Poisson { rate_x: ran, .. }, Workload::Poisson { rate_x: given, .. }) =
            (&spec.workload, &scenario.workload)
        {
            if ran != given {
                out.push_str(&format!(" --load {ran}"));
            }
        }
        if spec.skew != scenario.skew {
            out.push_str(&format!(" --skew {}", format_skew(&spec.skew)));
        }
        // A scenario that runs both time sources needs the one this run used named.
        let several = scenario.time_sources.len() > 1 || scenario.time_sources.first() != Some(&spec.time_source);
        if spec.subject.has_time_source_choice() && several {
            out.push_str(&format!(" --time-source {}", spec.time_source.name()));
        }
        out
    }
}

/// `MIN..MAX`, or one number for a fixed latency.
pub fn format_latency((lo, hi): (u64, u64)) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}..{hi}")
    }
}

/// Reads [`format_latency`]'s form: one-way latency in ms, at most 10 s.
pub fn parse_latency(text: &str) -> Result<(u64, u64), String> {
    let number = |s: &str| -> Result<u64, String> {
        let n: u64 = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number of ms"))?;
        if n > 10_000 {
            return Err(format!("{n} ms is more than 10 s"));
        }
        Ok(n)
    };
    let (lo, hi) = match text.split_once("..") {
        Some((lo, hi)) => (number(lo)?, number(hi)?),
        None => (number(text)?, number(text)?),
    };
    if lo > hi {
        return Err(format!("the range {lo}..{hi} runs backwards"));
    }
    Ok((lo, hi))
}

/// `OFFSET_MS[/DRIFT_PPM],...`, one entry per instance (cycled).
pub fn format_skew(skew: &[(i64, i64)]) -> String {
    let entries: Vec<String> = skew
        .iter()
        .map(|&(offset, drift)| if drift == 0 { offset.to_string() } else { format!("{offset}/{drift}") })
        .collect();
    entries.join(",")
}

/// Reads [`format_skew`]'s form: offsets within an hour, drifts within 10%.
pub fn parse_skew(text: &str) -> Result<Vec<(i64, i64)>, String> {
    let mut out = Vec::new();
    for entry in text.split(',') {
        let (offset, drift) = entry.split_once('/').unwrap_or((entry, "0"));
        let offset: i64 =
            offset.trim().parse().map_err(|_| format!("{entry:?}: the offset is not a whole number of ms"))?;
        let drift: i64 =
            drift.trim().parse().map_err(|_| format!("{entry:?}: the drift is not a whole number of ppm"))?;
        if offset.abs() > 3_600_000 || drift.abs() > 100_000 {
            return Err(format!("{entry:?}: an offset is at most an hour and a drift at most 100000 ppm"));
        }
        out.push((offset, drift));
    }
    Ok(out)
}
