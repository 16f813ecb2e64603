//! `redis-model --port N`: the in-process Redis model as a standalone server on 127.0.0.1.
//!
//! Point `redis-cli -p N` or any client at it to poke the model by hand, or run the same test
//! against it and a real `redis-server`. Time is the system clock; expired keys are swept ten
//! times a second (Redis's default `hz`).
//!
//! It takes the options the integration tests pass to `redis-server` (`--bind 127.0.0.1
//! --save "" --appendonly no --protected-mode no`), so `REDIS_TESTS_SERVER=$PWD/target/debug/redis-model`
//! runs those tests against it unchanged (see `tests/src/lib.rs`); any other option is refused
//! by name. Killing the process loses everything, as a Redis without persistence does.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use sim::model::{ModelHandle, SystemServerClock};

const USAGE: &str =
    "usage: redis-model --port N [--bind 127.0.0.1] [--save \"\"] [--appendonly no] [--protected-mode yes|no]

Serves the simulation's Redis model (Redis 7.0 commands, Lua scripts) on 127.0.0.1:N.
It accepts the redis-server options that describe what it already is, so a test harness can
start it exactly as it starts redis-server; options asking for something it cannot do (another
address, persistence) are refused.

options:
  --port N                  TCP port to listen on (0 picks a free one and prints it)
  --bind ADDR               address to listen on: 127.0.0.1 (or localhost) only
  --save \"\"                 no RDB snapshots (the model never persists; other values are refused)
  --appendonly no           no AOF (the model never persists; yes is refused)
  --protected-mode yes|no   accepted and ignored: the model has no users or passwords
  --help                    show this text";

/// What the command line asks for.
#[derive(Debug, PartialEq)]
struct Options {
    port: u16,
}

fn value<'a>(args: &'a [String], i: usize, name: &str, example: &str) -> Result<&'a str, String> {
    args.get(i + 1).map(String::as_str).ok_or_else(|| format!("{name} needs a value, e.g. {name} {example}"))
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut port = None;
    let mut i = 0;
    while i < args.len() {
        let name = args[i].as_str();
        match name {
            "--port" => {
                let v = value(args, i, name, "6390")?;
                port = Some(v.parse::<u16>().map_err(|_| format!("--port: '{v}' is not a port number (0-65535)"))?);
            }
            "--bind" => {
                let v = value(args, i, name, "127.0.0.1")?;
                if v != "127.0.0.1" && v != "localhost" {
                    return Err(format!("--bind: the model listens on 127.0.0.1 only, not '{v}'"));
                }
            }
            "--save" => {
                let v = value(args, i, name, "\"\"")?;
                if !v.is_empty() {
                    return Err(format!(
                        "--save: the model has no persistence; only --save \"\" is accepted, not '{v}'"
                    ));
                }
            }
            "--appendonly" => {
                let v = value(args, i, name, "no")?;
                if !v.eq_ignore_ascii_case("no") {
                    return Err(format!(
                        "--appendonly: the model has no persistence; only 'no' is accepted, not '{v}'"
                    ));
                }
            }
            "--protected-mode" => {
                let v = value(args, i, name, "no")?;
                if !v.eq_ignore_ascii_case("no") && !v.eq_ignore_ascii_case("yes") {
                    return Err(format!("--protected-mode: expected yes or no, got '{v}'"));
                }
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
        i += 2;
    }
    let port = port.ok_or_else(|| "missing --port N".to_string())?;
    Ok(Options { port })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let port = match parse_args(&args) {
        Ok(options) => options.port,
        Err(message) => {
            eprintln!("redis-model: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
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

    fn parse(args: &[&str]) -> Result<Options, String> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn accepts_the_arguments_a_redis_server_harness_passes() {
        let args =
            ["--port", "6390", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"];
        assert_eq!(parse(&args), Ok(Options { port: 6390 }));
        assert_eq!(parse(&["--port", "0"]), Ok(Options { port: 0 }));
    }

    #[test]
    fn refuses_unknown_arguments_and_impossible_settings_by_name() {
        assert!(parse(&["--port", "1", "--daemonize", "yes"]).unwrap_err().contains("unknown argument '--daemonize'"));
        assert!(parse(&["--port", "1", "--bind", "0.0.0.0"]).unwrap_err().contains("--bind"));
        assert!(parse(&["--port", "1", "--save", "900 1"]).unwrap_err().contains("persistence"));
        assert!(parse(&["--port", "1", "--appendonly", "yes"]).unwrap_err().contains("persistence"));
        assert!(parse(&["--port", "1", "--protected-mode", "maybe"]).unwrap_err().contains("yes or no"));
        assert!(parse(&["--port"]).unwrap_err().contains("needs a value"));
        assert!(parse(&["--port", "x"]).unwrap_err().contains("not a port"));
        assert!(parse(&[]).unwrap_err().contains("missing --port"));
    }
}
