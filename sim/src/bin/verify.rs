//! `verify`: the engine behind `cargo xtask verify SUBJECT.toml...`. See `sim::verify`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

// Small, short-lived allocations dominate a simulation; mimalloc serves them faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{bail, Context, Result};
use clap::Parser;
use limiter::{Algorithm, Quota};

use results::{Results, RunResult, SCHEMA};
use sim::real;
use sim::run::{self, Executor};
use sim::scenario::{self, RunSpec};
use sim::subject::{Subject, SubjectFile};
use sim::verify::checks::{CheckKind, Held};
use sim::verify::schedule::{Ran, Schedule};
use sim::verify::{self, calibrate, profile, search, verdicts};

/// Verifies rate-limiter scripts described by subject files: each promise judged under
/// generated schedules at exact times and under the scenario catalogue (instances racing,
/// skewed clocks, partitions, outages, restarts), with a profile of what the script is.
/// Exits 1 when a promise is broken, 2 when a file or an option is wrong.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask verify", version, about)]
struct Args {
    /// Subject files (TOML, beside their scripts).
    #[arg(required = true, value_name = "SUBJECT.toml")]
    files: Vec<PathBuf>,
    /// Run the scenarios on `model` (in process, deterministic) or on real `redis` servers.
    #[arg(long, default_value = "model", value_parser = ["model", "redis"])]
    backend: String,
    /// With --backend redis: an existing server instead of private ones.
    #[arg(long, value_name = "URL")]
    redis_url: Option<String>,
    /// Only these scenarios (repeatable; default: the whole catalogue).
    #[arg(long = "scenario", value_name = "NAME", value_parser = scenario_name)]
    scenarios: Vec<String>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds per scenario, from --seed on.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    seeds: u64,
    /// Simulated length of each scenario run: 12s, 500ms, or ms.
    #[arg(long, value_parser = duration_ms)]
    duration: Option<u64>,
    /// Threads running scenarios.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=256))]
    threads: u64,
    /// Generated schedules per check and quota in the search.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    cases: u32,
    /// Skip the race and clock-skew sweeps.
    #[arg(long)]
    no_sweeps: bool,
    /// The quota to drive the subject with, as LIMIT/PERIOD_MS/BURST (replays).
    #[arg(long, value_name = "L/T/B", value_parser = quota)]
    quota: Option<Quota>,
    /// Replay one schedule at exact times instead of verifying: `0:1 0:1 250:2 lose-data@400`.
    #[arg(long, value_name = "SCHEDULE", value_parser = Schedule::parse)]
    replay: Option<Schedule>,
    /// Where the results JSON goes (default OUT/results.json).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Where the results and the report go.
    #[arg(long, value_name = "DIR", default_value = "target/verify")]
    out: PathBuf,
}

fn scenario_name(name: &str) -> Result<String, String> {
    match scenario::find(name) {
        Some(_) => Ok(name.to_owned()),
        None => {
            let names: Vec<&str> = scenario::catalogue().iter().map(|s| s.name).collect();
            Err(format!("unknown scenario {name:?}; expected one of {}", names.join(", ")))
        }
    }
}

fn duration_ms(text: &str) -> Result<u64, String> {
    sim::cli::duration_ms(text).map_err(|e| e.to_string())
}

