//! A synthetic, deterministic results file shaped like a real `cargo xtask simulate` run: the
//! simulator's scenarios, every algorithm, every policy and time source a scenario runs, both
//! sweeps. The render and browser tests render it; it also documents what the report expects.
//!
//! The numbers are made up but follow the real findings: the naive counter over-admits as
//! instances and latency grow, ADR-002 starves a trickle, client time over-admits under clock
//! skew, and a Redis outage plays out differently under each failure policy.

use std::collections::BTreeMap;

use reports::{
    FaultWindow, Profile, RacePoint, RatePoint, RedisCost, Results, RunResult, Series, SkewPoint, Sources,
    SubjectReport, Verdict, VerdictLine, Witness, WitnessFault, WitnessRequest, SCHEMA,
};

/// splitmix64: a tiny deterministic generator, so the sample needs no `rand`.
struct Rng(u64);

impl Rng {
    fn new(parts: &[u64]) -> Self {
        let mut r = Rng(0x5EED);
        for p in parts {
            r.0 ^= *p;
            r.next();
        }
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x1000_0000_01b3))
}

#[derive(Clone, Copy, PartialEq)]
enum Load {
    /// Poisson-like load at this multiple of the limit.
    Rate(f64),
    /// Full-limit bursts on both sides of each window boundary.
    Boundary,
    /// A steady trickle just above one token's refill.
    Trickle,
}

struct Scenario {
    name: &'static str,
    description: &'static str,
    instances: u64,
    load: Load,
    /// (kind, at_ms, until_ms, share of instances cut off from Redis)
    faults: &'static [(&'static str, u64, u64, f64)],
    policies: &'static [&'static str],
    time_sources: &'static [&'static str],
}

const ALL_POLICIES: &[&str] = &["fail-open", "fail-closed", "local-budget"];

const SCENARIOS: [Scenario; 10] = [
    Scenario {
        name: "get-set-race",
        description: "8 instances share one hot key at 5x its limit with 2-10 ms to Redis: a GET-then-SET counter \
                      loses updates between its read and its write and over-admits; atomic scripts cannot.",
        instances: 8,
        load: Load::Rate(5.0),
        faults: &[],
        policies: &["fail-open"],
        time_sources: &["server"],
    },
    Scenario {
        name: "baseline",
        description: "No faults: Poisson load at 2x the limit over 3 keys, costs 1 to 3. Every algorithm should \
                      match its oracle closely.",
        instances: 4,
        load: Load::Rate(2.0),
        faults: &[],
        policies: &["fail-open"],
        time_sources: &["server"],
    },
    Scenario {
        name: "clock-skew",
        description: "Instance clocks are off by up to 1.5 s and drift by up to 2%. Algorithms fed the instances' \
                      clocks (client time) over-admit; the same algorithms on Redis's clock hold.",
        instances: 4,
        load: Load::Rate(3.0),
        faults: &[],
        policies: &["fail-open"],
        time_sources: &["server", "client"],
    },
    Scenario {
        name: "partition",
        description: "Instance 0 is cut off from Redis from 3 s to 7 s, then one-way partitions and a held link \
                      follow. Its failure policy answers; the others keep using Redis.",
        instances: 4,
        load: Load::Rate(2.0),
        faults: &[
            ("partition", 3000, 7000, 0.25),
            ("partition-to-redis", 8000, 9000, 0.25),
            ("hold", 9500, 10000, 0.25),
        ],
        policies: ALL_POLICIES,
        time_sources: &["server"],
    },
    Scenario {
        name: "redis-outage",
        description: "Redis is down from 3 s to 7 s (it keeps its data). Fail-open admits everything, unbounded; \
                      fail-closed admits nothing; the local budget holds instances x budget.",
        instances: 4,
        load: Load::Rate(3.0),
        faults: &[("redis-crash-persistent", 3000, 7000, 1.0)],
        policies: ALL_POLICIES,
        time_sources: &["server"],
    },
    Scenario {
        name: "redis-restart",
        description: "Redis restarts at 4 s losing every key and every script. Each key may admit one extra burst, \
                      no more; scripts come back through EVAL after NOSCRIPT.",
        instances: 4,
        load: Load::Rate(3.0),
        faults: &[("redis-crash", 4000, 4200, 1.0), ("script-flush", 7000, 7000, 0.0)],
        policies: &["fail-closed"],
        time_sources: &["server"],
    },
    Scenario {
        name: "window-boundary",
        description: "Bursts of the full limit just before and just after window boundaries. A fixed window admits \
                      twice its limit within a few ms of the boundary; the others do not.",
        instances: 2,
        load: Load::Boundary,
        faults: &[],
        policies: &["fail-open"],
        time_sources: &["server"],
    },
    Scenario {
        name: "steady-trickle",
        description: "One client sends every 30 ms, faster than one token's 50 ms refill. A correct bucket admits \
                      the rate; ADR-002's floored refill throws the fraction away on every call and starves it.",
        instances: 1,
        load: Load::Trickle,
        faults: &[],
        policies: &["fail-open"],
        time_sources: &["server"],
    },
    Scenario {
        name: "hot-key",
        description: "20 keys pinned to instances, 90% of the load on one of them (many clients behind one \
                      instance), at 3x the limit.",
        instances: 4,
        load: Load::Rate(3.0),
        faults: &[],
        policies: &["fail-open"],
        time_sources: &["server"],
    },
    Scenario {
        name: "swarm",
        description: "A random mix of faults per seed: partitions, held links, Redis crashes with and without \
                      data, pauses, script flushes, instance crashes. Bounds must hold whatever the mix.",
        instances: 4,
        load: Load::Rate(2.5),
        faults: &[("hold", 2000, 2600, 0.25), ("redis-pause", 5000, 6500, 1.0), ("instance-crash", 9000, 10000, 0.0)],
        policies: ALL_POLICIES,
        time_sources: &["server"],
    },
];

