//! The service verifier: `ratelimit-lab verify SERVICE.toml` judges any limiter that answers
//! over HTTP or Envoy's rate limit service (RLS), not only a Lua script.
//!
//! The verifier starts the subject itself, as its service file says ([`file`](mod@file)): a private
//! `redis-server`, one fault proxy per instance, and the instances, each in a process group of
//! its own ([`fleet`]). It drives them in real time through [`scenario::ALL`] (instances racing
//! on one key, a window boundary, a trickle under the rate, a load over it, one instance cut off
//! from Redis, Redis paused and Redis down), recording for each request the instant it left and
//! the instant its answer arrived ([`ask`]). The checks ([`judge`]) place each decision anywhere
//! in that interval, so a promise is broken only where nothing the service could have done in
//! that time explains what it admitted. A break's scenario is driven again
//! ([`Options::redrives`]): real time is not seeded, so the verdict says how many re-drives
//! reproduced it, and prints the command that drives that scenario alone.
//!
//! Everything started is stopped when the verification ends, fails, panics or is interrupted
//! ([`verify_blocking`] stops on SIGINT and SIGTERM).

#![forbid(unsafe_code)]

pub mod answer;
pub mod ask;
pub mod file;
pub mod fleet;
pub mod judge;
pub mod scenario;
pub mod template;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use results::{Profile, RatePoint, ServiceRun, SubjectReport, Verdict, VerdictLine};
use sim_real::clock::wall_us;

pub use file::{is_service_file, ServiceFile};

use crate::fleet::Fleet;
use crate::judge::{Check, Finding};
use crate::scenario::{Load, Run, Scenario};

/// How a verification runs.
pub struct Options {
    /// The scenarios to drive (default: all of them).
    pub scenarios: Vec<Scenario>,
    /// How many times a broken scenario is driven again.
    pub redrives: usize,
    /// Told each step as it starts (the command line prints it).
    pub progress: Box<dyn Fn(&str) + Send + Sync>,
}

impl Default for Options {
    fn default() -> Options {
        Options { scenarios: scenario::ALL.to_vec(), redrives: 2, progress: Box::new(|_| {}) }
    }
}

/// A verification's outcome.
#[derive(Debug)]
pub struct Verified {
    /// The verdicts and the profile.
    pub report: SubjectReport,
    /// The processes it started (instances) and the ports it used (instances, proxies,
    /// Redis), all stopped and closed by now: for the tests that check nothing is left.
    pub pids: Vec<u32>,
    pub ports: Vec<u16>,
}

/// The fleets of one verification: one for the scenarios on true clocks, one for the skewed
/// clocks (started when a skewed scenario first runs), and everything they started.
struct Fleets {
    plain: Option<Fleet>,
    skewed: Option<Fleet>,
    pids: Vec<u32>,
    ports: Vec<u16>,
}

impl Fleets {
    /// The fleet `s` runs on, started if it is not yet.
    async fn of(&mut self, file: &ServiceFile, s: &Scenario, say: &(dyn Fn(&str) + Send + Sync)) -> Result<&mut Fleet> {
        let offsets = scenario::offsets(s, file.start.instances);
        let slot = if offsets.is_empty() { &mut self.plain } else { &mut self.skewed };
        if slot.is_none() {
            let clocks = if offsets.is_empty() { String::new() } else { format!(", clocks off by {offsets:?} ms") };
            say(&format!(
                "starting {} instance(s) of {:?} beside a private redis-server{clocks}",
                file.start.instances, file.name
            ));
            let fleet = Fleet::start(file, &offsets).await?;
            self.pids.extend(fleet.pids());
            self.ports.extend(fleet.instances.iter().map(|i| i.port));
            self.ports.extend(fleet.proxies.iter().map(|p| p.addr().port()));
            self.ports.push(fleet.redis.port());
            *slot = Some(fleet);
        }
        Ok(slot.as_mut().expect("started above"))
    }
}

