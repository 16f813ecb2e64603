//! The rate limit service's scenarios: several service instances (the service's own decision
//! code, `redis_ratelimit_server::service::Service`, in process on their hosts) answer several
//! proxies over turmoil's network, against the Redis model, and every decision, the service's
//! and those a proxy makes from its quota grants, is judged with the library's oracle and
//! bounds.
//!
//! The proxies speak the service's messages (Envoy's `RateLimitRequest` and
//! `RateLimitResponse`, protobuf) over turmoil TCP, one frame each way per call, rather than
//! HTTP/2: the decision is what is simulated, and gRPC's framing adds nothing to judge. A proxy
//! honours quota grants as the protocol describes them: a cached quota admits until it runs out
//! and then refuses until it expires, read on the proxy's own (skewed) clock; only then is the
//! service asked again.
//!
//! | variant | what | held to |
//! |---|---|---|
//! | `rls-grants` | one hot key at three times its GCRA limit, grants on, proxies' clocks within the grant allowance, Redis restarting empty mid-run | GCRA's bound on everything admitted (service and proxies), one extra burst per data loss |
//! //! | `rls-all-or-nothing` | two descriptors per request (a user's limit and a route's), several services | each limit's bound, and an all-or-nothing oracle: no request admitted that the exact limiters refuse beyond the interval placement |

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::Message;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::store::{BoxedStream, ConnectFuture, Connector};
use redis_ratelimit::{Algorithm, Clock, Quota, RedisStore, Source};
use redis_ratelimit_server::adapter::{Engine, EngineSettings};
use redis_ratelimit_server::config::{self, LoadOptions};
use redis_ratelimit_server::service::{Loaded, Options, Service};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::checker::{self, Check};
use crate::oracle::{self, Accuracy};
use crate::promise::{Promise, Tolerance};
use crate::redis_host;
use crate::simclock::{SimTime, SkewedClock, EPOCH_MS};
use crate::trace::{self, Record};

const REDIS: &str = "redis:6379";
const PORT: u16 = 8081;

/// Which scenario of the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// A hot key with grants, proxies' clocks within the allowance, Redis restarting empty.
    Grants,
    /// Two descriptors per request, decided all-or-nothing.
    AllOrNothing,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 2] = [Variant::Grants, Variant::AllOrNothing];

    /// The scenario's name.
    pub const fn name(self) -> &'static str {
        match self {
            Variant::Grants => "rls-grants",
            Variant::AllOrNothing => "rls-all-or-nothing",
        }
    }
}

/// One run of the family.
#[derive(Debug, Clone)]
pub struct RlsSpec {
    /// The scenario.
    pub variant: Variant,
    /// The seed of everything random.
    pub seed: u64,
    /// Service instances.
    pub services: u32,
    /// Proxies calling them.
    pub proxies: u32,
    /// How long the proxies send (ms).
    pub duration_ms: u64,
}

impl RlsSpec {
    /// The variant's run with `seed`.
    pub fn new(variant: Variant, seed: u64) -> RlsSpec {
        RlsSpec { variant, seed, services: 3, proxies: 4, duration_ms: 3_000 }
    }
}

/// What a run came to.
#[derive(Debug, Clone)]
pub struct RlsOutcome {
    /// Every decision (per limited descriptor), in decision-time order.
    pub records: Vec<Record>,
    /// The records' hash: the same seed gives the same hash.
    pub trace_hash: String,
    /// Each limit's bound, on everything admitted by the service and from grants.
    pub bound: Check,
    /// The oracle's counts (per key for grants; all-or-nothing for two descriptors).
    pub accuracy: Accuracy,
    /// Requests the proxies decided, themselves or by asking.
    pub decisions: u64,
    /// Of those, the ones they decided from a grant without asking.
    pub from_grants: u64,
    /// Calls to Redis.
    pub redis_calls: u64,
}

/// Dials the Redis host over turmoil.
#[derive(Debug, Clone, Copy)]
struct ToRedis;

impl Connector for ToRedis {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move { Ok(Box::new(turmoil::net::TcpStream::connect(REDIS).await?) as BoxedStream) })
    }

    fn describe(&self) -> String {
        format!("turmoil://{REDIS}")
    }
}

/// The quota of the hot key (GCRA): 50 per second, burst 50.
const HOT: Quota = Quota::new(50, Duration::from_secs(1));
/// A user's limit and the route's in the all-or-nothing scenario.
const PER_USER: Quota = Quota::new(5, Duration::from_secs(1));
const ROUTE: Quota = Quota::new(40, Duration::from_secs(1));
/// Grants live 200 ms, less a 25 ms allowance for the proxies' clocks.
const LIFETIME_MS: u64 = 200;
const ALLOWANCE_MS: u64 = 25;

