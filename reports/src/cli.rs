//! `report --from RESULTS.json [--from MORE.json...] --out DIR`: renders simulation results
//! into DIR/index.html plus one PNG per chart. The `simulate` binary renders its own report
//! already; this one re-renders a results file (`cargo xtask report`), or several merged into
//! one (`results::merge`: the shards of one sweep go back into its order).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Renders a simulation results file into DIR/index.html plus one PNG per chart.
#[derive(Debug, Parser)]
#[command(name = "report")]
struct Args {
    /// Results file written by `cargo xtask simulate` (repeatable: the files are merged, shards
    /// of one sweep back into its order)
    #[arg(long, value_name = "RESULTS.json", required = true)]
    from: Vec<PathBuf>,
    /// Directory for index.html and the chart PNGs (created if missing)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Renders with `args` (the program's name first).
pub fn main<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    // Bad arguments: clap's message naming them, the usage, status 2. Help: status 0.
    let args = Args::try_parse_from(args).unwrap_or_else(|e| e.exit());
    match crate::render_merged(&args.from, &args.out) {
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
