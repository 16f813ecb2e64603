//! Load: when requests arrive, at which instance, for which key, costing how much. Drawn
//! in advance from the run's seed, so the same seed replays the same load.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::Rng;

use redis_ratelimit::Quota;

use crate::simclock::SimTime;

/// Runs `run(n, item)` for each of `items` at its moment (`at_ms(item)`, simulated ms since
/// the run began), each in a task of its own, so a request slow to be answered delays none
/// after it, as in production; returns when every one has finished.
pub async fn paced<T, Fut>(time: &SimTime, items: Vec<T>, at_ms: impl Fn(&T) -> u64, run: impl Fn(usize, T) -> Fut)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    for (n, item) in items.into_iter().enumerate() {
        let (now, at) = (time.elapsed_ms(), at_ms(&item));
        if at > now {
            tokio::time::sleep(Duration::from_millis(at - now)).await;
        }
        // Reap finished ones as we go: a finished task stays allocated until joined.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(run(n, item));
    }
    while tasks.join_next().await.is_some() {}
}

/// One request arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Simulated ms since the run began.
    pub t_ms: u64,
    /// The instance it arrives at.
    pub instance: u32,
    /// Key index (`key-N`).
    pub key: u32,
    /// Cost (at least 1).
    pub cost: u64,
}

/// How keys are spread over instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Every request goes to a random instance: each key is shared by all instances.
    Random,
    /// Each key is pinned to one instance (many clients behind one instance).
    PinnedKeys,
}

/// A load shape. Rates are multiples of the quota's rate `limit / period`.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// Poisson arrivals at `rate_x` times the limit, over `keys` keys; `hot_share` of the
    /// requests go to key 0. Costs are 1, or up to `max_cost` for a fifth of requests.
    Poisson {
        /// Offered load as a multiple of the limit.
        rate_x: f64,
        /// Number of keys.
        keys: u32,
        /// Share of requests on key 0.
        hot_share: f64,
        /// Largest cost drawn.
        max_cost: u64,
        /// Key-to-instance spread.
        spread: Spread,
    },
    /// `size` requests at once every `every_ms`, on one key, spread over instances.
    Bursts {
        /// Period between bursts.
        every_ms: u64,
        /// Requests per burst.
        size: u32,
    },
    /// `size` requests just before and `size` just after each window boundary, one key.
    BoundaryBursts {
        /// Requests on each side of the boundary.
        size: u32,
    },
    /// One client, one key, one request every `gap_ms` (shorter than one token's refill).
    Trickle {
        /// Gap between requests.
        gap_ms: u64,
    },
}

impl Workload {
    /// The same load with no request costing more than `max` (a subject that takes no cost
    /// is driven with requests of cost 1).
    pub fn with_max_cost(&self, max: u64) -> Workload {
        match self.clone() {
            Workload::Poisson { rate_x, keys, hot_share, max_cost, spread } => {
                Workload::Poisson { rate_x, keys, hot_share, max_cost: max_cost.min(max.max(1)), spread }
            }
            other => other,
        }
    }

    /// Draws the arrivals for `duration_ms` over `instances` instances.
    pub fn generate(&self, q: &Quota, instances: u32, duration_ms: u64, rng: &mut SmallRng) -> Vec<Arrival> {
        let mut out = Vec::new();
        let period = q.period_ms();
        match *self {
            Workload::Poisson { rate_x, keys, hot_share, max_cost, spread } => {
                // Offered requests per ms over all keys: each key sees about rate_x x limit.
                let per_ms = rate_x * q.limit() as f64 / period as f64 * keys.max(1) as f64;
                let mut t = 0.0f64;
                loop {
                    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
                    t += -u.ln() / per_ms;
                    if t >= duration_ms as f64 {
                        break;
                    }
                    let key = if keys <= 1 || rng.random_bool(hot_share.clamp(0.0, 1.0)) {
                        0
                    } else {
                        rng.random_range(1..keys)
                    };
                    let instance = match spread {
                        Spread::Random => rng.random_range(0..instances),
                        Spread::PinnedKeys => key % instances,
                    };
                    let cost =
                        if max_cost > 1 && rng.random_range(0..5) == 0 { rng.random_range(2..=max_cost) } else { 1 };
                    out.push(Arrival { t_ms: t as u64, instance, key, cost });
                }
            }
            Workload::Bursts { every_ms, size } => {
                let mut t = every_ms / 2;
                while t < duration_ms {
                    for _ in 0..size {
                        out.push(Arrival { t_ms: t, instance: rng.random_range(0..instances), key: 0, cost: 1 });
                    }
                    t += every_ms.max(1);
                }
            }
            Workload::BoundaryBursts { size } => {
                let mut boundary = period;
                while boundary + period / 10 < duration_ms {
                    let spread_ms = (period / 20).max(1);
                    for i in 0..size {
                        let before = boundary - 1 - rng.random_range(0..spread_ms);
                        let after = boundary + rng.random_range(0..spread_ms);
                        let instance = i % instances;
                        out.push(Arrival { t_ms: before, instance, key: 0, cost: 1 });
                        out.push(Arrival { t_ms: after, instance, key: 0, cost: 1 });
                    }
                    boundary += 3 * period;
                }
            }
            Workload::Trickle { gap_ms } => {
                let mut t = 0;
                while t < duration_ms {
                    out.push(Arrival { t_ms: t, instance: 0, key: 0, cost: 1 });
                    t += gap_ms.max(1);
                }
            }
        }
        out.sort_by_key(|a| a.t_ms);
        out
    }
}
