//! Goal 12: what a request whose cost was known after the work costs Redis: its decision at an
//! estimate (`lua/gcra.lua`, cost 1) and the debit of its excess (`lua/debit.lua`, 5 units),
//! two calls, against the floor script of goal 8 on each clock, measured the same way on the
//! same server in the same run (through goal 11's driver: 16 requests to a pipeline over
//! 100,000 keys, `INFO commandstats`' µs per call, the least of three interleaved rounds).
//! Each call is measured on keys it finds empty, as the floor is.

use redis_ratelimit::harness::scripts::Request;

use super::cost::{FLOOR, FLOOR_TIME};
use super::permits::{floor, usec_per_call, Sent, NOW_MS, ROUNDS};
use super::*;

/// Request `i`'s call: its decision at cost 1, or the debit of 5 units, on `now_ms` (None:
/// Redis's clock).
fn call(now_ms: Option<u64>, debit: bool) -> impl Fn(usize) -> Vec<(Vec<String>, Vec<String>)> + Copy {
    move |i: usize| {
        let quota = Quota::per_minute(1_000);
        let stem = format!("rl:{{k{}}}:gcra-1000-60000:", i.wrapping_mul(7_919) % KEYS);
        let req = Request { algorithm: Algorithm::Gcra, quota: &quota, stem: &stem, now_ms, cost: 1 };
        let inv = if debit { Request { cost: 5, ..req }.units_invocation() } else { req.invocation_of_stem() };
        vec![(inv.keys, inv.args)]
    }
}

pub(crate) fn reconcile(server: &RedisServer) -> Vec<Goal> {
    let n = scaled(100_000);
    let mut conn = server.client().expect("connect");
    // Per clock (the caller's, then Redis's): the floor, the decision and the debit.
    let mut us = [[f64::INFINITY; 3]; 2];
    for _ in 0..ROUNDS {
        for (row, (floor_source, now_ms)) in us.iter_mut().zip([(FLOOR, Some(NOW_MS)), (FLOOR_TIME, None)]) {
            row[0] = row[0].min(usec_per_call(&mut conn, Sent::Script(floor_source), n, 0, floor));
            let decide = Sent::Script(scripts::for_algorithm(Algorithm::Gcra).source);
            row[1] = row[1].min(usec_per_call(&mut conn, decide, n, 0, call(now_ms, false)));
            row[2] = row[2].min(usec_per_call(&mut conn, Sent::Script(scripts::DEBIT), n, 0, call(now_ms, true)));
        }
    }
    support::flush(&mut conn);
    us.into_iter()
        .zip([("caller's clock", "GET+SET PX"), ("Redis's clock", "TIME+GET+SET PX")])
        .map(|([floor_us, decide_us, debit_us], (clock, label))| {
            let ratio = (decide_us + debit_us) / floor_us;
            Goal {
                what: format!("Redis us per request, a reconciled excess (GCRA): decision + debit, {clock}"),
                measured: format!("{:.2} us ({decide_us:.2} decision, {debit_us:.2} debit)", decide_us + debit_us),
                reference: format!("{label} script: {floor_us:.2} us"),
                ratio,
                goal: "<= 2.5x",
                met: ratio <= 2.5,
                note: if ratio <= 2.5 {
                    String::new()
                } else {
                    format!(
                        "{:.0}% over: two calls where the floor makes one, each about what the GCRA script \
                         costs alone (goal 8's GCRA row): the debit does the decision's work, a GET, the TAT's \
                         arithmetic in microseconds and a SET PX, with 5 arguments where the floor has none; \
                         the debit {:.2}x the decision",
                        (ratio / 2.5 - 1.0) * 100.0,
                        debit_us / decide_us
                    )
                },
            }
        })
        .collect()
}
