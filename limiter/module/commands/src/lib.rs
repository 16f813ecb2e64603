//! The Redis module's rate-limit commands (`RATELIMIT.FW`, `.SW`, `.SL`, `.TB`, `.GCRA`, and
//! `.RULES` for several rules of one request all-or-nothing, `.LEASE.GCRA` and `.LEASE.TB` for
//! leases, `.CONCURRENCY` for a concurrency limit's permits), apart
//! from any server: each reads and writes keys through [`Keys`], what a Redis offers a command
//! (read a string, a hash field, a sorted set's members and scores; write a value with or
//! without a new expiry, trim, add and remove members, expire), and decides by the algorithm twins the scripts
//! mirror. The module (`redis-ratelimit-module`) implements [`Keys`] over Redis's module API;
//! the harness's in-process Redis model implements it over its own commands, so both decide by
//! this one code. A crate of its own so the model links none of the module API (its build
//! needs libclang, and its cdylib sets the process's allocator).
//!
//! Each command takes exactly the KEYS and ARGV of its algorithm's script (`RATELIMIT.RULES`:
//! the all-or-nothing script's, the key count after the first key) and answers its reply; arguments the library would never send (a quota it refuses, a cost above the quota's
//! capacity, anything but digits) are refused by name, where a script would compute something:
//! inside Redis the twins' arithmetic must stay in the range where it is exact.

#![forbid(unsafe_code)]

mod args;
mod buckets;
mod concurrency;
mod guard;
mod held;
mod leases;
mod log;
mod number;
mod rules;
mod windows;

use redis_ratelimit::harness::{algo, mode_scripts, rules_script, scripts};
pub use redis_ratelimit::Algorithm;

pub use number::{argument, stored_int};

/// What a key holds that is not a string, as far as a command cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A hash.
    Hash,
    /// A sorted set.
    ZSet,
    /// Anything else.
    Other,
}

/// Why a command answered an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The wrong number of arguments.
    Arity,
    /// A key holds another type than the command reads (`WRONGTYPE`).
    WrongType,
    /// Anything else, as Redis's error text (`ERR ...`).
    Error(String),
}

/// A sorted set's member and its score, as Redis writes them.
pub type Member = (Vec<u8>, Vec<u8>);

/// A key's operations, as a command inside a Redis sees them (see the module docs). Every
/// write is the caller's to replicate, by its effect.
pub trait Keys {
    /// Redis's clock, in µs since the epoch (what a script computes from `TIME`).
    fn now_us(&mut self) -> u64;
    /// The string at `key`, read by `read`: None when `key` holds nothing, and what it holds
    /// when that is not a string (one look at the key for its type and its value).
    fn string<T>(&mut self, key: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Kind>;
    /// The hash field `field` of `key` (None when it has none).
    fn hash_field(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>>;
    /// The sorted set `key`'s members scored above `after` (every member for None), each with
    /// its score as Redis writes it (`ZRANGEBYSCORE key (after +inf WITHSCORES`, or from
    /// `-inf`), lowest first.
    fn members_above(&mut self, key: &[u8], after: Option<i128>) -> Result<Vec<Member>, Refusal>;
    /// The scores alone of the members scored above `after`.
    fn scores_above(&mut self, key: &[u8], after: i128) -> Result<Vec<Vec<u8>>, Refusal> {
        Ok(self.members_above(key, Some(after))?.into_iter().map(|(_, score)| score).collect())
    }
    /// Sets `key` to the string `value`, expiring in `ttl_ms`, or keeping its expiry when None
    /// (`SET ... PX` or `SET ... KEEPTTL`).
    fn set(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> Result<(), Refusal>;
    /// Removes the sorted set `key`'s members scored at most `through`
    /// (`ZREMRANGEBYSCORE key -inf through`).
    fn trim(&mut self, key: &[u8], through: u64) -> Result<(), Refusal>;
    /// Adds `members` to the sorted set `key`, each scored `score` (`ZADD`; a member already
    /// there takes the new score).
    fn add(&mut self, key: &[u8], score: u64, members: &[String]) -> Result<(), Refusal>;
    /// Removes `member` from the sorted set `key` (`ZREM`).
    fn remove(&mut self, key: &[u8], member: &[u8]) -> Result<(), Refusal>;
    /// Expires `key` in `ttl_ms` (`PEXPIRE`).
    fn expire(&mut self, key: &[u8], ttl_ms: u64) -> Result<(), Refusal>;
    /// A write Redis refuses with `refusal` (an `INCRBY` of a count it cannot read): it fails
    /// where the other writes happen, so a command that holds its writes back holds this one.
    fn refused_write(&mut self, refusal: Refusal) -> Result<(), Refusal> {
        Err(refusal)
    }
}

/// One of the module's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// One algorithm's decision (`RATELIMIT.FW`, `.SW`, `.SL`, `.TB`, `.GCRA`), taking its
    /// script's KEYS and ARGV.
    Decide(Algorithm),
    /// `RATELIMIT.RULES`: several rules of one request all-or-nothing, taking the
    /// all-or-nothing script's KEYS and ARGV with the key count after the first key (see
    /// `rules.rs`).
    Rules,
    /// A lease of a bucket's units (`RATELIMIT.LEASE.GCRA`, `.LEASE.TB`), taking its lease
    /// script's KEYS and ARGV.
    Lease(Algorithm),
    /// `RATELIMIT.CONCURRENCY`: a concurrency limit's acquire, renewal, release or peek, taking
    /// the concurrency script's KEYS and ARGV.
    Concurrency,
}

/// What a command answered: the script's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// One decision (or a concurrency command's answer): `[allowed, remaining, retry_after_ms,
    /// reset_after_ms, now_ms]`.
    One([u64; 5]),
    /// Several rules: `[allowed, rules, then per rule the above and consumed]`.
    Rules(Vec<u64>),
    /// A lease: `[granted, start_us, written (two numbers), credited, remaining,
    /// retry_after_ms, reset_after_ms, now_ms]`.
    Lease(leases::LeaseReply),
}

impl Reply {
    /// Its integers, in order.
    pub fn values(&self) -> &[u64] {
        match self {
            Reply::One(reply) => reply,
            Reply::Rules(reply) => reply,
            Reply::Lease(reply) => reply,
        }
    }
}

impl Command {
    /// Every command: one deciding each algorithm of `Algorithm::ALL`, the rules command, a
    /// lease command for each algorithm that leases, and the concurrency command.
    pub fn all() -> impl Iterator<Item = Command> {
        let leasing = Algorithm::ALL.into_iter().filter(|&a| algo::lease::can_lease(a));
        let decide = Algorithm::ALL.into_iter().map(Command::Decide);
        decide.chain([Command::Rules]).chain(leasing.map(Command::Lease)).chain([Command::Concurrency])
    }