/// Verifies `file`'s service. Must be called inside a multi-threaded tokio runtime.
pub async fn verify(file: Arc<ServiceFile>, options: &Options) -> Result<Verified> {
    let say = &*options.progress;
    let mut fleets = Fleets { plain: None, skewed: None, pids: Vec::new(), ports: Vec::new() };
    // Keys of their own per verification, scenario and re-drive.
    let tag = format!("v{}", wall_us() % 1_000_000_000);

    let mut runs = Vec::new();
    for s in &options.scenarios {
        if s.skew_ms > 0 && file.start.instances < 2 {
            say(&format!("scenario {}: skipped, one instance has no other clock to disagree with", s.name));
            continue;
        }
        let fleet = fleets.of(&file, s, say).await?;
        say(&format!("scenario {}: {}", s.name, s.description));
        let run = scenario::drive(s, &file, fleet, &format!("{tag}-{}", s.name)).await?;
        settle(&run).await;
        runs.push(run);
    }

    let mut verdicts = Vec::new();
    for check in Check::ALL {
        let findings: Vec<(&Run, Finding)> =
            runs.iter().filter_map(|r| judge::judge(&file, r, check).map(|f| (r, f))).collect();
        let Some(line) = verdict(&file, check, &findings, &runs) else { continue };
        let line = match findings.iter().find(|(_, f)| f.verdict == Verdict::Broken) {
            Some((run, _)) => {
                let fleet = fleets.of(&file, &run.scenario, say).await?;
                redrive(&file, check, run.scenario, line, fleet, &tag, options).await?
            }
            None => line,
        };
        verdicts.push(line);
    }
    let (keys_without_ttl, keys_without_ttl_sample) = fleets.plain.as_ref().map(keys_without_ttl).unwrap_or_default();
    let Fleets { pids, ports, .. } = fleets;
    let report = SubjectReport {
        name: file.name.clone(),
        file: file.path.display().to_string(),
        promise: file.promise.to_string(),
        time: match file.start.clock {
            file::Clock::Redis => "redis",
            file::Clock::Service => "service",
        }
        .to_owned(),
        tolerance: file.tolerance.describe(),
        quota: format!("{} per {} ms, burst {}", file.quota.limit(), file.quota.period_ms(), file.quota.burst()),
        verdicts,
        profile: Profile { keys_without_ttl, keys_without_ttl_sample, ..profile(&file, &runs) },
    };
    Ok(Verified { report, pids, ports })
}

