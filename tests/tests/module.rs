//! The Redis module's commands are their scripts: on one `redis-server` with the module loaded,
//! every request of long generated sequences goes once to the algorithm's script and once to
//! its native command, on keys of their own, in one MULTI/EXEC (so Redis expires both keys at
//! the same instant). The replies must be equal, and so must what each left in Redis: the
//! value, and the TTL to the millisecond or two the two calls lie apart. Before some requests
//! both keys get the same foreign value, text, fractions, numbers in forms only Lua reads
//! (`1e3`, `0x10`, blanks around them), or a hash (WRONGTYPE): each must read it as the other
//! does.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit::harness::scripts::{self, Request};
use redis_ratelimit::{Algorithm, Quota};
use redis_tests::RedisServer;

const BASE_MS: u64 = 1_700_000_000_000;

/// What someone else might have left under a limiter's key at `now_ms`: text, fractions,
/// negatives, numbers past what a double holds exactly, and a TAT shortly ahead of now (µs)
/// written in the forms only Lua's `tonumber` reads (blanks, a fraction of zero, an exponent,
/// hexadecimal), which both must read as that TAT.
fn foreign(rng: &mut SmallRng, now_ms: u64) -> String {
    let tat = (now_ms + rng.random_range(0..2_000)) * 1_000;
    match rng.random_range(0..10) {
        0 => "abc".into(),
        1 => format!("{tat}.5"),
        2 => "-1".into(),
        3 => String::new(),
        4 => "4503599627370496".into(),
        5 => format!(" {tat}\t"),
        6 => format!("{tat}.0"),
        7 => format!("{}e3", tat / 1_000),
        8 => format!("0x{tat:x}"),
        _ => tat.to_string(),
    }
}

fn server() -> RedisServer {
    let module = redis_tests::build_module("dev").expect("the Redis module builds");
    RedisServer::start_real_with_module(&module).expect("redis-server loads the module")
}

/// One request to the script and to the command, on `s` and `m`, in one transaction; each
/// reply as integers or an error's text, then each key's value and PTTL.
type Sides = ((Result<Vec<i64>, String>, Option<String>, i64), (Result<Vec<i64>, String>, Option<String>, i64));

fn both(conn: &mut redis::Connection, command: &str, call: &scripts::Invocation, s: &str, m: &str) -> Sides {
    let script = scripts::for_algorithm(Algorithm::Gcra).source;
    let mut pipe = redis::pipe();
    pipe.atomic().ignore_errors();
    pipe.cmd("EVAL").arg(script).arg(1).arg(s).arg(&call.args);
    pipe.cmd(command).arg(m).arg(&call.args);
    pipe.cmd("GET").arg(s).cmd("PTTL").arg(s).cmd("GET").arg(m).cmd("PTTL").arg(m);
    let replies: Vec<redis::Value> = pipe.query(conn).expect("EXEC");
    let ints = |v: &redis::Value| -> Result<Vec<i64>, String> {
        match v {
            redis::Value::Array(items) => {
                Ok(items.iter().map(|i| redis::from_redis_value_ref(i).expect("an integer")).collect())
            }
            redis::Value::ServerError(e) => Err(e.code().to_owned()),
            other => Err(format!("{other:?}")),
        }
    };
    // A GET of a hash is an error on both sides: read as no text.
    let text = |v: &redis::Value| -> Option<String> { redis::from_redis_value_ref(v).ok() };
    let ttl = |v: &redis::Value| -> i64 { redis::from_redis_value_ref(v).expect("PTTL") };
    ((ints(&replies[0]), text(&replies[2]), ttl(&replies[3])), (ints(&replies[1]), text(&replies[4]), ttl(&replies[5])))
}

#[test]
fn the_gcra_command_is_the_gcra_script_on_the_callers_clock() {
    let server = server();
    let mut conn = server.client().expect("connect");
    let mut compared = 0;
    let mut foreign_values = 0;
    for seed in 0..24u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let q = Quota::new(rng.random_range(1..=6), rng.random_range(100..=2_000)).with_burst(rng.random_range(1..=6));
        let mut now = BASE_MS;
        for i in 0..150 {
            now = now.saturating_add_signed(if rng.random_bool(0.1) {
                -rng.random_range(0..300)
            } else {
                rng.random_range(0..700)
            });
            let key = rng.random_range(0..3);
            let (s, m) = (format!("s:{{k{seed}-{key}}}"), format!("m:{{k{seed}-{key}}}"));
            if rng.random_bool(0.08) {
                let _: () = redis::cmd("DEL").arg(&s).arg(&m).query(&mut conn).expect("DEL");
                if rng.random_bool(0.2) {
                    let _: () = redis::cmd("HSET").arg(&s).arg("u").arg(1).query(&mut conn).expect("HSET");
                    let _: () = redis::cmd("HSET").arg(&m).arg("u").arg(1).query(&mut conn).expect("HSET");
                } else {
                    let value = foreign(&mut rng, now);
                    let _: () =
                        redis::cmd("SET").arg(&s).arg(&value).arg("PX").arg(60_000).query(&mut conn).expect("SET");
                    let _: () =
                        redis::cmd("SET").arg(&m).arg(&value).arg("PX").arg(60_000).query(&mut conn).expect("SET");
                }
                foreign_values += 1;
            }
            let cost = rng.random_range(0..=q.burst());
            let stem = format!("s:{{k{seed}-{key}}}");
            let call =
                Request { algorithm: Algorithm::Gcra, quota: &q, stem: &stem, now_ms: Some(now), cost }.invocation();
            let ((s_reply, s_value, s_ttl), (m_reply, m_value, m_ttl)) =
                both(&mut conn, "RATELIMIT.GCRA", &call, &s, &m);
            let at = format!("seed {seed} step {i} {q:?} now {now} cost {cost}");
            match (&s_reply, &m_reply) {
                (Err(a), Err(b)) => {
                    assert!(a.starts_with("WRONGTYPE") && b.starts_with("WRONGTYPE"), "{at}: {a} / {b}")
                }
                _ => assert_eq!(s_reply, m_reply, "{at}"),
            }
            assert_eq!(s_value, m_value, "{at}: the values left");
            assert_eq!(s_ttl < 0, m_ttl < 0, "{at}: TTLs {s_ttl} / {m_ttl}");
            assert!((s_ttl - m_ttl).abs() <= 2, "{at}: TTLs {s_ttl} / {m_ttl}");
            compared += 1;
        }
    }
    println!("module: {compared} GCRA requests agreed with the script ({foreign_values} on foreign values)");
}

