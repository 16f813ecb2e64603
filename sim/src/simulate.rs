//! `ratelimit-lab simulate` (and `cargo xtask simulate`; options: `crate::cli::SimulateArgs`,
//! or `--help`). It runs the catalogue, prints the tables, writes the results JSON and renders
//! the HTML/PNG report from it (`reports::render`), so `cargo xtask simulate` only passes its
//! arguments through.
//!
//! Exit status: 0 when every promised bound held, 1 when one broke (after the JSON and the
//! report are written), 2 on bad arguments or any error.

use std::process::ExitCode;

use anyhow::Result;
use sim_engine::subject::{ClientSubject, RulesSubject, Subject};

use crate::campaign;
use crate::cli::{Backend, Format, RunArgs, SimulateArgs};
use sim_engine::results::verdict::{problems, Check};
use sim_engine::results::{Results, Verdict, SCHEMA};
use sim_engine::run::is_failure;
use sim_engine::{families, scenario};
use sim_real as real;

/// Runs with `args` (the options, without a program name) and returns the exit status.
pub fn main(args: &[String]) -> ExitCode {
    let options = match SimulateArgs::parse_args(args) {
        Ok(options) => options,
        // Help goes to stdout with status 0; a bad command line to stderr with status 2.
        Err(e) => e.exit(),
    };
    crate::output::set_json(options.run.format == Format::Json);
    match simulate(&options, args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The mini-redis backend runs only what it can: the naive subject's race.
fn mini_redis_only(o: &mut SimulateArgs) -> Result<()> {
    if o.run.scenarios.is_empty() {
        o.run.scenarios = vec![real::MINI_REDIS_SCENARIO.to_owned()];
    }
    if o.subjects.is_empty() {
        o.subjects = vec![Subject::Client(ClientSubject::NaiveGetSet)];
    }
    for scenario in &o.run.scenarios {
        for subject in &o.subjects {
            real::check_mini_redis(scenario, subject)?;
        }
    }
    Ok(())
}

/// Returns Ok(false) when a bound-promising algorithm broke its promise.
fn simulate(o: &SimulateArgs, args: &[String]) -> Result<bool> {
    if o.list {
        for s in scenario::catalogue() {
            say!("{:<16} {}", s.name, s.description);
        }
        for (name, what) in families::scenarios() {
            say!("{name:<16} {what}");
        }
        say!();
        for s in Subject::catalogue().into_iter().chain(Subject::modules()) {
            say!("{:<20} {}", s.name(), s.summary());
        }
        for (name, what) in families::subjects() {
            say!("{name:<20} {what}");
        }
        say!();
        for m in sim_engine::mode::Mode::ALL {
            say!("{:<16} round-trip mode: {}", m.name(), m.description());
        }
        return Ok(true);
    }
    let mut o = o.clone();
    if o.run.backend == Backend::MiniRedis {
        mini_redis_only(&mut o)?;
    }
    let execute = campaign::executor(&o.run)?;
    let mut subjects: Vec<Subject> = if o.subjects.is_empty() { Subject::catalogue() } else { o.subjects.clone() };
    if o.store == "module" {
        subjects = with_module_rows(subjects);
    }
    let opts = o.clone();
    let o: &RunArgs = &o.run;
    let duration_ms = o.duration_ms();
    let seeds: Vec<u64> = o.seed_list();
    say!(
        "simulate: seeds {}..={}, {} ms per run, {} threads",
        seeds[0],
        seeds[seeds.len() - 1],
        duration_ms,
        o.threads
    );
    if o.backend != Backend::Model {
        say!(
            "{} (--backend {}: runs take real time and real scheduling; the seed fixes the load and the faults)",
            real::NOT_DETERMINISTIC,
            o.backend.name()
        );
    }
    let (run_catalogue, family_specs) = selection(&opts, &seeds)?;
    let specs = if run_catalogue { campaign::specs(o, &subjects)? } else { Vec::new() };
    let campaign = if run_catalogue { campaign::run(o, &subjects, &specs, &*execute)? } else { Default::default() };
    let mut not_deterministic = campaign.not_deterministic;
    let mut results = campaign.results;
    // The in-flight and post-hoc scenarios: their own runs, judged into the same results.
    let family_results = families::run_all(&family_specs, o.threads)?;
    if o.check_determinism {
        for (first, again) in family_results.iter().zip(families::run_all(&family_specs, o.threads)?) {
            if again.trace_hash != first.trace_hash {
                not_deterministic.push((first.replay.clone(), first.trace_hash.clone(), again.trace_hash));
            }
        }
    }
    results.extend(family_results);
    let mut ok = true;
    if o.check_determinism {
        if not_deterministic.is_empty() {
            say!("determinism: {} runs replayed, every trace identical", specs.len() + family_specs.len());
        } else {
            ok = false;
            for (replay, first, second) in &not_deterministic {
                say!("NOT DETERMINISTIC: {replay} (trace {first} then {second})");
            }
        }
    }

    say_text!("{}", sim_engine::table::render(&results));
    // A failover's cost, per algorithm: extra admissions against the stated bound.
    let failovers: Vec<&sim_engine::results::RunResult> =
        results.iter().filter(|r| r.faults.iter().any(|f| f.kind == "failover") && r.bound != Verdict::None).collect();
    if !failovers.is_empty() {
        say!("\nfailover: extra admissions per key over each promise, and the bound's verdict");
        for r in failovers {
            let extra = r.bound_detail.split(';').next().unwrap_or("");
            say!("  {:<19} {:<13} {:<6} seed {}: {} ({})", r.subject, r.policy, r.time_source, r.seed, extra, r.bound);
        }
    }
    let mut broken = 0;
    say!();
    for r in &results {
        // The first broken check speaks for the run: bound, then policy, liveness, mode, errors.
        let Some(first) = problems(r).into_iter().next() else { continue };
        let failure = is_failure(r);
        broken += failure as usize;
        let label = if failure { "BROKEN" } else { "finding" };
        let detail = match first.check {
            Check::Errors => format!("{} call(s) returned an error", r.errors),
            _ => first.detail.to_owned(),
        };
        let immortal = match r.redis.as_ref().filter(|c| c.keys_without_ttl > 0) {
            Some(c) => format!(
                "; {} key(s) left without a TTL, which never expire (e.g. {})",
                c.keys_without_ttl,
                c.keys_without_ttl_sample.join(", ")
            ),
            None => String::new(),
        };
        say!(
            "{label}: {} {} {} seed {}: {detail}{immortal}\n    replay: {}",
            r.scenario,
            r.subject,
            r.policy,
            r.seed,
            r.replay
        );
    }
    // One hash over every run's trace hash: equal output means byte-identical traces. Each
    // run's own hash is in the JSON, beside its replay command.
    let mut all = sha1_smol::Sha1::new();
    for r in &results {
        all.update(r.trace_hash.as_bytes());
    }
    say!("trace hash: {} ({} runs)", all.digest(), results.len());

    let all_results = Results {
        schema: SCHEMA.to_owned(),
        command: format!("{} {}", results::command::command("simulate"), args.join(" ")).trim_end().to_owned(),
        backend: o.backend.name().to_owned(),
        seeds: seeds.clone(),
        duration_ms,
        results,
        race_sweep: campaign.race_sweep,
        skew_sweep: campaign.skew_sweep,
        verify: Vec::new(),
        shard: o.shard_name(),
    };
    campaign::write(o, &all_results)?;
    if broken > 0 {
        say!("{broken} run(s) broke a promised bound: see the replay commands above");
        ok = false;
    }
    Ok(ok)
}

/// Whether the catalogue runs, and the runs of the scenario families (`sim_engine::families`)
/// the options select: with no `--scenario`, the catalogue and every family; otherwise those
/// named. A family runs only on the model, whose faults it needs, and with the library's
/// scripts.
pub fn selection(o: &SimulateArgs, seeds: &[u64]) -> Result<(bool, Vec<families::FamilySpec>)> {
    let family_names: Vec<&str> = families::scenarios().into_iter().map(|(name, _)| name).collect();
    let (named_families, named_catalogue): (Vec<String>, Vec<String>) =
        o.run.scenarios.iter().cloned().partition(|n| family_names.contains(&n.as_str()));
    let everything = o.run.scenarios.is_empty();
    // Subjects named, none of them the catalogue's: only the families have them.
    let only_family_subjects = !o.subject_names.is_empty() && o.subjects.is_empty();
    let run_catalogue = (everything || !named_catalogue.is_empty()) && !only_family_subjects;
    let families_possible = o.run.backend == Backend::Model && o.store == "scripts";
    if !named_families.is_empty() && !families_possible {
        anyhow::bail!(
            "{} run on the model with the library's scripts only (--backend model --store scripts)",
            named_families.join(", ")
        );
    }
    let family_specs = if (everything || !named_families.is_empty()) && families_possible {
        families::specs(&named_families, &o.subject_names, seeds)
    } else {
        Vec::new()
    };
    if !run_catalogue && family_specs.is_empty() {
        anyhow::bail!("nothing to run: no scenario selected runs the selected subjects");
    }
    Ok((run_catalogue, family_specs))
}

/// `subjects` with each of the library's algorithms followed by its row on the Redis module
/// (unless already there).
fn with_module_rows(subjects: Vec<Subject>) -> Vec<Subject> {
    let mut out: Vec<Subject> = Vec::with_capacity(subjects.len() * 2);
    for subject in &subjects {
        out.push(subject.clone());
        let module = match subject {
            Subject::Library(a) => Subject::Module(*a),
            Subject::Rules(RulesSubject::OneCall) => Subject::Rules(RulesSubject::OneCallModule),
            _ => continue,
        };
        if !subjects.contains(&module) {
            out.push(module);
        }
    }
    out
}
