//! The real-Redis lane: the same scenarios, RunSpecs and checkers as the model lane, run in
//! real time against real servers.
//!
//! - `--backend redis` ([`execute`]): per run, a private `redis-server` on a free loopback
//!   port ([`process`]), a 2-worker tokio runtime, N limiter instances each dialling Redis
//!   through its own fault-injecting TCP proxy ([`proxy`]) that also adds the scenario's
//!   one-way latency. Partitions, one-way partitions and holds go to the proxy of the
//!   instance; a Redis pause is SIGSTOP/SIGCONT; a crash is SIGKILL (after `SAVE` when it
//!   keeps its data) and a restart on the same port; a script flush is `SCRIPT FLUSH`; an
//!   instance crash aborts that instance's load and limiter and starts a fresh one later.
//!   With an existing server ([`execute_at`], `--redis-url`) the faults that need process
//!   control are skipped ([`without_process_faults`]).
//! - `--backend valkey` ([`execute_valkey`], [`execute_on`]): the same, on a private
//!   `valkey-server` ([`process::RealServer`]).
//! - `--backend mini-redis` ([`execute_mini`]): the `get-set-race` scenario with the naive
//!   subject only (mini-redis has GET and SET but no EVAL), against the embedded
//!   [`crate::mini`] server. Instances reach it through the same proxies, used for latency
//!   only: the scenario's 2-10 ms to Redis is what opens the GET-to-SET race window (over
//!   bare loopback it is ~0.1 ms and the naive subject over-admits by a request or two).
//!
//! Time is real: each instance's clock is the wall clock plus its scenario offset and drift
//! ([`clock`]); arrivals are issued at their times from the run's start, which is aligned to
//! a whole quota period of the wall clock so Redis's `TIME`-based windows fall where the
//! model's do. Records are made exactly as in [`sim_engine::turmoil_run`]. Runs are bound by wall
//! time (a run lasts its duration plus up to one period of alignment) and are **not
//! seed-deterministic**: the seed fixes the load, the faults and the proxies' latencies, but
//! not the scheduling.
//!
//! Faults start a little early ([`lane::LEAD_MS`], more for a crash) so they are in force
//! at their scheduled time whatever the timer and scheduling jitter: the checkers take the
//! schedule at its word. A fault that still took hold late is reported on stderr (an
//! overloaded machine: use fewer `--threads`). Faults after the end of the load still apply
//! while requests are in flight, as in the model lane's grace period.
//!
//! Known limit: a crash that keeps its data while Redis is paused (SIGSTOP) cannot save
//! first and restarts with the last snapshot.

#![forbid(unsafe_code)]

pub mod clock;
pub mod cluster_server;
pub mod lane;
pub mod mini;
pub mod process;
pub mod proxy;
pub mod redis_cluster;
mod server;

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context};

pub use process::RealServer;
use sim_engine::faults::{Fault, FaultKind};
use sim_engine::scenario::RunSpec;
use sim_engine::subject::{ClientSubject, Subject};
use sim_engine::turmoil_run::RunOutput;

/// Default run duration (ms) on a real backend when `--duration` is not given: runs take
/// wall-clock time.
pub const DEFAULT_DURATION_MS: u64 = 4_000;

/// Said in the output header of every real-lane run.
pub const NOT_DETERMINISTIC: &str = "real-Redis lane: not seed-deterministic";

/// The one scenario the mini-redis backend runs.
pub const MINI_REDIS_SCENARIO: &str = "get-set-race";

/// Runs `spec` against a private `redis-server` this run starts and stops. Usable with
/// [`sim_engine::run::run_many_with`].
pub fn execute(spec: &RunSpec) -> anyhow::Result<RunOutput> {
    execute_loading(None, spec)
}

/// As [`execute`], on a private `valkey-server` (`--backend valkey`).
pub fn execute_valkey(spec: &RunSpec) -> anyhow::Result<RunOutput> {
    execute_on(RealServer::Valkey, None, spec)
}