    /// Its name, as clients send it (`RATELIMIT.GCRA`): the one the library sends.
    pub const fn name(self) -> &'static str {
        match self {
            Command::Decide(algorithm) => scripts::module_command(algorithm),
            Command::Rules => rules_script::MODULE_COMMAND,
            Command::Lease(algorithm) => match mode_scripts::lease_module_command(algorithm) {
                Some(name) => name,
                None => "RATELIMIT.LEASE",
            },
            Command::Concurrency => scripts::CONCURRENCY_MODULE_COMMAND,
        }
    }

    /// The command named `name`, in any case.
    pub fn named(name: &[u8]) -> Option<Command> {
        Command::all().find(|c| c.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// Runs the command on `keys` with `args` (its arguments, after its name).
    pub fn run(self, keys: &mut impl Keys, args: &[&[u8]]) -> Result<Reply, Refusal> {
        match self {
            Command::Decide(algorithm) => decide(algorithm, keys, args).map(Reply::One),
            Command::Rules => rules::rules(keys, args).map(Reply::Rules),
            Command::Lease(Algorithm::Gcra) => leases::lease_gcra(keys, args).map(Reply::Lease),
            Command::Lease(Algorithm::TokenBucket) => leases::lease_token_bucket(keys, args).map(Reply::Lease),
            Command::Lease(other) => Err(Refusal::Error(format!("ERR {other} cannot lease"))),
            Command::Concurrency => concurrency::concurrency(keys, args).map(Reply::One),
        }
    }

    /// Where its keys are among `args` (its arguments, after its name; 0 is the first), as
    /// Redis asks a command whose keys move (`COMMAND GETKEYS`, a cluster's routing): only
    /// positions within `args`, whatever they hold.
    pub fn key_positions(self, args: &[&[u8]]) -> Vec<usize> {
        match self {
            Command::Decide(_) | Command::Lease(_) | Command::Concurrency => {
                (!args.is_empty()).then_some(0).into_iter().collect()
            }
            Command::Rules => rules::key_positions(args),
        }
    }
}

/// One decision of `algorithm` on `keys` with `args` (its script's KEYS, then ARGV): the
/// script's reply, `[allowed, remaining, retry_after_ms, reset_after_ms, now_ms]`.
fn decide(algorithm: Algorithm, keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    match algorithm {
        Algorithm::FixedWindow => windows::fixed_window(keys, args),
        Algorithm::SlidingWindow => windows::sliding_window(keys, args),
        Algorithm::SlidingLog => log::sliding_log(keys, args),
        Algorithm::TokenBucket => buckets::token_bucket(keys, args),
        Algorithm::Gcra => buckets::gcra(keys, args),
        // The library's algorithms are one enum it may grow; a new one has no command yet.
        other => Err(Refusal::Error(format!("ERR the module has no command for {other}"))),
    }
}

/// The script's reply for `outcome` decided at `now_ms`.
fn reply(outcome: &redis_ratelimit::harness::algo::Outcome, now_ms: u64) -> [u64; 5] {
    [u64::from(outcome.allowed), outcome.remaining, outcome.retry_after_ms, outcome.reset_after_ms, now_ms]
}
