//! One simulation run in turmoil: N application instances, each running the real
//! `limiter` crate over simulated TCP to a Redis host that runs the model, with the
//! scenario's faults applied by a step loop and every decision recorded.
//!
//! Determinism: one seed drives turmoil (latencies, ordering) and the workload; the
//! epoch is fixed; nothing reads the wall clock; records are sorted before hashing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use std::collections::BTreeMap;

use redis_ratelimit::harness::scripts::{self, Request};
use redis_ratelimit::harness::{KeySpace, LeaseLedger, LedgerEntry};
use redis_ratelimit::store::{BoxedStream, ConnectFuture, Connector};
use redis_ratelimit::{BreakerConfig, Clock, Source, TimeSource};

use crate::faults::{self, FaultKind};
use crate::mode::Mode;
use crate::redis_host::RedisHost;
use crate::scenario::RunSpec;
use crate::simclock::{SimTime, SkewedClock, EPOCH_MS};
use crate::subject::{Caller, CallerSpec, RunShared, Subject};
use crate::trace::{self, Record};
use crate::workload::Arrival;
use redis_model::Reply;
use results::RedisCost;

/// The Redis host's name and port in the simulated network.
pub const REDIS_ADDR: &str = "redis:6379";
/// Pending connections (and unread segments) a simulated socket holds.
const TCP_CAPACITY: usize = 1 << 16;
/// Time after the last arrival for in-flight requests to finish.
const GRACE_MS: u64 = 2_000;

/// Dials Redis over turmoil's simulated TCP.
#[derive(Debug, Clone)]
pub struct TurmoilConnector {
    addr: &'static str,
}

impl TurmoilConnector {
    /// Dials `addr` (a host's name and port).
    pub const fn to(addr: &'static str) -> Self {
        TurmoilConnector { addr }
    }
}

impl Connector for TurmoilConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(self.addr).await?;
            Ok(Box::new(stream) as BoxedStream)
        })
    }

    fn describe(&self) -> String {
        format!("turmoil://{}", self.addr)
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Every decision, in true-time order.
    pub records: Vec<Record>,
    /// SHA-1 of the records.
    pub trace_hash: String,
    /// What the run cost Redis.
    pub redis: RedisCost,
    /// What the round-trip mode did, for its own check.
    pub modes: ModeOutput,
}

/// What a round-trip mode did in one run, beyond its decisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModeOutput {
    /// Denial-cache decisions the harness checked against the model's state at that instant.
    pub probed: u64,
    /// Those the algorithm's script would have admitted: (true time in ms, key index).
    pub wrong_denials: Vec<(u64, u32)>,
    /// The leases' accounting, per user key (`key-N`).
    pub ledger: BTreeMap<String, LedgerEntry>,
}

/// What every instance of a run shares besides the records: the mode's instruments.
#[derive(Clone)]
struct Instruments {
    redis: RedisHost,
    ledger: Option<Arc<LeaseLedger>>,
    modes: Arc<Mutex<ModeOutput>>,
    /// Commands the harness added to the subject's calls (see `CallerSpec`).
    commands: Arc<AtomicU64>,
}

fn instance_name(i: u32) -> String {
    format!("app-{i}")
}

