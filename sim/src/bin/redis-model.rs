//! `redis-model --port N`: the in-process Redis model as a standalone server on 127.0.0.1.
//!
//! Point `redis-cli -p N` or any client at it to poke the model by hand, or run the same test
//! against it and a real `redis-server`. Time is the system clock; expired keys are swept ten
//! times a second (Redis's default `hz`).

use std::process::ExitCode;
use std::time::Duration;

use sim::model::{ModelHandle, SystemClock};

const USAGE: &str = "usage: redis-model --port N

Serves the simulation's Redis model (Redis 7.0 commands, Lua scripts) on 127.0.0.1:N.

options:
  --port N   TCP port to listen on (0 picks a free one and prints it)
  --help     show this text";

fn parse_port(args: &[String]) -> Result<u16, String> {
    let mut port = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--port" => {
                let value = args.get(i + 1).ok_or("--port needs a value, e.g. --port 6390")?;
                let parsed =
                    value.parse::<u16>().map_err(|_| format!("--port: '{value}' is not a port number (0-65535)"))?;
                port = Some(parsed);
                i += 2;
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    port.ok_or_else(|| "missing --port N".to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let port = match parse_port(&args) {
        Ok(port) => port,
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
        let model = ModelHandle::new(SystemClock);
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
