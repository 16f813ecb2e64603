//! In-flight limits in the simulator: several instances hold slots of one key while their work
//! runs, against the Redis model in turmoil, and [`check`] judges every acquire and release on
//! true time against the promise of a concurrency limit: at most N slots held at once, except
//! slots of holders that died, each for at most one lease; N more per loss of Redis's data.
//!
//! | variant | what happens | what it breaks in a design without leases or tokens |
//! |---|---|---|
//! | `in-flight-crashes` | one holder in 16 dies holding its slot (a crashed worker, a killed connection); Redis restarts without its data a third of the way in | a counter never gets the dead holders' slots back: the key is refused for good |
//! | `in-flight-lost-replies` | Redis's replies to each instance are lost three times for 60 ms: acquires and releases time out, and releases are retried, as clients retry them | an acquire whose reply was lost took a slot nobody holds, for good; a release retried after its reply was lost counts twice |
//! | `in-flight-double-release` | one request in 8 is released twice (its response ended and its connection closed, and both release) | the second release frees someone else's slot: the counter goes below the slots held, and more than N run |
//!
//! Two subjects run ([`Holder`]): the library's [`ConcurrencyLimiter`] (one script per call,
//! a token per holder, leases on Redis's clock) and `incr-decr`, the counter most public
//! implementations are: INCR to acquire (DECR back when over the limit), DECR to release, no
//! lease and no token.

pub mod check;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use redis_ratelimit::harness::{call_raw, RawCallError};
use redis_ratelimit::{
    Acquired, BreakerConfig, Clock, ConcurrencyLimiter, FailurePolicy, PermitTicket, Quota, RedisStore, Source,
    TimeSource,
};

use crate::redis_host;
use crate::simclock::{SimTime, SkewedClock};
use crate::subject::release::InFlightCall;
use crate::subject::template::Values;
use crate::subject::SubjectFile;
use crate::turmoil_run::{TurmoilConnector, REDIS_ADDR};
use crate::workload::paced;
use check::{Acquire, End, Hold, Judged};

/// Which scenario of the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlightVariant {
    /// Holders die holding slots; Redis restarts without its data.
    Crashes,
    /// Replies are lost; releases are retried.
    LostReplies,
    /// Some requests are released twice.
    DoubleRelease,
}

impl InFlightVariant {
    /// Every variant.
    pub const ALL: [InFlightVariant; 3] =
        [InFlightVariant::Crashes, InFlightVariant::LostReplies, InFlightVariant::DoubleRelease];

    /// The scenario's name.
    pub const fn name(self) -> &'static str {
        match self {
            InFlightVariant::Crashes => "in-flight-crashes",
            InFlightVariant::LostReplies => "in-flight-lost-replies",
            InFlightVariant::DoubleRelease => "in-flight-double-release",
        }
    }

    /// The variant named `name`.
    pub fn named(name: &str) -> Option<InFlightVariant> {
        InFlightVariant::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// What holds the slots.
#[derive(Debug, Clone, PartialEq)]
pub enum Holder {
    /// The library's concurrency limiter.
    Library,
    /// INCR to acquire, DECR to release: no lease, no token.
    IncrDecr,
    /// A script described by a concurrency subject file (`subject::release`).
    Script(Arc<SubjectFile>),
}

impl Holder {
    /// The simulator's own, the library first.
    pub const BUILT_IN: [Holder; 2] = [Holder::Library, Holder::IncrDecr];

    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Holder::Library => "concurrency",
            Holder::IncrDecr => "incr-decr",
            Holder::Script(file) => &file.name,
        }
    }

    /// The built-in subject named `name`.
    pub fn named(name: &str) -> Option<Holder> {
        Holder::BUILT_IN.into_iter().find(|h| h.name() == name)
    }
}

/// One run of the family.
#[derive(Debug, Clone)]
pub struct InFlightSpec {
    /// The scenario.
    pub variant: InFlightVariant,
    /// What holds the slots.
    pub holder: Holder,
    /// The seed of everything random.
    pub seed: u64,
    /// Instances holding slots of the one key.
    pub instances: u32,
    /// How long they send (ms).
    pub duration_ms: u64,
    /// N: slots of the key.
    pub limit: u64,
    /// How long a slot lasts unreleased (ms).
    pub lease_ms: u64,
}

