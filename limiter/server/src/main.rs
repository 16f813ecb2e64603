//! `redis-ratelimit-server`: see the crate docs and `docs/RLS.md`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use redis_ratelimit_server::cli::{self, Args};

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = cli::init_logs(args.log_format, &args.log) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(args, cli::signalled())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
