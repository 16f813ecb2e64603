//! `cargo xtask`: the project's checks and jobs, run as code.
//!
//! - `cargo xtask simulate`: the scenario catalogue on the in-process Redis model; prints
//!   tables, writes results JSON and the HTML/PNG report.
//! - `cargo xtask report --from RESULTS.json --out DIR`: re-renders a report.
//! - `cargo xtask test`: installs what the tests need (redis-server, chromium), then rustfmt check,
//!   clippy with `-D warnings`, and every test in the workspace. CI runs exactly this.
//! - `cargo xtask bench`: the speed goals as ratios against references from the same run.
//! - `cargo xtask props [--cases N]`: the property suites of `properties/`.
//! - `cargo xtask loom`: the loom models in `limiter/tests/loom_*.rs`.
//! - `cargo xtask tidy`: the invariants of `docs/ARCHITECTURE.md` that code can check.

#![forbid(unsafe_code)]

mod bench;
mod loom;
mod props;
mod simulate;
mod test;
mod tidy;
mod tools;

use anyhow::{bail, Result};

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  simulate    run the scenario catalogue on the in-process Redis model (see simulate --help)
  report      re-render the report: report --from RESULTS.json --out DIR
  test        install what the tests need, then rustfmt, clippy -D warnings and every test
  bench       the speed goals, each as a ratio against a reference measured in the same run
  props       the property suites over the algorithms: props [--cases N] (default 256)
  loom        the loom models of the breaker and the local store (release, target/loom)
  tidy        the architecture invariants code can check (docs/ARCHITECTURE.md)
  help        show this message";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        println!("{USAGE}");
        return Ok(());
    };
    let rest: Vec<String> = args.collect();
    match command.as_str() {
        "simulate" => simulate::run(&rest),
        "report" => simulate::run_report(&rest),
        "test" => test::run(&rest),
        "bench" => bench::run(&rest),
        "props" => props::run(&rest),
        "loom" => loom::run(&rest),
        "tidy" => tidy::run(&rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}
