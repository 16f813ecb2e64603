//! `cargo xtask simulate` options, parsed by hand so every mistake gets a message that
//! names the option and the value.

use std::path::PathBuf;

use crate::subject::Subject;
use anyhow::{anyhow, bail, Result};

use crate::scenario;

/// Where the limiters' Redis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The in-process model over simulated sockets (deterministic).
    Model,
    /// Real `redis-server` processes over real TCP.
    Redis,
    /// The embedded mini-redis server (GET/SET only: the naive subject).
    MiniRedis,
}

impl Backend {
    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Model => "model",
            Backend::Redis => "redis",
            Backend::MiniRedis => "mini-redis",
        }
    }
}

/// Parsed options.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--list`.
    pub list: bool,
    /// `--scenario` (repeatable; empty = all).
    pub scenarios: Vec<String>,
    /// `--algorithm` (repeatable; empty = all): the library's algorithms and the catalogue's
    /// subjects, by name.
    pub algorithms: Vec<Subject>,
    /// `--policy` (repeatable; empty = each scenario's own).
    pub policies: Vec<String>,
    /// `--instances`.
    pub instances: Option<u32>,
    /// `--seed` (first seed).
    pub seed: u64,
    /// `--seeds` (how many).
    pub seeds: u64,
    /// `--duration` in ms.
    pub duration_ms: u64,
    /// Whether `--duration` was given (the real backends default to a shorter run).
    pub duration_explicit: bool,
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--out`.
    pub out: PathBuf,
    /// `--check-determinism`.
    pub check_determinism: bool,
    /// `--backend`.
    pub backend: Backend,
    /// `--redis-url`.
    pub redis_url: Option<String>,
    /// `--threads`.
    pub threads: usize,
    /// `--faults`: a schedule replacing the scenario's.
    pub faults: Option<Vec<crate::faults::Fault>>,
    /// `--no-sweeps`.
    pub sweeps: bool,
}

/// Help text.
pub const USAGE: &str = "\
usage: cargo xtask simulate [options]

Runs the scenario catalogue: many limiter instances in a deterministic simulated network
against the in-process Redis model, faults injected, every decision judged by an exact oracle.

options:
  --list                     list the scenarios and algorithms, then exit
  --scenario NAME            run only this scenario (repeatable)
  --algorithm NAME           run only this algorithm or subject (repeatable)
  --policy NAME              only this failure policy: fail-open, fail-closed, local-budget (repeatable)
  --instances N              application instances (default: each scenario's own)
  --seed N                   first seed (default 1)
  --seeds N                  number of seeds, from --seed on (default 1)
  --duration D               simulated time per run: 12000, 12000ms or 12s (default 12s;
                             4s with --backend redis or mini-redis, whose runs take real time)
  --json PATH                where to write the results JSON (default OUT/results.json)
  --out DIR                  output directory (default target/simulate)
  --check-determinism        run every case twice and require identical trace hashes
  --backend model|redis|mini-redis
                             model (default): in-process Redis model, deterministic
  --redis-url URL            with --backend redis: use this server instead of starting one
  --faults SCHEDULE          replace the scenario's faults (one --scenario only), e.g.
                             partition:0@3000..7000,redis-crash@4000..4200,script-flush@7000
                             kinds: partition:I partition-to-redis:I partition-from-redis:I hold:I
                             instance-crash:I redis-crash redis-crash-persistent redis-pause script-flush
  --threads N                worker threads (default: available cores)
  --no-sweeps                skip the race and skew sweeps the report charts";

fn value<'a>(args: &'a [String], i: &mut usize, flag: &str) -> Result<&'a str> {
    *i += 1;
    args.get(*i).map(String::as_str).ok_or_else(|| anyhow!("{flag} needs a value\n\n{USAGE}"))
}

fn number<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T> {
    text.parse().map_err(|_| anyhow!("{flag} expects a whole number, got {text:?}"))
}

/// Parses a duration: plain milliseconds, `ms` or `s` suffix.
pub fn duration_ms(text: &str) -> Result<u64> {
    let (digits, scale) = if let Some(d) = text.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = text.strip_suffix('s') {
        (d, 1000)
    } else {
        (text, 1)
    };
    let n: u64 =
        digits.trim().parse().map_err(|_| anyhow!("--duration expects e.g. 12000, 12000ms or 12s, got {text:?}"))?;
    let ms = n.checked_mul(scale).ok_or_else(|| anyhow!("--duration {text:?} is too long"))?;
    if !(100..=3_600_000).contains(&ms) {
        bail!("--duration must be between 100 ms and 1 h, got {ms} ms");
    }
    Ok(ms)
}

/// Parses the command line (without the program name).
pub fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        list: false,
        scenarios: vec![],
        algorithms: vec![],
        policies: vec![],
        instances: None,
        seed: 1,
        seeds: 1,
        duration_ms: 12_000,
        duration_explicit: false,
        json: None,
        out: PathBuf::from("target/simulate"),
        check_determinism: false,
        backend: Backend::Model,
        redis_url: None,
        threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        faults: None,
        sweeps: true,
    };
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        match flag {
            "--list" => o.list = true,
            "--check-determinism" => o.check_determinism = true,
            "--no-sweeps" => o.sweeps = false,
            "--scenario" => {
                let name = value(args, &mut i, flag)?;
                if scenario::find(name).is_none() {
                    let names: Vec<_> = scenario::catalogue().iter().map(|s| s.name).collect();
                    bail!("unknown scenario {name:?}; expected one of {}", names.join(", "));
                }
                o.scenarios.push(name.to_owned());
            }
            "--algorithm" => {
                let name = value(args, &mut i, flag)?;
                let Some(a) = Subject::named(name) else {
                    let names: Vec<String> = Subject::catalogue().iter().map(|s| s.name().to_owned()).collect();
                    bail!("unknown algorithm {name:?}; expected one of {}", names.join(", "));
                };
                if !o.algorithms.contains(&a) {
                    o.algorithms.push(a);
                }
            }
            "--policy" => {
                let name = value(args, &mut i, flag)?;
                if !["fail-open", "fail-closed", "local-budget"].contains(&name) {
                    bail!("unknown policy {name:?}; expected fail-open, fail-closed or local-budget");
                }
                o.policies.push(name.to_owned());
            }
            "--instances" => {
                let n: u32 = number(value(args, &mut i, flag)?, flag)?;
                if !(1..=64).contains(&n) {
                    bail!("--instances must be between 1 and 64, got {n}");
                }
                o.instances = Some(n);
            }
            "--seed" => o.seed = number(value(args, &mut i, flag)?, flag)?,
            "--seeds" => {
                o.seeds = number(value(args, &mut i, flag)?, flag)?;
                if !(1..=100_000).contains(&o.seeds) {
                    bail!("--seeds must be between 1 and 100000, got {}", o.seeds);
                }
            }
            "--duration" => {
                o.duration_ms = duration_ms(value(args, &mut i, flag)?)?;
                o.duration_explicit = true;
            }
            "--json" => o.json = Some(PathBuf::from(value(args, &mut i, flag)?)),
            "--out" => o.out = PathBuf::from(value(args, &mut i, flag)?),
            "--backend" => {
                o.backend = match value(args, &mut i, flag)? {
                    "model" => Backend::Model,
                    "redis" => Backend::Redis,
                    "mini-redis" => Backend::MiniRedis,
                    other => bail!("unknown backend {other:?}; expected model, redis or mini-redis"),
                }
            }
            "--redis-url" => o.redis_url = Some(value(args, &mut i, flag)?.to_owned()),
            "--threads" => {
                o.threads = number(value(args, &mut i, flag)?, flag)?;
                if !(1..=256).contains(&o.threads) {
                    bail!("--threads must be between 1 and 256, got {}", o.threads);
                }
            }
            "--faults" => {
                o.faults = Some(
                    crate::faults::parse_schedule(value(args, &mut i, flag)?).map_err(|e| anyhow!("--faults: {e}"))?,
                )
            }
            "-h" | "--help" => bail!("{USAGE}"),
            other => bail!("unknown option {other:?}\n\n{USAGE}"),
        }
        i += 1;
    }
    if o.faults.is_some() && o.scenarios.len() != 1 {
        bail!("--faults replaces one scenario's faults: give exactly one --scenario");
    }
    if o.redis_url.is_some() && o.backend != Backend::Redis {
        bail!("--redis-url only makes sense with --backend redis");
    }
    Ok(o)
}

impl Options {
    /// The options a replay command needs to run on the same backend: nothing for the model
    /// (the default), else `--backend` and any `--redis-url`.
    pub fn backend_args(&self) -> String {
        let mut out = String::new();
        if self.backend != Backend::Model {
            out.push_str(" --backend ");
            out.push_str(self.backend.name());
        }
        if let Some(url) = &self.redis_url {
            out.push_str(" --redis-url ");
            out.push_str(url);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn bad_arguments_get_messages_naming_them() {
        let err = |s: &str| parse(&args(s)).expect_err(s).to_string();
        assert!(err("--scenario nope").contains("unknown scenario \"nope\""));
        assert!(err("--algorithm nope").contains("unknown algorithm \"nope\""));
        assert!(err("--instances 0").contains("--instances must be between 1 and 64"));
        assert!(err("--seeds x").contains("--seeds expects a whole number, got \"x\""));
        assert!(err("--duration 5m").contains("--duration expects"));
        assert!(err("--duration 10").contains("between 100 ms and 1 h"));
        assert!(err("--seed").contains("--seed needs a value"));
        assert!(err("--frobnicate").contains("unknown option \"--frobnicate\""));
        assert!(err("--backend etcd").contains("unknown backend"));
        assert!(err("--policy maybe").contains("unknown policy \"maybe\""));
        assert!(err("--scenario swarm --faults hold@1").contains("--faults: fault \"hold@1\": hold needs an instance"));
        assert!(err("--faults redis-pause@1..5").contains("exactly one --scenario"));
        assert!(err("--redis-url redis://x").contains("--backend redis"));
    }

    #[test]
    fn good_arguments_parse() {
        let o =
            parse(&args("--scenario baseline --algorithm gcra --algorithm naive --seeds 3 --duration 5s")).expect("ok");
        assert_eq!(o.scenarios, vec!["baseline"]);
        let naive = Subject::Client(crate::subject::ClientSubject::NaiveGetSet);
        assert_eq!(o.algorithms, vec![Subject::Algorithm(limiter::Algorithm::Gcra), naive]);
        assert_eq!((o.seeds, o.duration_ms), (3, 5_000));
    }

    #[test]
    fn replays_name_the_backend_they_ran_on() {
        for given in
            ["", "--backend mini-redis", "--backend redis", "--backend redis --redis-url redis://127.0.0.1:6390"]
        {
            let o = parse(&args(given)).expect(given);
            let again = parse(&args(&o.backend_args())).expect("replay arguments parse");
            assert_eq!((again.backend, again.redis_url), (o.backend, o.redis_url.clone()), "{given}");
            assert_eq!(o.backend_args().trim(), given);
        }
    }
}
