//! Costs known only after the work, in the simulator: instances admit requests of one key at an
//! estimate, and learn each one's real cost when its work ends, most a little over the
//! estimate and one in four far over it (the tokens of a long completion). The units each
//! subject charges are judged on true time with the checker every rate limit is judged by.
//!
//! The bound: the library admits at the estimate, then charges the excess whether it fits or
//! not, a key owing at most one capacity (`Limiter::reconcile`). Units charged, at admission
//! and after, so keep within the algorithm's promise for twice its capacity; what a cap
//! forgave is reported, never hidden (`Reconciled::uncharged`).
//!
//! The subject it is compared with, `charge-after`, is what gateways that charge a response
//! "toward the next request" do: admit while the window's count is under its limit, charge
//! nothing until the response ends, then add its real cost with no cap. Every request in
//! flight when the count reaches the limit is charged past it, and there is no bound at all on
//! how far.
//!
//! | scenario | what | held to |
//! |---|---|---|
//! | `post-hoc-over-estimate` | four instances admit at an estimate of 5 units and charge what they used: 5 to 10 for three requests in four, 25 to 65 for the fourth | the promise for twice the capacity, on every unit charged |

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use redis_ratelimit::harness::call_raw;
use redis_ratelimit::{
    Algorithm, BreakerConfig, FailurePolicy, Limiter, Quota, Reconciled, RedisStore, Source, TimeSource,
};

use crate::checker::{self, Check};
use crate::promise::{Promise, Tolerance};
use crate::redis_host;
use crate::simclock::{SimTime, SkewedClock};
use crate::trace::{self, Record};
use crate::turmoil_run::{TurmoilConnector, REDIS_ADDR};
use crate::workload::paced;

/// The scenario's name.
pub const SCENARIO: &str = "post-hoc-over-estimate";

/// What admits and charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charger {
    /// The library's limiter of an algorithm: check at the estimate, reconcile at the end.
    Library(Algorithm),
    /// Admit under the limit, charge the real cost at the end, uncapped (a fixed window).
    ChargeAfter,
}

impl Charger {
    /// The library's algorithms, then `charge-after`.
    pub fn all() -> Vec<Charger> {
        Algorithm::ALL.iter().map(|&a| Charger::Library(a)).chain([Charger::ChargeAfter]).collect()
    }

    /// Its name: the algorithm's, or `charge-after`.
    pub fn name(self) -> &'static str {
        match self {
            Charger::Library(a) => a.name(),
            Charger::ChargeAfter => "charge-after",
        }
    }

    /// The charger named `name`.
    pub fn named(name: &str) -> Option<Charger> {
        Charger::all().into_iter().find(|c| c.name() == name)
    }

    /// What it means to keep, before costs known after the work.
    pub fn promise(self) -> Promise {
        match self {
            Charger::Library(a) => Promise::of(a),
            Charger::ChargeAfter => Promise::FixedWindow { first_hit: false },
        }
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct PostHocSpec {
    /// What admits and charges.
    pub charger: Charger,
    /// The seed of everything random.
    pub seed: u64,
    /// Instances sending requests of the one key.
    pub instances: u32,
    /// How long they send (ms).
    pub duration_ms: u64,
    /// The key's quota.
    pub quota: Quota,
}

impl PostHocSpec {
    /// The run of `charger` with `seed`: four instances, 100 units a second.
    pub fn new(charger: Charger, seed: u64) -> PostHocSpec {
        PostHocSpec { charger, seed, instances: 4, duration_ms: 4_000, quota: Quota::new(100, Duration::from_secs(1)) }
    }

    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "{} --scenario {SCENARIO} --subject {} --seed {}",
            results::command::command("simulate"),
            self.charger.name(),
            self.seed
        )
    }

    /// The quota whose promise bounds every unit charged: twice the capacity (twice the
    /// window's limit, or twice the burst at the same rate).
    pub fn bound_quota(&self) -> Quota {
        let q = self.quota;
        if self.charger.promise().is_bucket() {
            q.with_burst(2 * q.burst())
        } else {
            Quota::new(2 * q.limit(), Duration::from_millis(q.period_ms()))
        }
    }
}

