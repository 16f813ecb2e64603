//! The results file that `cargo xtask simulate` writes, as this crate reads it.
//!
//! These types are the report's own view of schema [`SCHEMA`]; they do not import `sim`, so the
//! simulator can change its internals freely as long as it writes the same JSON. Almost every
//! field carries `#[serde(default)]`: a partial file (one scenario, no sweeps, no Redis
//! statistics) still renders, and the charts it cannot draw say which run would fill them.
//! Unknown fields are ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The only schema version this crate reads.
pub const SCHEMA: &str = "rate-limit-sim/1";

/// A whole results file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Results {
    /// Always [`SCHEMA`] for files this crate accepts.
    pub schema: String,
    /// The command that produced the file, e.g. `cargo xtask simulate --seeds 3`.
    pub command: String,
    /// Which Redis ran the scripts: `model`, `redis` or `mini-redis`.
    pub backend: String,
    /// Every seed that was run; charts of one run use the first.
    pub seeds: Vec<u64>,
    /// Simulated length of each run.
    pub duration_ms: u64,
    /// One entry per scenario x algorithm x policy x seed.
    pub results: Vec<RunResult>,
    /// The GET+SET race sweep: admissions against instance count and Redis latency.
    pub race_sweep: Vec<RacePoint>,
    /// The clock-skew sweep: admissions against skew, client time versus server time.
    pub skew_sweep: Vec<SkewPoint>,
}

/// One simulated run: a scenario, an algorithm, a failure policy and a seed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResult {
    pub scenario: String,
    /// What the scenario does, in a sentence or two; shown above its chart.
    pub description: String,
    /// `fixed-window`, `sliding-window`, `sliding-log`, `token-bucket`, `gcra`, `adr002`, `naive`.
    pub algorithm: String,
    /// True for the subjects (`adr002`, `naive`): their broken bounds are expected findings.
    pub subject: bool,
    /// `fail-open`, `fail-closed` or `local-budget`.
    pub policy: String,
    /// `server` (Redis `TIME`) or `client` (the instance's own clock).
    pub time_source: String,
    pub seed: u64,
    pub instances: u64,
    /// Units admitted per `period_ms`.
    pub limit: u64,
    pub period_ms: u64,
    pub burst: u64,
    pub requests: u64,
    pub admitted: u64,
    /// What an exact limiter fed the same requests in true time order admits.
    pub oracle_admitted: u64,
    /// Requests admitted that the oracle denied.
    pub wrong_allow: u64,
    /// Requests denied that the oracle admitted.
    pub wrong_limit: u64,
    /// `wrong_allow` as a percentage of `requests` (0.1 means 0.1 %).
    pub wrong_allow_pct: f64,
    /// `wrong_limit` as a percentage of `requests`.
    pub wrong_limit_pct: f64,
    /// `held`, `broken` or `none` (no bound checked).
    pub bound: String,
    pub bound_detail: String,
    /// The broken bound is what the run set out to show (a subject, or client time under
    /// skew), not a defect.
    pub expected_finding: bool,
    /// Whether the failure policy kept its own promise while Redis was unreachable: `held`,
    /// `broken` or `none`.
    pub policy_check: String,
    pub policy_detail: String,
    /// Calls that returned an error instead of a decision.
    pub errors: u64,
    /// Time from the last fault healing until decisions matched the oracle again; `None` when no
    /// fault healed.
    pub recover_ms: Option<f64>,
    /// How many decisions each source made: `store`, `fail_open`, `fail_closed`, `local_budget`.
    pub sources: BTreeMap<String, u64>,
    /// The command that replays exactly this run.
    pub replay: String,
    pub trace_hash: String,
    pub series: Option<Series>,
    pub redis: Option<RedisStats>,
    pub faults: Vec<Fault>,
}

/// Admissions per time bucket, for the over-time charts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Series {
    pub bucket_ms: u64,
    /// Requests admitted in each bucket.
    pub admitted: Vec<f64>,
    /// Requests the oracle admitted in each bucket.
    pub oracle_admitted: Vec<f64>,
    /// The limit expressed per bucket (limit x bucket_ms / period_ms).
    pub limit_per_bucket: Option<f64>,
}

/// What the run cost Redis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RedisStats {
    pub commands: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub keys: u64,
    pub memory_bytes: u64,
}

/// An injected fault; `until_ms` is `None` when it never healed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fault {
    /// e.g. `redis-crash`, `partition`, `latency`, `clock-skew`.
    pub kind: String,
    pub at_ms: f64,
    pub until_ms: Option<f64>,
}

/// One point of the GET+SET race sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RacePoint {
    pub algorithm: String,
    pub instances: u64,
    /// Redis round-trip time.
    pub latency_ms: f64,
    pub limit: u64,
    pub admitted: u64,
    pub requests: u64,
    pub seed: u64,
}

/// One point of the clock-skew sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkewPoint {
    pub algorithm: String,
    /// `client` or `server`.
    pub time_source: String,
    /// Magnitude of the clock offset between instances.
    pub skew_ms: f64,
    pub admitted: u64,
    /// The most the algorithm promises to admit over the run.
    pub bound: f64,
    pub seed: u64,
}
