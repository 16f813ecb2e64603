//! `report --from RESULTS.json --out DIR` (`reports::cli`), the renderer on its own: what
//! `ratelimit-lab report` runs, kept here so this crate's tests drive it as a process.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    reports::cli::main(std::env::args_os())
}