const ALGORITHMS: [&str; 7] =
    ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "gcra", "adr002", "naive"];

const LIMIT: u64 = 20;
const PERIOD_MS: u64 = 1000;
const BURST: u64 = 20;
const DURATION_MS: u64 = 12_000;
const BUCKET_MS: u64 = 500;
/// Local budget per instance and bucket while Redis is unreachable.
const LOCAL_BUDGET: f64 = 2.0;

fn cut_off_share(s: &Scenario, t_ms: u64) -> f64 {
    s.faults.iter().filter(|f| t_ms + BUCKET_MS > f.1 && t_ms < f.2).map(|f| f.3).fold(0.0, f64::max)
}

fn run(s: &Scenario, algorithm: &str, policy: &str, time_source: &str, seed: u64) -> RunResult {
    let mut rng = Rng::new(&[seed, hash(s.name), hash(algorithm), hash(policy), hash(time_source)]);
    let buckets = (DURATION_MS / BUCKET_MS) as usize;
    let library = !matches!(algorithm, "adr002" | "naive");
    let client = time_source == "client";
    let per_bucket = (LIMIT * BUCKET_MS / PERIOD_MS) as f64;
    let (mut admitted, mut oracle) = (Vec::with_capacity(buckets), Vec::with_capacity(buckets));
    let mut sources: BTreeMap<String, u64> = BTreeMap::new();
    let mut requests = 0.0;
    let mut spare_burst = BURST as f64;
    for b in 0..buckets {
        let t = b as u64 * BUCKET_MS;
        let d = match s.load {
            Load::Rate(x) => (x * per_bucket * (0.85 + 0.3 * rng.unit())).round(),
            // A full limit in the half second before a window boundary and again just after it.
            Load::Boundary => {
                if matches!(b % 4, 1 | 2) {
                    per_bucket * 2.0
                } else {
                    0.0
                }
            }
            Load::Trickle => (BUCKET_MS as f64 / 30.0).round(),
        };
        requests += d;
        // The exact model of the same algorithm: the limit per bucket, plus the burst once.
        let burst_now = if matches!(algorithm, "token-bucket" | "gcra") { spare_burst.min(d) } else { 0.0 };
        let mut o = d.min(per_bucket + burst_now);
        if s.load == Load::Boundary && algorithm == "fixed-window" {
            o = d.min(per_bucket * 2.0);
        }
        spare_burst -= (o - per_bucket).max(0.0);
        let mut a = match algorithm {
            "naive" if s.instances > 1 => {
                let over = if s.name == "get-set-race" { 1.6 + 0.8 * rng.unit() } else { 0.1 + 0.2 * rng.unit() };
                (o * (1.0 + over)).min(d).round()
            }
            "adr002" if s.load == Load::Trickle => (o * (0.55 + 0.1 * rng.unit())).round(),
            "sliding-window" if rng.unit() < 0.3 => (o + 1.0).min(d),
            _ => o,
        };
        if client && s.name == "clock-skew" {
            let sens = if algorithm == "adr002" { 0.5 } else { 0.25 };
            a = (a * (1.0 + sens * (0.8 + 0.4 * rng.unit()))).min(d).round();
        }
        let share = cut_off_share(s, t);
        if share > 0.0 {
            let via_policy = d * share;
            a = a * (1.0 - share)
                + match policy {
                    "fail-open" => via_policy,
                    "fail-closed" => 0.0,
                    _ => (LOCAL_BUDGET * s.instances as f64 * share).min(via_policy),
                };
            a = a.round();
            *sources.entry(policy.replace('-', "_")).or_default() += via_policy as u64;
            *sources.entry("store".into()).or_default() += (d - via_policy) as u64;
        } else {
            *sources.entry("store".into()).or_default() += d as u64;
        }
        if s.name == "redis-restart" && t == 4000 {
            // Redis came back empty: each key may admit one extra burst.
            a = (a + BURST as f64 / 2.0).min(d);
        }
        admitted.push(a);
        oracle.push(o);
    }
    let requests = requests as u64;
    let wrong_allow: f64 = admitted.iter().zip(&oracle).map(|(a, o)| (a - o).max(0.0)).sum();
    let wrong_limit: f64 = admitted.iter().zip(&oracle).map(|(a, o)| (o - a).max(0.0)).sum();
    let expected_finding = !library || (client && s.name == "clock-skew");
    // Peak per period (two buckets) outside the windows where a failure policy decided.
    let peak = admitted
        .windows(2)
        .enumerate()
        .filter(|(b, _)| (*b..*b + 2).all(|b| cut_off_share(s, b as u64 * BUCKET_MS) == 0.0))
        .map(|(_, w)| w[0] + w[1])
        .fold(0.0, f64::max);
    let bound_value = match algorithm {
        "fixed-window" => 2 * LIMIT,
        "sliding-log" | "sliding-window" | "naive" => LIMIT,
        _ => BURST + LIMIT,
    } as f64;
    let bound_value = if s.name == "redis-restart" { bound_value + BURST as f64 } else { bound_value };
    let bound = if peak > bound_value * 1.1 { Verdict::Broken } else { Verdict::Held };
    let faults_here = !s.faults.is_empty();
    let policy_check = if faults_here { Verdict::Held } else { Verdict::None };
    let policy_detail = match (faults_here, policy) {
        (false, _) => String::new(),
        (true, "fail-open") => "fail-open admitted every request Redis could not decide".to_string(),
        (true, "fail-closed") => "fail-closed denied every request Redis could not decide".to_string(),
        (true, _) => format!("at most {LOCAL_BUDGET} per instance per {BUCKET_MS} ms while cut off"),
    };
    let recover_ms = s.faults.iter().any(|f| f.3 > 0.0).then(|| 40 + rng.next() % 260);
    let commands_per_request = if algorithm == "naive" { 2.0 } else { 1.0 + 0.003 * rng.unit() };
    let (keys, bytes_per_key) = match algorithm {
        "sliding-log" => (1, 20 * 48 + 96),
        "sliding-window" => (2, 72),
        "fixed-window" => (1, 72),
        "gcra" | "naive" => (1, 64),
        _ => (1, 136),
    };
    let store_requests = *sources.get("store").unwrap_or(&0);
    let commands = (store_requests as f64 * commands_per_request).round() as u64;
    let mut replay = format!("cargo xtask simulate --scenario {} --subject {algorithm} --seed {seed}", s.name);
    if s.policies.len() > 1 {
        replay.push_str(&format!(" --policy {policy}"));
    }
    if client && s.time_sources.len() > 1 {
        replay.push_str(" --time-source client");
    }
    RunResult {
        scenario: s.name.into(),
        description: s.description.into(),
        subject: algorithm.into(),
        library,
        policy: policy.into(),
        time_source: time_source.into(),
        seed,
        instances: s.instances as u32,
        limit: LIMIT,
        period_ms: PERIOD_MS,
        burst: BURST,
        requests,
        admitted: admitted.iter().sum::<f64>() as u64,
        oracle_admitted: oracle.iter().sum::<f64>() as u64,
        wrong_allow: wrong_allow as u64,
        wrong_limit: wrong_limit as u64,
        wrong_allow_pct: 100.0 * wrong_allow / requests.max(1) as f64,
        wrong_limit_pct: 100.0 * wrong_limit / requests.max(1) as f64,
        bound,
        bound_detail: format!("max {peak:.0} admitted in any {PERIOD_MS} ms window; bound {bound_value:.0}"),
        expected_finding,
        policy_check,
        policy_detail,
        liveness: if algorithm == "adr002" { Verdict::Broken } else { Verdict::Held },
        liveness_detail: String::new(),
        peak_per_period: peak as u64,
        errors: 0,
        recover_ms,
        sources: Sources {
            store: sources.get("store").copied().unwrap_or(0),
            fail_open: sources.get("fail_open").copied().unwrap_or(0),
            fail_closed: sources.get("fail_closed").copied().unwrap_or(0),
            local_budget: sources.get("local_budget").copied().unwrap_or(0),
            ..Sources::default()
        },
        replay,
        trace_hash: format!("{:016x}{:016x}", rng.next(), rng.next()),
        series: Some(Series {
            bucket_ms: BUCKET_MS,
            admitted: admitted.iter().map(|&n| n as u64).collect(),
            oracle_admitted: oracle.iter().map(|&n| n as u64).collect(),
            limit_per_bucket: per_bucket,
        }),
        redis: Some(RedisCost {
            commands,
            bytes_in: commands * 118,
            bytes_out: commands * 14,
            keys,
            memory_bytes: keys * bytes_per_key,
            ..RedisCost::default()
        }),
        faults: s.faults.iter().map(|&(k, a, b, _)| FaultWindow { kind: k.into(), at_ms: a, until_ms: b }).collect(),
        round_trips: commands,
        ..RunResult::default()
    }
}

