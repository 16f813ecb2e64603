//! `report --from RESULTS.json --out DIR`: renders a simulation results file into DIR/index.html
//! plus one PNG per chart.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: report --from RESULTS.json --out DIR\n\n  \
    --from PATH   results file written by `cargo xtask simulate`\n  \
    --out DIR     directory for index.html and the chart PNGs (created if missing)";

struct Args {
    from: PathBuf,
    out: PathBuf,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let (mut from, mut out) = (None, None);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let slot = match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--from" => &mut from,
            "--out" => &mut out,
            other => return Err(format!("unknown argument {other:?}")),
        };
        let value = match inline.or_else(|| args.next()) {
            Some(v) if !v.is_empty() && !v.starts_with("--") => v,
            _ => return Err(format!("{flag} needs a value")),
        };
        if slot.replace(PathBuf::from(value)).is_some() {
            return Err(format!("{flag} given twice"));
        }
    }
    match (from, out) {
        (Some(from), Some(out)) => Ok(Some(Args { from, out })),
        (None, _) => Err("missing --from RESULTS.json".into()),
        (_, None) => Err("missing --out DIR".into()),
    }
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("report: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