/// As [`execute`], the server loading the Redis module at `module` (`--loadmodule`) when given,
/// again after every restart: what a subject deciding with the module's commands runs on.
pub fn execute_loading(module: Option<&std::path::Path>, spec: &RunSpec) -> anyhow::Result<RunOutput> {
    execute_on(RealServer::Redis, module, spec)
}

/// As [`execute_loading`], on `server`'s private server (Redis or Valkey).
pub fn execute_on(server: RealServer, module: Option<&std::path::Path>, spec: &RunSpec) -> anyhow::Result<RunOutput> {
    let dir = tempfile::Builder::new().prefix("sim-redis-").tempdir().context("cannot create a data directory")?;
    let controller = server::Controller::start(server, dir.path(), module)?;
    let out = lane::run(spec, lane::Target::Private(Box::new(controller)), None);
    drop(dir);
    out
}

/// Runs `spec` against a private Redis Cluster (three primaries, one replica each) this run
/// starts and stops (`--backend redis-cluster`): each instance reaches every node through
/// its own proxy, and a failover kills the primaries and promotes their replicas (see
/// [`cluster_server`]).
pub fn execute_cluster(spec: &RunSpec) -> anyhow::Result<RunOutput> {
    let cluster = cluster_server::ClusterServer::start()?;
    lane::run(spec, lane::Target::Private(Box::new(cluster)), None)
}

/// Runs `spec` against the existing server at `url` (plain TCP, database 0, no password).
/// Faults that need process control (Redis crashes and pauses) are skipped; strip them from
/// the spec with [`without_process_faults`] before judging. The run's keys get a prefix of
/// their own (and are deleted at the end), so concurrent runs on one server do not meet.
/// The server's clock must be this machine's (loopback), as decisions are timed by it.
pub fn execute_at(url: &str, spec: &RunSpec) -> anyhow::Result<RunOutput> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let prefix = format!("sim-{}-{}", std::process::id(), RUNS.fetch_add(1, Ordering::Relaxed));
    let (spec, _) = without_process_faults(spec);
    let external = server::External::connect(url, prefix.clone())?;
    lane::run(&spec, lane::Target::External(Box::new(external)), Some(prefix))
}

/// Runs the naive subject of the `get-set-race` scenario against an embedded mini-redis,
/// with real concurrency. Anything else is refused: see [`check_mini_redis`].
pub fn execute_mini(spec: &RunSpec) -> anyhow::Result<RunOutput> {
    check_mini_redis(spec.scenario, &spec.subject)?;
    if !spec.faults.is_empty() {
        bail!("the mini-redis backend injects no faults (the spec has {})", spec.faults.len());
    }
    lane::run(spec, lane::Target::Mini, None)
}

/// Whether the fault needs control of the Redis process (so cannot run against a server
/// given by URL).
pub fn needs_process_control(kind: &FaultKind) -> bool {
    matches!(kind, FaultKind::RedisCrash { .. } | FaultKind::RedisPause | FaultKind::Failover { .. })
}

/// The spec without the faults that need process control, and those faults.
pub fn without_process_faults(spec: &RunSpec) -> (RunSpec, Vec<Fault>) {
    let mut kept = spec.clone();
    let (skipped, faults): (Vec<Fault>, Vec<Fault>) = spec.faults.iter().partition(|f| needs_process_control(&f.kind));
    kept.faults = faults;
    (kept, skipped)
}

/// Whether the mini-redis backend can run `scenario` with `subject`, with the reason if not.
pub fn check_mini_redis(scenario: &str, subject: &Subject) -> anyhow::Result<()> {
    if scenario != MINI_REDIS_SCENARIO {
        bail!(
            "--backend mini-redis runs only the {MINI_REDIS_SCENARIO} scenario, not {scenario:?}: mini-redis has \
             GET and SET but no EVAL, so only the naive GET-then-SET subject can run on it"
        );
    }
    let naive = Subject::Client(ClientSubject::NaiveGetSet);
    if *subject != naive {
        bail!(
            "--backend mini-redis runs only the {naive} subject, not {subject}: the others need EVAL or EXPIRE, \
             and mini-redis has GET and SET only"
        );
    }
    Ok(())
}