/// Runs `spec` to completion.
pub fn run(spec: &RunSpec) -> anyhow::Result<RunOutput> {
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let arrivals = spec.workload.generate(&spec.quota, spec.instances, spec.duration_ms, &mut rng);
    let mut per_instance: Vec<Vec<Arrival>> = vec![Vec::new(); spec.instances as usize];
    for a in arrivals {
        per_instance[a.instance as usize].push(a);
    }
    let per_instance: Vec<Arc<Vec<Arrival>>> = per_instance.into_iter().map(Arc::new).collect();

    let time = SimTime::default();
    let records: Arc<Mutex<Vec<Record>>> = Arc::default();
    // The model lives outside the host closure, so a restart can keep its data (or not).
    let redis = RedisHost::new(time.clone());
    // A replica follows the primary when the run fails one over (one lag per run: the
    // first failover's).
    if let Some(lag_ms) = spec.faults.iter().find_map(|f| f.kind.failover_lag_ms()) {
        redis.model().enable_replication(lag_ms);
    }
    // Bumped each time Redis comes back without its data.
    let data_epoch = Arc::new(AtomicU64::new(0));
    let instruments = Instruments {
        redis: redis.clone(),
        ledger: (spec.mode == Mode::Lease).then(|| Arc::new(LeaseLedger::new())),
        modes: Arc::default(),
        commands: Arc::default(),
    };

    let end_ms = spec.duration_ms + GRACE_MS;
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_millis(end_ms + 60_000))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(spec.latency_ms.0))
        .max_message_latency(Duration::from_millis(spec.latency_ms.1.max(spec.latency_ms.0)))
        // Connection attempts queue at Redis while it is paused or down; a subject without a
        // breaker retries every call, and turmoil panics when the queue passes its capacity
        // (64 by default). Real servers' backlogs are larger; this only matters when reached.
        .tcp_capacity(TCP_CAPACITY)
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_MS))
        .rng_seed(spec.seed)
        .build();

    {
        let redis = redis.clone();
        sim.host("redis", move || {
            let redis = redis.clone();
            async move { redis.serve().await }
        });
    }
    for i in 0..spec.instances {
        let spec = spec.clone();
        let arrivals = per_instance[i as usize].clone();
        let time = time.clone();
        let records = records.clone();
        let data_epoch = data_epoch.clone();
        let instruments = instruments.clone();
        sim.host(instance_name(i), move || {
            let (spec, arrivals, time, records) = (spec.clone(), arrivals.clone(), time.clone(), records.clone());
            instance(i, spec, arrivals, time, records, data_epoch.clone(), instruments.clone())
        });
    }
    let mut events = faults::events(&spec.faults);
    let mut next = 0;
    // The loop ends the run at `end_ms`: no host has to stay alive just to keep the
    // simulation going, so no runtime is stepped for nothing.
    while sim.elapsed() < Duration::from_millis(end_ms) {
        let elapsed = sim.elapsed();
        time.publish(elapsed.as_micros() as u64);
        let now_ms = elapsed.as_millis() as u64;
        while next < events.len() && events[next].0 <= now_ms {
            let (_, kind, start) = events[next];
            apply(&mut sim, &redis, spec.instances, &kind, start);
            if let (FaultKind::RedisCrash { keep_data: false }, false) = (kind, start) {
                data_epoch.fetch_add(1, Ordering::Release);
            }
            if !start {
                // turmoil's repair and release reset the whole link, healing any other fault
                // still active on it (a hold ending inside a partition): assert those again.
                for f in
                    spec.faults.iter().filter(|f| f.at_ms <= now_ms && now_ms < f.until_ms && f.kind.is_link_fault())
                {
                    apply(&mut sim, &redis, spec.instances, &f.kind, true);
                }
            }
            next += 1;
        }
        if let Err(e) = sim.step() {
            anyhow::bail!("simulation failed at {now_ms} ms: {e}");
        }
    }
    events.clear();

    let mut records = std::mem::take(&mut *records.lock().unwrap_or_else(|p| p.into_inner()));
    let trace_hash = trace::finish(&mut records);
    let mut modes = std::mem::take(&mut *instruments.modes.lock().unwrap_or_else(|p| p.into_inner()));
    modes.ledger = instruments.ledger.map(|l| l.entries()).unwrap_or_default();
    let mut cost = redis.cost();
    // The harness's own look at the state is no call of the limiter's, nor are its clock readings.
    cost.round_trips = cost.round_trips.saturating_sub(modes.probed);
    cost.commands = cost.commands.saturating_sub(instruments.commands.load(Ordering::Relaxed));
    Ok(RunOutput { records, trace_hash, redis: cost, modes })
}

fn apply(sim: &mut turmoil::Sim<'_>, redis: &RedisHost, instances: u32, kind: &FaultKind, start: bool) {
    match (*kind, start) {
        (FaultKind::Partition { instance }, true) => sim.partition(instance_name(instance), "redis"),
        (FaultKind::Partition { instance }, false) => sim.repair(instance_name(instance), "redis"),
        (FaultKind::PartitionToRedis { instance }, true) => sim.partition_oneway(instance_name(instance), "redis"),
        (FaultKind::PartitionToRedis { instance }, false) => sim.repair_oneway(instance_name(instance), "redis"),
        (FaultKind::PartitionFromRedis { instance }, true) => sim.partition_oneway("redis", instance_name(instance)),
        (FaultKind::PartitionFromRedis { instance }, false) => sim.repair_oneway("redis", instance_name(instance)),
        (FaultKind::Hold { instance }, true) => sim.hold(instance_name(instance), "redis"),
        (FaultKind::Hold { instance }, false) => sim.release(instance_name(instance), "redis"),
        // The Redis *process* crashes, not its turmoil host: the model drops every connection
        // (in the order they registered) and closes new ones on arrival until it restarts.
        // Crashing the host instead would drop its runtime, whose tasks tokio shuts down in
        // an order that depends on how many tasks the whole process has ever made, and the
        // trace would differ from one run of the same seed to the next.
        (FaultKind::RedisCrash { .. }, true) => redis.crash(),
        (FaultKind::RedisCrash { keep_data }, false) => redis.restart(keep_data),
        // A paused Redis (SIGSTOP, a long fork) accepts and answers nothing; to every client
        // that is all of its links held until it resumes.
        (FaultKind::RedisPause, true) => (0..instances).for_each(|i| sim.hold(instance_name(i), "redis")),
        (FaultKind::RedisPause, false) => (0..instances).for_each(|i| sim.release(instance_name(i), "redis")),
        (FaultKind::ScriptFlush, true) => redis.flush_scripts(),
        (FaultKind::ScriptFlush, false) => {}
        // The primary dies and its replica's data (missing the last `lag_ms` of writes, see
        // `model::replica`) and empty script cache take its place; it serves again, at the
        // same address (as a cluster client or Sentinel would find it), when the fault heals.
        (FaultKind::Failover { .. }, true) => {
            redis.fail_over();
        }
        (FaultKind::Failover { .. }, false) => redis.restart(true),
        (FaultKind::InstanceCrash { instance }, true) => sim.crash(instance_name(instance)),
        (FaultKind::InstanceCrash { instance }, false) => sim.bounce(instance_name(instance)),
    }
}

