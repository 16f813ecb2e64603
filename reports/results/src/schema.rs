//! The results file of `cargo xtask simulate`: JSON, schema `rate-limit-sim/3`.
//!
//! One file per run of the command. `results` holds one object per scenario, subject,
//! policy, time source and seed; `race_sweep` and `skew_sweep` hold the GET+SET race and
//! clock-skew sweeps the report charts. Fields (all integers are counts of requests unless
//! named otherwise):
//!
//! - `scenario`, `description`, `subject` (what the run drove: one of the library's
//!   algorithms, or a subject it is compared with), `library` (whether it is the library's: the
//!   others' broken bounds are expected findings), `policy`, `time_source` (`server`/`client`), `seed`,
//!   `instances`, `limit`, `period_ms`, `burst`;
//! - `requests`, `admitted`, `oracle_admitted`, `wrong_allow`, `wrong_limit` and the two
//!   as `_pct` shares of all requests;
//! - `bound`: `held`, `broken` or `none`, with `bound_detail` (the worst case and the bound),
//!   `expected_finding` (a subject, or client time under skew: the break is the finding),
//!   `policy_check`/`policy_detail` (what the failure policy did while Redis was
//!   unreachable), `liveness`/`liveness_detail` (no starvation: where the oracle admits, the
//!   system admits too), `peak_per_period` (most admitted for one key within one period);
//! - `recover_ms`: from the last heal to the first store-decided admission (null if none);
//! - `sources`: decisions per source; `errors`: calls that returned an error;
//! - `replay`: the command that reruns exactly this case; `trace_hash`: SHA-1 of the trace;
//! - `series`: admitted and oracle-admitted per `bucket_ms`; `redis`: commands, bytes and
//!   keys the run cost Redis, and the keys it left with no TTL; `faults`: the schedule;
//! - `rules` (only for runs that enforce several rules per request, absent otherwise):
//!   `all_or_nothing` (`held`/`broken`: no request consumed from one rule while another denied
//!   it), `split_requests` (how many did), and per rule its `bound` and `consumed` units;
//! - `shard`: `I/N` for one shard of a sweep split with `--shard` (see `results::merge`);
//! - `mode`: the round-trip mode the library ran (`denial-cache`, `lease`, `batch`; empty for
//!   none), `round_trips` (calls sent to Redis; per decision in the tables), `mode_check` and
//!   `mode_detail` (the mode's own promise: the denial cache never denied what Redis would have
//!   admitted; leases under-admitted no more than the units leased and never spent, plus one
//!   lifetime's refill per stretch near rest), `under_admitted` (units the exact limiter admitted beyond
//!   the instances together, net, leaving out what a failure policy denied) and `lease_unspent` (units
//!   leased and never spent nor given back). All added with defaults, so older files of the same
//!   schema still read;
//! - `beyond_clock_trust`/`beyond_clock_trust_detail`: for a subject fed its instances' clocks
//!   while they disagreed, whether some reading of the clocks explains what it admitted
//!   (`held`) or none does (`broken`, a broken promise, not the clock trust's price); `none`
//!   otherwise. `redis.expired_keys`: keys Redis expired in the run.
//! - `held` (only for the in-flight scenarios, absent otherwise): `bucket_ms`, `per_bucket` (the
//!   most holders working at once in each bucket), `limit` and `lease_ms`. For those runs `requests`
//!   and `admitted` count acquires and slots given; for the post-hoc scenario they count
//!   requests, `series.admitted` counts units charged, at admission and after, and `charges`
//!   (absent elsewhere) holds `used` (the real cost of the requests admitted), `uncharged` (what
//!   a cap forgave) and `worst_ratio` (the most charged in one span over what the promise
//!   allows there).
//!
//! Every change of shape is a new version, and the report reads the earlier ones
//! (`RENAMED_IN` below; `reports::load_results` upgrades them):
//! - 3 added `beyond_clock_trust`, `beyond_clock_trust_detail` and `redis.expired_keys`; a file
//!   of 2 reads with them `none`, empty and 0.
//! - 2 renamed 1's per-run `algorithm` to `subject` and its `subject` flag (the run drove an
//!   external subject) to the inverse `library`, and the race and skew points' `algorithm` to
//!   `subject`.
//!
//! Every struct reads missing fields as their defaults, so a partial file (one scenario, no
//! sweeps) still renders; the `schema` string is what refuses a file of another kind or of a
//! newer simulator.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The schema version written in every file.
pub const SCHEMA: &str = "rate-limit-sim/3";

