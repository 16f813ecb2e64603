//! What every command that runs the scenario catalogue does with its [`RunArgs`]
//! (`simulate`, `verify`): pick the executor for the backend, expand the scenarios into runs
//! for the subjects, run them (and the race and skew sweeps) with progress bars, check
//! determinism when asked, and write the results JSON and the report.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Backend, RunArgs};
use results::Results;
use sim_engine::run::{self, Executor};
use sim_engine::scenario::{self, RunSpec};
use sim_engine::subject::Subject;

/// What a campaign ran (defined beside the runs, so the verifier reads it without this crate).
pub use sim_engine::run::Campaign;

fn progress(total: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} runs, {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

/// How a run is executed for `--backend` (model, redis, valkey or redis-cluster; the mini-redis
/// backend is the simulator's own case).
pub fn executor(o: &RunArgs) -> Result<Box<Executor>> {
    if o.check_determinism && o.backend != Backend::Model {
        bail!(
            "--check-determinism needs --backend model: the {} backend runs in real time against a real server, \
             so two runs of one seed are never byte-identical",
            o.backend.name()
        );
    }
    Ok(match (o.backend, o.redis_url.clone()) {
        (Backend::Model, _) => Box::new(sim_engine::turmoil_run::run),
        (Backend::Redis, Some(url)) => Box::new(move |spec: &RunSpec| sim_real::execute_at(&url, spec)),
        (Backend::Redis, None) => {
            let module = o.module.clone();
            Box::new(move |spec: &RunSpec| sim_real::execute_loading(module.as_deref(), spec))
        }
        (Backend::Valkey, _) => {
            let module = o.module.clone();
            Box::new(move |spec: &RunSpec| sim_real::execute_on(sim_real::RealServer::Valkey, module.as_deref(), spec))
        }
        (Backend::RedisCluster, _) => Box::new(sim_real::execute_cluster),
        (Backend::MiniRedis, _) => Box::new(sim_real::execute_mini),
    })
}

/// The runs `o` selects for `subjects`: its scenarios, seeds, policies, instances and faults.
pub fn specs(o: &RunArgs, subjects: &[Subject]) -> Result<Vec<RunSpec>> {
    let duration_ms = o.duration_ms();
    // On a real backend without --duration, each scenario runs as long as it needs to show
    // its finding (`Scenario::real_duration_ms`).
    let shaped =
        o.duration_ms.is_none() && matches!(o.backend, Backend::Redis | Backend::Valkey | Backend::RedisCluster);
    let seeds = o.seed_list();
    let specs: Vec<RunSpec> = scenario::catalogue()
        .iter()
        .filter(|s| o.scenarios.is_empty() || o.scenarios.iter().any(|n| n == s.name))
        .flat_map(|s| {
            let duration_ms = if shaped { s.real_duration_ms(duration_ms) } else { duration_ms };
            s.runs(subjects, &seeds, o.instances, duration_ms)
        })
        .filter(|s| o.policies.is_empty() || o.policies.iter().any(|p| p == s.policy.name()))
        .filter(|s| o.modes.is_empty() || o.modes.iter().any(|m| m == s.mode.name()))
        .collect();
    if specs.is_empty() {
        bail!("nothing to run: no scenario runs the selected policy and mode for the selected algorithms");
    }
    // A shard keeps every N-th run of the whole selection: deterministic, and the shards'
    // results interleave back into the unsharded order (`results::merge`).
    let mut specs: Vec<RunSpec> =
        specs.into_iter().enumerate().filter(|(i, _)| o.in_shard(*i)).map(|(_, s)| s).collect();
    if specs.is_empty() {
        bail!("shard {} has no runs: the selection has fewer runs than shards", o.shard_name());
    }
    let overrides = o.overrides();
    if let Some(source) = overrides.time_source {
        // A scenario that runs both time sources keeps the runs of the one named; one that
        // runs another is given it.
        specs.retain(|s| {
            s.time_source == source
                || !scenario::find(s.scenario).is_some_and(|sc| sc.time_sources.contains(&source))
                || !s.subject.has_time_source_choice()
        });
    }
    if overrides != scenario::Overrides::default() {
        for spec in &mut specs {
            overrides.apply(spec);
        }
    }
    if let Some(faults) = &o.faults {
        if let Some(f) = faults.iter().find(|f| f.kind.instance().is_some_and(|i| i >= specs[0].instances)) {
            bail!("--faults: {f} names an instance the run does not have ({} instances)", specs[0].instances);
        }
        for spec in &mut specs {
            spec.faults = sim_engine::faults::normalize(faults.clone());
        }
    }
    Ok(if o.redis_url.is_some() { without_process_faults(specs) } else { specs })
}

/// With `--redis-url` the harness cannot crash or pause the server: those faults are dropped
/// from the specs (so the judge does not expect them either), and the run says so.
fn without_process_faults(specs: Vec<RunSpec>) -> Vec<RunSpec> {
    let mut skipped = std::collections::BTreeMap::<&str, usize>::new();
    let specs: Vec<RunSpec> = specs
        .iter()
        .map(|spec| {
            let (kept, dropped) = sim_real::without_process_faults(spec);
            for f in dropped {
                *skipped.entry(f.kind.name()).or_default() += 1;
            }
            kept
        })
        .collect();
    if !skipped.is_empty() {
        let list: Vec<String> = skipped.iter().map(|(k, n)| format!("{n} x {k}")).collect();
        eprintln!(
            "--redis-url: skipping faults that need control of the Redis process ({}); the judge does not expect them",
            list.join(", ")
        );
    }
    specs
}

/// Runs `specs` (and the sweeps for `subjects`, when `o` asks for them and runs the whole
/// catalogue) with `execute`.
pub fn run(o: &RunArgs, subjects: &[Subject], specs: &[RunSpec], execute: &Executor) -> Result<Campaign> {
    let bar = progress(specs.len(), "scenarios");
    let mut results = run::run_many_with(specs, o.threads, &|| bar.inc(1), execute)?;
    bar.finish_and_clear();
    for r in &mut results {
        r.replay.push_str(&o.backend_args());
    }
    let mut campaign = Campaign { results, ..Campaign::default() };
    if o.check_determinism {
        let bar = progress(specs.len(), "determinism");
        let again = run::run_many_with(specs, o.threads, &|| bar.inc(1), execute)?;
        bar.finish_and_clear();
        campaign.not_deterministic = campaign
            .results
            .iter()
            .zip(&again)
            .filter(|(a, b)| a.trace_hash != b.trace_hash)
            .map(|(a, b)| (a.replay.clone(), a.trace_hash.clone(), b.trace_hash.clone()))
            .collect();
    }
    // The sweeps run once, in shard 1 (or unsharded).
    if o.sweeps && o.scenarios.is_empty() && o.shard.is_none_or(|(i, _)| i == 1) {
        let duration_ms = o.duration_ms().min(6_000);
        let seed = o.seed;
        let race = run::race_sweep_specs(subjects, seed, duration_ms);
        let skew = run::skew_sweep_specs(subjects, seed, duration_ms);
        let all: Vec<RunSpec> =
            race.iter().map(|(s, _)| s.clone()).chain(skew.iter().map(|(s, _)| s.clone())).collect();
        let bar = progress(all.len(), "sweeps");
        let mut swept = run::run_many_with(&all, o.threads, &|| bar.inc(1), execute)?;
        bar.finish_and_clear();
        for r in &mut swept {
            r.replay.push_str(&o.backend_args());
        }
        let (r, k) = swept.split_at(race.len());
        campaign.race_sweep = run::race_points(&race, r);
        campaign.skew_sweep = run::skew_points(&skew, k);
        campaign.swept = r
            .iter()
            .cloned()
            .map(|x| (x, None))
            .chain(k.iter().cloned().zip(skew.iter().map(|(_, s)| Some(*s))))
            .collect();
    }
    Ok(campaign)
}

/// Writes `results` to the JSON path `o` names and renders the report beside it (read back
/// from the file just written: exactly what `cargo xtask report` would render from it later).
pub fn write(o: &RunArgs, results: &Results) -> Result<PathBuf> {
    let json_path = o.json_path();
    if let Some(dir) = json_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(results)?;
    std::fs::write(&json_path, &text).with_context(|| format!("cannot write {}", json_path.display()))?;
    say!("\nresults: {}", json_path.display());
    let report = reports::render(&json_path, &o.out).with_context(|| {
        format!("rendering the report into {} (the results are in {})", o.out.display(), json_path.display())
    })?;
    say!("report: {} and {} chart(s)", report.index_html.display(), report.charts.len());
    if let Some(path) = &o.junit {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(path, results::junit::render(results))
            .with_context(|| format!("cannot write the JUnit file {}", path.display()))?;
        say!("junit: {}", path.display());
    }
    if o.format == crate::cli::Format::Json {
        println!("{text}");
    }
    Ok(json_path)
}
