//! `ratelimit-lab verify SUBJECT.toml...` (and `cargo xtask verify`). See `sim_verify`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, Parser};
use redis_ratelimit::{Algorithm, Quota};

use crate::campaign;
use crate::cli::{Backend, Format, RunArgs};
use results::{ReplayReport, Results, Verdict, VerdictLine, SCHEMA};
use sim_engine::in_flight::InFlightVariant;
use sim_engine::subject::{Subject, SubjectFile};
use sim_service as service;
use sim_verify as verify;
use sim_verify::checks::CheckKind;
use sim_verify::schedule::{Ran, Schedule};
use sim_verify::search;

/// `ratelimit-lab verify`: rate-limiter scripts described by subject files, each promise
/// judged under generated schedules at exact times and under the scenario catalogue.
#[derive(Debug, Parser)]
#[command(
    name = "verify",
    about = "Verifies rate-limiter scripts described by subject files: each promise judged under generated \
             schedules at exact times (shrunk to the shortest counterexample) and under the scenario catalogue \
             (instances racing, skewed clocks, partitions, outages, restarts) beside the library's algorithms, \
             with a profile of what each script is. Prints one verdict per promise with its replay command, \
             writes the results JSON and the HTML report.",
    after_help = "Exit status: 0 when every promise held, 1 when one broke, 2 when a file or an option is wrong, 3 when \
                  nothing broke but a check could not be judged on the Redis model (the script needs a command it \
                  lacks: run with --backend redis)."
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
    /// Service files only: drive this one scenario (the command a broken verdict prints)
    #[arg(long, value_name = "NAME", value_parser = service_scenario)]
    service_scenario: Option<service::scenario::Scenario>,
    #[command(flatten)]
    run: RunArgs,
}

fn service_scenario(name: &str) -> Result<service::scenario::Scenario, String> {
    service::scenario::named(name).ok_or_else(|| {
        let names: Vec<&str> = service::scenario::ALL.iter().map(|s| s.name).collect();
        format!("{name:?}: expected one of {}", names.join(", "))
    })
}

fn quota(text: &str) -> Result<Quota, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let number = |s: &str| s.parse::<u64>().map_err(|_| format!("{s:?} in {text:?} is not a whole number"));
    let q = match parts.as_slice() {
        [l, t] => Quota::new(number(l)?, Duration::from_millis(number(t)?)),
        [l, t, b] => Quota::new(number(l)?, Duration::from_millis(number(t)?)).with_burst(number(b)?),
        _ => return Err(format!("{text:?}: expected LIMIT/PERIOD_MS or LIMIT/PERIOD_MS/BURST")),
    };
    q.validate(Algorithm::FixedWindow).map_err(|e| format!("{text:?}: {e}"))?;
    Ok(q)
}

/// Where verify's results and report go unless `--out` says otherwise (`simulate` writes to
/// `target/simulate`).
const OUT: &str = "target/verify";

fn command() -> clap::Command {
    VerifyArgs::command().bin_name(results::command::command("verify")).mut_arg("out", |a| a.default_value(OUT))
}

fn parse(args: &[OsString]) -> Result<VerifyArgs, clap::Error> {
    let matches =
        command().try_get_matches_from(std::iter::once(OsString::from("verify")).chain(args.iter().cloned()))?;
    let args = VerifyArgs::from_arg_matches(&matches)?;
    args.run.validate::<VerifyArgs>()?;
    if args.run.backend == Backend::MiniRedis {
        return Err(command().error(
            ErrorKind::InvalidValue,
            "--backend mini-redis cannot run scripts (mini-redis has no EVAL): use model, redis or valkey",
        ));
    }
    Ok(args)
}