fn configuration(variant: Variant) -> String {
    match variant {
        Variant::Grants => format!(
            "domain: sim\ndescriptors:\n  - key: api\n    rate_limit:\n      unit: second\n      requests_per_unit: {}\n      \
             algorithm: gcra\n      quota_grants: {{ lifetime: {LIFETIME_MS}ms, max_requests: 8 }}\n",
            HOT.limit()
        ),
        Variant::AllOrNothing => format!(
            "domain: sim\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: second, requests_per_unit: {}, algorithm: gcra }}\n  \
             - key: route\n    rate_limit: {{ unit: second, requests_per_unit: {}, algorithm: gcra }}\n",
            PER_USER.limit(),
            ROUTE.limit()
        ),
    }
}

fn service(variant: Variant, clock: Arc<dyn Clock>) -> anyhow::Result<Arc<Service>> {
    let cfg = config::parse(&[("sim.yaml".into(), configuration(variant))], LoadOptions::default())?;
    let rules = redis_ratelimit_server::adapter::compile(&cfg)?;
    let store = RedisStore::new(ToRedis).with_timeout(Duration::from_millis(100))?;
    let settings = EngineSettings {
        key_prefix: "rls".into(),
        max_key_bytes: 1_024,
        breaker_failures: 3,
        breaker_open: Duration::from_millis(200),
        near_limit_ratio: 0.8,
        partition_key_secret: None,
    };
    let engine = Engine::new(Some(store), Some(clock), &settings, |_| {}).map_err(anyhow::Error::msg)?;
    let options = Options { grant_clock_allowance: Duration::from_millis(ALLOWANCE_MS), ..Options::default() };
    Ok(Arc::new(Service::new(Loaded { config: cfg, rules }, engine, options)))
}

