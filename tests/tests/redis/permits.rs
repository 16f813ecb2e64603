//! The concurrency limiter on a real `redis-server`: instances with their own connections share
//! one key's permits; each way a request ends gives its permit back (a release, a drop, a
//! cancelled acquire, the lease of a holder that died, on Redis's clock); and with Redis dead
//! each failure policy answers as the docs say, naming itself.

// Real Redis keeps real time: leases end and background releases land in it.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use redis_ratelimit::{
    Acquired, BreakerConfig, ConcurrencyLimiter, Decision, Degraded, FailurePolicy, Permit, RedisStore, Source,
    TimeSource,
};
use redis_tests::RedisServer;

const KEY: &str = "ratelimiter:{client}:c=3:permits";

fn limiter(server: &RedisServer, lease: Duration) -> ConcurrencyLimiter {
    ConcurrencyLimiter::builder(3, lease).redis(store(server)).build().expect("valid")
}

fn store(server: &RedisServer) -> RedisStore {
    RedisStore::from_url(&server.url()).expect("url").with_timeout(Duration::from_millis(500)).expect("timeout")
}

async fn held(limiter: &ConcurrencyLimiter) -> Permit {
    match limiter.acquire("client").await.expect("decides") {
        Acquired::Held(permit) => permit,
        Acquired::Full(d) => panic!("refused: {d:?}"),
    }
}

async fn refused(limiter: &ConcurrencyLimiter) -> Decision {
    match limiter.acquire("client").await.expect("decides") {
        Acquired::Held(permit) => panic!("held: {:?}", permit.decision()),
        Acquired::Full(d) => d,
    }
}

/// How many holders Redis keeps for the key.
fn holders(server: &RedisServer) -> u64 {
    let mut conn = server.client().expect("connect");
    redis::cmd("ZCARD").arg(KEY).query(&mut conn).expect("ZCARD")
}

