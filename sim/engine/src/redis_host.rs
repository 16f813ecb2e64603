//! The Redis host of a simulated deployment (its instances and Redis): the model served on turmoil's network, its clock
//! the simulation's (so `TIME` and expiry follow simulated time), its data outside the host
//! closure (so a restart can keep it, as persistence would, or lose it).

use std::time::{Duration, UNIX_EPOCH};

use crate::simclock::{SimTime, EPOCH_MS};
use redis_model::{serve_turmoil, FnServerClock, ModelHandle, Reply};
use results::RedisCost;

/// A simulation of a scenario family (`crate::rls`, `crate::in_flight`, `crate::post_hoc`)
/// running `end_ms` of simulated time: 1 ms ticks, links of 1 to 3 ms, the fixed epoch, and
/// the Redis host already on it as `redis`.
pub fn simulation<'a>(seed: u64, end_ms: u64, time: &SimTime) -> (turmoil::Sim<'a>, RedisHost) {
    let redis = RedisHost::new(time.clone());
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_millis(end_ms + 60_000))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(3))
        .tcp_capacity(1 << 16)
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_MS))
        .rng_seed(seed)
        .build();
    let host = redis.clone();
    sim.host("redis", move || {
        let host = host.clone();
        async move { host.serve().await }
    });
    (sim, redis)
}

/// Port the model listens on.
pub const PORT: u16 = 6379;

/// See the module docs.
#[derive(Clone)]
pub struct RedisHost {
    model: ModelHandle,
}

impl RedisHost {
    /// A model whose clock is simulated time (Redis's clock is the true one: skew belongs to
    /// the instances).
    pub fn new(time: SimTime) -> Self {
        RedisHost { model: ModelHandle::new(FnServerClock(move || EPOCH_MS * 1000 + time.elapsed_us())) }
    }

    /// The host's software: listen, serve, and sweep expired keys every 100 ms as Redis's
    /// active expiry does.
    pub async fn serve(self) -> turmoil::Result {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
        let sweeper = self.model.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                sweeper.active_expire();
            }
        });
        serve_turmoil(self.model, listener).await;
        Ok(())
    }

    /// The process dies: connections drop, replies in flight are lost.
    pub fn crash(&self) {
        self.model.crash();
    }

    /// The process starts again, with or without its data; scripts are always gone.
    pub fn restart(&self, keep_data: bool) {
        self.model.restart(keep_data);
    }

    /// The primary dies and its replica takes over (see [`ModelHandle::fail_over`]).
    pub fn fail_over(&self) -> Option<redis_model::Failover> {
        self.model.fail_over()
    }

    /// `SCRIPT FLUSH`.
    pub fn flush_scripts(&self) {
        self.model.flush_scripts();
    }

    /// What the run cost Redis.
    pub fn cost(&self) -> RedisCost {
        let s = self.model.stats();
        RedisCost {
            commands: s.total_commands,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            keys: s.keys as u64,
            memory_bytes: s.dataset_bytes as u64,
            round_trips: round_trips(&s),
            scripts_run: s.scripts_run,
            expired_keys: s.expired_keys,
            ..self.keys_without_ttl()
        }
    }

    /// The keys that will never expire (`PTTL` -1), counted and sampled.
    fn keys_without_ttl(&self) -> RedisCost {
        let Reply::Array(keys) = self.model.call(&[b"KEYS", b"*"]) else { return RedisCost::default() };
        let mut names: Vec<String> = keys
            .iter()
            .filter_map(|k| match k {
                Reply::Bulk(name) if self.model.call(&[b"PTTL", name]) == Reply::Integer(-1) => {
                    Some(String::from_utf8_lossy(name).into_owned())
                }
                _ => None,
            })
            .collect();
        names.sort();
        RedisCost::without_ttl(names)
    }

    /// The model, for tests.
    pub fn model(&self) -> &ModelHandle {
        &self.model
    }
}

/// Calls clients sent, counted as the real lane counts them from Redis's own statistics:
/// where scripts ran (every call of the library is one) the calls are the scripts' (`EVAL`,
/// `EVALSHA`), so the clock readings the harness pipelines around a subject's script are no
/// call of the subject's; a client that runs no script makes every command a call.
fn round_trips(s: &redis_model::ModelStats) -> u64 {
    let calls = |name: &str| s.calls.get(name).copied().unwrap_or(0);
    match calls("eval") + calls("evalsha") {
        0 => s.client_commands,
        scripts => scripts,
    }
}
