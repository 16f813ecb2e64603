//! The limiter on a real Redis Cluster the tests start (`redis-server --cluster-enabled yes`
//! joined by `redis-cli --cluster create`, free loopback ports, killed on drop): every
//! algorithm (its excesses reconciled too) and the concurrency limit with keys on every
//! primary, a slot migrated under traffic (ASK, then MOVED), and a primary killed while its
//! replica takes over, the failure policy answering the gap.

#![allow(clippy::disallowed_methods)] // real servers, real time

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use redis_ratelimit::{
    Acquired, Algorithm, ConcurrencyLimiter, Decision, FailurePolicy, Limiter, Quota, Reconciled, RedisStore, Source,
};
use sim_real::cluster_server::slot_of_tag;
use sim_real::redis_cluster::{query, RedisCluster};
use tokio::time::Instant;

/// A cluster of the real server `REDIS_TESTS_REAL` names (Redis, or Valkey), joined by redis-cli.
fn cluster(primaries: usize, replicas: usize) -> RedisCluster {
    let kind = redis_tests::real_server().expect("REDIS_TESTS_REAL names redis or valkey");
    kind.require_for_tests();
    sim_real::process::require_for_tests("redis-cli", "redis-tools");
    RedisCluster::start_with(kind, primaries, replicas).expect("a cluster starts")
}

fn store(c: &RedisCluster) -> RedisStore {
    RedisStore::cluster(c.urls()).expect("cluster URLs").with_timeout(Duration::from_millis(300)).expect("timeout")
}