/// The schema's family and the versions a reader takes: every one since the first, upgraded
/// to this one's shape on reading (see the module docs).
pub const SCHEMA_FAMILY: &str = "rate-limit-sim";
/// This version's number.
pub const SCHEMA_VERSION: u32 = 3;

/// A whole results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Results {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The command line that produced it.
    pub command: String,
    /// `model`, `redis` or `mini-redis`.
    pub backend: String,
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// Simulated duration per run (ms).
    pub duration_ms: u64,
    /// One per scenario x subject x policy x time source x seed.
    pub results: Vec<RunResult>,
    /// Admitted against the limit as instances and latency grow.
    pub race_sweep: Vec<RacePoint>,
    /// Admitted against the bound as clock skew grows.
    pub skew_sweep: Vec<SkewPoint>,
    /// `cargo xtask verify`: one report per subject file verified (empty for `simulate`).
    pub verify: Vec<SubjectReport>,
    /// `I/N` when the command ran shard I of N of its runs (`--shard`), empty otherwise;
    /// `results::merge` puts the shards of one sweep back together.
    pub shard: String,
}

/// What `cargo xtask verify` found about one subject file: a verdict per promise, with its
/// evidence and the command that replays it, and the subject's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SubjectReport {
    /// The subject's name (as in `results`, `race_sweep` and `skew_sweep`).
    pub name: String,
    /// The subject file.
    pub file: String,
    /// What it promises (`token-bucket`, `fixed-window (first-hit)`, `none`...).
    pub promise: String,
    /// `server` (the script reads Redis's `TIME`) or `client` (the caller sends its clock).
    pub time: String,
    /// How coarsely it keeps time, as it was judged (empty when exact).
    pub tolerance: String,
    /// The quota it was driven with, in words.
    pub quota: String,
    /// One line per check, in order.
    pub verdicts: Vec<VerdictLine>,
    /// What it is, measured.
    pub profile: Profile,
}

/// What `verify --replay` found on the one schedule it ran (`--format json` prints it alone on
/// standard output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ReplayReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The command that ran it, as given.
    pub command: String,
    /// The subject's name and file.
    pub name: String,
    pub file: String,
    /// The quota it was held to, `LIMIT/PERIOD_MS/BURST`.
    pub quota: String,
    /// The schedule replayed, as `--replay` takes it.
    pub schedule: String,
    /// One line per check that applies, in order: `held`, `broken`, `expected` (the price of
    /// trusting the caller's clock) or `not judged` (a command the model lacks), with what it
    /// found; `evidence` is empty here, since every check ran the one schedule in `trace`.
    pub verdicts: Vec<VerdictLine>,
    /// The schedule as it ran: one row per request, what the subject answered and what the
    /// exact limiter would have.
    pub trace: String,
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct VerdictLine {
    /// The check (`bound`, `no lost capacity`, `failure policy`...).
    pub check: String,
    /// `held`, `broken`, `expected` (the price of the design, such as trusting the caller's
    /// clock: shown, not a broken promise) or `n/a`.
    pub verdict: Verdict,
    /// What it rests on: the worst case seen, or why it does not apply.
    pub detail: String,
    /// For a broken check: the shortest schedule that shows it, as a table.
    pub evidence: String,
    /// For a broken check: the command that replays it.
    pub replay: String,
    /// For a broken check: its witness as the report draws it (absent when the evidence is
    /// not a stretch of requests on one key).
    pub witness: Option<Witness>,
}