/// What a run came to.
#[derive(Debug, Clone)]
pub struct PostHocOutcome {
    /// Every unit charged: an admission at its estimate, or a charge after the work.
    pub records: Vec<Record>,
    /// The records' hash: the same seed gives the same hash.
    pub trace_hash: String,
    /// The promise for twice the capacity, on every unit charged.
    pub bound: Check,
    /// The most charged in one span over what that promise allows there.
    pub worst_ratio: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests admitted.
    pub admitted: u64,
    /// The real cost of the requests admitted.
    pub used: u64,
    /// Units an excess was not charged, by a cap: reported, not hidden.
    pub uncharged: u64,
    /// Calls to Redis.
    pub redis_calls: u64,
}

/// Units each request is admitted at.
const ESTIMATE: u64 = 5;
const KEY: &str = "tokens";

enum Meter {
    Library(Limiter),
    ChargeAfter { store: RedisStore, quota: Quota, clock: SkewedClock },
}

impl Meter {
    fn build(spec: &PostHocSpec, time: &SimTime) -> anyhow::Result<Meter> {
        let store = RedisStore::new(TurmoilConnector::to(REDIS_ADDR)).with_timeout(Duration::from_millis(50))?;
        let clock = SkewedClock::new(time.clone(), 0, 0);
        Ok(match spec.charger {
            Charger::Library(algorithm) => Meter::Library(
                Limiter::builder(algorithm, spec.quota)
                    .redis(store)
                    .time_source(TimeSource::Server)
                    .clock(Arc::new(clock))
                    .failure_policy(FailurePolicy::FailClosed)
                    .breaker(BreakerConfig::new(3, Duration::from_millis(250)))
                    .build()?,
            ),
            Charger::ChargeAfter => Meter::ChargeAfter { store, quota: spec.quota, clock },
        })
    }

    fn window_key(quota: &Quota, clock: &SkewedClock) -> String {
        use redis_ratelimit::Clock;
        format!("spend:{{{KEY}}}:{}", clock.now_ms() / quota.period_ms())
    }

    /// Whether the request is admitted, and the units charged for it now.
    async fn admit(&self) -> (bool, u64) {
        match self {
            Meter::Library(limiter) => match limiter.check_n(KEY, ESTIMATE).await {
                Ok(d) if d.source == Source::Store => (d.allowed, if d.allowed { ESTIMATE } else { 0 }),
                _ => (false, 0),
            },
            Meter::ChargeAfter { store, quota, clock } => {
                let get = redis::cmd("GET").arg(Meter::window_key(quota, clock)).clone();
                match call_raw(store, |mut c| async move { get.query_async::<Option<u64>>(&mut c).await }).await {
                    Ok(count) => (count.unwrap_or(0) < quota.limit(), 0),
                    Err(_) => (false, 0),
                }
            }
        }
    }

