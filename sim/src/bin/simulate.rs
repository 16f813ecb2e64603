//! `simulate`: the engine behind `cargo xtask simulate`. See `sim::cli::USAGE`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

// Small, short-lived allocations dominate a simulation; mimalloc serves them faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sim::subject::{ClientSubject, Subject};

use sim::cli::{self, Backend, Options};
use sim::real;
use sim::results::{Results, SCHEMA};
use sim::run::{self, is_failure};
use sim::scenario::{self, RunSpec};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match cli::parse(&args).and_then(|o| simulate(&o, &args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

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

/// The executor for `--backend`, with the options adjusted to it: the real backends run in
/// real time, so they default to short runs; mini-redis runs only what it can run.
fn backend(o: &Options) -> Result<(Options, Box<run::Executor>)> {
    let mut o = o.clone();
    if o.backend == Backend::Model {
        return Ok((o, Box::new(sim::cluster::run)));
    }
    if o.check_determinism {
        anyhow::bail!(
            "--check-determinism needs --backend model: the {} backend runs in real time against a real server, \
             so two runs of one seed are never byte-identical",
            o.backend.name()
        );
    }
    if !o.duration_explicit {
        o.duration_ms = real::DEFAULT_DURATION_MS;
    }
    if o.backend == Backend::MiniRedis {
        if o.scenarios.is_empty() {
            o.scenarios = vec![real::MINI_REDIS_SCENARIO.to_owned()];
        }
        if o.algorithms.is_empty() {
            o.algorithms = vec![Subject::Client(ClientSubject::NaiveGetSet)];
        }
        for scenario in &o.scenarios {
            for subject in &o.algorithms {
                real::check_mini_redis(scenario, subject)?;
            }
        }
        return Ok((o, Box::new(real::execute_mini)));
    }
    match o.redis_url.clone() {
        Some(url) => Ok((o, Box::new(move |spec: &RunSpec| real::execute_at(&url, spec)))),
        None => Ok((o, Box::new(real::execute))),
    }
}

/// With `--redis-url` the harness cannot crash or pause the server: those faults are
/// dropped from the specs (so the judge does not expect them either), and the run says so.
fn without_process_faults(specs: Vec<RunSpec>) -> Vec<RunSpec> {
    let mut skipped = std::collections::BTreeMap::<&str, usize>::new();
    let specs: Vec<RunSpec> = specs
        .iter()
        .map(|spec| {
            let (kept, dropped) = real::without_process_faults(spec);
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

/// Returns Ok(false) when a bound-promising algorithm broke its promise.
fn simulate(o: &Options, args: &[String]) -> Result<bool> {
    if o.list {
        for s in scenario::catalogue() {
            println!("{:<16} {}", s.name, s.description);
        }
        println!();
        for s in Subject::catalogue() {
            println!("{:<16} {}", s.name(), s.summary());
        }
        return Ok(true);
    }
    let (o, execute) = &backend(o)?;
    let algorithms: Vec<Subject> = if o.algorithms.is_empty() { Subject::catalogue() } else { o.algorithms.clone() };
    let scenarios: Vec<_> = scenario::catalogue()
        .into_iter()
        .filter(|s| o.scenarios.is_empty() || o.scenarios.iter().any(|n| n == s.name))
        .collect();
    let seeds: Vec<u64> = (o.seed..o.seed.saturating_add(o.seeds)).collect();
    println!(
        "simulate: seeds {}..={}, {} ms per run, {} threads",
        seeds[0],
        seeds[seeds.len() - 1],
        o.duration_ms,
        o.threads
    );
    if o.backend != Backend::Model {
        println!(
            "{} (--backend {}: runs take real time and real scheduling; the seed fixes the load and the faults)",
            real::NOT_DETERMINISTIC,
            o.backend.name()
        );
    }

    let specs: Vec<RunSpec> = scenarios
        .iter()
        .flat_map(|s| s.runs(&algorithms, &seeds, o.instances, o.duration_ms))
        .filter(|s| o.policies.is_empty() || o.policies.iter().any(|p| p == s.policy.name()))
        .collect();
    if specs.is_empty() {
        anyhow::bail!("nothing to run: no scenario runs the selected policy");
    }
    let mut specs = specs;
    if let Some(faults) = &o.faults {
        if let Some(f) = faults.iter().find(|f| f.kind.instance().is_some_and(|i| i >= specs[0].instances)) {
            anyhow::bail!("--faults: {f} names an instance the run does not have ({} instances)", specs[0].instances);
        }
        for spec in &mut specs {
            spec.faults = sim::faults::normalize(faults.clone());
        }
    }
    let specs = if o.redis_url.is_some() { without_process_faults(specs) } else { specs };
    let bar = progress(specs.len(), "scenarios");
    let mut results = run::run_many_with(&specs, o.threads, &|| bar.inc(1), &**execute)?;
    bar.finish_and_clear();
    for r in &mut results {
        r.replay.push_str(&o.backend_args());
    }

    let mut ok = true;
    if o.check_determinism {
        let bar = progress(specs.len(), "determinism");
        let again = run::run_many_with(&specs, o.threads, &|| bar.inc(1), &**execute)?;
        bar.finish_and_clear();
        let differing: Vec<_> = results.iter().zip(&again).filter(|(a, b)| a.trace_hash != b.trace_hash).collect();
        if differing.is_empty() {
            println!("determinism: {} runs replayed, every trace identical", specs.len());
        } else {
            ok = false;
            for (a, b) in &differing {
                println!("NOT DETERMINISTIC: {} (trace {} then {})", a.replay, a.trace_hash, b.trace_hash);
            }
        }
    }

    let full_catalogue = o.scenarios.is_empty();
    let (race_sweep, skew_sweep) = if o.sweeps && full_catalogue {
        let race_specs = run::race_sweep_specs(&algorithms, seeds[0], o.duration_ms.min(6_000));
        let skew_specs = run::skew_sweep_specs(&algorithms, seeds[0], o.duration_ms.min(6_000));
        let all: Vec<RunSpec> =
            race_specs.iter().map(|(s, _)| s.clone()).chain(skew_specs.iter().map(|(s, _)| s.clone())).collect();
        let bar = progress(all.len(), "sweeps");
        let swept = run::run_many_with(&all, o.threads, &|| bar.inc(1), &**execute)?;
        bar.finish_and_clear();
        let (race, skew) = swept.split_at(race_specs.len());
        (run::race_points(&race_specs, race), run::skew_points(&skew_specs, skew))
    } else {
        (Vec::new(), Vec::new())
    };

    print!("{}", sim::table::render(&results));
    let mut broken = 0;
    println!();
    for r in results
        .iter()
        .filter(|r| r.bound == "broken" || r.policy_check == "broken" || r.liveness == "broken" || r.errors > 0)
    {
        let failure = is_failure(r);
        broken += failure as usize;
        let label = if failure { "BROKEN" } else { "finding" };
        let detail = if r.bound == "broken" {
            &r.bound_detail
        } else if r.policy_check == "broken" {
            &r.policy_detail
        } else {
            &r.liveness_detail
        };
        println!(
            "{label}: {} {} {} seed {}: {detail}\n    replay: {}",
            r.scenario, r.algorithm, r.policy, r.seed, r.replay
        );
    }
    // One hash over every run's trace hash: equal output means byte-identical traces. Each
    // run's own hash is in the JSON, beside its replay command.
    let mut all = sha1_smol::Sha1::new();
    for r in &results {
        all.update(r.trace_hash.as_bytes());
    }
    println!("trace hash: {} ({} runs)", all.digest(), results.len());

    let all_results = Results {
        schema: SCHEMA.to_owned(),
        command: format!("cargo xtask simulate {}", args.join(" ")).trim_end().to_owned(),
        backend: o.backend.name().to_owned(),
        seeds: seeds.clone(),
        duration_ms: o.duration_ms,
        results,
        race_sweep,
        skew_sweep,
    };
    let json_path = o.json.clone().unwrap_or_else(|| o.out.join("results.json"));
    if let Some(dir) = json_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&all_results)?;
    std::fs::write(&json_path, text).with_context(|| format!("cannot write {}", json_path.display()))?;
    println!("\nresults: {}", json_path.display());
    if broken > 0 {
        println!("{broken} run(s) broke a promised bound: see the replay commands above");
        ok = false;
    }
    Ok(ok)
}