/// A break's witness on a timeline: the requests of the stretch that shows it, in true time,
/// each where it may have been decided, against what the promise allows from the stretch's
/// first admission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Witness {
    /// The requests shown, in the order they were sent.
    pub requests: Vec<WitnessRequest>,
    /// What the promise allows from the first admission on: `[ms, units]` points (empty when
    /// the break is not a bound's).
    pub envelope: Vec<[f64; 2]>,
    /// Faults in the stretch.
    pub faults: Vec<WitnessFault>,
    /// Each instance's clock offset (ms); empty when every clock was true.
    pub offsets_ms: Vec<i64>,
}

/// One request of a witness.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct WitnessRequest {
    /// The instance that asked (0 when there is one).
    pub instance: u32,
    /// The earliest and latest moment it may have been decided (ms of true time from the
    /// run's start); equal when known exactly.
    pub lo_ms: f64,
    pub hi_ms: f64,
    /// Units it asked for.
    pub units: u64,
    /// Whether it was admitted.
    pub admitted: bool,
}

/// A fault in a witness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct WitnessFault {
    /// From and to (ms from the run's start; equal for an instant).
    pub from_ms: f64,
    pub to_ms: f64,
    /// What it was.
    pub what: String,
}

/// A subject's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Profile {
    /// Delivered against offered load, both as multiples of the limit.
    pub rate_curve: Vec<RatePoint>,
    /// What an exact limiter of the promise delivers from the same requests (empty for a
    /// promise without one).
    pub exact_curve: Vec<RatePoint>,
    /// Admitted from a fresh key by one burst of five times the capacity at one instant.
    pub largest_burst: u64,
    /// What the promise allows at once (the burst or the limit).
    pub burst_bound: u64,
    /// The longest gap between admissions for a client asking at 1.5x the rate (ms).
    pub longest_starvation_ms: u64,
    /// The same for an exact limiter of the promise (none without a promise).
    pub exact_longest_gap_ms: Option<u64>,
    /// Keys left with no TTL, counted and sampled (the profile's runs and the scenarios).
    pub keys_without_ttl: u64,
    /// Up to ten of their names.
    pub keys_without_ttl_sample: Vec<String>,
    /// Average memory per limited identity on the Redis model (`MEMORY USAGE`), in bytes.
    pub memory_per_key_bytes: f64,
    /// Admitted over the promise's bound at 32 instances sharing one key (1.0 = exact).
    pub race_ratio: Option<f64>,
    /// The smallest clock skew between instances (ms) at which it admitted more than the
    /// bound in true time, if any did.
    pub breaks_at_skew_ms: Option<i64>,
    /// A service subject's runs, one per scenario (empty for a script subject, whose profile
    /// is measured on the model).
    pub service_runs: Vec<ServiceRun>,
    /// An in-flight limit's runs, one per scenario and seed (empty for a rate limit).
    pub in_flight_runs: Vec<InFlightRun>,
}

/// One in-flight scenario run of a concurrency subject: how its acquires were answered, and
/// how that stands against its promise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct InFlightRun {
    /// The scenario (`in-flight-crashes`...) and its seed.
    pub scenario: String,
    pub seed: u64,
    /// N: the slots it promises at once.
    pub limit: u64,
    /// Acquires sent, and how they were answered.
    pub acquires: u64,
    pub held: u64,
    pub refused: u64,
    /// Acquires with no answer of the store's (timed out, the connection lost, an error).
    pub unanswered: u64,
    /// The most holders working at once, and how many the promise allows (N, and N more per
    /// loss of Redis's data).
    pub most_at_once: u64,
    pub allowed_at_once: u64,
    /// Refusals with fewer than N slots possibly held: capacity lost.
    pub unexplained_refusals: u64,
    /// Calls the script answered with an error.
    pub script_errors: u64,
}

/// One scenario of a service subject, as it ran in real time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ServiceRun {
    /// The scenario (`race`, `trickle`, `redis-down`...).
    pub scenario: String,
    /// What it did, in words.
    pub description: String,
    /// Requests sent, and how they were answered.
    pub requests: u64,
    pub admitted: u64,
    pub denied: u64,
    /// Answers a failure policy gave (marked degraded).
    pub degraded: u64,
    /// Requests with no answer the subject file explains.
    pub unanswered: u64,
    /// The most admitted in one window or interval, and what the promise allows there.
    pub worst_admitted: u64,
    pub worst_allowed: f64,
    /// The slowest answer (ms).
    pub slowest_ms: f64,
}