/// Runs with `args` (the options, without a program name) and returns the exit status.
pub fn main(args: &[OsString]) -> ExitCode {
    let given = args;
    let args = match parse(args) {
        Ok(args) => args,
        // Help goes to stdout with status 0; a bad command line to stderr with status 2.
        Err(e) => e.exit(),
    };
    crate::output::set_json(args.run.format == Format::Json);
    match verify_all(&args, given) {
        Ok(Outcome::Held) => ExitCode::SUCCESS,
        Ok(Outcome::Broken) => ExitCode::from(1),
        Ok(Outcome::NotJudged) => ExitCode::from(3),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// What the subjects came to, as the exit status says it.
enum Outcome {
    /// Every promise held.
    Held,
    /// A promise broke.
    Broken,
    /// Nothing broke, but a check could not be judged on the model.
    NotJudged,
}

/// Loads every file; every mistake in any of them is reported before anything runs.
fn load(files: &[PathBuf]) -> Result<Vec<SubjectFile>> {
    let mut loaded = Vec::new();
    let mut problems = Vec::new();
    for path in files {
        match SubjectFile::load(path).and_then(sim_verify::preflight) {
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

/// The command as it was run, for the results (`ratelimit-lab verify ...` or `cargo xtask verify ...`).
fn command_line(given: &[OsString]) -> String {
    let args: Vec<_> = given.iter().map(|a| a.to_string_lossy()).collect();
    format!("{} {}", results::command::command("verify"), args.join(" "))
}

fn verify_all(args: &VerifyArgs, given: &[OsString]) -> Result<Outcome> {
    let services = args.files.iter().filter(|f| service::is_service_file(f)).count();
    if services > 0 {
        if services < args.files.len() {
            bail!("service files and script subject files are verified by separate commands: give one kind at a time");
        }
        return verify_services(args, given);
    }
    if args.service_scenario.is_some() {
        bail!("--service-scenario drives a service file's scenario; these are script subject files");
    }
    let files = load(&args.files)?;
    let in_flight = files.iter().filter(|f| f.in_flight.is_some()).count();
    if in_flight > 0 {
        if in_flight < files.len() {
            bail!(
                "concurrency subject files and rate subject files are verified by separate commands: give one kind at \
                 a time"
            );
        }
        if args.replay.is_some() {
            bail!("--replay replays a rate limit's schedule; a concurrency subject's run replays with --scenario and --seed");
        }
        return verify_in_flight(args, given, files);
    }
    if let Some(schedule) = &args.replay {
        let [file] = files.as_slice() else { bail!("--replay replays one subject file, got {}", files.len()) };
        return replay(file, args.quota, schedule, command_line(given));
    }
    let subjects: Vec<Arc<SubjectFile>> = files.into_iter().map(Arc::new).collect();
    let o = &args.run;
    let families: Vec<&str> = sim_engine::families::scenarios().into_iter().map(|(name, _)| name).collect();
    if let Some(family) = o.scenarios.iter().find(|n| families.contains(&n.as_str())) {
        bail!(
            "{family} is not a rate limit's scenario: the in-flight ones verify concurrency subject files (kind = \
             \"concurrency\"), and the post-hoc one runs in simulate"
        );
    }
    let execute = campaign::executor(o)?;

    // The subjects beside the library's algorithms their promises name.
    let mut everyone: Vec<Subject> = subjects.iter().map(|f| Subject::Script(f.clone())).collect();
    for f in &subjects {
        if let Some(a) = verify::beside(f.promise) {
            if !everyone.contains(&Subject::Library(a)) {
                everyone.push(Subject::Library(a));
            }
        }
    }
    let specs = campaign::specs(o, &everyone)?;
    say!(
        "verify: {} subject file(s); {} scenario runs of {} ms on {}; {} schedules per check and quota",
        subjects.len(),
        specs.len(),
        o.duration_ms(),
        o.backend.name(),
        args.cases
    );
    let campaign = campaign::run(o, &everyone, &specs, &*execute)?;

    let reports: Vec<_> =
        subjects.iter().map(|file| verify::report(file, &campaign, args.cases, o.seed, o.backend.name())).collect();

    let out = Results {
        duration_ms: o.duration_ms(),
        results: campaign.results,
        race_sweep: campaign.race_sweep,
        skew_sweep: campaign.skew_sweep,
        verify: reports,
        ..Results::default()
    };
    conclude(o, given, out)
}

/// Prints the runs' tables and each subject's verdicts, writes the results (`out`, completed
/// with the command, the backend, the seeds and the shard) and the report, and says what they
/// come to.
fn conclude(o: &RunArgs, given: &[OsString], out: Results) -> Result<Outcome> {
    say_text!("{}", results::table::render(&out.results));
    for r in &out.verify {
        say_text!("{}", results::subject::render(r));
    }
    let outcome = outcome(&out.verify);
    let out = Results {
        schema: SCHEMA.to_owned(),
        command: command_line(given),
        backend: o.backend.name().to_owned(),
        seeds: o.seed_list(),
        shard: o.shard_name(),
        ..out
    };
    campaign::write(o, &out)?;
    Ok(outcome)
}

/// Verifies concurrency subject files (`sim_verify::in_flight`): the in-flight scenarios with
/// each file's script, the library's limiter of the same N and lease beside it.
fn verify_in_flight(args: &VerifyArgs, given: &[OsString], files: Vec<SubjectFile>) -> Result<Outcome> {
    let o = &args.run;
    if o.backend != Backend::Model {
        bail!(
            "a concurrency subject runs on the model (--backend model): its scenarios' faults are the simulator's, \
             not yet --backend {}'s",
            o.backend.name()
        );
    }
    let every: Vec<&str> = InFlightVariant::ALL.iter().map(|v| v.name()).collect();
    let variants = if o.scenarios.is_empty() {
        InFlightVariant::ALL.to_vec()
    } else {
        let named = o.scenarios.iter().map(|n| {
            InFlightVariant::named(n).ok_or_else(|| {
                anyhow::anyhow!("a concurrency subject runs the in-flight scenarios ({}), not {n}", every.join(", "))
            })
        });
        named.collect::<Result<Vec<_>>>()?
    };
    let seeds = o.seed_list();
    say!(
        "verify: {} concurrency subject file(s); {} in-flight scenario(s) x {} seed(s) on the model, the library's \
         limiter beside each",
        files.len(),
        variants.len(),
        seeds.len()
    );
    let (mut results, mut reports) = (Vec::new(), Vec::new());
    for file in files {
        let verified = verify::in_flight::verify(&Arc::new(file), &variants, &seeds).map_err(anyhow::Error::msg)?;
        results.extend(verified.results);
        reports.push(verified.report);
    }
    conclude(o, given, Results { results, verify: reports, ..Results::default() })
}

/// What the reports come to.
fn outcome(reports: &[results::SubjectReport]) -> Outcome {
    if reports.iter().any(|r| results::subject::broken(r) > 0) {
        Outcome::Broken
    } else if reports.iter().any(|r| results::subject::not_judged(r) > 0) {
        Outcome::NotJudged
    } else {
        Outcome::Held
    }
}

/// Verifies service files (`sim_service`): each service started, driven in real time and
/// stopped, one after the other.
fn verify_services(args: &VerifyArgs, given: &[OsString]) -> Result<Outcome> {
    if args.replay.is_some() || args.quota.is_some() {
        bail!("--replay and --quota apply to script subject files; a service is driven with its file's quota (re-drive a scenario with --service-scenario)");
    }
    if !matches!(args.run.backend, Backend::Model | Backend::Redis)
        || args.run.redis_url.is_some()
        || args.run.module.is_some()
    {
        bail!(
            "a service is verified against a private redis-server the verifier starts: --backend {}, --redis-url and \
             --module do not apply",
            args.run.backend.name()
        );
    }
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in &args.files {
        match service::ServiceFile::load(path) {
            Ok(f) => files.push(Arc::new(f)),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\nerror: "));
    }
    let scenarios = match args.service_scenario {
        Some(s) => vec![s],
        None => service::scenario::ALL.to_vec(),
    };
    let mut reports = Vec::new();
    for file in files {
        say!("verify: {} ({}), {} scenario(s) in real time", file.name, file.path.display(), scenarios.len());
        let options = service::Options {
            scenarios: scenarios.clone(),
            progress: Box::new(|m: &str| say!("  {m}")),
            ..service::Options::default()
        };
        let verified = service::verify_blocking(file, &options)?;
        say_text!("{}", results::subject::render(&verified.report));
        reports.push(verified.report);
    }
    let outcome = outcome(&reports);
    let out = Results {
        schema: SCHEMA.to_owned(),
        command: command_line(given),
        backend: "redis".to_owned(),
        verify: reports,
        ..Results::default()
    };
    campaign::write(&args.run, &out)?;
    Ok(outcome)
}

/// Replays one schedule and prints it with every check's result, holding the subject exactly
/// as the search did (what its file declares, whether it decides ties both ways); with
/// `--format json`, the same as a [`ReplayReport`] on standard output.
fn replay(file: &SubjectFile, quota: Option<Quota>, schedule: &Schedule, command: String) -> Result<Outcome> {
    let file = Arc::new(file.clone());
    let quota = quota.unwrap_or_else(|| verify::catalogue_quota(&file));
    let held = verify::held(&file, quota);
    let ran = Ran::new(&mut sim_verify::direct::Direct::new(file.clone(), quota), schedule);
    say!("{} ({}), quota {}/{}/{}:", file.name, file.path.display(), quota.limit(), quota.period_ms(), quota.burst());
    let mut report = ReplayReport {
        schema: SCHEMA.to_owned(),
        command,
        name: file.name.clone(),
        file: file.path.display().to_string(),
        quota: format!("{}/{}/{}", quota.limit(), quota.period_ms(), quota.burst()),
        schedule: schedule.to_string(),
        ..ReplayReport::default()
    };
    let line = |check: CheckKind, verdict, detail: String| VerdictLine {
        check: check.name().to_owned(),
        verdict,
        replay: if verdict == Verdict::Held { String::new() } else { report.command.clone() },
        detail,
        ..VerdictLine::default()
    };
    let mut outcome = Outcome::Held;
    let mut mark = (usize::MAX, String::new());
    let mut verdicts = Vec::new();
    if let Some(command) = ran.unknown_command() {
        let why = format!(
            "the script calls `{command}`, which the Redis model does not implement (run the scenarios on real Redis \
             with --backend redis)"
        );
        say!("  not judged: {why}");
        outcome = Outcome::NotJudged;
        verdicts.extend(
            CheckKind::ALL.into_iter().filter(|c| c.applies(&file)).map(|c| line(c, Verdict::NotJudged, why.clone())),
        );
    } else {
        for check in CheckKind::ALL.into_iter().filter(|c| c.applies(&file)) {
            let (verdict, detail) = match search::judge(&file, &held, check, schedule) {
                // The price of taking the caller's clock: shown, not a broken promise.
                Some((v, _)) if check == CheckKind::ClockTrust => {
                    say!("  {:<24} expected {}", check.name(), v.message);
                    if mark.0 == usize::MAX {
                        mark = (v.at, check.name().to_owned());
                    }
                    (Verdict::Expected, v.message)
                }
                Some((v, _)) => {
                    outcome = Outcome::Broken;
                    say!("  {:<24} BROKEN  {}", check.name(), v.message);
                    if mark.0 == usize::MAX {
                        mark = (v.at, check.name().to_owned());
                    }
                    (Verdict::Broken, v.message)
                }
                None => {
                    // A tie the script's rounding decided early is held, and says so with its size.
                    let forgiven = check
                        .is_bound()
                        .then(|| sim_verify::checks::closeness(&held, &ran, check).1)
                        .flatten()
                        .map(|over| {
                            format!(
                                "an admission at most one unit of the script's time before a tie, {} over the bound, \
                                 forgiven: the script also denies at exact ties",
                                sim_verify::verdicts::excess(over)
                            )
                        })
                        .unwrap_or_default();
                    say!(
                        "  {:<24} held{}",
                        check.name(),
                        if forgiven.is_empty() { String::new() } else { format!("    {forgiven}") }
                    );
                    (Verdict::Held, forgiven)
                }
            };
            verdicts.push(line(check, verdict, detail));
        }
    }
    report.trace = ran.table(mark.0, &mark.1);
    report.verdicts = verdicts;
    say_text!("{}", report.trace);
    if crate::output::json() {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(outcome)
}