impl Instruments {
    /// Whether the algorithm's script, run on the model at this very instant, would have
    /// admitted the request the denial cache just denied (a peek: it writes nothing). Skipped
    /// while the model is down: then no call could have reached it.
    fn probe(&self, spec: &RunSpec, key: &str, index: u32, cost: u64, client_now_ms: u64, at_ms: u64) {
        let model = self.redis.model();
        if !model.is_up() {
            return;
        }
        // A module row's state is its script's (the conformance suites hold them equal), so
        // the script peeks it too.
        let (Subject::Library(algorithm) | Subject::Module(algorithm)) = spec.subject else { return };
        let script = scripts::for_algorithm(algorithm);
        let stem = KeySpace::default().stem(key);
        let now_ms = (spec.effective_time_source() == TimeSource::Client).then_some(client_now_ms);
        let request = Request { algorithm, quota: &spec.quota, stem: &stem, now_ms, cost: 0 };
        let call = request.invocation();
        let n = call.keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVAL", script.source.as_bytes(), n.as_bytes()];
        argv.extend(call.keys.iter().chain(&call.args).map(|s| s.as_bytes()));
        let reply = model.call(&argv);
        let ints: Option<Vec<i64>> = match &reply {
            Reply::Array(items) => {
                items.iter().map(|r| if let Reply::Integer(n) = r { Some(*n) } else { None }).collect()
            }
            _ => None,
        };
        let admits = ints.and_then(|i| request.read_reply(&i)).is_some_and(|(o, _)| o.remaining >= cost);
        let mut modes = self.modes.lock().unwrap_or_else(|p| p.into_inner());
        modes.probed += 1;
        if admits {
            modes.wrong_denials.push((at_ms, index));
        }
    }
}

/// One application instance: a limiter and a load generator that issues each arrival at
/// its time, concurrently (a slow Redis means overlapping requests, as in production).
async fn instance(
    i: u32,
    spec: RunSpec,
    arrivals: Arc<Vec<Arrival>>,
    time: SimTime,
    records: Arc<Mutex<Vec<Record>>>,
    data_epoch: Arc<AtomicU64>,
    instruments: Instruments,
) -> turmoil::Result {
    let (offset_ms, drift_ppm) = spec.skew_of(i);
    let clock = Arc::new(SkewedClock::new(time.clone(), offset_ms, drift_ppm));
    let caller = Arc::new(Caller::build(CallerSpec {
        subject: &spec.subject,
        quota: spec.quota,
        policy: spec.policy,
        time_source: spec.time_source,
        clock: clock.clone(),
        connector: Box::new(TurmoilConnector { addr: REDIS_ADDR }),
        store: None,
        timeout: Duration::from_millis(spec.timeout_ms),
        breaker: BreakerConfig::new(3, Duration::from_millis(250)),
        key_prefix: None,
        run: RunShared { data_epoch, instrument_commands: instruments.commands.clone() },
        instance: i,
        mode: spec.mode,
        lease_ledger: instruments.ledger.clone(),
    })?);
    let spec = Arc::new(spec);
    // After a restart, pick up where the load is now.
    let start_ms = time.elapsed_ms();
    let mut tasks = tokio::task::JoinSet::new();
    for (seq, a) in arrivals.iter().enumerate().filter(|(_, a)| a.t_ms >= start_ms) {
        let now = time.elapsed_ms();
        if a.t_ms > now {
            tokio::time::sleep(Duration::from_millis(a.t_ms - now)).await;
        }
        // Reap finished requests as we go: a finished task stays allocated until joined, and
        // a set that only grows makes a long run cost more per request than a short one.
        while tasks.try_join_next().is_some() {}
        let (caller, time, records, a) = (caller.clone(), time.clone(), records.clone(), *a);
        let (spec, clock, instruments) = (spec.clone(), clock.clone(), instruments.clone());
        tasks.spawn(async move {
            let t_ms = time.elapsed_ms();
            let key = format!("key-{}", a.key);
            let answer = caller.check(&key, a.cost, seq as u64).await;
            let done_ms = time.elapsed_ms();
            if answer.source == Source::DenialCache {
                instruments.probe(&spec, &key, a.key, a.cost, clock.now_ms(), done_ms);
            }
            let r = Record::of_answer(i, seq as u32, &a, t_ms, done_ms, &answer, EPOCH_MS);
            records.lock().unwrap_or_else(|p| p.into_inner()).push(r);
        });
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}
