//! One real-lane run: a tokio runtime, N limiter instances over real TCP (each through its
//! own fault-injecting proxy), the RunSpec's load issued in real time, its faults applied on
//! schedule, every decision recorded exactly as `sim_engine::turmoil_run` records it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{sleep_until, Instant};

use redis_ratelimit::store::TcpConnector;
use redis_ratelimit::BreakerConfig;

use super::clock::{aligned_start, WallClock};
use super::proxy::{LinkFault, Proxy};
use super::server::{External, ServerControl};
use crate::mini::MiniRedis;
use results::RedisCost;
use sim_engine::faults::{self, FaultKind};
use sim_engine::scenario::RunSpec;
use sim_engine::subject::{Caller, CallerSpec, RunShared};
use sim_engine::trace::{self, Record};
use sim_engine::turmoil_run::RunOutput;
use sim_engine::workload::Arrival;

/// The real lane's per-call timeout. Redis on loopback answers in well under a millisecond,
/// but a busy machine (a build, CI) can stall any process for tens of milliseconds; the
/// simulated scenarios' 100 ms would then be mistaken for an outage and the failure policy
/// would answer for a Redis that is up.
const REAL_TIMEOUT_MS: u64 = 500;

/// Fault starts are applied this much ahead of their time, so the fault is in force by its
/// scheduled instant despite timer and scheduling jitter: the checkers then never see a
/// store decision inside a window where Redis was meant to be unreachable. Heals are applied
/// at their time or later.
pub const LEAD_MS: u64 = 20;
/// A crash's extra lead: its freeze is a round trip from a blocking thread.
pub const CRASH_LEAD_MS: u64 = 30;
/// Time between setting a run up and its first arrival, at least.
const SETUP_MARGIN_MS: u64 = 100;
/// Breaker thresholds: the same as the model lane's.
const BREAKER: BreakerConfig = BreakerConfig::new(3, Duration::from_millis(250));

/// The Redis a run talks to.
pub(crate) enum Redis {
    /// A private `redis-server` the run controls.
    Private(Arc<Mutex<Box<dyn ServerControl>>>),
    /// A server given by URL: no process control.
    External(Arc<Mutex<External>>),
    /// The embedded mini-redis (GET/SET only).
    Mini(MiniRedis),
}

impl Redis {
    fn upstreams(&self) -> Vec<SocketAddr> {
        match self {
            Redis::Private(c) => lock(c).upstreams(),
            Redis::External(e) => vec![lock(e).addr()],
            Redis::Mini(m) => vec![m.addr()],
        }
    }

    fn cluster_nodes(&self) -> Option<Vec<u16>> {
        match self {
            Redis::Private(c) => lock(c).cluster_nodes(),
            _ => None,
        }
    }

    /// Runs a quick operation (a signal) on the private server right here: a blocking
    /// thread's wake-up would make the fault late.
    fn control_now(&self, f: impl FnOnce(&mut dyn ServerControl) -> anyhow::Result<()>) -> anyhow::Result<()> {
        match self {
            Redis::Private(c) => f(lock(c).as_mut()),
            Redis::External(_) | Redis::Mini(_) => Ok(()),
        }
    }

    /// Runs a blocking operation on the private server, off the runtime's workers.
    async fn control(
        &self,
        f: impl FnOnce(&mut dyn ServerControl) -> anyhow::Result<()> + Send + 'static,
    ) -> anyhow::Result<()> {
        match self {
            Redis::Private(c) => {
                let c = c.clone();
                tokio::task::spawn_blocking(move || f(lock(&c).as_mut())).await?
            }
            // Process faults are skipped without process control (the caller strips them
            // from the spec, so the judge does not expect them either).
            Redis::External(_) | Redis::Mini(_) => Ok(()),
        }
    }

    /// A failover's start or end on servers with replicas; false without them.
    async fn fail_over(&self, start: bool) -> anyhow::Result<bool> {
        match self {
            Redis::Private(c) => {
                let c = c.clone();
                tokio::task::spawn_blocking(move || lock(&c).fail_over(start)).await?
            }
            Redis::External(_) | Redis::Mini(_) => Ok(false),
        }
    }