/// On Redis's clock (no time argument) both read the server's clock: a burst is admitted and
/// the next refused by both, each reporting the same instant to the millisecond or so.
#[test]
fn the_gcra_command_decides_on_redis_clock_as_the_script_does() {
    let server = server();
    let mut conn = server.client().expect("connect");
    let q = Quota::new(2, 60_000).with_burst(3);
    let call = Request { algorithm: Algorithm::Gcra, quota: &q, stem: "s:{k}:", now_ms: None, cost: 1 }.invocation();
    for n in 0..4 {
        let ((s_reply, ..), (m_reply, m_value, m_ttl)) = both(&mut conn, "RATELIMIT.GCRA", &call, "s:{k}", "m:{k}");
        let (s, m) = (s_reply.expect("the script decides"), m_reply.expect("the command decides"));
        assert_eq!((s[0], s[1]), (m[0], m[1]), "request {n}: allowed and remaining: {s:?} / {m:?}");
        assert_eq!(m[0], i64::from(n < 3), "request {n}: {m:?}");
        assert!((s[4] - m[4]).abs() <= 2 && (s[3] - m[3]).abs() <= 2, "request {n}: {s:?} / {m:?}");
        assert!(m_value.is_some() && m_ttl > 0, "request {n}: {m_value:?} {m_ttl}");
    }
}

/// Bad arguments are refused with an error naming what was wrong, and nothing is written.
#[test]
fn the_gcra_command_refuses_bad_arguments_by_name() {
    let server = server();
    let mut conn = server.client().expect("connect");
    for (args, says) in [
        (&["k", "", "1000"][..], "wrong number of arguments"),
        (&["k", "x", "1000", "3", "1"], "now_ms must be a non-negative integer"),
        (&["k", "", "-5", "3", "1"], "interval_us must be a non-negative integer"),
        (&["k", "", "1000", "3", "9"], "cost 9 exceeds the burst 3"),
        (&["k", "", "1000", "0", "1"], "burst"),
        (&["k", "", "0", "3", "1"], "interval_us must be at least 1"),
    ] {
        let err = redis::cmd("RATELIMIT.GCRA").arg(args).query::<redis::Value>(&mut conn).expect_err("refused");
        assert!(err.to_string().contains(says), "{args:?}: {err}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");
}

/// A write is replicated as its effect, a plain `SET ... PXAT`: a replica without the module
/// holds the same value with the same expiry.
#[test]
fn the_gcra_command_replicates_its_write_not_itself() {
    let primary = server();
    let replica = RedisServer::start_real().expect("redis-server");
    let mut p = primary.client().expect("connect");
    let mut r = replica.client().expect("connect");
    // A full sync at once, not after the default 5 s a diskless primary waits for more replicas.
    let _: () = redis::cmd("CONFIG").arg("SET").arg("repl-diskless-sync-delay").arg(0).query(&mut p).expect("CONFIG");
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port()).query(&mut r).expect("REPLICAOF");
    let linked = (0..500).any(|_| {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap_or_default();
        std::thread::sleep(std::time::Duration::from_millis(10));
        info.contains("master_link_status:up")
    });
    assert!(linked, "the replica never linked");
    let q = Quota::new(2, 60_000).with_burst(3);
    let call =
        Request { algorithm: Algorithm::Gcra, quota: &q, stem: "m:{k}:", now_ms: Some(BASE_MS), cost: 2 }.invocation();
    let reply: Vec<i64> = redis::cmd("RATELIMIT.GCRA").arg("m:{k}").arg(&call.args).query(&mut p).expect("decides");
    assert_eq!(reply[0], 1, "{reply:?}");
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5_000).query(&mut p).expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged the write");
    let (value, ttl): (Option<String>, i64) =
        redis::pipe().cmd("GET").arg("m:{k}").cmd("PTTL").arg("m:{k}").query(&mut r).expect("read");
    let primary_value: Option<String> = redis::cmd("GET").arg("m:{k}").query(&mut p).expect("GET");
    assert_eq!(value, primary_value);
    assert!(ttl > 0 && ttl <= reply[3], "the replica's TTL {ttl} against the reset {}", reply[3]);
}