fn race_point(algorithm: &str, instances: u64, latency_ms: f64, seed: u64) -> RacePoint {
    let mut rng = Rng::new(&[seed, instances, latency_ms.to_bits(), hash(algorithm)]);
    let duration_s = DURATION_MS as f64 / 1000.0;
    let limit = (LIMIT as f64 * duration_s) as u64 + BURST;
    let requests = limit * 5;
    let ratio = match algorithm {
        // Lost updates grow with the overlap of read-modify-write windows, up to admitting all.
        "naive" => {
            let overlap = (instances as f64 - 1.0) * 0.06 * latency_ms * (0.9 + 0.2 * rng.unit());
            1.0 + 4.0 * (1.0 - (-overlap).exp())
        }
        "sliding-window" => 1.0 - 0.01 * rng.unit(),
        _ => 1.0,
    };
    RacePoint {
        subject: algorithm.into(),
        instances,
        latency_ms,
        limit,
        admitted: (limit as f64 * ratio).round() as u64,
        requests,
        seed,
    }
}

fn skew_point(algorithm: &str, time_source: &str, skew_ms: f64, seed: u64) -> SkewPoint {
    let mut rng = Rng::new(&[seed, skew_ms.to_bits(), hash(algorithm), hash(time_source)]);
    let bound = (LIMIT * DURATION_MS / PERIOD_MS + BURST) as f64;
    let sensitivity = match (time_source, algorithm) {
        ("server", _) => 0.0,
        (_, "adr002") => 0.45,
        (_, "sliding-log") => 0.15,
        (_, "fixed-window" | "sliding-window") => 0.2,
        _ => 0.3,
    };
    let over = (sensitivity * skew_ms.abs() / PERIOD_MS as f64).min(2.0);
    let admitted = (bound * (1.0 + over) * (0.995 + 0.01 * rng.unit())).round() as u64;
    SkewPoint {
        subject: algorithm.into(),
        time_source: time_source.into(),
        skew_ms: skew_ms as i64,
        admitted,
        bound: bound as u64,
        seed,
    }
}

