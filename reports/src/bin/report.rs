//! `report --from RESULTS.json --out DIR`: renders a simulation results file into DIR/index.html
//! plus one PNG per chart. The `simulate` binary renders its own report already; this one
//! re-renders a results file (`cargo xtask report`).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Renders a simulation results file into DIR/index.html plus one PNG per chart.
#[derive(Debug, Parser)]
#[command(name = "report")]
struct Args {
    /// Results file written by `cargo xtask simulate`
    #[arg(long, value_name = "RESULTS.json")]
    from: PathBuf,
    /// Directory for index.html and the chart PNGs (created if missing)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

fn main() -> ExitCode {
    // Bad arguments: clap's message naming them, the usage, status 2. Help: status 0.
    let args = Args::parse();
    match reports::render(&args.from, &args.out) {
        Ok(paths) => {
            println!("wrote {} and {} chart(s)", paths.index_html.display(), paths.charts.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("report: {e:#}");
            ExitCode::FAILURE
        }
    }
}