impl InFlightSpec {
    /// The variant's run of `holder` with `seed`: four instances asking for half again the
    /// key's slots, 4 with leases of 400 ms or the N and lease a subject file declares.
    pub fn new(variant: InFlightVariant, holder: Holder, seed: u64) -> InFlightSpec {
        let (limit, lease_ms) = match &holder {
            Holder::Script(file) => file.in_flight.as_ref().map_or((4, 400), |c| (c.limit, c.lease_ms)),
            _ => (4, 400),
        };
        InFlightSpec { variant, holder, seed, instances: 4, duration_ms: 4_000, limit, lease_ms }.with_lease(lease_ms)
    }

    /// The same run with leases of `lease_ms`: the work of each request is a fortieth to three
    /// eighths of a lease (a holder never outlives its lease), and the run lasts at least ten.
    pub fn with_lease(mut self, lease_ms: u64) -> InFlightSpec {
        self.lease_ms = lease_ms.max(1);
        self.duration_ms = self.duration_ms.max(10 * self.lease_ms);
        self
    }

    /// The command that replays this run: `simulate` for the simulator's own subjects,
    /// `verify` for a subject file.
    pub fn replay_command(&self) -> String {
        match &self.holder {
            Holder::Script(file) => format!(
                "{} {} --scenario {} --seed {}",
                results::command::command("verify"),
                file.path.display(),
                self.variant.name(),
                self.seed
            ),
            holder => format!(
                "{} --scenario {} --subject {} --seed {}",
                results::command::command("simulate"),
                self.variant.name(),
                holder.name(),
                self.seed
            ),
        }
    }
}

/// What a run came to.
#[derive(Debug, Clone)]
pub struct InFlightOutcome {
    /// Every request's acquire and release, by instance and job.
    pub holds: Vec<Hold>,
    /// The holds' hash: the same seed gives the same hash.
    pub trace_hash: String,
    /// The promise, judged.
    pub judged: Judged,
    /// Restarts of Redis without its data.
    pub data_losses: u64,
    /// Calls to Redis.
    pub redis_calls: u64,
    /// The faults injected.
    pub faults: Vec<results::FaultWindow>,
    /// Calls a subject file's script answered with an error.
    pub script_errors: u64,
}

/// Width of the buckets of the slots-held series.
pub const BUCKET_MS: u64 = 100;
/// How long one call may take before the caller gives up on it.
const TIMEOUT_MS: u64 = 50;
/// Attempts at a release, 20 ms apart.
const RELEASE_ATTEMPTS: u32 = 3;
const KEY: &str = "api";
/// How long each loss of replies lasts.
const LOSS_MS: u64 = 150;

/// One instance's way of holding slots.
enum SlotClient {
    Library(ConcurrencyLimiter),
    IncrDecr { store: RedisStore, limit: u64 },
    Script(ScriptHolder),
}

/// A subject file's script, called as its library would.
struct ScriptHolder {
    store: RedisStore,
    file: Arc<SubjectFile>,
    clock: SkewedClock,
    instance: u32,
    acquires: AtomicU64,
    errors: Arc<AtomicU64>,
}

/// What a held slot is released with.
enum Token {
    Ticket(PermitTicket),
    Count,
    /// The script's holder: the acquire's `{request_id}`.
    Holder(u64),
}