/// After a fault, time for the instances to find Redis again (breakers close, connections
/// reopen) before the next scenario.
async fn settle(run: &Run) {
    if run.scenario.fault.is_some() {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// One check's verdict over every run it applies to; None when it applies to none.
fn verdict(file: &ServiceFile, check: Check, findings: &[(&Run, Finding)], runs: &[Run]) -> Option<VerdictLine> {
    let requests: usize = runs.iter().map(|r| r.answers.len()).sum();
    let rests_on = format!("{} run(s), {requests} requests", runs.len());
    if let Some((run, f)) = findings.iter().find(|(_, f)| f.verdict == Verdict::Broken) {
        return Some(VerdictLine {
            check: check.name().to_owned(),
            verdict: Verdict::Broken,
            detail: format!("{}: {}", run.scenario.name, f.detail),
            evidence: f.evidence.clone(),
            witness: f.witness.clone(),
            replay: format!(
                "{} {} --service-scenario {}",
                results::command::command("verify"),
                file.path.display(),
                run.scenario.name
            ),
        });
    }
    let held: Vec<&(&Run, Finding)> = findings.iter().filter(|(_, f)| f.verdict == Verdict::Held).collect();
    let (verdict, detail) = match (held.as_slice(), findings.first()) {
        (_, None) => return None,
        ([], Some((run, f))) => (f.verdict, format!("{}: {}", run.scenario.name, f.detail)),
        (held, _) if check == Check::Bound => {
            // The closest any run came.
            let closest = held
                .iter()
                .filter_map(|(r, f)| judge::worst(file, r).map(|w| (w.ratio(), r.scenario.name, &f.detail)))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let said = closest.map_or(String::new(), |(_, name, d)| format!("closest: {name}: {d}"));
            (Verdict::Held, said)
        }
        (held, _) => {
            let said: Vec<String> = held.iter().map(|(r, f)| format!("{}: {}", r.scenario.name, f.detail)).collect();
            (Verdict::Held, said.join("; "))
        }
    };
    Some(VerdictLine {
        check: check.name().to_owned(),
        verdict,
        detail: format!("{detail} ({rests_on})"),
        evidence: String::new(),
        replay: String::new(),
        witness: None,
    })
}

/// Drives the broken scenario again `options.redrives` times and says how many broke `check`
/// again.
async fn redrive(
    file: &Arc<ServiceFile>,
    check: Check,
    s: Scenario,
    mut line: VerdictLine,
    fleet: &mut Fleet,
    tag: &str,
    options: &Options,
) -> Result<VerdictLine> {
    let mut again = 0;
    for k in 0..options.redrives {
        (options.progress)(&format!(
            "re-driving {} ({} of {}): {} broke",
            s.name,
            k + 1,
            options.redrives,
            check.name()
        ));
        let run = scenario::drive(&s, file, fleet, &format!("{tag}-{}-redrive-{check:?}-{k}", s.name)).await?;
        settle(&run).await;
        if judge::judge(file, &run, check).is_some_and(|f| f.verdict == Verdict::Broken) {
            again += 1;
        }
    }
    line.detail = format!("{}; reproduced by {again} of {} re-drive(s)", line.detail, options.redrives);
    Ok(line)
}

/// What the runs show the service to be.
fn profile(file: &ServiceFile, runs: &[Run]) -> Profile {
    let capacity = scenario::capacity(file);
    let rate_per_ms = file.quota.limit() as f64 / file.quota.period_ms() as f64;
    let mut p = Profile { burst_bound: capacity, ..Profile::default() };
    for run in runs {
        let admitted = run.answers.iter().filter(|a| a.admitted()).count() as u64;
        let worst = judge::worst(file, run);
        match run.scenario.load {
            Load::Race => {
                // The most admitted in one window or interval: a request the subject queued
                // past a boundary was not part of the burst.
                p.largest_burst = worst.as_ref().map_or(admitted, |w| w.admitted);
                p.race_ratio = worst.as_ref().map(|w| w.ratio());
            }
            Load::Steady { .. } if run.fault.is_none() && run.skew_ms.is_empty() && run.answers.len() > 1 => {
                let span_ms = (run.answers.last().map_or(0, |a| a.sent_us) - run.answers[0].sent_us) as f64 / 1000.0;
                let offered = run.answers.len() as f64 / (span_ms.max(1.0) * rate_per_ms);
                let delivered = admitted as f64 / (span_ms.max(1.0) * rate_per_ms);
                p.rate_curve.push(RatePoint { offered: (offered * 10.0).round() / 10.0, delivered });
                if run.scenario.name == "over" {
                    p.longest_starvation_ms = longest_gap_ms(run);
                }
            }
            _ => {}
        }
        p.service_runs.push(ServiceRun {
            scenario: run.scenario.name.to_owned(),
            description: run.scenario.description.to_owned(),
            requests: run.answers.len() as u64,
            admitted,
            denied: run.answers.iter().filter(|a| a.said == ask::Said::Denied).count() as u64,
            degraded: run.answers.iter().filter(|a| a.degraded).count() as u64,
            unanswered: run.answers.iter().filter(|a| matches!(a.said, ask::Said::Error(_))).count() as u64,
            worst_admitted: worst.as_ref().map_or(0, |w| w.admitted),
            worst_allowed: worst.as_ref().map_or(0.0, |w| w.allowed),
            slowest_ms: run.answers.iter().map(|a| (a.answered_us - a.sent_us) as f64 / 1000.0).fold(0.0, f64::max),
        });
    }
    p
}

/// The longest stretch without an admission, from the run's first request to its last.
fn longest_gap_ms(run: &Run) -> u64 {
    let Some(first) = run.answers.first() else { return 0 };
    let mut last = first.sent_us;
    let mut gap = 0;
    for a in run.answers.iter().filter(|a| a.admitted()) {
        gap = gap.max(a.sent_us.saturating_sub(last));
        last = a.sent_us;
    }
    let end = run.answers.last().map_or(last, |a| a.sent_us);
    gap.max(end.saturating_sub(last)) / 1000
}

/// The keys the service left in Redis with no TTL: counted, and up to ten named.
fn keys_without_ttl(fleet: &Fleet) -> (u64, Vec<String>) {
    let Ok(mut conn) = fleet.redis.client() else { return (0, Vec::new()) };
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap_or_default();
    let mut without = Vec::new();
    for key in keys {
        if redis::cmd("TTL").arg(&key).query::<i64>(&mut conn) == Ok(-1) {
            without.push(key);
        }
    }
    let n = without.len() as u64;
    without.truncate(10);
    (n, without)
}

/// Verifies `file` on a runtime of its own, stopping everything it started on SIGINT or
/// SIGTERM (the verification's future is dropped, and its fleet with it) with an error saying
/// so.
pub fn verify_blocking(file: Arc<ServiceFile>, options: &Options) -> Result<Verified> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let interrupted = async {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{signal, SignalKind};
                let mut term = signal(SignalKind::terminate())?;
                tokio::select! {
                    r = tokio::signal::ctrl_c() => r.map(|_| "SIGINT"),
                    _ = term.recv() => Ok("SIGTERM"),
                }
            }
            #[cfg(not(unix))]
            {
                tokio::signal::ctrl_c().await.map(|_| "Ctrl-C")
            }
        };
        tokio::select! {
            done = verify(file, options) => done,
            signal = interrupted => {
                let signal = signal?;
                bail!("interrupted by {signal}: every process the verification started is stopped")
            }
        }
    })
}
