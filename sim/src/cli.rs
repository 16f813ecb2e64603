//! The simulator's command line, parsed by clap (derive).
//!
//! Two layers, so that every command that runs the catalogue takes the same options the same
//! way:
//!
//! - [`RunArgs`]: what any command that runs scenarios needs (which scenarios and policies,
//!   seeds, duration, backend, faults, where the results go). A command flattens it
//!   (`#[command(flatten)]`) and calls [`RunArgs::validate`] after parsing, for the checks that
//!   involve more than one option.
//! - [`SimulateArgs`]: `ratelimit-lab simulate`'s own command: [`RunArgs`] plus `--list` and
//!   `--subject` (also spelled `--algorithm`).
//!
//! Every option's value goes through a value parser that refuses bad input with a reason; clap
//! wraps it as `invalid value 'VALUE' for '--OPTION <ARG>': REASON`, so each message names the
//! option and the value. Names (scenarios, subjects, policies, backends) are clap possible
//! values, so `--help` lists them with what each is, and a wrong one gets the valid ones.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::error::ErrorKind;
use clap::{Args, CommandFactory, FromArgMatches, Parser, ValueEnum};

use sim_engine::faults::Fault;
use sim_engine::scenario;
use sim_engine::subject::Subject;

/// Simulated time per run when `--duration` is not given, on the model.
pub const DEFAULT_DURATION_MS: u64 = 12_000;

/// Where the limiters' Redis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The in-process Redis model over simulated sockets: deterministic, one seed replays a run.
    Model,
    /// Real redis-server processes over real TCP (started by the harness unless --redis-url).
    Redis,
    /// A private valkey-server per run over real TCP, as `redis` (the Valkey release `cargo xtask
    /// test` installs into the target directory, or VALKEY_SERVER, or valkey-server on PATH)
    Valkey,
    /// A private Redis Cluster (3 primaries, 1 replica each) over real TCP; failovers promote a
    /// real replica
    RedisCluster,
    /// The embedded mini-redis server: GET/SET only, so the naive subject's race only.
    MiniRedis,
}

impl Backend {
    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Model => "model",
            Backend::Redis => "redis",
            Backend::Valkey => "valkey",
            Backend::RedisCluster => "redis-cluster",
            Backend::MiniRedis => "mini-redis",
        }
    }
}

/// What standard output carries (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables, verdicts and replay commands, for a person.
    Text,
    /// The results JSON alone, for another tool; the text goes to standard error.
    Json,
}