/// A realistic synthetic results file: the simulator's ten scenarios x seven algorithms x three
/// seeds, every failure policy and time source those scenarios run, the GET+SET race sweep and
/// the clock-skew sweep.
pub fn sample_results() -> Results {
    let seeds = vec![1, 2, 3];
    let mut results = Vec::new();
    for s in &SCENARIOS {
        for a in ALGORITHMS {
            // ADR-002's script only takes client time.
            let time_sources = if a == "adr002" { &["client"][..] } else { s.time_sources };
            for p in s.policies {
                for ts in time_sources {
                    for &seed in &seeds {
                        results.push(run(s, a, p, ts, seed));
                    }
                }
            }
        }
    }
    let mut race_sweep = Vec::new();
    let mut skew_sweep = Vec::new();
    for &seed in &seeds {
        for a in ALGORITHMS {
            for n in [1, 2, 4, 8, 16, 32] {
                race_sweep.push(race_point(a, n, 3.0, seed));
            }
            for l in [1.0, 2.0, 5.0, 10.0, 20.0] {
                race_sweep.push(race_point(a, 8, l, seed));
            }
            if a == "naive" {
                continue;
            }
            for ts in ["client", "server"] {
                if a == "adr002" && ts == "server" {
                    continue;
                }
                for skew_ms in [0.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0] {
                    skew_sweep.push(skew_point(a, ts, skew_ms, seed));
                }
            }
        }
    }
    Results {
        schema: SCHEMA.into(),
        command: "cargo xtask simulate --seeds 3".into(),
        backend: "model".into(),
        seeds,
        duration_ms: DURATION_MS,
        results,
        race_sweep,
        skew_sweep,
        verify: Vec::new(),
        shard: String::new(),
    }
}