/// Waits (a few seconds at most) until Redis keeps `n` holders: releases sent in the
/// background land a moment later.
async fn until_holders(server: &RedisServer, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while holders(server) != n {
        assert!(Instant::now() < deadline, "{} holders, waiting for {n}", holders(server));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_share_the_permits_and_every_way_of_ending_gives_one_back() {
    let server = RedisServer::start().expect("redis-server");
    let (one, two) = (limiter(&server, Duration::from_secs(30)), limiter(&server, Duration::from_secs(30)));
    let a = held(&one).await;
    let b = held(&two).await;
    let c = held(&one).await;
    assert_eq!((a.decision().source, c.decision().remaining), (Source::Store, 0));
    let full = refused(&two).await;
    assert_eq!((full.source, full.remaining, full.capacity), (Source::Store, 0, 3));
    // The wait is at most until the earliest lease ends.
    assert!(full.retry_after > Duration::from_secs(29) && full.retry_after <= Duration::from_secs(30), "{full:?}");
    assert_eq!(holders(&server), 3);

    // Released by one instance, taken by the other.
    assert!(a.release().await.expect("released"));
    let d = held(&two).await;
    // Dropped: released in the background.
    drop(b);
    until_holders(&server, 2).await;
    let e = held(&one).await;
    assert!(!two.state("client").await.expect("reads").allowed);

    // A release is the holder's: after the lease is lost, nothing of another's is freed.
    drop((c, d, e));
    until_holders(&server, 0).await;
    assert_eq!(two.state("client").await.expect("reads").remaining, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_died_keeps_its_permit_one_lease_on_redis_s_clock() {
    let server = RedisServer::start().expect("redis-server");
    for time_source in [TimeSource::Server, TimeSource::Client] {
        let lease = Duration::from_millis(500);
        let l = ConcurrencyLimiter::builder(3, lease).redis(store(&server)).time_source(time_source).build();
        let l = l.expect("valid");
        // Three holders die holding their permits: never released, never dropped.
        let started = Instant::now();
        let dead: Vec<Permit> = vec![held(&l).await, held(&l).await, held(&l).await];
        let last_dead = Instant::now();
        let full = refused(&l).await;
        assert!(full.retry_after <= lease, "{full:?}");
        std::mem::forget(dead);
        // Reclaimed once the lease has passed, and not before.
        let mut again = None;
        while again.is_none() {
            match l.acquire("client").await.expect("decides") {
                Acquired::Held(permit) => again = Some(permit),
                Acquired::Full(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        assert!(started.elapsed() >= lease - Duration::from_millis(50), "{time_source:?}: {:?}", started.elapsed());
        // Once the last dead one's lease has ended too (long before the new one's), only the new
        // holder counts.
        tokio::time::sleep_until((last_dead + lease + Duration::from_millis(30)).into()).await;
        let now = l.state("client").await.expect("reads");
        assert_eq!((now.allowed, now.remaining), (true, 2), "{time_source:?}");
        assert!(again.expect("held").release().await.expect("released"));
        assert_eq!(l.state("client").await.expect("reads").remaining, 3, "{time_source:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_cancelled_in_flight_gives_back_what_redis_gave_it() {
    let server = RedisServer::start().expect("redis-server");
    let l = ConcurrencyLimiter::builder(3, Duration::from_secs(30))
        .redis(RedisStore::from_url(&server.url()).expect("url").with_timeout(Duration::from_secs(5)).expect("timeout"))
        .build()
        .expect("valid");
    let warm = held(&l).await; // the connection is open
    server.pause().expect("SIGSTOP");
    // The acquire is sent, and Redis will run it once it wakes; its caller gives up first.
    let gave_up = tokio::time::timeout(Duration::from_millis(200), l.acquire("client")).await;
    assert!(gave_up.is_err(), "answered by a paused Redis: {gave_up:?}");
    server.resume().expect("SIGCONT");
    // Redis ran the acquire, then the release the dropped future sent after it.
    until_holders(&server, 1).await;
    drop(warm);
    until_holders(&server, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_dead_each_failure_policy_answers_and_says_so() {
    let mut server = RedisServer::start().expect("redis-server");
    let with = |policy| {
        ConcurrencyLimiter::builder(3, Duration::from_secs(30))
            .redis(store(&server))
            .failure_policy(policy)
            .breaker(BreakerConfig::new(100, Duration::from_secs(1)))
            .build()
            .expect("valid")
    };
    let open = with(FailurePolicy::FailOpen);
    let closed = with(FailurePolicy::FailClosed);
    let budget = with(FailurePolicy::LocalBudget { limit: 2, period: Duration::from_secs(1) });
    let before = held(&open).await;
    server.kill();

    // Fail-open admits and holds nothing: there is nothing to release.
    let p = held(&open).await;
    assert_eq!((p.decision().source, p.decision().degraded), (Source::FailOpen, Some(Degraded::Unavailable)));
    assert!(!p.release().await.expect("nothing to release"));
    // Fail-closed refuses, with a wait.
    let d = refused(&closed).await;
    assert_eq!((d.source, d.degraded), (Source::FailClosed, Some(Degraded::Unavailable)));
    assert!(d.retry_after > Duration::ZERO, "{d:?}");
    // The local budget lends this instance's own 2 permits, and takes them back.
    let (x, y) = (held(&budget).await, held(&budget).await);
    assert_eq!((x.decision().source, y.decision().capacity), (Source::LocalBudget, 2));
    let d = refused(&budget).await;
    assert_eq!((d.source, d.degraded), (Source::LocalBudget, Some(Degraded::Unavailable)));
    assert!(x.release().await.expect("released in process"));
    drop(y);
    let z = held(&budget).await;
    let _w = held(&budget).await;
    drop(z);

    // What no policy stands in for is an error that says what did not happen.
    let err = open.state("client").await.expect_err("no reading without Redis");
    assert!(err.to_string().contains("the permits read"), "{err}");
    let err = before.release().await.expect_err("Redis is dead");
    assert!(err.to_string().contains("release"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_carries_a_permit_to_another_instance_that_releases_it_once() {
    let server = RedisServer::start().expect("redis-server");
    let (one, two) = (limiter(&server, Duration::from_secs(30)), limiter(&server, Duration::from_secs(30)));
    let ticket = held(&one).await.into_ticket();
    // Handed over, it is not released on drop: Redis still holds it.
    assert_eq!(holders(&server), 1);
    let text = ticket.encode();
    assert!(!format!("{ticket:?}").contains(&text[5..]), "the token stays out of what it prints");
    // Another instance, from the text alone, releases it once; the second time it is gone.
    let read = redis_ratelimit::PermitTicket::decode(&text).expect("its own text");
    assert_eq!(read.key(), "client");
    assert!(two.renew_ticket(&read).await.expect("renews"));
    assert!(two.release_ticket(&read).await.expect("released"));
    assert_eq!(holders(&server), 0);
    assert!(!two.release_ticket(&read).await.expect("answers"), "released already");
    // A ticket naming a token nobody holds frees nothing of the key's holders.
    let _p = held(&one).await;
    let forged = format!("p1:s:{}.1:client", "0".repeat(32));
    let forged = redis_ratelimit::PermitTicket::decode(&forged).expect("well formed");
    assert!(!one.release_ticket(&forged).await.expect("answers"));
    assert_eq!(holders(&server), 1);
}