/// The options of every command that runs the scenario catalogue.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Run only this scenario (repeatable; default: the whole catalogue)
    #[arg(long = "scenario", value_name = "NAME", value_parser = scenario_names())]
    pub scenarios: Vec<String>,

    /// Run only this failure policy (repeatable; default: each scenario's own)
    #[arg(long = "policy", value_name = "NAME", value_parser = policy_names())]
    pub policies: Vec<String>,

    /// Run only this round-trip mode of the library (repeatable; default: each scenario's own)
    #[arg(long = "mode", value_name = "NAME", value_parser = mode_names())]
    pub modes: Vec<String>,

    /// First seed: everything random in a run (load, latencies, the swarm's faults) comes from it
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = number::<u64>, allow_negative_numbers = true)]
    pub seed: u64,

    /// Number of seeds, from --seed on
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = between(1u64..=100_000), allow_negative_numbers = true)]
    pub seeds: u64,

    /// Application instances sharing Redis [default: each scenario's own]
    #[arg(long, value_name = "N", value_parser = between(1u32..=64), allow_negative_numbers = true)]
    pub instances: Option<u32>,

    /// Time per run: 12000, 12000ms or 12s, from 100 ms to 1 h [default: 12s; on the real
    /// backends, whose runs take real time, 4s or what the scenario needs to show its finding:
    /// past its last fault, 12s where clocks drift]
    #[arg(long = "duration", value_name = "D", value_parser = duration_ms, allow_negative_numbers = true)]
    pub duration_ms: Option<u64>,

    /// Worker threads running cases side by side [default: available cores]
    #[arg(long, value_name = "N", default_value_t = available_threads(), hide_default_value = true,
          value_parser = between(1usize..=256), allow_negative_numbers = true)]
    pub threads: usize,

    /// Where the limiters' Redis is
    #[arg(long, value_name = "BACKEND", value_enum, default_value_t = Backend::Model)]
    pub backend: Backend,

    /// With --backend redis: use the server at this URL instead of starting one (faults that need
    /// control of the Redis process are skipped)
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// With --backend redis or valkey: every server the run starts loads this Redis module (the shared
    /// library `cargo build --release -p redis-ratelimit-module` makes), which `--store module`
    /// decides with
    #[arg(long, value_name = "PATH")]
    pub module: Option<PathBuf>,

    /// Replace the scenario's faults (one --scenario only), e.g.
    /// partition:0@3000..7000,redis-crash@4000..4200,script-flush@7000. Kinds: partition:I
    /// partition-to-redis:I partition-from-redis:I hold:I instance-crash:I redis-crash
    /// redis-crash-persistent redis-pause script-flush failover:LAG_MS
    // `std::vec::Vec`, spelled out: clap's derive would read a bare `Option<Vec<_>>` as a
    // repeatable option, and a schedule is one value.
    #[arg(long, value_name = "SCHEDULE", value_parser = fault_schedule)]
    pub faults: Option<std::vec::Vec<Fault>>,

    /// One-way latency to Redis, in ms: 20 or 2..10 [default: each scenario's own]
    #[arg(long = "latency", value_name = "MS", value_parser = scenario::parse_latency)]
    pub latency_ms: Option<(u64, u64)>,

    /// Offered load of a Poisson workload, as a multiple of the limit, e.g. 8 [default: each
    /// scenario's own]
    #[arg(long = "load", value_name = "X", value_parser = load_x)]
    pub load_x: Option<f64>,

    /// The instances' clocks: an offset in ms (and a drift in ppm after a slash) per instance,
    /// cycled, e.g. 500,-500,250/2000,0 [default: each scenario's own]
    // `std::vec::Vec`, spelled out, for the same reason as --faults.
    #[arg(long = "skew", value_name = "OFFSETS", value_parser = scenario::parse_skew, allow_hyphen_values = true)]
    pub skew: Option<std::vec::Vec<(i64, i64)>>,

    /// The library's time source: server (Redis's TIME) or client (each instance's clock)
    /// [default: each scenario's own]; subjects keep theirs
    #[arg(long = "time-source", value_name = "SOURCE", value_parser = time_source)]
    pub time_source: Option<redis_ratelimit::TimeSource>,

    /// Where to write the results JSON [default: OUT/results.json]
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Output directory: the results JSON and the HTML/PNG report
    #[arg(long, value_name = "DIR", default_value = "target/simulate")]
    pub out: PathBuf,

    /// What standard output carries: text (tables, verdicts, replay commands) or json (the
    /// results JSON alone; the text goes to standard error)
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Also write the results as JUnit XML to PATH, for CI systems that show test reports
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// Skip the race and skew sweeps the report charts (they run only with the whole catalogue)
    #[arg(long = "no-sweeps", action = clap::ArgAction::SetFalse)]
    pub sweeps: bool,

    /// Run every case twice and require identical trace hashes (model only)
    #[arg(long)]
    pub check_determinism: bool,

    /// Run only shard I of N of the selected runs (runs I-1, I-1+N, ...; the sweeps in shard 1),
    /// so several machines split one sweep; `cargo xtask report --from a.json --from b.json`
    /// merges their results files back into the whole sweep's report
    #[arg(long, value_name = "I/N", value_parser = shard)]
    pub shard: Option<(u32, u32)>,
}