/// A service host: answers framed requests (one byte asking for grants, a length, the
/// request) with framed responses (one byte, 1 for a response and 0 for a refusal's text).
async fn serve(service: Arc<Service>) -> turmoil::Result {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
    loop {
        let (mut stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            loop {
                let Ok(grants) = stream.read_u8().await else { return };
                let Ok(len) = stream.read_u32().await else { return };
                let mut buf = vec![0; len as usize];
                if stream.read_exact(&mut buf).await.is_err() {
                    return;
                }
                let (kind, body) = match RateLimitRequest::decode(&buf[..]) {
                    Ok(req) => match service.should_rate_limit(&req, grants == 1).await {
                        Ok(r) => (1u8, r.encode_to_vec()),
                        Err(e) => (0, e.message.into_bytes()),
                    },
                    Err(e) => (0, e.to_string().into_bytes()),
                };
                let mut frame = vec![kind];
                frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
                frame.extend_from_slice(&body);
                if stream.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
    }
}

async fn call(
    stream: &mut turmoil::net::TcpStream,
    req: &RateLimitRequest,
    grants: bool,
) -> std::io::Result<Option<RateLimitResponse>> {
    let body = req.encode_to_vec();
    let mut frame = vec![u8::from(grants)];
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await?;
    let kind = stream.read_u8().await?;
    let len = stream.read_u32().await?;
    let mut buf = vec![0; len as usize];
    stream.read_exact(&mut buf).await?;
    Ok((kind == 1).then(|| RateLimitResponse::decode(&buf[..]).ok()).flatten())
}

fn descriptor(key: &str, value: String) -> RateLimitDescriptor {
    RateLimitDescriptor { entries: vec![Entry { key: key.into(), value }], limit: None, hits_addend: None }
}

/// A proxy's cached grant for one descriptor set: requests left, and when it ends on the
/// proxy's clock (ms since the epoch).
#[derive(Debug, Clone, Copy)]
struct Held {
    left: u32,
    until_ms: u64,
}

struct Proxy {
    index: u32,
    variant: Variant,
    services: u32,
    arrivals: Vec<(u64, u32)>,
    clock: SkewedClock,
    time: SimTime,
    records: Arc<Mutex<Vec<Record>>>,
    counts: Arc<Mutex<(u64, u64)>>,
}

impl Proxy {
    async fn run(self) -> turmoil::Result {
        let mut streams: BTreeMap<u32, turmoil::net::TcpStream> = BTreeMap::new();
        let mut held: BTreeMap<u32, Held> = BTreeMap::new();
        let mut seq = 0u32;
        let mut out = Vec::new();
        let (mut decisions, mut from_grants) = (0u64, 0u64);
        for (n, &(at_ms, user)) in self.arrivals.iter().enumerate() {
            let now = self.time.elapsed_ms();
            if at_ms > now {
                tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
            }
            let t_ms = self.time.elapsed_ms();
            decisions += 1;
            seq += 1;
            let grants = self.variant != Variant::AllOrNothing;
            if grants {
                // The one descriptor set: the hot key.
                if let Some(h) = held.get_mut(&0).filter(|h| self.clock.now_ms() < h.until_ms) {
                    let allowed = h.left > 0;
                    h.left = h.left.saturating_sub(1);
                    from_grants += u64::from(allowed);
                    out.push(Record {
                        source: Source::Lease,
                        instance: self.index,
                        seq,
                        ..Record::exact(t_ms, 0, 1, allowed)
                    });
                    continue;
                }
            }
            let target = (self.index + n as u32) % self.services;
            if let std::collections::btree_map::Entry::Vacant(e) = streams.entry(target) {
                match turmoil::net::TcpStream::connect((format!("rls-{target}"), PORT)).await {
                    Ok(s) => {
                        e.insert(s);
                    }
                    Err(_) => continue,
                }
            }
            let req = match self.variant {
                Variant::AllOrNothing => RateLimitRequest {
                    domain: "sim".into(),
                    descriptors: vec![descriptor("user", format!("u{user}")), descriptor("route", "/pay".into())],
                    hits_addend: 0,
                },
                _ => RateLimitRequest {
                    domain: "sim".into(),
                    descriptors: vec![descriptor("api", "hot".into())],
                    hits_addend: 0,
                },
            };
            let stream = streams.get_mut(&target).expect("connected above");
            let answered = call(stream, &req, grants).await;
            let done_ms = self.time.elapsed_ms();
            let Ok(Some(r)) = answered else {
                streams.remove(&target);
                continue;
            };
            let allowed = r.overall_code == 1;
            let degraded = r.request_headers_to_add.iter().any(|h| h.key == "ratelimit-degraded");
            let source = if degraded { Source::FailOpen } else { Source::Store };
            let keys: Vec<u32> = match self.variant {
                Variant::AllOrNothing => vec![1 + user, 0],
                _ => vec![0],
            };
            for key in keys {
                let mut rec = Record::exact(t_ms, key, 1, allowed);
                rec.done_ms = done_ms;
                rec.hi_ms = done_ms.max(t_ms);
                rec.at_ms = t_ms + (rec.hi_ms - t_ms) / 2;
                rec.source = source;
                rec.instance = self.index;
                rec.seq = seq;
                out.push(rec);
            }
            if grants {
                if let Some(q) = r.statuses.first().and_then(|s| s.quota.as_ref()) {
                    if let Some(ExpirationSpecifier::ValidUntil(u)) = &q.expiration_specifier {
                        let until_ms = u.seconds as u64 * 1_000 + u.nanos as u64 / 1_000_000;
                        held.insert(0, Held { left: q.requests, until_ms });
                    }
                }
            }
        }
        self.records.lock().unwrap_or_else(|p| p.into_inner()).extend(out);
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.0 += decisions;
        c.1 += from_grants;
        Ok(())
    }
}

/// Runs `spec` to completion.
pub fn run(spec: &RlsSpec) -> anyhow::Result<RlsOutcome> {
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let time = SimTime::default();
    let end_ms = spec.duration_ms + 1_000;
    let (mut sim, redis) = redis_host::simulation(spec.seed, end_ms, &time);
    for i in 0..spec.services {
        let offset = rng.random_range(-10i64..=10);
        let (variant, time) = (spec.variant, time.clone());
        sim.host(format!("rls-{i}"), move || {
            let clock: Arc<dyn Clock> = Arc::new(SkewedClock::new(time.clone(), offset, 0));
            async move {
                let service = service(variant, clock).map_err(|e| e.to_string())?;
                serve(service).await
            }
        });
    }
    let records: Arc<Mutex<Vec<Record>>> = Arc::default();
    let counts: Arc<Mutex<(u64, u64)>> = Arc::default();
    // Each proxy sends at three quarters of the hot key's limit, so four send three times it.
    let gap_ms = (4 * HOT.period_ms()) / (3 * HOT.limit());
    for p in 0..spec.proxies {
        let mut arrivals = Vec::new();
        let mut t = rng.random_range(0..gap_ms.max(1));
        while t < spec.duration_ms {
            arrivals.push((t, rng.random_range(0..4u32)));
            t += rng.random_range(1..=2 * gap_ms);
        }
        // Within the allowance a grant's end is shortened by.
        let offset = rng.random_range(-(ALLOWANCE_MS as i64 - 5)..=(ALLOWANCE_MS as i64 - 5));
        let (variant, services, time, records, counts) =
            (spec.variant, spec.services, time.clone(), records.clone(), counts.clone());
        sim.client(format!("proxy-{p}"), async move {
            let clock = SkewedClock::new(time.clone(), offset, 0);
            Proxy { index: p, variant, services, arrivals, clock, time, records, counts }.run().await
        });
    }
    // Redis restarts without its data a third of the way in (the grants scenario).
    let crash = (spec.variant == Variant::Grants).then_some((spec.duration_ms / 3, spec.duration_ms / 3 + 200));
    let mut losses = 0;
    while sim.elapsed() < Duration::from_millis(end_ms) {
        let elapsed = sim.elapsed();
        time.publish(elapsed.as_micros() as u64);
        let now = elapsed.as_millis() as u64;
        if let Some((at, until)) = crash {
            if now == at {
                redis.crash();
            }
            if now == until {
                redis.restart(false);
                losses += 1;
            }
        }
        match sim.step() {
            Ok(_) => {}
            Err(e) => anyhow::bail!("simulation failed at {now} ms: {e}"),
        }
    }
    let mut records = std::mem::take(&mut *records.lock().unwrap_or_else(|p| p.into_inner()));
    let trace_hash = trace::finish(&mut records);
    let promise = Promise::of(Algorithm::Gcra);
    let (bound, accuracy) = match spec.variant {
        Variant::AllOrNothing => {
            let per_key = |key: u32| -> Vec<Record> { records.iter().filter(|r| r.key == key).cloned().collect() };
            let users = checker::check_bound_with(
                promise,
                &PER_USER,
                &records.iter().filter(|r| r.key > 0).cloned().collect::<Vec<_>>(),
                0,
                Tolerance::EXACT,
            );
            let route = checker::check_bound_with(promise, &ROUTE, &per_key(0), 0, Tolerance::EXACT);
            let bound = if users.verdict == checker::Verdict::Broken { users } else { route };
            (bound, all_or_nothing_oracle(&records))
        }
        _ => {
            let bound =
                checker::check_bound_with(promise, &HOT, &records, losses * promise.capacity(&HOT), Tolerance::EXACT);
            let (_, acc) = oracle::judge(promise, &HOT, &records);
            (bound, acc)
        }
    };
    let (decisions, from_grants) = *counts.lock().unwrap_or_else(|p| p.into_inner());
    Ok(RlsOutcome {
        records,
        trace_hash,
        bound,
        accuracy,
        decisions,
        from_grants,
        redis_calls: redis.cost().round_trips,
    })
}

/// The all-or-nothing oracle: requests (the records of one proxy's call share `instance` and
/// `seq`) replayed in decision-time order through GCRA's twin per descriptor; a request is
/// admitted when every descriptor's exact limiter admits it, and only then consumes from any.
fn all_or_nothing_oracle(records: &[Record]) -> Accuracy {
    use redis_ratelimit::harness::algo;
    let mut groups: BTreeMap<(u32, u32), Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.source == Source::Store) {
        groups.entry((r.instance, r.seq)).or_default().push(r);
    }
    let mut requests: Vec<&Vec<&Record>> = groups.values().collect();
    requests.sort_by_key(|g| (g[0].at_ms, g[0].instance, g[0].seq));
    let mut states: BTreeMap<u32, Option<algo::State>> = BTreeMap::new();
    let mut acc = Accuracy::default();
    for g in requests {
        let now = EPOCH_MS + g[0].at_ms;
        let quota = |key: u32| if key == 0 { ROUTE } else { PER_USER };
        let fits = g.iter().all(|r| {
            let mut peek = states.get(&r.key).cloned().flatten();
            algo::step(Algorithm::Gcra, &quota(r.key), &mut peek, now, 1).allowed
        });
        if fits {
            for r in g {
                algo::step(Algorithm::Gcra, &quota(r.key), states.entry(r.key).or_default(), now, 1);
            }
        }
        acc.oracle_admitted += u64::from(fits);
        match (g[0].allowed, fits) {
            (true, false) => acc.wrong_allow += 1,
            (false, true) => acc.wrong_limit += 1,
            _ => {}
        }
    }
    acc
}