impl SlotClient {
    fn build(
        spec: &InFlightSpec,
        time: &SimTime,
        instance: u32,
        errors: &Arc<AtomicU64>,
    ) -> anyhow::Result<SlotClient> {
        let store =
            RedisStore::new(TurmoilConnector::to(REDIS_ADDR)).with_timeout(Duration::from_millis(TIMEOUT_MS))?;
        Ok(match &spec.holder {
            Holder::Library => SlotClient::Library(
                ConcurrencyLimiter::builder(spec.limit, Duration::from_millis(spec.lease_ms))
                    .redis(store)
                    .time_source(TimeSource::Server)
                    // Simulated time for its breaker and its readings, never the machine's.
                    .clock(Arc::new(SkewedClock::new(time.clone(), 0, 0)))
                    .failure_policy(FailurePolicy::FailClosed)
                    .breaker(BreakerConfig::new(3, Duration::from_millis(250)))
                    .build()?,
            ),
            Holder::IncrDecr => SlotClient::IncrDecr { store, limit: spec.limit },
            Holder::Script(file) => SlotClient::Script(ScriptHolder {
                store,
                file: file.clone(),
                clock: SkewedClock::new(time.clone(), 0, 0),
                instance,
                acquires: AtomicU64::new(0),
                errors: errors.clone(),
            }),
        })
    }

    async fn acquire(&self) -> (Acquire, Option<Token>) {
        match self {
            SlotClient::Library(limiter) => match limiter.acquire(KEY).await {
                Ok(Acquired::Held(permit)) if permit.decision().source == Source::Store => {
                    (Acquire::Held, Some(Token::Ticket(permit.into_ticket())))
                }
                Ok(Acquired::Full(d)) if d.source == Source::Store => (Acquire::Full, None),
                // A failure policy's answer, or an error: not the store's.
                _ => (Acquire::Unknown, None),
            },
            SlotClient::IncrDecr { store, limit } => {
                let key = format!("inflight:{{{KEY}}}");
                let incr = redis::cmd("INCR").arg(&key).clone();
                let Ok(n) = call_raw(store, |mut c| async move { incr.query_async::<i64>(&mut c).await }).await else {
                    return (Acquire::Unknown, None);
                };
                if n > *limit as i64 {
                    // Over the limit: take the increment back (should this fail, the slot
                    // leaks, as it does in the libraries that work this way).
                    let decr = redis::cmd("DECR").arg(&key).clone();
                    let _ = call_raw(store, |mut c| async move { decr.query_async::<Value>(&mut c).await }).await;
                    return (Acquire::Full, None);
                }
                (Acquire::Held, Some(Token::Count))
            }
            SlotClient::Script(script) => script.acquire().await,
        }
    }

    /// One attempt at a release: whether the store acknowledged it.
    async fn release(&self, token: &Token) -> bool {
        match (self, token) {
            (SlotClient::Library(limiter), Token::Ticket(ticket)) => limiter.release_ticket(ticket).await.is_ok(),
            (SlotClient::IncrDecr { store, .. }, Token::Count) => {
                let decr = redis::cmd("DECR").arg(format!("inflight:{{{KEY}}}")).clone();
                call_raw(store, |mut c| async move { decr.query_async::<Value>(&mut c).await }).await.is_ok()
            }
            (SlotClient::Script(script), Token::Holder(id)) => script.release(*id).await,
            _ => false,
        }
    }
}

impl ScriptHolder {
    fn values<'a>(&self, quota: &'a Quota, request_id: u64) -> Values<'a> {
        let call = self.file.in_flight.as_ref();
        Values {
            key: KEY,
            quota,
            now_us: self.clock.now_ms().saturating_mul(1000),
            cost: 1,
            request_id,
            instance: self.instance,
            lease_ms: call.map_or(0, |c| c.lease_ms),
        }
    }

    fn quota(&self) -> Quota {
        self.file.in_flight.as_ref().map_or(Quota::new(1, Duration::from_secs(1)), InFlightCall::quota)
    }

    /// `EVAL` of `source`: the reply, or whether the failure was the script's own error.
    async fn eval(&self, source: &str, keys: Vec<String>, argv: Vec<String>) -> Result<Value, bool> {
        let eval = redis::cmd("EVAL").arg(source).arg(keys.len()).arg(keys).arg(argv).clone();
        match call_raw(&self.store, |mut c| async move { eval.query_async::<Value>(&mut c).await }).await {
            Ok(reply) => Ok(reply),
            Err(RawCallError::Refused(_)) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                Err(true)
            }
            Err(RawCallError::Unavailable(_)) => Err(false),
        }
    }

    async fn acquire(&self) -> (Acquire, Option<Token>) {
        // Unique per acquire across instances, and given to its release: the holder's token.
        let request_id = (u64::from(self.instance) << 40) | self.acquires.fetch_add(1, Ordering::Relaxed);
        let quota = self.quota();
        let values = self.values(&quota, request_id);
        let (keys, argv) = self.file.render(&values);
        match self.eval(&self.file.source, keys, argv).await {
            Ok(reply) if self.file.reply.read(&reply, &values, values.now_us / 1000).allowed => {
                (Acquire::Held, Some(Token::Holder(request_id)))
            }
            Ok(_) => (Acquire::Full, None),
            // The caller's `on_error` answers: whatever it does, no slot of the store's.
            Err(_) => (Acquire::Unknown, None),
        }
    }

    async fn release(&self, request_id: u64) -> bool {
        let Some(call) = self.file.in_flight.as_ref() else { return false };
        let quota = self.quota();
        let (keys, argv) = call.render_release(&self.values(&quota, request_id));
        self.eval(&call.release_source, keys, argv).await.is_ok()
    }
}