/// `ratelimit-lab simulate` (`cargo xtask simulate`): run the scenario catalogue, print the tables, write the results JSON
/// and the report.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "simulate",
    about = "Runs the scenario catalogue: many limiter instances in a deterministic simulated network against \
             the in-process Redis model, faults injected, every decision judged by an exact oracle. Prints one \
             table per scenario, writes the results JSON and the HTML/PNG report.",
    after_help = "Exit status: 0 when every promised bound held, 1 when one broke (its replay command is printed), \
                  2 on bad arguments or errors."
)]
pub struct SimulateArgs {
    /// List the scenarios and the algorithms and subjects, then exit
    #[arg(long)]
    pub list: bool,

    /// Run only this subject: one of the library's algorithms, an external subject, or a
    /// subject of the in-flight and post-hoc scenarios (repeatable; default: all of them)
    #[arg(long = "subject", visible_alias = "algorithm", value_name = "NAME", value_parser = subject_names())]
    pub subject_names: Vec<String>,

    /// The catalogue's subjects among `--subject` (filled by [`SimulateArgs::parse_args`]).
    #[arg(skip)]
    pub subjects: Vec<Subject>,

    /// Where the library's algorithms decide: with their scripts, or also with the Redis
    /// module's commands (`module`: a row `<algorithm>-module` beside each algorithm's row,
    /// held to the same promise; on the model, which runs the module's commands)
    #[arg(long, value_name = "STORE", value_parser = ["scripts", "module"], default_value = "scripts")]
    pub store: String,

    #[command(flatten)]
    pub run: RunArgs,
}

impl SimulateArgs {
    /// The command as the user runs it: its usage line names `ratelimit-lab simulate` (or
    /// `cargo xtask simulate`, `results::command`).
    pub fn named_command() -> clap::Command {
        SimulateArgs::command().bin_name(results::command::command("simulate"))
    }

    /// Parses the simulator's command line (`args` without the program name): clap's parse,
    /// then [`RunArgs::validate`]. `Err` is clap's error (or help) to print and exit with.
    pub fn parse_args<I, T>(args: I) -> Result<SimulateArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args = std::iter::once(std::ffi::OsString::from("simulate")).chain(args.into_iter().map(Into::into));
        let matches = SimulateArgs::named_command().try_get_matches_from(args)?;
        let mut parsed = SimulateArgs::from_arg_matches(&matches)?;
        parsed.run.validate::<SimulateArgs>()?;
        // One subject named twice runs once; a family's own subject is no catalogue subject.
        let mut seen: Vec<String> = Vec::new();
        parsed.subject_names.retain(|name| {
            !seen.contains(name) && {
                seen.push(name.clone());
                true
            }
        });
        let mut unique: Vec<Subject> = Vec::new();
        for subject in parsed.subject_names.iter().filter_map(|name| Subject::named(name)) {
            if !unique.contains(&subject) {
                unique.push(subject);
            }
        }
        parsed.subjects = unique;
        let r = &parsed.run;
        let module_missing = match r.backend {
            Backend::Model => false,
            Backend::Redis => r.module.is_none() && r.redis_url.is_none(),
            Backend::Valkey => r.module.is_none(),
            Backend::RedisCluster | Backend::MiniRedis => true,
        };
        let wants_module = parsed.store == "module" || parsed.subjects.iter().any(|s| matches!(s, Subject::Module(_)));
        if wants_module && module_missing {
            return Err(SimulateArgs::named_command().error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--store module runs on the model (--backend model), which runs the module's commands, or \
                     on --backend redis or valkey with --module PATH (the shared library `cargo build --release -p \
                     redis-ratelimit-module` makes) or --redis-url of a server that loaded it; --backend {} {}",
                    r.backend.name(),
                    match r.backend {
                        Backend::Redis => "was given neither",
                        Backend::Valkey => "was given no --module",
                        _ => "starts servers without it",
                    }
                ),
            ));
        }
        Ok(parsed)
    }
}

impl RunArgs {
    /// Parses these options alone (for tests and tools that drive a campaign from code):
    /// `args` without a program name.
    pub fn parse_from<I, T>(args: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        #[derive(Parser)]
        struct Alone {
            #[command(flatten)]
            run: RunArgs,
        }
        let args = std::iter::once(std::ffi::OsString::from("run")).chain(args.into_iter().map(Into::into));
        let alone = Alone::try_parse_from(args)?;
        alone.run.validate::<Alone>()?;
        Ok(alone.run)
    }

