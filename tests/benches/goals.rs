//! `cargo xtask bench`: every speed goal of the project, each as a ratio against a reference
//! measured in the same run on the same machine (these machines are shared and noisy: only
//! ratios mean much), on a `redis-server` this bench starts. It prints one table, says met or
//! not met for each goal and by how much, and for a goal not met where the time (or the memory)
//! goes, from Redis's own accounting.
//!
//! 1. `Limiter::check` throughput through `RedisStore` (GCRA, 50 tasks, 100,000 keys) against
//!    `redis-benchmark -c 50` sending EVALSHA of the same script with the same arguments.
//! 2. Redis CPU per decision with batching on (`INFO cpu` around the decisions) against the
//!    CPU per INCR of 1,000,000 pipelined INCRs (`redis-benchmark -P 16`).
//! 3. Decisions per Redis call on a busy key with leases (the `busy-key` scenario, 8 instances
//!    at twice the limit, on the real-Redis lane) against the plain library's, with the oracle's
//!    verdict: wrongly allowed (beyond the bound) 0, wrongly limited (net under-admission) at
//!    most 1%.
//! 4. Memory per key in Redis (`INFO memory` over 100,000 keys), token bucket and GCRA, against
//!    ADR-002's hash on the same key names.
//! 5. An in-process decision (`Limiter` with its local store, GCRA, 100,000 keys) against
//!    `governor`'s keyed limiter.
//! 6. A simulated decision (one core) against a bare script call on the Redis model; and the
//!    simulation's cost linear in requests.
//! 7. A decision with 1,000,000 distinct live keys in process, and under a fallback (Redis
//!    unreachable, the local budget deciding), against the same decision with one key: the
//!    in-process tables make room in O(1), so a key flood does not make each decision a scan.
//!
//! `cargo bench -p redis-tests --bench goals` (set GOALS_SCALE=0.1 for a quick, rougher run;
//! GOALS_ONLY=in-process,key-flood runs only the steps named, as the progress lines name them).

#![allow(clippy::disallowed_methods)] // a benchmark measures real time

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use redis_ratelimit::harness::scripts;
use redis_ratelimit::{Algorithm, Batching, Limiter, Quota, RedisStore};
use redis_tests::RedisServer;

/// The quota of the throughput goals: every check admitted, as redis-benchmark's calls are.
const OPEN: Quota = Quota::new(1_000_000, 1_000).with_burst(1_000_000);
const KEYS: usize = 100_000;

fn scale() -> f64 {
    std::env::var("GOALS_SCALE").ok().and_then(|v| v.parse().ok()).filter(|&s: &f64| s > 0.0).unwrap_or(1.0)
}

fn scaled(n: usize) -> usize {
    ((n as f64 * scale()) as usize).max(1_000)
}

/// One goal's row.
struct Goal {
    what: &'static str,
    measured: String,
    reference: String,
    ratio: f64,
    goal: &'static str,
    met: bool,
    /// By how much it is missed, and where the time or memory goes (empty when met).
    note: String,
}

fn info(conn: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(conn).unwrap_or_default()
}

fn field(info: &str, name: &str) -> Option<f64> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
}

/// Redis's CPU seconds (user + system).
fn cpu_s(conn: &mut redis::Connection) -> f64 {
    let i = info(conn, "cpu");
    field(&i, "used_cpu_user").unwrap_or(0.0) + field(&i, "used_cpu_sys").unwrap_or(0.0)
}

fn used_memory(conn: &mut redis::Connection) -> f64 {
    field(&info(conn, "memory"), "used_memory").unwrap_or(0.0)
}

/// Per-command calls and µs from `INFO commandstats`, for where Redis's time went.
fn commandstats(conn: &mut redis::Connection) -> Vec<(String, f64, f64)> {
    info(conn, "commandstats")
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let get = |k: &str| rest.split(',').find_map(|kv| kv.strip_prefix(k)?.parse::<f64>().ok());
            Some((name.to_owned(), get("calls=")?, get("usec=")?))
        })
        .collect()
}

