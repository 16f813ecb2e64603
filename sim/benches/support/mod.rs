//! What both benchmarks need: the limiter's EVALSHA arguments, and the model running one
//! script in process (no sockets, no parsing).

#![allow(dead_code)] // each benchmark uses its part
#![allow(clippy::disallowed_methods)] // a benchmark measures wall time by definition

use std::time::Duration;
use std::time::Instant;

use redis_model::{ManualServerClock, ModelHandle, Reply};
use redis_ratelimit::harness::scripts::{self, LuaScript};
use redis_ratelimit::{Algorithm, Quota};

/// The EVALSHA arguments (after the SHA) the limiter sends for one cost-1 request at `now_ms`.
pub fn call_args(algorithm: Algorithm, now_ms: u64) -> Vec<String> {
    let q = Quota::new(1_000_000, Duration::from_secs(1)).with_burst(1_000_000);
    let request =
        scripts::Request { algorithm, quota: &q, stem: "ratelimiter:{bench}:", now_ms: Some(now_ms), cost: 1 };
    let call = request.invocation();
    let mut args = vec![call.keys.len().to_string()];
    args.extend(call.keys);
    args.extend(call.args);
    args
}

/// `n` EVALSHA of `script` on the model, in process; calls per second.
pub fn in_process(script: &LuaScript, n: usize) -> f64 {
    let model = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
    let sha = match model.call(&[b"SCRIPT", b"LOAD", script.source.as_bytes()]) {
        Reply::Bulk(sha) => sha,
        other => panic!("SCRIPT LOAD of {} failed: {other:?}", script.file),
    };
    let start = Instant::now();
    for i in 0..n {
        let args = call_args(script.algorithm, 1_700_000_000_000 + i as u64 / 100);
        let mut argv: Vec<&[u8]> = vec![b"EVALSHA", &sha];
        argv.extend(args.iter().map(|a| a.as_bytes()));
        let reply = model.call(&argv);
        if matches!(reply, Reply::Error(_)) {
            panic!("EVALSHA {} failed: {reply:?}", script.file);
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}