    /// The checks clap's value parsers cannot make, because they involve two options. Call it
    /// right after parsing a command `C` that flattens these options; the error carries `C`'s
    /// usage, like clap's own.
    pub fn validate<C: CommandFactory>(&self) -> Result<(), clap::Error> {
        let problem = if self.faults.is_some() && self.scenarios.len() != 1 {
            Some(format!(
                "--faults replaces one scenario's faults: give exactly one --scenario (got {})",
                self.scenarios.len()
            ))
        } else if let (Some(url), true) = (&self.redis_url, self.backend != Backend::Redis) {
            Some(format!(
                "--redis-url {url} only makes sense with --backend redis (got --backend {})",
                self.backend.name()
            ))
        } else if let (Some(path), true) =
            (&self.module, !matches!(self.backend, Backend::Redis | Backend::Valkey) || self.redis_url.is_some())
        {
            Some(format!(
                "--module {} is loaded by the servers --backend redis (or valkey) starts (got --backend {}{})",
                path.display(),
                self.backend.name(),
                if self.redis_url.is_some() { " with --redis-url, which starts none" } else { "" }
            ))
        } else {
            None
        };
        match problem {
            Some(message) => Err(C::command().error(ErrorKind::ArgumentConflict, message)),
            None => Ok(()),
        }
    }

    /// Simulated (or, on the real backends, real) time per run: `--duration`, else 12 s on the
    /// model and a shorter default on the real backends, whose runs take real time.
    pub fn duration_ms(&self) -> u64 {
        match (self.duration_ms, self.backend) {
            (Some(ms), _) => ms,
            (None, Backend::Model) => DEFAULT_DURATION_MS,
            (None, Backend::Redis | Backend::Valkey | Backend::RedisCluster | Backend::MiniRedis) => {
                sim_real::DEFAULT_DURATION_MS
            }
        }
    }

    /// The seeds to run: `--seeds` of them from `--seed` on.
    pub fn seed_list(&self) -> Vec<u64> {
        (self.seed..self.seed.saturating_add(self.seeds)).collect()
    }

    /// Where the results JSON goes: `--json`, else `OUT/results.json`.
    pub fn json_path(&self) -> PathBuf {
        self.json.clone().unwrap_or_else(|| self.out.join("results.json"))
    }

    /// `I/N` for `--shard`, empty without it (the results file's `shard`).
    pub fn shard_name(&self) -> String {
        self.shard.map(|(i, n)| format!("{i}/{n}")).unwrap_or_default()
    }

    /// Whether the run at `index` of the whole selection belongs to this shard.
    pub fn in_shard(&self, index: usize) -> bool {
        self.shard.is_none_or(|(i, n)| index % n as usize == (i - 1) as usize)
    }

    /// What these options change of each scenario (latency, load, clocks, time source).
    pub fn overrides(&self) -> scenario::Overrides {
        scenario::Overrides {
            latency_ms: self.latency_ms,
            load_x: self.load_x,
            skew: self.skew.clone(),
            time_source: self.time_source,
        }
    }

    /// The options a replay command needs to run on the same backend: nothing for the model
    /// (the default), else `--backend` and any `--redis-url` and `--module`.
    pub fn backend_args(&self) -> String {
        let mut out = String::new();
        if self.backend != Backend::Model {
            out.push_str(" --backend ");
            out.push_str(self.backend.name());
        }
        if let Some(url) = &self.redis_url {
            out.push_str(" --redis-url ");
            out.push_str(url);
        }
        if let Some(module) = &self.module {
            out.push_str(" --module ");
            out.push_str(&module.display().to_string());
        }
        out
    }
}

// ------------------------------------------------------------------------------ value parsers
//
// Each returns the reason a value is refused; clap puts the option and the value in front.
// Numeric options take `allow_negative_numbers`, so that `--seed -1` reaches the parser and is
// refused as a number rather than read as an unknown flag `-1`.