/// One point of a rate curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RatePoint {
    /// Offered load, a multiple of the limit.
    pub offered: f64,
    /// Delivered, a multiple of the limit.
    pub delivered: f64,
}

/// One run's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RunResult {
    pub scenario: String,
    pub description: String,
    /// What the run drove (`gcra`, `adr002`, ...).
    pub subject: String,
    /// Whether the subject is one of the library's own algorithms or rules.
    pub library: bool,
    pub policy: String,
    pub time_source: String,
    pub seed: u64,
    pub instances: u32,
    pub limit: u64,
    pub period_ms: u64,
    pub burst: u64,
    pub requests: u64,
    pub admitted: u64,
    pub oracle_admitted: u64,
    pub wrong_allow: u64,
    pub wrong_limit: u64,
    pub wrong_allow_pct: f64,
    pub wrong_limit_pct: f64,
    pub bound: Verdict,
    pub bound_detail: String,
    pub expected_finding: bool,
    /// For a subject fed its instances' clocks while they disagree: whether some reading of
    /// those clocks explains what it admitted (`held`), or none does (`broken`: a broken promise
    /// whatever the design, never only the clock trust's price); `none` otherwise.
    pub beyond_clock_trust: Verdict,
    pub beyond_clock_trust_detail: String,
    pub policy_check: Verdict,
    pub policy_detail: String,
    pub liveness: Verdict,
    pub liveness_detail: String,
    pub peak_per_period: u64,
    pub recover_ms: Option<u64>,
    pub sources: Sources,
    pub errors: u64,
    pub replay: String,
    pub trace_hash: String,
    pub series: Option<Series>,
    pub redis: Option<RedisCost>,
    pub faults: Vec<FaultWindow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<RulesResult>,
    pub mode: String,
    pub round_trips: u64,
    pub mode_check: Verdict,
    pub mode_detail: String,
    pub under_admitted: u64,
    pub lease_unspent: u64,
    /// Calls the limiter gave up on (a timeout) that Redis ran anyway, later: a sent command
    /// cannot be withdrawn, so each such call is counted by Redis although the failure policy
    /// answered it. Counted where every decision is one script run (None elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_executions: Option<u64>,
    /// For an in-flight limit (`in-flight-*` scenarios): slots held over time against its
    /// limit. Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<SlotsHeld>,
    /// For costs known after the work (the post-hoc scenario): what was used, charged and
    /// forgiven. Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charges: Option<Charges>,
}

impl RunResult {
    /// Calls sent to Redis per decision (0 without decisions).
    pub fn round_trips_per_decision(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.round_trips as f64 / self.requests as f64
        }
    }
}

/// A run that enforced several rules per request: the request as a whole and each rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RulesResult {
    /// `held` or `broken`: no request consumed from one rule while another denied it, and no
    /// admitted request went unpaid.
    pub all_or_nothing: Verdict,
    /// Requests that broke it.
    pub split_requests: u64,
    /// The first such request, or what held.
    pub all_or_nothing_detail: String,
    /// Each rule's own bound, in rule order.
    pub rules: Vec<RuleBound>,
}

/// One rule of a multi-rule run, held to its own algorithm's promise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RuleBound {
    pub name: String,
    pub algorithm: String,
    pub limit: u64,
    pub period_ms: u64,
    pub burst: u64,
    /// Units consumed from the rule (decided by Redis).
    pub consumed: u64,
    pub bound: Verdict,
    pub bound_detail: String,
}

/// Decisions by source.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq, Eq)]
#[serde(default)]
pub struct Sources {
    pub store: u64,
    pub fail_open: u64,
    pub fail_closed: u64,
    pub local_budget: u64,
    /// Decided from a lease, locally.
    pub lease: u64,
    /// Denied by the denial cache, locally.
    pub denial_cache: u64,
}

