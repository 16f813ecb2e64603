//! `redis-model --port N` (or `ratelimit-lab model --port N`): the in-process Redis model as a
//! standalone server on 127.0.0.1.
//!
//! Point `redis-cli -p N` or any client at it to poke the model by hand, or run the same test
//! against it and a real `redis-server`. Time is the system clock; expired keys are swept ten
//! times a second (Redis's default `hz`).
//!
//! It takes the options the integration tests pass to `redis-server` (`--bind 127.0.0.1
//! --save "" --appendonly no --protected-mode no --dir DIR`), so `REDIS_TESTS_SERVER=$PWD/target/debug/redis-model`
//! runs those tests against it unchanged (see `tests/src/lib.rs`); any other option is refused
//! by name. Killing the process loses everything, as a Redis without persistence does.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::{ModelHandle, SystemServerClock};

/// Serves the simulation's Redis model (Redis 7.0 commands, Lua scripts) on 127.0.0.1:PORT.
///
/// It accepts the redis-server options that describe what it already is, so a test harness can
/// start it exactly as it starts redis-server; options asking for something it cannot do
/// (another address, persistence) are refused.
#[derive(Debug, PartialEq, Parser)]
#[command(name = "redis-model")]
struct CommandLine {
    /// TCP port to listen on (0 picks a free one and prints it)
    #[arg(long, value_name = "N")]
    port: u16,
    /// Address to listen on: 127.0.0.1 (or localhost) only
    #[arg(long, value_name = "ADDR", value_parser = loopback)]
    bind: Option<String>,
    /// No RDB snapshots: the model never persists, so only "" is accepted
    #[arg(long, value_name = "\"\"", value_parser = no_snapshots)]
    save: Option<String>,
    /// No AOF: the model never persists, so only no is accepted
    #[arg(long, value_name = "no", value_parser = no_aof)]
    appendonly: Option<String>,
    /// Accepted and ignored: the model has no users or passwords
    #[arg(long, value_name = "yes|no", value_parser = clap::builder::PossibleValuesParser::new(["yes", "no"]),
          ignore_case = true)]
    protected_mode: Option<String>,
    /// Accepted and ignored: the model writes no files
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

// Each value parser returns the reason; clap names the option and the value in front of it.

fn loopback(v: &str) -> Result<String, String> {
    match v {
        "127.0.0.1" | "localhost" => Ok(v.to_owned()),
        _ => Err("the model listens on 127.0.0.1 only".to_owned()),
    }
}

fn no_snapshots(v: &str) -> Result<String, String> {
    match v {
        "" => Ok(String::new()),
        _ => Err("the model has no persistence; only --save \"\" is accepted".to_owned()),
    }
}

fn no_aof(v: &str) -> Result<String, String> {
    match v.eq_ignore_ascii_case("no") {
        true => Ok(v.to_owned()),
        false => Err("the model has no persistence; only 'no' is accepted".to_owned()),
    }
}

/// Runs the server with `args` (the program's name first) until the process is killed.
pub fn main<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    // Bad arguments: clap's message naming them, the usage, status 2. Help: status 0.
    let port = match CommandLine::try_parse_from(args) {
        Ok(options) => options.port,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("redis-model: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("redis-model: cannot listen on 127.0.0.1:{port}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        println!("redis-model listening on {addr}");
        let model = ModelHandle::new(SystemServerClock);
        let sweeper = model.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                sweeper.active_expire();
            }
        });
        model.serve_tcp(listener).await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CommandLine, String> {
        CommandLine::try_parse_from(std::iter::once("redis-model").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn accepts_the_arguments_a_redis_server_harness_passes() {
        let args = [
            "--port",
            "6390",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--dir",
            "/tmp",
        ];
        assert_eq!(parse(&args).map(|o| o.port), Ok(6390));
        assert_eq!(parse(&["--port", "0"]).map(|o| o.port), Ok(0));
        assert_eq!(parse(&["--port", "1", "--appendonly", "NO", "--protected-mode", "Yes"]).map(|o| o.port), Ok(1));
    }

    #[test]
    fn refuses_unknown_arguments_and_impossible_settings_by_name() {
        for (args, said) in [
            (&["--port", "1", "--daemonize", "yes"][..], &["unexpected argument '--daemonize'"][..]),
            (&["--port", "1", "--bind", "0.0.0.0"], &["--bind <ADDR>", "'0.0.0.0'", "127.0.0.1 only"]),
            (&["--port", "1", "--save", "900 1"], &["--save", "'900 1'", "persistence"]),
            (&["--port", "1", "--appendonly", "yes"], &["--appendonly <no>", "'yes'", "persistence"]),
            (&["--port", "1", "--protected-mode", "maybe"], &["--protected-mode", "'maybe'", "yes, no"]),
            (&["--port"], &["--port <N>", "a value is required"]),
            (&["--port", "x"], &["--port <N>", "'x'", "invalid digit"]),
            (&["--port", "70000"], &["--port <N>", "'70000'", "0..=65535"]),
            (&[], &["--port <N>", "required"]),
        ] {
            let e = parse(args).expect_err("refused");
            for part in said {
                assert!(e.contains(part), "the message for {args:?} does not say {part:?}:\n{e}");
            }
        }
    }
}