fn quota(text: &str) -> Result<Quota, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let number = |s: &str| s.parse::<u64>().map_err(|_| format!("{s:?} in {text:?} is not a whole number"));
    let q = match parts.as_slice() {
        [l, t] => Quota::new(number(l)?, number(t)?),
        [l, t, b] => Quota::new(number(l)?, number(t)?).with_burst(number(b)?),
        _ => return Err(format!("{text:?}: expected LIMIT/PERIOD_MS or LIMIT/PERIOD_MS/BURST")),
    };
    q.validate(Algorithm::FixedWindow).map_err(|e| format!("{text:?}: {e}"))?;
    Ok(q)
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match verify_all(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Loads every file; every mistake in any of them is reported before anything runs.
fn load(files: &[PathBuf]) -> Result<Vec<SubjectFile>> {
    let mut loaded = Vec::new();
    let mut problems = Vec::new();
    for path in files {
        match SubjectFile::load(path).and_then(sim::verify::preflight) {
            Ok(f) => loaded.push(f),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\nerror: "));
    }
    let mut names: Vec<&str> = loaded.iter().map(|f| f.name.as_str()).collect();
    names.sort();
    if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!("two subject files are named {:?}: give each its own `name`", twice[0]);
    }
    Ok(loaded)
}

fn verify_all(args: &Args) -> Result<bool> {
    let files = load(&args.files)?;
    if let Some(schedule) = &args.replay {
        let [file] = files.as_slice() else { bail!("--replay replays one subject file, got {}", files.len()) };
        return Ok(replay(file, args.quota, schedule));
    }
    let subjects: Vec<Arc<SubjectFile>> = files.iter().map(verify::calibrated).collect();
    let backend_args = match (&args.backend[..], &args.redis_url) {
        ("redis", Some(url)) => format!(" --backend redis --redis-url {url}"),
        ("redis", None) => " --backend redis".to_owned(),
        _ => String::new(),
    };
    let execute: Box<Executor> = match (&args.backend[..], args.redis_url.clone()) {
        ("model", None) => Box::new(sim::cluster::run),
        ("redis", Some(url)) => Box::new(move |spec: &RunSpec| real::execute_at(&url, spec)),
        ("redis", None) => Box::new(real::execute),
        _ => bail!("--redis-url only makes sense with --backend redis"),
    };
    let duration_ms = args.duration.unwrap_or(if args.backend == "model" { 12_000 } else { real::DEFAULT_DURATION_MS });

    // The subjects beside the library's algorithms their promises name.
    let mut everyone: Vec<Subject> = subjects.iter().map(|f| Subject::Script(f.clone())).collect();
    for f in &subjects {
        if let Some(a) = verify::beside(f.promise) {
            if !everyone.contains(&Subject::Algorithm(a)) {
                everyone.push(Subject::Algorithm(a));
            }
        }
    }
    let seeds: Vec<u64> = (args.seed..args.seed.saturating_add(args.seeds)).collect();
    let specs: Vec<RunSpec> = scenario::catalogue()
        .iter()
        .filter(|s| args.scenarios.is_empty() || args.scenarios.iter().any(|n| n == s.name))
        .flat_map(|s| s.runs(&everyone, &seeds, None, duration_ms))
        .collect();
    println!(
        "verify: {} subject(s), {} scenario runs ({} ms each, on {}), {} schedules per check and quota",
        subjects.len(),
        specs.len(),
        duration_ms,
        args.backend,
        args.cases
    );
    let threads = args.threads as usize;
    let mut results = run::run_many_with(&specs, threads, &|| {}, &*execute)?;
    for r in &mut results {
        r.replay.push_str(&backend_args);
    }
    let (mut swept, mut race_sweep, mut skew_sweep) = (Vec::new(), Vec::new(), Vec::new());
    if !args.no_sweeps && args.scenarios.is_empty() {
        let race = run::race_sweep_specs(&everyone, seeds[0], duration_ms.min(6_000));
        let skew = run::skew_sweep_specs(&everyone, seeds[0], duration_ms.min(6_000));
        let all: Vec<RunSpec> =
            race.iter().map(|(s, _)| s.clone()).chain(skew.iter().map(|(s, _)| s.clone())).collect();
        let ran = run::run_many_with(&all, threads, &|| {}, &*execute)?;
        let (r, k) = ran.split_at(race.len());
        race_sweep = run::race_points(&race, r);
        skew_sweep = run::skew_points(&skew, k);
        swept = r
            .iter()
            .cloned()
            .map(|x| (x, None))
            .chain(k.iter().cloned().zip(skew.iter().map(|(_, s)| Some(*s))))
            .collect::<Vec<(RunResult, Option<i64>)>>();
    }

    let mut reports = Vec::new();
    for file in &subjects {
        let quota = verify::catalogue_quota(file);
        let searched = searches(file, args.cases, args.seed);
        let measured = profile::measure(file, file.promise, quota);
        let runs: Vec<&RunResult> = results.iter().filter(|r| r.algorithm == file.name).collect();
        let mine: Vec<(&RunResult, Option<i64>)> =
            swept.iter().filter(|(r, _)| r.algorithm == file.name).map(|(r, s)| (r, *s)).collect();
        let evidence = verdicts::Evidence {
            file,
            quota,
            searched: &searched,
            runs: &runs,
            swept: &mine,
            measured: &measured,
            verify_command: format!("cargo xtask verify {}{backend_args}", file.path.display()),
        };
        reports.push(verdicts::report(&evidence));
    }

    print!("{}", results::table::render(&results));
    for r in &reports {
        print!("{}", verdicts::render(r));
    }
    let held = reports.iter().all(|r| r.verdicts.iter().all(|v| v.verdict != "broken"));

    let out = Results {
        schema: SCHEMA.to_owned(),
        command: format!("cargo xtask verify {}", std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
        backend: args.backend.clone(),
        seeds,
        duration_ms,
        results,
        race_sweep,
        skew_sweep,
        verify: reports,
    };
    let json_path = args.json.clone().unwrap_or_else(|| args.out.join("results.json"));
    if let Some(dir) = json_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&out)?)
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    println!("\nresults: {}", json_path.display());
    Ok(held)
}