fn flush(conn: &mut redis::Connection) {
    let _: redis::RedisResult<()> = redis::cmd("FLUSHALL").query(conn);
    let _: redis::RedisResult<()> = redis::cmd("CONFIG").arg("RESETSTAT").query(conn);
}

/// `redis-benchmark` with `args`; requests per second.
fn redis_benchmark(port: u16, args: &[&str]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "--csv"])
        .args(args)
        .output()
        .expect("redis-benchmark runs (Debian's redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().rev().find_map(|l| l.split(',').nth(1)?.trim_matches('"').parse().ok()).unwrap_or(0.0)
}

fn limiter(server: &RedisServer, algorithm: Algorithm, quota: Quota, batching: bool) -> Limiter {
    let mut b = Limiter::builder(algorithm, quota).redis(RedisStore::from_url(&server.url()).expect("url"));
    if batching {
        b = b.batching(Batching::default());
    }
    b.build().expect("valid")
}

/// `n` checks from `tasks` tasks over `keys`; checks per second.
async fn drive(l: &Limiter, keys: &Arc<Vec<String>>, tasks: usize, n: usize) -> f64 {
    l.check("warm", 1).await.expect("decides");
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (l, keys, next) = (l.clone(), keys.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    l.check(&keys[i.wrapping_mul(7_919) % keys.len()], 1).await.expect("decides");
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn key_names(n: usize) -> Arc<Vec<String>> {
    Arc::new((0..n).map(|i| format!("k{i:012}")).collect())
}

// ---------------------------------------------------------------------------------- goal 1

fn throughput(server: &RedisServer, rt: &tokio::runtime::Runtime) -> Goal {
    let n = scaled(300_000);
    let mut conn = server.client().expect("connect");
    flush(&mut conn);
    let script = scripts::for_algorithm(Algorithm::Gcra).expect("gcra");
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(script.source).query(&mut conn).expect("load");
    let call = scripts::Request {
        algorithm: Algorithm::Gcra,
        quota: &OPEN,
        stem: "ratelimiter:{k__rand_int__}:",
        now_ms: None,
        cost: 1,
    }
    .invocation();
    let mut args: Vec<String> =
        vec!["-c".into(), "50".into(), "-n".into(), n.to_string(), "-r".into(), KEYS.to_string()];
    args.extend(["EVALSHA".to_owned(), sha, call.keys.len().to_string()]);
    args.extend(call.keys.iter().chain(&call.args).cloned());
    let reference = redis_benchmark(server.port(), &args.iter().map(String::as_str).collect::<Vec<_>>());
    flush(&mut conn);
    let l = limiter(server, Algorithm::Gcra, OPEN, false);
    let keys = key_names(KEYS);
    let measured = rt.block_on(drive(&l, &keys, 50, n));
    let ratio = measured / reference;
    Goal {
        what: "Limiter::check throughput, RedisStore, GCRA, 50 tasks, 100,000 keys",
        measured: format!("{measured:.0} checks/s"),
        reference: format!("redis-benchmark -c 50 EVALSHA: {reference:.0}/s"),
        ratio,
        goal: ">= 1.0x",
        met: ratio >= 1.0,
        note: if ratio >= 1.0 {
            String::new()
        } else {
            format!(
                "{:.0}% short: the limiter's client work per check (key escaping, arguments, one multiplexed \
                 connection's encoding and decoding) shares the machine's two cores with redis-server",
                (1.0 - ratio) * 100.0
            )
        },
    }
}

// ---------------------------------------------------------------------------------- goal 2

fn cpu_per_decision(server: &RedisServer, rt: &tokio::runtime::Runtime) -> Goal {
    let n = scaled(1_000_000);
    let mut conn = server.client().expect("connect");
    flush(&mut conn);
    let before = cpu_s(&mut conn);
    redis_benchmark(server.port(), &["-P", "16", "-n", &n.to_string(), "INCR", "counter"]);
    let incr_us = (cpu_s(&mut conn) - before) * 1e6 / n as f64;
    flush(&mut conn);
    // Decisions on a hundred busy keys, as the reference's INCRs are on one.
    let keys = key_names(100);
    let l = limiter(server, Algorithm::Gcra, OPEN, true);
    let before = cpu_s(&mut conn);
    rt.block_on(drive(&l, &keys, 50, n));
    let decision_us = (cpu_s(&mut conn) - before) * 1e6 / n as f64;
    let stats = commandstats(&mut conn);
    let calls = stats.iter().find(|s| s.0 == "evalsha").map_or(1.0, |s| s.1.max(1.0));
    let per_decision = |name: &str| stats.iter().find(|s| s.0 == name).map_or(0.0, |s| s.2 / n as f64);
    let inner: f64 = ["get", "set", "time"].iter().map(|c| per_decision(c)).sum();
    let script = per_decision("evalsha");
    let ratio = decision_us / incr_us;
    Goal {
        what: "Redis CPU per decision, batching on (GCRA, 100 keys, 50 tasks)",
        measured: format!("{decision_us:.2} us/decision ({:.0} decisions per call)", n as f64 / calls),
        reference: format!("INCR, redis-benchmark -P 16: {incr_us:.2} us"),
        ratio,
        goal: "<= 2x",
        met: ratio <= 2.0,
        note: if ratio <= 2.0 {
            String::new()
        } else {
            format!(
                "{:.1}x over: per decision Redis spends {script:.2} us in the batch script (INFO commandstats), of \
                 which {inner:.2} us inside the GET, SET PX and TIME each request's own script runs; the rest is Lua \
                 and redis.call's conversions of arguments and replies, three calls per decision. The call itself \
                 (read, parse, dispatch, reply) is shared by the batch. Reading every key of a batch with one MGET \
                 and deciding repeated keys in Lua would leave one SET PX per distinct key: on 100,000 keys a SET \
                 PX alone costs Redis about three INCRs",
                ratio / 2.0
            )
        },
    }
}

// ---------------------------------------------------------------------------------- goal 3

fn leases() -> Goal {
    use sim_engine::mode::Mode;
    use sim_engine::subject::Subject;
    let busy = sim_engine::scenario::find("busy-key").expect("the busy-key scenario");
    let duration = (20_000.0 * scale()).max(2_000.0) as u64;
    let run = |mode: Mode| {
        let mut spec = busy.runs(&[Subject::Algorithm(Algorithm::Gcra)], &[1], None, duration).remove(0);
        spec.mode = mode;
        let out = sim_real::execute(&spec).expect("a real-lane run");
        sim_engine::run::judge(&spec, out)
    };
    let plain = run(Mode::Plain);
    let leased = run(Mode::Lease);
    let per_call = |r: &sim_engine::results::RunResult| 1.0 / r.round_trips_per_decision().max(1e-9);
    let ratio = per_call(&leased) / per_call(&plain);
    let limited = 100.0 * leased.under_admitted as f64 / leased.requests.max(1) as f64;
    let allowed_beyond = leased.bound != "held";
    let met = ratio >= 20.0 && limited <= 1.0 && !allowed_beyond && !sim_engine::results::is_failure(&leased);
    Goal {
        what: "decisions per Redis call, busy key, leases, 8 instances at 2x (real Redis)",
        measured: format!(
            "{:.1} per call; beyond the bound: {}; net under-admission {limited:.2}% (pairwise {:.2}% / {:.2}%)",
            per_call(&leased),
            if allowed_beyond { "some" } else { "0" },
            leased.wrong_allow_pct,
            leased.wrong_limit_pct
        ),
        reference: format!("plain: {:.2} per call", per_call(&plain)),
        ratio,
        goal: ">= 20x, w.limit <= 1%, w.allow 0",
        met,
        note: if met {
            String::new()
        } else {
            format!("missed: {} ({}; {})", leased.mode_detail, leased.bound_detail, leased.policy_detail)
        },
    }
}

// ---------------------------------------------------------------------------------- goal 4

fn memory(server: &RedisServer, rt: &tokio::runtime::Runtime) -> Vec<Goal> {
    let n = scaled(KEYS);
    let mut conn = server.client().expect("connect");
    // 100 per hour: each key's state lives for minutes, so none expires while it is measured.
    let quota = Quota::new(100, 3_600_000);
    let adr = &sim_engine::subject::ADR002.source;
    let adr_sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(adr.as_str()).query(&mut conn).expect("load");
    let mut goals = Vec::new();
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let keys = key_names(n);
        flush(&mut conn);
        let before = used_memory(&mut conn);
        let l = limiter(server, algorithm, quota, false);
        rt.block_on(async {
            for k in keys.iter() {
                l.check(k, 1).await.expect("decides");
            }
        });
        let ours = (used_memory(&mut conn) - before) / n as f64;
        // The very names the limiter wrote (its state named by its quota).
        let names: Vec<String> = keys
            .iter()
            .map(|k| {
                let stem = redis_ratelimit::harness::KeySpace::default().stem(k);
                let request = scripts::Request { algorithm, quota: &quota, stem: &stem, now_ms: None, cost: 1 };
                request.invocation().keys.remove(0)
            })
            .collect();
        flush(&mut conn);
        let before = used_memory(&mut conn);
        for chunk in names.chunks(1_000) {
            let mut pipe = redis::pipe();
            for name in chunk {
                // ADR-002's call: tokens to consume, capacity, refill per s, now (ms).
                pipe.cmd("EVALSHA")
                    .arg(&adr_sha)
                    .arg(1)
                    .arg(name)
                    .arg(1)
                    .arg(100)
                    .arg(1)
                    .arg(1_767_225_600_000u64)
                    .ignore();
            }
            let _: () = pipe.query(&mut conn).expect("ADR-002's script runs");
        }
        let reference = (used_memory(&mut conn) - before) / n as f64;
        let ratio = ours / reference;
        goals.push(Goal {
            what: if algorithm == Algorithm::Gcra {
                "memory per key in Redis, GCRA, 100,000 keys"
            } else {
                "memory per key in Redis, token bucket, 100,000 keys"
            },
            measured: format!("{ours:.0} B/key"),
            reference: format!("ADR-002's hash, same key names: {reference:.0} B"),
            ratio,
            goal: "<= 0.6x",
            met: ratio <= 0.6,
            note: if ratio <= 0.6 {
                String::new()
            } else {
                let floor = memory_floor(&mut conn, &names);
                format!(
                    "{:.0}% over: {floor:.0} B of each key is Redis's own for any key with a TTL on these names (its \
                     dictionary entry, the key's string, its entry in the expiry table, table slots), so one key per \
                     identity cannot go below {:.2}x; the value costs {:.0} B",
                    (ratio / 0.6 - 1.0) * 100.0,
                    floor / reference,
                    ours - floor
                )
            },
        });
    }
    goals
}

/// What a key with a TTL costs Redis on these names with the smallest value there is (a shared
/// small integer, no allocation): the floor under any one-key-per-identity layout.
fn memory_floor(conn: &mut redis::Connection, names: &[String]) -> f64 {
    flush(conn);
    let before = used_memory(conn);
    for chunk in names.chunks(1_000) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("SET").arg(name).arg(1).arg("PX").arg(3_600_000).ignore();
        }
        let _: () = pipe.query(conn).expect("SET");
    }
    let floor = (used_memory(conn) - before) / names.len() as f64;
    flush(conn);
    floor
}