    async fn cost(&self, proxies: &[Proxy]) -> anyhow::Result<RedisCost> {
        match self {
            Redis::Private(c) => {
                let c = c.clone();
                Ok(tokio::task::spawn_blocking(move || lock(&c).cost()).await?)
            }
            Redis::External(e) => {
                let e = e.clone();
                Ok(tokio::task::spawn_blocking(move || lock(&e).cost()).await?)
            }
            // mini-redis keeps no statistics: count what crossed the proxies.
            Redis::Mini(_) => {
                let (bytes_in, bytes_out) =
                    proxies.iter().map(Proxy::bytes).fold((0, 0), |(i, o), (pi, po)| (i + pi, o + po));
                Ok(RedisCost { bytes_in, bytes_out, ..RedisCost::default() })
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a run's Redis comes from.
pub(crate) enum Target {
    /// A private server (or cluster), already started.
    Private(Box<dyn ServerControl>),
    /// An existing server.
    External(Box<External>),
    /// Start an embedded mini-redis in the run's runtime (reached through latency-only
    /// proxies: the scenario's 2-10 ms to Redis is what opens the GET-to-SET race; over
    /// bare loopback the race window is ~0.1 ms and the over-admission all but vanishes).
    Mini,
}

/// Runs `spec` against `target` on a fresh 2-worker runtime.
pub(crate) fn run(spec: &RunSpec, target: Target, prefix: Option<String>) -> anyhow::Result<RunOutput> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("real-lane")
        .build()
        .context("cannot build the run's tokio runtime")?;
    let result = rt.block_on(async {
        let redis = match target {
            Target::Private(c) => Redis::Private(Arc::new(Mutex::new(c))),
            Target::External(e) => Redis::External(Arc::new(Mutex::new(*e))),
            Target::Mini => Redis::Mini(crate::mini::start().await.context("cannot start mini-redis")?),
        };
        let out = drive(spec, &redis, prefix).await;
        match redis {
            Redis::Mini(m) => m.shutdown().await,
            // The server's side connection and process go on a blocking thread's time.
            other => drop(tokio::task::spawn_blocking(move || drop(other)).await),
        }
        out
    });
    rt.shutdown_timeout(Duration::from_millis(500));
    result
}

/// What every task of a run shares.
struct Ctx {
    spec: RunSpec,
    start: Instant,
    start_wall_ms: u64,
    arrivals: Vec<Vec<Arrival>>,
    /// Per instance, the proxy of each server (one, or every cluster node in order).
    dial: Vec<Vec<SocketAddr>>,
    /// The cluster's node ports, when the run is on a cluster.
    cluster_nodes: Option<Vec<u16>>,
    prefix: Option<String>,
    records: Mutex<Vec<Record>>,
    /// Bumped each time Redis comes back without its data.
    data_epoch: Arc<AtomicU64>,
    /// Commands the harness adds to a subject's calls (its clock readings), left out of the cost.
    instrument_commands: Arc<AtomicU64>,
    /// The leases' accounting, when the run leases.
    ledger: Option<Arc<redis_ratelimit::harness::LeaseLedger>>,
}

impl Ctx {
    fn elapsed_ms(&self) -> u64 {
        Instant::now().saturating_duration_since(self.start).as_millis() as u64
    }
}

async fn drive(spec: &RunSpec, redis: &Redis, prefix: Option<String>) -> anyhow::Result<RunOutput> {
    // One proxy per instance and server: a cluster's nodes each get one per instance, so a
    // partition of an instance cuts it off the whole cluster, and the latency is everywhere.
    let upstreams = redis.upstreams();
    let mut proxies = Vec::new();
    let mut dial = Vec::new();
    for i in 0..spec.instances {
        let mut mine = Vec::new();
        for (n, &upstream) in upstreams.iter().enumerate() {
            let seed = spec.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (u64::from(i) + 1) ^ ((n as u64) << 32);
            let proxy = Proxy::start(upstream, spec.latency_ms, seed).await.context("cannot start a proxy")?;
            mine.push(proxy.addr());
            proxies.push((i, proxy));
        }
        dial.push(mine);
    }
    let cluster_nodes = redis.cluster_nodes();

    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(spec.seed);
    let mut arrivals: Vec<Vec<Arrival>> = vec![Vec::new(); spec.instances as usize];
    for a in spec.workload.generate(&spec.quota, spec.instances, spec.duration_ms, &mut rng) {
        arrivals[a.instance as usize].push(a);
    }

    // Start on a whole period of the wall clock, as the model's epoch is: Redis's windows
    // (from TIME) then begin where the run's time axis says they do.
    let period = spec.quota.period_ms();
    let align = if period <= 10_000 { period } else { 1_000 };
    let (start, start_wall_ms) = aligned_start(align, SETUP_MARGIN_MS);
    let ctx = Arc::new(Ctx {
        spec: spec.clone(),
        start,
        start_wall_ms,
        arrivals,
        dial,
        cluster_nodes,
        prefix,
        records: Mutex::new(Vec::new()),
        data_epoch: Arc::new(AtomicU64::new(0)),
        instrument_commands: Arc::default(),
        ledger: (spec.mode == sim_engine::mode::Mode::Lease)
            .then(|| Arc::new(redis_ratelimit::harness::LeaseLedger::new())),
    });
    let mut instances: Vec<Option<JoinHandle<anyhow::Result<()>>>> =
        (0..spec.instances).map(|i| Some(tokio::spawn(run_instance(ctx.clone(), i)))).collect();

    let end = start + Duration::from_millis(spec.duration_ms);
    for (at, kind, is_start) in faults::events(&spec.faults) {
        let lead = match kind {
            _ if !is_start => 0,
            FaultKind::RedisCrash { .. } | FaultKind::Failover { .. } => LEAD_MS + CRASH_LEAD_MS,
            _ => LEAD_MS,
        };
        let due = start + Duration::from_millis(at.saturating_sub(lead));
        if due <= end {
            sleep_until(due).await;
        } else if !in_flight_until(&instances, due).await {
            // The load is over and every request has returned: later faults and heals
            // change nothing that is recorded. (Until then they apply, as in the model
            // lane's grace period: a request in flight meets the crash it would meet.)
            break;
        }
        let link = |instance: u32, fault: LinkFault| {
            proxies.iter().filter(|(i, _)| *i == instance).for_each(|(_, p)| p.set(fault, is_start));
        };
        // When the fault took hold, if not at the end of its arm.
        let mut effective_ms = None;
        match kind {
            FaultKind::Partition { instance } => link(instance, LinkFault::Partition),
            FaultKind::PartitionToRedis { instance } => link(instance, LinkFault::ToRedis),
            FaultKind::PartitionFromRedis { instance } => link(instance, LinkFault::FromRedis),
            FaultKind::Hold { instance } => link(instance, LinkFault::Hold),
            FaultKind::RedisPause if is_start => redis.control_now(|c| c.pause())?,
            FaultKind::RedisPause => redis.control_now(|c| c.resume())?,
            // With replicas (a cluster): the primary dies and its replica takes over.
            FaultKind::Failover { .. } if redis.fail_over(is_start).await? => {}
            // One server has no replica to promote: a failover is the primary dying with
            // every write saved, as a replica that was not behind at all would have it
            // (lag 0, within any lag the judge allows), and coming back without its scripts.
            FaultKind::Failover { .. } if is_start => {
                redis.control(|c| c.freeze()).await?;
                effective_ms = Some(ctx.elapsed_ms());
                proxies.iter().for_each(|(_, p)| p.set_redis_down(true));
                redis.control(|c| c.crash(true)).await?;
            }
            FaultKind::Failover { .. } => {
                redis.control(|c| c.restart(true)).await?;
                proxies.iter().for_each(|(_, p)| p.set_redis_down(false));
            }
            FaultKind::RedisCrash { keep_data } if is_start => {
                redis.control(|c| c.freeze()).await?;
                effective_ms = Some(ctx.elapsed_ms());
                proxies.iter().for_each(|(_, p)| p.set_redis_down(true));
                redis.control(move |c| c.crash(keep_data)).await?;
            }
            FaultKind::RedisCrash { keep_data } => {
                redis.control(move |c| c.restart(keep_data)).await?;
                if !keep_data {
                    ctx.data_epoch.fetch_add(1, Ordering::Release);
                }
                proxies.iter().for_each(|(_, p)| p.set_redis_down(false));
            }
            FaultKind::ScriptFlush if is_start => match redis {
                Redis::External(e) => {
                    let e = e.clone();
                    tokio::task::spawn_blocking(move || lock(&e).flush_scripts()).await??
                }
                _ => redis.control(|c| c.flush_scripts()).await?,
            },
            FaultKind::ScriptFlush => {}
            FaultKind::InstanceCrash { instance } => {
                let Some(slot) = instances.get_mut(instance as usize) else { continue };
                if is_start {
                    // The process dies: its load task, its requests in flight (their JoinSet
                    // is dropped with the task) and its limiter with its connection.
                    if let Some(task) = slot.take() {
                        task.abort();
                        let _ = task.await;
                    }
                } else if slot.is_none() {
                    *slot = Some(tokio::spawn(run_instance(ctx.clone(), instance)));
                }
            }
        }
        let applied_ms = effective_ms.unwrap_or_else(|| ctx.elapsed_ms());
        if is_start && applied_ms > at {
            // The judge takes the schedule at its word; a fault that came late lets Redis
            // answer inside its window. Say so rather than let a verdict mislead.
            eprintln!(
                "warning: real lane: {} {} {} seed {}: fault {} scheduled at {at} ms took effect at {applied_ms} ms \
                 (machine overloaded? try fewer --threads); its verdicts may be off",
                spec.scenario,
                spec.subject,
                spec.policy.name(),
                spec.seed,
                kind.name()
            );
        }
    }

    sleep_until(start + Duration::from_millis(spec.duration_ms)).await;
    for task in instances.iter_mut().filter_map(Option::take) {
        match task.await {
            Ok(result) => result?,
            Err(e) if e.is_cancelled() => {}
            Err(e) => anyhow::bail!("an instance task failed: {e}"),
        }
    }
    let proxies: Vec<Proxy> = proxies.into_iter().map(|(_, p)| p).collect();
    let mut redis_cost = redis.cost(&proxies).await?;
    redis_cost.commands = redis_cost.commands.saturating_sub(ctx.instrument_commands.load(Ordering::Relaxed));
    drop(proxies);
    let mut records = std::mem::take(&mut *lock(&ctx.records));
    let trace_hash = trace::finish(&mut records);
    // The real lane cannot look at Redis's state at the instant of a cached denial: only the
    // leases' accounting comes back.
    let modes = sim_engine::turmoil_run::ModeOutput {
        ledger: ctx.ledger.as_ref().map(|l| l.entries()).unwrap_or_default(),
        ..Default::default()
    };
    Ok(RunOutput { records, trace_hash, redis: redis_cost, modes })
}

/// Waits until `due`, or until every instance task has finished; says whether any was
/// still running at `due`.
async fn in_flight_until(instances: &[Option<JoinHandle<anyhow::Result<()>>>], due: Instant) -> bool {
    loop {
        if instances.iter().flatten().all(JoinHandle::is_finished) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        sleep_until(due.min(now + Duration::from_millis(2))).await;
    }
}

/// On a cluster, instance `i`'s store: the cluster's nodes, each dialled through the
/// instance's own proxy for it (the cluster client's node address map), MOVED and ASK
/// included.
fn cluster_store(ctx: &Ctx, i: u32) -> anyhow::Result<Option<redis_ratelimit::RedisStore>> {
    let Some(nodes) = &ctx.cluster_nodes else { return Ok(None) };
    let proxies = &ctx.dial[i as usize];
    let urls: Vec<String> = proxies.iter().map(|p| format!("redis://{p}/")).collect();
    let map = nodes
        .iter()
        .zip(proxies)
        .map(|(port, proxy)| (("127.0.0.1".to_owned(), *port), (proxy.ip().to_string(), proxy.port())));
    Ok(Some(redis_ratelimit::RedisStore::cluster(urls)?.with_node_addresses(map)?))
}

/// One application instance: its own limiter over its own proxy, issuing each arrival at
/// its time, concurrently (a slow Redis means overlapping requests, as in production).
async fn run_instance(ctx: Arc<Ctx>, i: u32) -> anyhow::Result<()> {
    let spec = &ctx.spec;
    let (offset_ms, drift_ppm) = spec.skew_of(i);
    let caller = Arc::new(Caller::build(CallerSpec {
        subject: &spec.subject,
        quota: spec.quota,
        policy: spec.policy,
        time_source: spec.time_source,
        clock: Arc::new(WallClock::new(ctx.start_wall_ms, offset_ms, drift_ppm)),
        connector: Box::new(TcpConnector::new(ctx.dial[i as usize][0].to_string())),
        store: cluster_store(&ctx, i)?,
        timeout: Duration::from_millis(spec.timeout_ms.max(REAL_TIMEOUT_MS)),
        breaker: BREAKER,
        key_prefix: ctx.prefix.clone(),
        run: RunShared { data_epoch: ctx.data_epoch.clone(), instrument_commands: ctx.instrument_commands.clone() },
        instance: i,
        mode: spec.mode,
        lease_ledger: ctx.ledger.clone(),
    })?);
    // After a restart, pick up where the load is now.
    let start_ms = ctx.elapsed_ms();
    let mut tasks = JoinSet::new();
    for (seq, a) in ctx.arrivals[i as usize].iter().enumerate().filter(|(_, a)| a.t_ms >= start_ms) {
        sleep_until(ctx.start + Duration::from_millis(a.t_ms)).await;
        while tasks.try_join_next().is_some() {}
        let (caller, ctx, a) = (caller.clone(), ctx.clone(), *a);
        tasks.spawn(async move {
            let t_ms = ctx.elapsed_ms();
            let answer = caller.check(&format!("key-{}", a.key), a.cost, seq as u64).await;
            let done_ms = ctx.elapsed_ms();
            let r = Record::of_answer(i, seq as u32, &a, t_ms, done_ms, &answer, ctx.start_wall_ms);
            lock(&ctx.records).push(r);
        });
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}