/// Every applicable check, searched on every quota.
fn searches(file: &Arc<SubjectFile>, cases: u32, seed: u64) -> Vec<verdicts::Searched> {
    let quotas = verify::search_quotas(file);
    let mut out = Vec::new();
    for check in CheckKind::ALL {
        if !check.applies(file.promise, file.reply.retry_after.is_some()) {
            continue;
        }
        // Exact clocks first; for a subject fed its caller's clock, then instances whose
        // clocks disagree, where the bound and the capacity are at stake.
        let skew_too = file.client_time() && check == CheckKind::Bound;
        let found = quotas
            .iter()
            .map(|&q| {
                let held =
                    Held { promise: file.promise, quota: q, tolerance: calibrate::tolerance(file, file.promise, q) };
                let exact = search::search(file, &held, check, cases, seed, false);
                let found =
                    exact.or_else(|| skew_too.then(|| search::search(file, &held, check, cases, seed, true)).flatten());
                (q, found)
            })
            .collect();
        out.push(verdicts::Searched { check, cases, found });
    }
    out
}

/// Replays one schedule and prints it with every check's result.
fn replay(file: &SubjectFile, quota: Option<Quota>, schedule: &Schedule) -> bool {
    let file = Arc::new(file.clone());
    let quota = quota.unwrap_or_else(|| verify::catalogue_quota(&file));
    let held = Held { promise: file.promise, quota, tolerance: calibrate::tolerance(&file, file.promise, quota) };
    let ran = Ran::new(&mut sim::verify::direct::Direct::new(file.clone(), quota), schedule);
    println!(
        "{} ({}), quota {}/{}/{}:",
        file.name,
        file.path.display(),
        quota.limit(),
        quota.period_ms(),
        quota.burst()
    );
    let mut ok = true;
    let mut mark = (usize::MAX, String::new());
    for check in CheckKind::ALL {
        if !check.applies(file.promise, file.reply.retry_after.is_some()) {
            continue;
        }
        match search::judge(&file, &held, check, schedule) {
            Some((v, _)) => {
                ok = false;
                println!("  {:<24} BROKEN  {}", check.name(), v.message);
                if mark.0 == usize::MAX {
                    mark = (v.at, check.name().to_owned());
                }
            }
            None => println!("  {:<24} held", check.name()),
        }
    }
    print!("{}", ran.table(mark.0, &mark.1));
    ok
}
