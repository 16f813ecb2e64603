//! `ratelimit-lab`: the harness as one installable command.
//!
//! - `ratelimit-lab simulate [OPTIONS]`: the scenario catalogue on the in-process Redis model
//!   (`sim::simulate`);
//! - `ratelimit-lab verify SUBJECT.toml... [OPTIONS]`: any rate-limiter script judged by its
//!   promise (`sim::verify`);
//! - `ratelimit-lab report --from RESULTS.json --out DIR`: the HTML/PNG report of a results file
//!   (`reports::cli`);
//! - `ratelimit-lab model --port N`: the Redis model as a server (`redis_model::standalone`).
//!
//! Each subcommand's options belong to it (`ratelimit-lab verify --help`); this file only picks
//! the subcommand. Exit status: 0 when everything held, 1 when a promise broke, 2 on a wrong
//! file or option or any error, 3 (verify) when nothing broke but a check could not be judged
//! on the model.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

// Small, short-lived allocations dominate a simulation; mimalloc serves them faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Simulates and verifies rate limiters on Redis: many instances in a deterministic simulated
/// network, faults on a schedule, every decision judged by an exact oracle.
#[derive(Debug, Parser)]
#[command(
    name = "ratelimit-lab",
    version,
    after_help = "Exit status: 0 when everything held, 1 when a promise broke (its replay command is printed), 2 on a \
                  wrong file or option or any error, 3 (verify) when nothing broke but a check could not be judged on \
                  the Redis model."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the scenario catalogue: tables, results JSON, JUnit XML, the HTML/PNG report
    #[command(disable_help_flag = true)]
    Simulate {
        /// The simulator's options (see `ratelimit-lab simulate --help`)
        #[arg(value_name = "OPTIONS", trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Verify rate-limiter scripts described by subject files: a verdict per promise
    #[command(disable_help_flag = true)]
    Verify {
        /// Subject files and the verifier's options (see `ratelimit-lab verify --help`)
        #[arg(value_name = "ARGS", trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Render the HTML/PNG report from results files (several merge into one)
    #[command(disable_help_flag = true)]
    Report {
        /// --from RESULTS.json [--from MORE.json] --out DIR (see `ratelimit-lab report --help`)
        #[arg(value_name = "OPTIONS", trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Serve the Redis model on 127.0.0.1 (redis-server's options that describe it are accepted)
    #[command(disable_help_flag = true)]
    Model {
        /// --port N [--bind 127.0.0.1 --save "" --appendonly no] (see `ratelimit-lab model --help`)
        #[arg(value_name = "OPTIONS", trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

fn main() -> ExitCode {
    // Bad arguments: clap's message and status 2. Help and --version: status 0.
    let cli = Cli::parse();
    let named = |sub: &str, args: Vec<OsString>| std::iter::once(OsString::from(sub)).chain(args);
    match cli.command {
        Command::Simulate { args } => {
            // The simulator's options are text; a name that is not Unicode is refused by name.
            let args: Result<Vec<String>, OsString> = args.into_iter().map(OsString::into_string).collect();
            match args {
                Ok(args) => sim::simulate::main(&args),
                Err(bad) => {
                    eprintln!("error: the argument {bad:?} is not valid Unicode");
                    ExitCode::from(2)
                }
            }
        }
        Command::Verify { args } => sim::verify::main(&args),
        Command::Report { args } => reports::cli::main(named("ratelimit-lab report", args)),
        Command::Model { args } => redis_model::standalone::main(named("ratelimit-lab model", args)),
    }
}
