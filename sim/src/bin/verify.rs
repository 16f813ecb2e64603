//! `verify`: the engine behind `cargo xtask verify SUBJECT.toml...`. See `sim::verify`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

// Small, short-lived allocations dominate a simulation; mimalloc serves them faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{bail, Result};
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};
use limiter::{Algorithm, Quota};

use results::{Results, RunResult, SCHEMA};
use sim::campaign;
use sim::cli::{Backend, RunArgs};
use sim::subject::{Subject, SubjectFile};
use sim::verify::checks::{CheckKind, Held};
use sim::verify::schedule::{Ran, Schedule};
use sim::verify::{self, calibrate, profile, search, verdicts};

/// `cargo xtask verify`: rate-limiter scripts described by subject files, each promise
/// judged under generated schedules at exact times and under the scenario catalogue.
#[derive(Debug, Parser)]
#[command(
    name = "verify",
    bin_name = "cargo xtask verify",
    about = "Verifies rate-limiter scripts described by subject files: each promise judged under generated \
             schedules at exact times (shrunk to the shortest counterexample) and under the scenario catalogue \
             (instances racing, skewed clocks, partitions, outages, restarts) beside the library's algorithms, \
             with a profile of what each script is. Prints one verdict per promise with its replay command, \
             writes the results JSON and the HTML report.",
    after_help = "Exit status: 0 when every promise held, 1 when one broke, 2 when a file or an option is wrong."
)]
struct VerifyArgs {
    /// Subject files (TOML, beside their scripts)
    #[arg(required = true, value_name = "SUBJECT.toml")]
    files: Vec<PathBuf>,
    /// Generated schedules per check and quota in the search
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    cases: u32,
    /// The quota to drive a replay with, as LIMIT/PERIOD_MS[/BURST] [default: the file's, or 20/1000/20]
    #[arg(long, value_name = "L/T/B", value_parser = quota)]
    quota: Option<Quota>,
    /// Replay one schedule at exact times instead of verifying, e.g. "0:1 0:1 250:2@+500 lose-data@400"
    #[arg(long, value_name = "SCHEDULE", value_parser = Schedule::parse)]
    replay: Option<Schedule>,
    #[command(flatten)]
    run: RunArgs,
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

/// Where verify's results and report go unless `--out` says otherwise (`simulate` writes to
/// `target/simulate`).
const OUT: &str = "target/verify";

fn parse() -> Result<VerifyArgs, clap::Error> {
    let matches = VerifyArgs::command().try_get_matches()?;
    let mut args = VerifyArgs::from_arg_matches(&matches)?;
    args.run.validate::<VerifyArgs>()?;
    if matches.value_source("out") == Some(ValueSource::DefaultValue) {
        args.run.out = PathBuf::from(OUT);
    }
    if args.run.backend == Backend::MiniRedis {
        return Err(VerifyArgs::command().error(
            ErrorKind::InvalidValue,
            "--backend mini-redis cannot run scripts (mini-redis has no EVAL): use model or redis",
        ));
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        // Help goes to stdout with status 0; a bad command line to stderr with status 2.
        Err(e) => e.exit(),
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

fn verify_all(args: &VerifyArgs) -> Result<bool> {
    let files = load(&args.files)?;
    if let Some(schedule) = &args.replay {
        let [file] = files.as_slice() else { bail!("--replay replays one subject file, got {}", files.len()) };
        return Ok(replay(file, args.quota, schedule));
    }
    let subjects: Vec<Arc<SubjectFile>> = files.iter().map(verify::calibrated).collect();
    let o = &args.run;
    let execute = campaign::executor(o)?;

    // The subjects beside the library's algorithms their promises name.
    let mut everyone: Vec<Subject> = subjects.iter().map(|f| Subject::Script(f.clone())).collect();
    for f in &subjects {
        if let Some(a) = verify::beside(f.promise) {
            if !everyone.contains(&Subject::Algorithm(a)) {
                everyone.push(Subject::Algorithm(a));
            }
        }
    }
    let specs = campaign::specs(o, &everyone)?;
    println!(
        "verify: {} subject file(s); {} scenario runs of {} ms on {}; {} schedules per check and quota",
        subjects.len(),
        specs.len(),
        o.duration_ms(),
        o.backend.name(),
        args.cases
    );
    let campaign = campaign::run(o, &everyone, &specs, &*execute)?;

    let mut reports = Vec::new();
    for file in &subjects {
        let quota = verify::catalogue_quota(file);
        let searched = searches(file, args.cases, o.seed);
        let measured = profile::measure(file, file.promise, quota);
        let runs: Vec<&RunResult> = campaign.results.iter().filter(|r| r.algorithm == file.name).collect();
        let swept: Vec<(&RunResult, Option<i64>)> =
            campaign.swept.iter().filter(|(r, _)| r.algorithm == file.name).map(|(r, s)| (r, *s)).collect();
        let evidence = verdicts::Evidence {
            file,
            quota,
            searched: &searched,
            runs: &runs,
            swept: &swept,
            measured: &measured,
            verify_command: format!("cargo xtask verify {}{}", file.path.display(), o.backend_args()),
        };
        reports.push(verdicts::report(&evidence));
    }

    print!("{}", results::table::render(&campaign.results));
    for r in &reports {
        print!("{}", verdicts::render(r));
    }
    let held = reports.iter().all(|r| r.verdicts.iter().all(|v| v.verdict != "broken"));
    let out = Results {
        schema: SCHEMA.to_owned(),
        command: format!("cargo xtask verify {}", std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
        backend: o.backend.name().to_owned(),
        seeds: o.seed_list(),
        duration_ms: o.duration_ms(),
        results: campaign.results,
        race_sweep: campaign.race_sweep,
        skew_sweep: campaign.skew_sweep,
        verify: reports,
        shard: o.shard_name(),
    };
    campaign::write(o, &out)?;
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