fn limiter(c: &RedisCluster, algorithm: Algorithm, quota: Quota, policy: FailurePolicy) -> Limiter {
    Limiter::builder(algorithm, quota).redis(store(c)).failure_policy(policy).build().expect("valid limiter")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

#[test]
fn every_algorithm_and_the_concurrency_limit_decide_on_a_three_primary_cluster_with_keys_on_every_primary() {
    let c = cluster(3, 0);
    let primaries = c.primaries();
    assert_eq!(primaries.len(), 3, "{:?}", c.describe());
    let rt = runtime();
    // The permits still held when the keys are looked at: their keys are there until released.
    let _held = rt.block_on(async {
        for algorithm in Algorithm::ALL {
            let l = limiter(&c, algorithm, Quota::per_minute(3), FailurePolicy::FailClosed);
            // 60 users: their slots spread over the whole slot range.
            for u in 0..60 {
                let key = format!("{}-user-{u}", algorithm.name());
                for i in 0..4 {
                    let d = l.check(&key).await.expect("a decision");
                    assert_eq!(d.source, Source::Store, "{algorithm} {key}: {d:?}");
                    assert_eq!(d.allowed, i < 3, "{algorithm} {key} request {i}: {d:?}");
                }
                // The last admitted cost 3, not 1: the excess is owed, on the key's primary.
                let settled = l.reconcile(&key, 1, 3).await.expect("reconciled");
                assert_eq!(settled, Reconciled::Charged { excess: 2, charged: 2 }, "{algorithm} {key}");
            }
        }
        // Three permits per user, held at once; the fourth is refused until one goes back.
        let permits = ConcurrencyLimiter::builder(3, Duration::from_secs(60)).redis(store(&c)).build();
        let permits = permits.expect("valid limiter");
        let mut kept = Vec::new();
        for u in 0..60 {
            let key = format!("permits-user-{u}");
            let mut held = Vec::new();
            for i in 0..4 {
                match permits.acquire(&key).await.expect("a decision") {
                    Acquired::Held(permit) if i < 3 => held.push(permit),
                    other => assert!(i == 3 && matches!(other, Acquired::Full(_)), "{key} acquire {i}: {other:?}"),
                }
            }
            assert!(held.pop().expect("held").release().await.expect("released"), "{key}");
            match permits.acquire(&key).await.expect("a decision") {
                Acquired::Held(permit) => held.push(permit),
                full => panic!("{key}: a released permit was not given again: {full:?}"),
            }
            kept.extend(held);
        }
        kept
    });
    // Keys of every algorithm landed on every primary, and each limit's keys on one node.
    for port in &primaries {
        let keys: Vec<String> = query(*port, &["KEYS", "*"]).expect("KEYS");
        let algorithms: BTreeSet<&str> =
            keys.iter().filter_map(|k| Algorithm::ALL.into_iter().map(|a| a.name()).find(|a| k.contains(a))).collect();
        assert_eq!(algorithms.len(), Algorithm::ALL.len(), "primary {port} holds {keys:?}");
        assert!(keys.iter().any(|k| k.ends_with(":permits")), "primary {port} holds {keys:?}");
        for k in &keys {
            let tag = &k[k.find('{').expect("hash tag") + 1..k.find('}').expect("hash tag")];
            assert_eq!(c.primary_of(slot_of_tag(tag)), Some(*port), "{k} is on {port}");
        }
    }
    println!("cluster: every algorithm decided on 3 primaries, {} keys each side", 60);
}

#[test]
fn a_slot_migrated_mid_run_keeps_the_store_deciding_and_keeps_the_state() {
    let c = cluster(3, 0);
    // Ten users sharing one slot, so the migration moves keys in several batches while
    // requests for moved and not yet moved keys keep coming (ASK), then MOVED.
    let slot = slot_of_tag("mig-0");
    let users: Vec<String> =
        (0..200_000).map(|u| format!("mig-{u}")).filter(|u| slot_of_tag(u) == slot).take(10).collect();
    assert_eq!(users.len(), 10);
    let from = c.primary_of(slot).expect("slot served");
    let to = *c.primaries().iter().find(|&&p| p != from).expect("another primary");
    let rt = runtime();
    let l = limiter(&c, Algorithm::SlidingLog, Quota::per_minute(5), FailurePolicy::FailClosed);
    // Each user spends its whole limit before the migration.
    rt.block_on(async {
        for u in &users {
            for _ in 0..5 {
                assert!(l.check(u).await.expect("decision").allowed);
            }
        }
    });
    // Traffic runs beside the migration, as it would in production: a script whose two keys
    // are split between the nodes for a moment gets TRYAGAIN and is retried until the next
    // batch lands; one whose keys moved gets ASK, then MOVED once the slot is handed over.
    let decisions: Arc<std::sync::Mutex<Vec<Decision>>> = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = {
        let (l, decisions, users, done) = (l.clone(), decisions.clone(), users.clone(), done.clone());
        std::thread::spawn(move || {
            runtime().block_on(async move {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    for u in &users {
                        let d = l.check(u).await.expect("a decision, not an error");
                        decisions.lock().expect("lock").push(d);
                    }
                }
            })
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let moved = c.migrate_slot(slot, from, to, || std::thread::sleep(Duration::from_millis(30))).expect("migration");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    traffic.join().expect("traffic thread");
    assert!(moved >= 10, "moved {moved} keys");
    assert_eq!(c.primary_of(slot), Some(to), "the slot now lives on {to}");
    rt.block_on(async {
        for u in &users {
            let d = l.check(u).await.expect("decision after the migration");
            decisions.lock().expect("lock").push(d);
        }
    });
    let decisions = decisions.lock().expect("lock");
    assert!(decisions.len() >= 20, "{} decisions", decisions.len());
    // Every decision came from the store (ASK and MOVED followed, no failure policy), and
    // the state moved with the keys: every user stays limited.
    for d in decisions.iter() {
        assert_eq!(d.source, Source::Store, "{d:?}");
        assert!(!d.allowed, "a user over its limit was admitted after its keys moved: {d:?}");
    }
    println!(
        "migration: slot {slot} moved {moved} keys from {from} to {to}; {} decisions, all by the store",
        decisions.len()
    );
}

/// Requests every 20 ms on `keys` until `until` says stop or `limit` passes; every decision
/// with the time since `start` it was made at.
async fn drive(
    l: &Limiter,
    keys: &[String],
    start: Instant,
    limit: Duration,
    until: impl Fn(&[(Duration, Decision)]) -> bool,
) -> Vec<(Duration, Decision)> {
    let mut seen = Vec::new();
    let mut i = 0;
    while start.elapsed() < limit && !until(&seen) {
        let d = l.check(&keys[i % keys.len()]).await.expect("a decision, not an error");
        seen.push((start.elapsed(), d));
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

#[test]
fn a_killed_primary_is_replaced_and_the_failure_policy_answers_the_gap() {
    let mut c = cluster(3, 1);
    let slot = slot_of_tag("victim-0");
    let victim = c.primary_of(slot).expect("slot served");
    let keys: Vec<String> =
        (0..100_000).map(|u| format!("victim-{u}")).filter(|u| slot_of_tag(u) == slot).take(3).collect();
    let rt = runtime();
    let l = limiter(&c, Algorithm::Gcra, Quota::per_second(1_000), FailurePolicy::FailClosed);
    rt.block_on(async {
        let warm = drive(&l, &keys, Instant::now(), Duration::from_secs(5), |s| s.len() >= 5).await;
        assert!(warm.iter().all(|(_, d)| d.source == Source::Store), "{warm:?}");
    });
    c.kill(victim);
    let start = Instant::now();
    // Until the store decides again after the failure policy stood in for it.
    let seen = rt.block_on(drive(&l, &keys, start, Duration::from_secs(40), |s| {
        s.iter().any(|(_, d)| d.source != Source::Store) && s.last().is_some_and(|(_, d)| d.source == Source::Store)
    }));
    let gap: Vec<&(Duration, Decision)> = seen.iter().filter(|(_, d)| d.source != Source::Store).collect();
    assert!(!gap.is_empty(), "no decision fell to the failure policy while the primary was gone");
    for (_, d) in &gap {
        assert_eq!(d.source, Source::FailClosed, "{d:?}");
        assert!(!d.allowed && d.degraded.is_some(), "{d:?}");
    }
    let (first_policy, _) = gap[0];
    let (resumed, d) = seen.last().expect("decisions");
    assert_eq!(d.source, Source::Store, "the store came back within 40 s: {seen:?}");
    let promoted = c.primary_of(slot).expect("slot served again");
    assert_ne!(promoted, victim, "a replica was promoted");
    // A limiter that never met the old primary works on the new one too (its script cache
    // started empty: NOSCRIPT, then EVAL).
    let fresh = limiter(&c, Algorithm::TokenBucket, Quota::per_second(10), FailurePolicy::FailClosed);
    let d = rt.block_on(fresh.check(&keys[0])).expect("decision");
    assert_eq!((d.source, d.allowed), (Source::Store, true), "{d:?}");
    let degraded: BTreeSet<String> = gap.iter().map(|(_, d)| format!("{:?}", d.degraded)).collect();
    println!(
        "failover: primary {victim} killed, replica {promoted} promoted; {} decisions by fail-closed ({degraded:?}) \
         from {first_policy:?}, the store again at {resumed:?}",
        gap.len()
    );
}

/// The enforcement point on a cluster: rules whose tags (first key parts) differ live in
/// different slots, so the enforcer decides them tag by tag (a dry pass, then a committing
/// pass) and no script call ever touches two slots. Without contention the request is still
/// all-or-nothing: a request the global cap denies consumes nothing from its API key's rule.
#[test]
fn the_enforcer_decides_rules_in_different_slots_without_crossslot() {
    use redis_ratelimit::enforce::{Enforcer, Ruling};
    use redis_ratelimit::rules::{KeyPart, Rule, RuleSet};

    let c = cluster(3, 0);
    let rules = RuleSet::builder()
        .rule(Rule::new("per-key", Algorithm::FixedWindow, Quota::per_minute(3)).key([KeyPart::header("x-api-key")]))
        .rule(Rule::new("global", Algorithm::SlidingLog, Quota::per_minute(5)).key([KeyPart::Const("all".into())]))
        .build()
        .expect("valid rules");
    let store = RedisStore::cluster(c.urls()).expect("cluster URLs");
    let enforcer = Enforcer::builder(rules).redis(store).build().expect("valid enforcer");
    let request = |key: &str| http::Request::builder().header("x-api-key", key).body(()).expect("request");
    let decided: Vec<(bool, Vec<bool>)> = runtime().block_on(async {
        let mut out = Vec::new();
        // Key "a" four times (its own limit is 3), then "b" three times (the global cap of 5 is
        // reached by b's second request).
        for key in ["a", "a", "a", "a", "b", "b", "b"] {
            match enforcer.check(&request(key)).await.expect("no error from the cluster") {
                Ruling::Decided(d) => {
                    for r in &d.rules {
                        assert_eq!(r.decision.source, Source::Store, "{key}: {d:?}");
                    }
                    out.push((d.allowed, d.rules.iter().map(|r| r.consumed).collect()));
                }
                other => panic!("{key}: expected a decision, got {other:?}"),
            }
        }
        out
    });
    let expected = vec![
        (true, vec![true, true]),
        (true, vec![true, true]),
        (true, vec![true, true]),
        // a's own rule denies: the global cap is not charged.
        (false, vec![false, false]),
        (true, vec![true, true]),
        (true, vec![true, true]),
        // the global cap denies: b's own rule is not charged.
        (false, vec![false, false]),
    ];
    assert_eq!(decided, expected);
    // The rules' keys sit in different slots, each on the primary that owns it.
    let mut slots = BTreeSet::new();
    for port in c.primaries() {
        let keys: Vec<String> = query(port, &["KEYS", "*"]).expect("KEYS");
        for k in keys {
            let tag = &k[k.find('{').expect("hash tag") + 1..k.find('}').expect("hash tag")];
            assert_eq!(c.primary_of(slot_of_tag(tag)), Some(port), "{k} is on {port}");
            slots.insert(slot_of_tag(tag));
        }
    }
    assert!(slots.len() >= 3, "the keys of a, b and the global cap span several slots: {slots:?}");
    // What Redis holds agrees: a's window counted 3, b's 2 (its denied request charged
    // nothing), the global log 5 entries.
    let mut counted = Vec::new();
    for port in c.primaries() {
        let keys: Vec<String> = query(port, &["KEYS", "*"]).expect("KEYS");
        for k in keys {
            let kind: String = query(port, &["TYPE", &k]).expect("TYPE");
            let n: i64 = if kind == "zset" {
                query(port, &["ZCARD", &k]).expect("a count")
            } else {
                // A fixed window's counter: "window:count".
                let text: String = query(port, &["GET", &k]).expect("a counter");
                text.rsplit(':').next().and_then(|n| n.parse().ok()).expect("window:count")
            };
            counted.push((k, n));
        }
    }
    assert_eq!(counted.len(), 3, "{counted:?}");
    assert!(counted.iter().any(|(k, n)| k.ends_with("global:sl") && *n == 5), "{counted:?}");
    println!("cluster: the enforcer's keys {counted:?}");
    assert!(counted.iter().any(|(k, n)| k.contains("=a") && *n == 3), "{counted:?}");
    assert!(counted.iter().any(|(k, n)| k.contains("=b") && *n == 2), "{counted:?}");
}
