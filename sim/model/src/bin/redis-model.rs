//! `redis-model --port N`: the Redis model as a standalone server (`redis_model::standalone`).

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    redis_model::standalone::main(std::env::args_os())
}