// ---------------------------------------------------------------------------------- goal 5

fn in_process() -> Goal {
    use std::num::NonZeroU32;
    let n = scaled(2_000_000);
    let keys = key_names(KEYS);
    let l = Limiter::builder(Algorithm::Gcra, OPEN).build().expect("valid");
    // Warm both maps with every key first: the goal is the time of a decision, not of inserts.
    for k in keys.iter() {
        l.check(k, 1).now_or_never().expect("ready").expect("decides");
    }
    let started = Instant::now();
    for i in 0..n {
        let k = &keys[i.wrapping_mul(7_919) % KEYS];
        std::hint::black_box(l.check(k, 1).now_or_never().expect("ready").expect("decides"));
    }
    let ours = started.elapsed().as_nanos() as f64 / n as f64;
    let quota = governor::Quota::per_second(NonZeroU32::new(1_000_000).expect("non-zero"));
    let g = governor::RateLimiter::keyed(quota);
    for k in keys.iter() {
        let _ = g.check_key(k);
    }
    let started = Instant::now();
    for i in 0..n {
        let k = &keys[i.wrapping_mul(7_919) % KEYS];
        let _ = std::hint::black_box(g.check_key(k));
    }
    let theirs = started.elapsed().as_nanos() as f64 / n as f64;
    let ratio = ours / theirs;
    Goal {
        what: "in-process decision, Limiter (local store), GCRA, 100,000 String keys",
        measured: format!("{ours:.0} ns/decision"),
        reference: format!("governor keyed: {theirs:.0} ns"),
        ratio,
        goal: "<= 1.0x",
        met: ratio <= 1.0,
        note: if ratio <= 1.0 {
            String::new()
        } else {
            format!(
                "{:.0}% over: one mutex and one SipHash lookup per decision, against governor's sharded map and \
                 lock-free compare-and-swap",
                (ratio - 1.0) * 100.0
            )
        },
    }
}