/// One request as the workload draws it.
#[derive(Debug, Clone, Copy)]
struct Job {
    at_ms: u64,
    work_ms: u64,
    dies: bool,
    /// A second release this long after the first.
    again_ms: Option<u64>,
}

async fn instance(
    index: u32,
    spec: InFlightSpec,
    jobs: Vec<Job>,
    time: SimTime,
    holds: Arc<Mutex<Vec<Hold>>>,
    errors: Arc<AtomicU64>,
) -> turmoil::Result {
    let caller = Arc::new(SlotClient::build(&spec, &time, index, &errors).map_err(|e| e.to_string())?);
    paced(
        &time.clone(),
        jobs,
        |job| job.at_ms,
        |n, job: Job| {
            let (caller, time, holds) = (caller.clone(), time.clone(), holds.clone());
            async move {
                let sent_ms = time.elapsed_ms();
                let (acquire, token) = caller.acquire().await;
                let done_ms = time.elapsed_ms();
                let end = match token {
                    None => End::NotHeld,
                    Some(token) => {
                        tokio::time::sleep(Duration::from_millis(job.work_ms)).await;
                        if job.dies {
                            // Nothing releases it: the ticket (or the count) is simply gone.
                            End::Died { at_ms: time.elapsed_ms() }
                        } else {
                            let sent_ms = time.elapsed_ms();
                            let mut acked_ms = None;
                            for attempt in 0..RELEASE_ATTEMPTS {
                                if attempt > 0 {
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                                if caller.release(&token).await {
                                    acked_ms = Some(time.elapsed_ms());
                                    break;
                                }
                            }
                            if let Some(again_ms) = job.again_ms {
                                tokio::time::sleep(Duration::from_millis(again_ms)).await;
                                caller.release(&token).await;
                            }
                            End::Released { sent_ms, acked_ms }
                        }
                    }
                };
                let hold = Hold { instance: index, job: n as u32, sent_ms, done_ms, acquire, end };
                holds.lock().unwrap_or_else(|p| p.into_inner()).push(hold);
            }
        },
    )
    .await;
    Ok(())
}

/// Each instance's jobs: together they ask for half again the key's slots (work of a fortieth
/// to three eighths of a lease: 10 to 150 ms of a 400 ms one); in the crash scenario one holder
/// in 16 dies, in the double-release one one in 8 is released twice.
fn jobs(spec: &InFlightSpec, rng: &mut SmallRng) -> Vec<Vec<Job>> {
    let work_ms = (spec.lease_ms / 40).max(1)..=(spec.lease_ms * 3 / 8).max(1);
    let mean_work_ms = (work_ms.start() + work_ms.end()) / 2;
    // Little's law: slots asked for = arrival rate x work; per instance a quarter of 1.5 N.
    let gap_ms = (mean_work_ms * u64::from(spec.instances) * 2 / (3 * spec.limit)).max(1);
    (0..spec.instances)
        .map(|_| {
            let mut out = Vec::new();
            let mut t = rng.random_range(0..gap_ms);
            while t < spec.duration_ms {
                let dies = spec.variant == InFlightVariant::Crashes && rng.random_range(0..16) == 0;
                let again_ms = (spec.variant == InFlightVariant::DoubleRelease && rng.random_range(0..8) == 0)
                    .then(|| rng.random_range(1..=30));
                out.push(Job { at_ms: t, work_ms: rng.random_range(work_ms.clone()), dies, again_ms });
                t += rng.random_range(1..=2 * gap_ms);
            }
            out
        })
        .collect()
}

/// Runs `spec` to completion.
pub fn run(spec: &InFlightSpec) -> anyhow::Result<InFlightOutcome> {
    anyhow::ensure!(spec.instances > 0 && spec.limit > 0, "an in-flight run needs instances and slots");
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let time = SimTime::default();
    // Long enough after the last job for every work and release to end.
    let end_ms = spec.duration_ms + 1_000;
    let (mut sim, redis) = redis_host::simulation(spec.seed, end_ms, &time);
    let holds: Arc<Mutex<Vec<Hold>>> = Arc::default();
    let errors: Arc<AtomicU64> = Arc::default();
    for (i, jobs) in jobs(spec, &mut rng).into_iter().enumerate() {
        let (spec, time, holds, errors) = (spec.clone(), time.clone(), holds.clone(), errors.clone());
        sim.client(instance_name(i as u32), instance(i as u32, spec, jobs, time, holds, errors));
    }
    // (at, instance, start): replies from Redis lost, one window of 150 ms per third of the run.
    let mut losses: Vec<(u64, u32, bool)> = Vec::new();
    if spec.variant == InFlightVariant::LostReplies {
        let third = spec.duration_ms / 3;
        for i in 0..spec.instances {
            for k in 0..3 {
                let at = k * third + rng.random_range(0..third.saturating_sub(LOSS_MS).max(1));
                losses.extend([(at, i, true), (at + LOSS_MS, i, false)]);
            }
        }
        losses.sort_unstable();
    }
    let crash =
        (spec.variant == InFlightVariant::Crashes).then_some((spec.duration_ms / 3, spec.duration_ms / 3 + 150));
    let window = |kind: &str, at_ms, until_ms| results::FaultWindow { kind: kind.to_owned(), at_ms, until_ms };
    let faults: Vec<results::FaultWindow> = losses
        .iter()
        .filter(|l| l.2)
        .map(|&(at, _, _)| window("partition-from-redis", at, at + LOSS_MS))
        .chain(crash.map(|(at, until)| window("redis-crash", at, until)))
        .collect();
    let (mut next, mut data_losses) = (0, 0);
    while sim.elapsed() < Duration::from_millis(end_ms) {
        let elapsed = sim.elapsed();
        time.publish(elapsed.as_micros() as u64);
        let now = elapsed.as_millis() as u64;
        while let Some(&(_, i, start)) = losses.get(next).filter(|l| l.0 <= now) {
            if start {
                sim.partition_oneway("redis", instance_name(i));
            } else {
                sim.repair_oneway("redis", instance_name(i));
            }
            next += 1;
        }
        if let Some((at, until)) = crash {
            if now == at {
                redis.crash();
            }
            if now == until {
                redis.restart(false);
                data_losses += 1;
            }
        }
        if let Err(e) = sim.step() {
            anyhow::bail!("simulation failed at {now} ms: {e}");
        }
    }
    let mut holds = std::mem::take(&mut *holds.lock().unwrap_or_else(|p| p.into_inner()));
    holds.sort_by_key(|h| (h.instance, h.job));
    let mut hash = sha1_smol::Sha1::new();
    for h in &holds {
        hash.update(format!("{h:?}\n").as_bytes());
    }
    let judged = check::judge(&holds, spec.limit, spec.lease_ms, data_losses, BUCKET_MS);
    Ok(InFlightOutcome {
        holds,
        trace_hash: hash.digest().to_string(),
        judged,
        data_losses,
        redis_calls: redis.cost().round_trips,
        faults,
        script_errors: errors.load(Ordering::Relaxed),
    })
}

fn instance_name(i: u32) -> String {
    format!("holder-{i}")
}