/// Admissions over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Series {
    pub bucket_ms: u64,
    pub admitted: Vec<u64>,
    pub oracle_admitted: Vec<u64>,
    /// What the quota allows per bucket over all keys of the run (rate x bucket x keys).
    pub limit_per_bucket: f64,
}

/// Slots of an in-flight limit held over time: the most holders working at once in each
/// bucket, where at most `limit` may (plus `limit` per loss of Redis's data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SlotsHeld {
    pub bucket_ms: u64,
    pub per_bucket: Vec<u32>,
    pub limit: u64,
    /// How long a dead holder's slot may stay taken (ms).
    pub lease_ms: u64,
}

/// Costs known after the work: units used by the requests admitted, and how the units
/// charged for them compare with the promise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Charges {
    /// The real cost of the requests admitted.
    pub used: u64,
    /// Units of it a cap forgave (reported by the limiter, never hidden).
    pub uncharged: u64,
    /// The most units charged in one span over what the promise for twice the capacity
    /// allows there: above 1 where `bound` is broken.
    pub worst_ratio: f64,
}

/// What the run cost Redis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RedisCost {
    pub commands: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub keys: u64,
    pub memory_bytes: u64,
    /// Calls the clients sent (commands scripts ran inside Redis are not calls).
    pub round_trips: u64,
    /// Scripts Redis ran (EVAL and EVALSHA that found their script).
    pub scripts_run: u64,
    /// Keys Redis removed because their TTL ran out (`INFO`'s `expired_keys`): each is a
    /// state a later request finds gone and starts afresh.
    pub expired_keys: u64,
    /// Keys left with no TTL at the end of the run: they never expire (a counter whose
    /// EXPIRE was lost stays limited forever).
    pub keys_without_ttl: u64,
    /// Up to ten of their names.
    pub keys_without_ttl_sample: Vec<String>,
}

impl RedisCost {
    /// Only the keys left without a TTL: their count and up to ten names.
    pub fn without_ttl(mut names: Vec<String>) -> RedisCost {
        let keys_without_ttl = names.len() as u64;
        names.truncate(10);
        RedisCost { keys_without_ttl, keys_without_ttl_sample: names, ..RedisCost::default() }
    }
}

/// One fault in the schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct FaultWindow {
    pub kind: String,
    pub at_ms: u64,
    pub until_ms: u64,
}

/// One point of the GET+SET race sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RacePoint {
    pub subject: String,
    pub instances: u64,
    /// Redis's round trip (ms): twice the one-way latency of each message.
    pub latency_ms: f64,
    /// What the exact oracle admits of the same requests (the chart's 1).
    pub limit: u64,
    pub admitted: u64,
    pub requests: u64,
    pub seed: u64,
}

/// One point of the clock-skew sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SkewPoint {
    pub subject: String,
    pub time_source: String,
    pub skew_ms: i64,
    pub admitted: u64,
    pub bound: u64,
    pub seed: u64,
}

/// What one check came to. Serialised as the word the results file, the tables and the report
/// show (`held`, `broken`, ...), so a results file reads the same as the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Verdict {
    /// The check held.
    #[serde(rename = "held")]
    Held,
    /// The check broke.
    #[serde(rename = "broken")]
    Broken,
    /// Nothing to check: no promise applies.
    #[default]
    #[serde(rename = "none")]
    None,
    /// A verified subject's check that broke by the subject's design, shown with its evidence
    /// but no broken promise (the price of trusting the callers' clocks).
    #[serde(rename = "expected")]
    Expected,
    /// A verified subject's check that could not be judged (its script needs a command the
    /// Redis model does not have): neither held nor broken.
    #[serde(rename = "not judged")]
    NotJudged,
    /// A verified subject's check that has nothing to judge (no scenario cut it off from
    /// Redis).
    #[serde(rename = "n/a")]
    NotApplicable,
}

impl Verdict {
    /// The word for it, as the results file spells it.
    pub const fn word(self) -> &'static str {
        match self {
            Verdict::Held => "held",
            Verdict::Broken => "broken",
            Verdict::None => "none",
            Verdict::Expected => "expected",
            Verdict::NotJudged => "not judged",
            Verdict::NotApplicable => "n/a",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.word())
    }
}