/// What `cargo xtask verify` reports of one subject: `broken` breaks its bound with a
/// counterexample, otherwise every check holds.
pub fn sample_subject(name: &str, broken: bool) -> SubjectReport {
    let bound = if broken {
        VerdictLine {
            check: "bound".into(),
            verdict: Verdict::Broken,
            detail: "admitted 11 in a 1000 ms window; the promise allows 10".into(),
            evidence: "t (ms)  instance  asked  admitted\n     0         0     10        10\n   999         1      1         1"
                .into(),
            replay: format!("cargo xtask verify {name}.toml --quota 10/1000/10 --replay \"0:0:10,999:1:1\""),
            witness: Some(Witness {
                requests: vec![
                    WitnessRequest { instance: 0, lo_ms: 0.0, hi_ms: 0.0, units: 10, admitted: true },
                    WitnessRequest { instance: 1, lo_ms: 990.0, hi_ms: 999.0, units: 1, admitted: true },
                ],
                envelope: vec![[0.0, 10.0], [999.0, 10.0]],
                faults: vec![WitnessFault { from_ms: 500.0, to_ms: 600.0, what: "Redis paused".into() }],
                offsets_ms: vec![0, 250],
            }),
        }
    } else {
        VerdictLine {
            check: "bound".into(),
            verdict: Verdict::Held,
            detail: "held in 200 schedules x 3 quotas at exact times and 12 scenario runs".into(),
            ..VerdictLine::default()
        }
    };
    SubjectReport {
        name: name.into(),
        file: format!("{name}.toml"),
        promise: "fixed-window".into(),
        time: "server".into(),
        quota: "10 per 1000 ms, burst 10".into(),
        verdicts: vec![
            bound,
            VerdictLine {
                check: "failure policy".into(),
                verdict: Verdict::NotApplicable,
                detail: "not cut off".into(),
                ..VerdictLine::default()
            },
        ],
        profile: Profile {
            rate_curve: [0.5, 1.0, 2.0, 4.0]
                .iter()
                .map(|&offered| RatePoint {
                    offered,
                    delivered: if broken { offered.min(1.2) } else { offered.min(1.0) },
                })
                .collect(),
            largest_burst: if broken { 11 } else { 10 },
            burst_bound: 10,
            longest_starvation_ms: 1000,
            exact_longest_gap_ms: Some(1000),
            memory_per_key_bytes: 72.0,
            ..Profile::default()
        },
        ..SubjectReport::default()
    }
}

/// The sample as `cargo xtask verify` would leave it: two subjects judged, one broken.
pub fn sample_verification() -> Results {
    Results {
        verify: vec![sample_subject("mine", true), sample_subject("a subject with a long name", false)],
        ..sample_results()
    }
}