/// The catalogue's scenario names, each with what it shows (in `--help`).
fn scenario_names() -> PossibleValuesParser {
    let families =
        sim_engine::families::scenarios().into_iter().map(|(name, what)| PossibleValue::new(name).help(what));
    PossibleValuesParser::new(
        scenario::catalogue().into_iter().map(|s| PossibleValue::new(s.name).help(s.description)).chain(families),
    )
}

/// The failure policies, by the names the library gives them.
fn policy_names() -> PossibleValuesParser {
    let policies =
        [redis_ratelimit::FailurePolicy::FailOpen, redis_ratelimit::FailurePolicy::FailClosed, scenario::LOCAL_BUDGET];
    PossibleValuesParser::new(policies.map(|p| PossibleValue::new(p.name())))
}

/// The library's round-trip modes, each with what it does.
fn mode_names() -> PossibleValuesParser {
    PossibleValuesParser::new(sim_engine::mode::Mode::ALL.map(|m| PossibleValue::new(m.name()).help(m.description())))
}

/// The library's algorithms, the catalogue's subjects and the families' own, by name, each with
/// what it is.
fn subject_names() -> PossibleValuesParser {
    let values = Subject::catalogue()
        .into_iter()
        .chain(Subject::modules())
        .map(|s| PossibleValue::new(s.name().to_owned()).help(s.summary()))
        .chain(sim_engine::families::subjects().into_iter().map(|(name, what)| PossibleValue::new(name).help(what)));
    PossibleValuesParser::new(values)
}

/// A whole number of type `T`.
fn number<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.trim().parse().map_err(|_| "expected a whole number".to_owned())
}

/// A whole number within `range`.
fn between<T>(range: RangeInclusive<T>) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy + Send + Sync + 'static,
{
    move |text: &str| {
        let (lo, hi) = (*range.start(), *range.end());
        let n: T = text.trim().parse().map_err(|_| format!("expected a whole number from {lo} to {hi}"))?;
        if range.contains(&n) {
            Ok(n)
        } else {
            Err(format!("must be between {lo} and {hi}, got {n}"))
        }
    }
}

/// A duration from 100 ms to 1 h, written as everywhere else ([`redis_ratelimit::duration`]:
/// `12s`, `2500ms`, `1m`; a bare number is refused).
pub fn duration_ms(text: &str) -> Result<u64, String> {
    let ms = redis_ratelimit::duration::parse_ms(text)?;
    if !(100..=3_600_000).contains(&ms) {
        return Err(format!("must be between 100 ms and 1 h, got {}", redis_ratelimit::duration::format_ms(ms)));
    }
    Ok(ms)
}

/// `I/N`, 1 <= I <= N <= 10000.
fn shard(text: &str) -> Result<(u32, u32), String> {
    match results::merge::parse_shard(text) {
        Some((i, n)) if n <= 10_000 => Ok((i, n)),
        _ => Err("expected I/N with 1 <= I <= N <= 10000, e.g. 2/4".to_owned()),
    }
}

/// A load multiple: a positive number up to 100.
fn load_x(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches('x').parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 100.0 => Ok(x),
        _ => Err("expected a multiple of the limit above 0 and at most 100, e.g. 8 or 0.5".to_owned()),
    }
}

/// `server` or `client`.
fn time_source(text: &str) -> Result<redis_ratelimit::TimeSource, String> {
    match text {
        "server" => Ok(redis_ratelimit::TimeSource::Server),
        "client" => Ok(redis_ratelimit::TimeSource::Client),
        _ => Err("expected server (Redis's TIME) or client (each instance's clock)".to_owned()),
    }
}

/// A fault schedule (`sim_engine::faults::parse_schedule`).
fn fault_schedule(text: &str) -> Result<Vec<Fault>, String> {
    sim_engine::faults::parse_schedule(text)
}

/// The default of `--threads`: the cores there are, within the accepted range.
fn available_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 256)
}

#[cfg(test)]
mod tests;