    /// Settles a request that used `used`: the units charged now, and those a cap forgave.
    async fn settle(&self, used: u64) -> (u64, u64) {
        match self {
            Meter::Library(limiter) => match limiter.reconcile(KEY, ESTIMATE, used).await {
                Ok(r @ Reconciled::Charged { charged, .. }) => (charged, r.uncharged()),
                _ => (0, 0),
            },
            Meter::ChargeAfter { store, quota, clock } => {
                let key = Meter::window_key(quota, clock);
                let charge = redis::cmd("INCRBY").arg(&key).arg(used).clone();
                let expire = redis::cmd("PEXPIRE").arg(&key).arg(2 * quota.period_ms()).clone();
                let charged = call_raw(store, |mut c| async move {
                    charge.query_async::<Value>(&mut c).await?;
                    expire.query_async::<Value>(&mut c).await
                })
                .await;
                (if charged.is_ok() { used } else { 0 }, 0)
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Completion {
    at_ms: u64,
    work_ms: u64,
    used: u64,
}

#[derive(Debug, Default)]
struct Totals {
    requests: u64,
    admitted: u64,
    used: u64,
    uncharged: u64,
}

async fn instance(
    index: u32,
    spec: PostHocSpec,
    jobs: Vec<Completion>,
    time: SimTime,
    out: Arc<Mutex<(Vec<Record>, Totals)>>,
) -> turmoil::Result {
    let meter = Arc::new(Meter::build(&spec, &time).map_err(|e| e.to_string())?);
    paced(
        &time.clone(),
        jobs,
        |job| job.at_ms,
        |n, job: Completion| {
            let (meter, time, out) = (meter.clone(), time.clone(), out.clone());
            async move {
                // Each charge lies somewhere between its call's sending and its answer.
                let charge = |seq: u32, from: u64, to: u64, units: u64| Record {
                    t_ms: from,
                    done_ms: to,
                    at_ms: from + (to - from) / 2,
                    lo_ms: from,
                    hi_ms: to,
                    instance: index,
                    seq,
                    ..Record::exact(from, 0, units, true)
                };
                let sent = time.elapsed_ms();
                let (admitted, units) = meter.admit().await;
                let mut records = vec![charge(2 * n as u32, sent, time.elapsed_ms(), units)];
                let (mut uncharged, mut used) = (0, 0);
                if admitted {
                    tokio::time::sleep(Duration::from_millis(job.work_ms)).await;
                    let sent = time.elapsed_ms();
                    let (units, forgiven) = meter.settle(job.used).await;
                    records.push(charge(2 * n as u32 + 1, sent, time.elapsed_ms(), units));
                    (uncharged, used) = (forgiven, job.used);
                }
                let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
                out.0.extend(records.into_iter().filter(|r| r.cost > 0));
                out.1.requests += 1;
                out.1.admitted += u64::from(admitted);
                out.1.used += used;
                out.1.uncharged += uncharged;
            }
        },
    )
    .await;
    Ok(())
}

/// Each instance's requests, 25 a second: three in four use 5 to 10 units, one in four 25 to
/// 65, for 10 to 150 ms of work.
fn jobs(spec: &PostHocSpec, rng: &mut SmallRng) -> Vec<Vec<Completion>> {
    (0..spec.instances)
        .map(|_| {
            let mut out = Vec::new();
            let mut t = rng.random_range(0..40);
            while t < spec.duration_ms {
                let used = if rng.random_range(0..4) == 0 {
                    rng.random_range(25..=65)
                } else {
                    rng.random_range(ESTIMATE..=2 * ESTIMATE)
                };
                out.push(Completion { at_ms: t, work_ms: rng.random_range(10..=150), used });
                t += rng.random_range(1..=80);
            }
            out
        })
        .collect()
}

/// Runs `spec` to completion.
pub fn run(spec: &PostHocSpec) -> anyhow::Result<PostHocOutcome> {
    anyhow::ensure!(spec.instances > 0, "a post-hoc run needs instances");
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let time = SimTime::default();
    // Long enough after the last request for every work and settlement to end.
    let end_ms = spec.duration_ms + 1_000;
    let (mut sim, redis) = redis_host::simulation(spec.seed, end_ms, &time);
    let out: Arc<Mutex<(Vec<Record>, Totals)>> = Arc::default();
    for (i, jobs) in jobs(spec, &mut rng).into_iter().enumerate() {
        let (spec, time, out) = (spec.clone(), time.clone(), out.clone());
        sim.client(format!("meter-{i}"), instance(i as u32, spec, jobs, time, out));
    }
    while sim.elapsed() < Duration::from_millis(end_ms) {
        let elapsed = sim.elapsed();
        time.publish(elapsed.as_micros() as u64);
        if let Err(e) = sim.step() {
            anyhow::bail!("simulation failed at {} ms: {e}", elapsed.as_millis());
        }
    }
    let (mut records, totals) = std::mem::take(&mut *out.lock().unwrap_or_else(|p| p.into_inner()));
    let trace_hash = trace::finish(&mut records);
    let (promise, twice) = (spec.charger.promise(), spec.bound_quota());
    let bound = checker::check_bound_with(promise, &twice, &records, 0, Tolerance::EXACT);
    let worst_ratio = checker::worst_ratio(promise, &twice, &records, 0, Tolerance::EXACT);
    Ok(PostHocOutcome {
        records,
        trace_hash,
        bound,
        worst_ratio,
        requests: totals.requests,
        admitted: totals.admitted,
        used: totals.used,
        uncharged: totals.uncharged,
        redis_calls: redis.cost().round_trips,
    })
}