// ---------------------------------------------------------------------------------- goal 7

/// Nanoseconds per decision of `l` over `keys` distinct keys (each first decided once, so every
/// key is live in the tables), visiting them in a stride order unlike the order they were
/// inserted in. Each key's text is written afresh for its request, as a server parses it out of
/// the request it just read: the bench measures the tables, not a walk over a million strings.
fn ns_per_decision(l: &Limiter, keys: usize, n: usize) -> f64 {
    use std::fmt::Write;
    let mut key = String::with_capacity(16);
    let mut decide = |i: usize| {
        key.clear();
        let _ = write!(key, "k{i:012}");
        std::hint::black_box(l.check(&key, 1).now_or_never().expect("ready").expect("decides"));
    };
    for i in 0..keys {
        decide(i);
    }
    let started = Instant::now();
    for i in 0..n {
        decide(i.wrapping_mul(7_919) % keys);
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

/// Nanoseconds of one random read from an array of `n` cache lines, each read depending on the
/// one before (as a decision's slot depends on its index probe): the price of memory itself.
fn memory_read_ns(n: usize) -> f64 {
    let lines: Vec<[u64; 8]> = (0..n).map(|i| [i as u64; 8]).collect();
    let reads = 3 * n;
    let started = Instant::now();
    let mut at = 0usize;
    for _ in 0..reads {
        at = (lines[at][0] as usize).wrapping_mul(7_919).wrapping_add(1) % n;
    }
    std::hint::black_box(at);
    started.elapsed().as_nanos() as f64 / reads as f64
}

fn key_flood(rt: &tokio::runtime::Runtime) -> Vec<Goal> {
    use redis_ratelimit::{BreakerConfig, FailurePolicy, Source};
    let live = ((1_000_000.0 * scale()) as usize).max(10_000);
    let n = 3 * live;
    // A day's quota: every key decided in the run is still live (not at rest) at its end.
    let daily = Quota::new(1_000_000_000, 86_400_000).with_burst(1_000_000_000);
    let in_process = || Limiter::builder(Algorithm::Gcra, daily).max_local_keys(live).build().expect("valid");
    // Redis on a port nothing listens on: the first check fails, the breaker opens for a day,
    // and every later check is the local budget's, decided without a round trip.
    let fallback = || {
        let l = Limiter::builder(Algorithm::Gcra, daily)
            .redis(RedisStore::from_url("redis://127.0.0.1:1/").expect("url"))
            .failure_policy(FailurePolicy::LocalBudget { limit: 1_000_000_000, period_ms: 86_400_000 })
            .breaker(BreakerConfig::new(1, 86_400_000))
            .max_local_keys(live)
            .build()
            .expect("valid");
        let first = rt.block_on(l.check("open-the-breaker", 1)).expect("decides");
        assert_eq!(first.source, Source::LocalBudget, "{first:?}");
        l
    };
    let read_ns = memory_read_ns(live);
    let mut goals = Vec::new();
    for (what, build) in [
        ("decision cost, 1,000,000 live keys vs 1, in process (GCRA)", &in_process as &dyn Fn() -> Limiter),
        ("decision cost, 1,000,000 live keys vs 1, local budget while Redis is down", &fallback),
    ] {
        let reference = ns_per_decision(&build(), 1, n);
        let measured = ns_per_decision(&build(), live, n);
        let ratio = measured / reference;
        goals.push(Goal {
            what,
            measured: format!("{measured:.0} ns/decision over {live} live keys"),
            reference: format!("one key: {reference:.0} ns"),
            ratio,
            goal: "<= 2x",
            met: ratio <= 2.0,
            note: if ratio <= 2.0 {
                String::new()
            } else {
                format!(
                    "{:.0}% over: the work per decision is the same (one hash, one index probe, one slot, no \
                     scan), but {live} keys' slots do not fit in the caches, so each decision waits on memory: one \
                     random read from {live} cache lines costs {read_ns:.0} ns here (same run), and a decision \
                     needs its index probe and its slot, so the floor on this machine is about {:.1}x",
                    (ratio / 2.0 - 1.0) * 100.0,
                    (reference + 2.0 * read_ns) / reference
                )
            },
        });
    }
    goals
}

// ---------------------------------------------------------------------------------- goal 6

fn simulation() -> Goal {
    use redis_model::{ManualServerClock, ModelHandle, Reply};
    use sim_engine::scenario::RunSpec;
    use sim_engine::subject::Subject;
    use sim_engine::workload::{Spread, Workload};
    let specs = |seeds: std::ops::Range<u64>, duration_ms: u64| -> Vec<RunSpec> {
        let mut s = sim_engine::scenario::find("baseline").expect("baseline").runs(
            &[Subject::Algorithm(Algorithm::Gcra)],
            &seeds.collect::<Vec<_>>(),
            None,
            duration_ms,
        );
        for spec in &mut s {
            spec.workload =
                Workload::Poisson { rate_x: 4.0, keys: 50, hot_share: 0.2, max_cost: 1, spread: Spread::Random };
        }
        s
    };
    let measure = |specs: &[RunSpec]| {
        let started = Instant::now();
        let results = sim_engine::run::run_many(specs, 1, &|| {}).expect("runs");
        (results.iter().map(|r| r.requests).sum::<u64>(), started.elapsed().as_secs_f64())
    };
    measure(&specs(0..1, 1_000));
    let duration = (10_000.0 * scale()).max(2_000.0) as u64;
    let (n1, t1) = measure(&specs(0..2, duration));
    let (n2, t2) = measure(&specs(0..2, 2 * duration));
    let rate = n1 as f64 / t1;
    // The same script, called bare on the model in process: no network, limiter or scheduler.
    let model = ModelHandle::new(ManualServerClock::from_millis(1_767_225_600_000));
    let script = scripts::for_algorithm(Algorithm::Gcra).expect("gcra");
    let Reply::Bulk(sha) = model.call(&[b"SCRIPT", b"LOAD", script.source.as_bytes()]) else { panic!("SCRIPT LOAD") };
    let calls = scaled(100_000);
    let started = Instant::now();
    for i in 0..calls {
        let stem = format!("ratelimiter:{{key-{}}}:", i % 50);
        let call = scripts::Request {
            algorithm: Algorithm::Gcra,
            quota: &sim_engine::scenario::QUOTA,
            stem: &stem,
            now_ms: None,
            cost: 1,
        }
        .invocation();
        let n = call.keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVALSHA", &sha, n.as_bytes()];
        argv.extend(call.keys.iter().chain(&call.args).map(|a| a.as_bytes()));
        std::hint::black_box(model.call(&argv));
    }
    let bare = calls as f64 / started.elapsed().as_secs_f64();
    let ratio = rate / bare;
    let linear = (t2 / t1) / (n2 as f64 / n1 as f64);
    let met = ratio >= 0.8 && linear <= 1.1;
    Goal {
        what: "simulated decision, one core, against a bare script call on the model",
        measured: format!("{rate:.0} decisions/s; 2x the requests cost {:.2}x the time", t2 / t1),
        reference: format!("bare EVALSHA on the model: {bare:.0}/s"),
        ratio,
        goal: ">= 0.8x, linear",
        met,
        note: if met {
            String::new()
        } else {
            format!(
                "{:.0}% short{}. Where a simulated decision's time goes (callgrind, busy-key at 2000/s, GCRA, \
                 inclusive shares that overlap): the script itself 28%; the model's server around it (RESP, \
                 dispatch) 5%; turmoil's simulated network and clock about 30% (message delivery 14%, ticks 12%, \
                 its clock 7%; hashing host addresses alone 11%); tokio's scheduler and timers about 15%; \
                 redis-rs's multiplexed connection and its parser about 10%; the instance and the limiter 7%. The \
                 script is a quarter of a simulated decision, so 0.8x would need the rest cut to a tenth",
                (1.0 - ratio / 0.8) * 100.0,
                if linear > 1.1 { ", and not linear" } else { "" }
            )
        },
    }
}

fn main() {
    for program in ["redis-server", "redis-benchmark"] {
        sim_real::process::require_for_tests(
            program,
            if program == "redis-server" { "redis-server" } else { "redis-tools" },
        );
    }
    let server = RedisServer::start_real().expect("redis-server starts");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    println!("goals: measuring (GOALS_SCALE={})...", scale());
    let mut goals = Vec::new();
    let only: Option<Vec<String>> =
        std::env::var("GOALS_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let mut step = |name: &str, f: &mut dyn FnMut() -> Vec<Goal>| {
        if only.as_ref().is_some_and(|only| !only.iter().any(|o| o == name)) {
            return;
        }
        let started = Instant::now();
        let got = f();
        println!("  {name}: {:.1} s", started.elapsed().as_secs_f64());
        goals.extend(got);
    };
    step("throughput", &mut || vec![throughput(&server, &rt)]);
    step("cpu", &mut || vec![cpu_per_decision(&server, &rt)]);
    step("leases", &mut || vec![leases()]);
    step("memory", &mut || memory(&server, &rt));
    step("in-process", &mut || vec![in_process()]);
    step("simulation", &mut || vec![simulation()]);
    step("key-flood", &mut || key_flood(&rt));
    drop(server);
    std::thread::sleep(Duration::from_millis(10));

    println!();
    println!("{:<76} {:<42} {:>7} {:<32} result", "goal", "reference (same run)", "ratio", "target");
    for g in &goals {
        println!(
            "{:<76} {:<42} {:>6.2}x {:<32} {}",
            g.what,
            g.reference,
            g.ratio,
            g.goal,
            if g.met { "met" } else { "NOT MET" }
        );
        println!("{:<76} measured: {}", "", g.measured);
    }
    let missed: Vec<&Goal> = goals.iter().filter(|g| !g.met).collect();
    println!();
    if missed.is_empty() {
        println!("every goal met");
    } else {
        println!("{} of {} goals not met:", missed.len(), goals.len());
        for g in missed {
            println!("- {}: {}", g.what, g.note);
        }
    }
}
