//! What a run drives, its *subject*: one of the library's algorithms through the real
//! [`redis_ratelimit::Limiter`], a script described by a subject file ([`file`](mod@file)), a limiter whose
//! calling library makes several round trips ([`client`]: the naive GET-then-SET counter, INCR
//! then EXPIRE), or several rules through the library's enforcement point. "Subject" always
//! includes the library's own algorithms; the others are the subjects the library is compared
//! with, most of them shipped by real systems and broken.
//!
//! Every kind is driven the same way by the simulator and the real lane: an instance builds a
//! [`Caller`] over its connection to Redis and its own clock, and asks it about each request.
//! The answer says who decided and, where known, by which clock; the checkers hold it to the
//! subject's [`Promise`].

pub mod client;
pub mod enforcer;
pub mod file;
pub mod release;
pub mod reply;
pub mod script;
pub mod template;

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis_ratelimit::store::Connector;
use redis_ratelimit::{
    Algorithm, BreakerConfig, Clock, Decision, Error, FailurePolicy, Limiter, Quota, RedisStore, Source, TimeSource,
};

use crate::mode::Mode;
pub use crate::multi_rule::RulesSubject;
use crate::promise::Promise;
pub use client::ClientSubject;
pub use file::{FileError, OnError, SubjectFile};

/// ADR-002's token-bucket script as its record wrote it, and the subject file that says how
/// its Java caller invokes it (`docs/ORIGINS.md`).
pub static ADR002: LazyLock<Arc<SubjectFile>> = LazyLock::new(|| {
    let text = include_str!("../../../subjects/adr002.toml");
    let file = SubjectFile::parse(std::path::Path::new("sim/subjects/adr002.toml"), text, |script| {
        if script == "adr002.lua" {
            Ok(include_str!("../../../subjects/adr002.lua").to_owned())
        } else {
            Err(format!("the built-in ADR-002 subject names {script:?}, not adr002.lua"))
        }
    });
    Arc::new(file.expect("the built-in ADR-002 subject file is valid (tested)"))
});

/// What a run drives.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// One of the library's algorithms, through `redis_ratelimit::Limiter`.
    Library(Algorithm),
    /// One of the library's algorithms, through `redis_ratelimit::Limiter` on a store that
    /// decides with the Redis module's commands (`RedisStore::with_module`): the row beside
    /// its script row, held to the same promise.
    Module(Algorithm),
    /// A script described by a subject file.
    Script(Arc<SubjectFile>),
    /// A limiter of several round trips, written in the harness.
    Client(ClientSubject),
    /// Several rules per request through the library's enforcement point (the multi-rule
    /// scenario's subjects only).
    Rules(RulesSubject),
}

impl Subject {
    /// Whether this subject can run in `mode`: modes are the library's, and only the bucket
    /// algorithms lease.
    pub fn runs_in(&self, mode: Mode) -> bool {
        match (mode, self) {
            (Mode::Plain, _) => true,
            (Mode::Lease, Subject::Library(a) | Subject::Module(a)) => {
                redis_ratelimit::harness::algo::lease::can_lease(*a)
            }
            (_, Subject::Library(_) | Subject::Module(_)) => true,
            _ => false,
        }
    }

    /// The subjects `cargo xtask simulate` shows beside the library's algorithms: the seeds'
    /// findings.
    pub fn catalogue() -> Vec<Subject> {
        let mut all: Vec<Subject> = Algorithm::ALL.into_iter().map(Subject::Library).collect();
        all.push(Subject::Script(ADR002.clone()));
        all.extend(ClientSubject::ALL.into_iter().map(Subject::Client));
        all.extend(RulesSubject::ALL.into_iter().map(Subject::Rules));
        all
    }

    /// The library's algorithms and its enforcement point deciding with the Redis module
    /// (`--store module`), each named as its script row and `-module`.
    pub fn modules() -> Vec<Subject> {
        let mut all: Vec<Subject> = Algorithm::ALL.into_iter().map(Subject::Module).collect();
        all.push(Subject::Rules(RulesSubject::OneCallModule));
        all
    }

    /// Looks a catalogue subject, or a module row, up by name.
    pub fn named(name: &str) -> Option<Subject> {
        Subject::catalogue().into_iter().chain(Subject::modules()).find(|s| s.name() == name)
    }

    /// Its name in tables, results and replay commands.
    pub fn name(&self) -> &str {
        match self {
            Subject::Library(a) => a.name(),
            Subject::Module(a) => {
                static NAMES: LazyLock<[String; Algorithm::ALL.len()]> =
                    LazyLock::new(|| Algorithm::ALL.map(|a| format!("{}-module", a.name())));
                // `Algorithm::ALL` lists the variants in declaration order (checked where it is defined).
                &NAMES[*a as usize]
            }
            Subject::Script(f) => &f.name,
            Subject::Client(c) => c.name(),
            Subject::Rules(r) => r.name(),
        }
    }

    /// Whether it is the library's own (one of its algorithms, or its enforcement point),
    /// whose every promise is the library's: anything else is a subject, whose broken promise
    /// is a finding.
    pub fn is_library(&self) -> bool {
        match self {
            Subject::Library(_) | Subject::Module(_) => true,
            Subject::Rules(r) => r.is_library(),
            _ => false,
        }
    }

    /// What it is, in a line, for `--list`.
    pub fn summary(&self) -> String {
        match self {
            Subject::Rules(RulesSubject::OneCall) => {
                "the library's enforcement point: per-user, per-route and global rules in one script call".into()
            }
            Subject::Rules(RulesSubject::OneCallModule) => {
                "the library's enforcement point on the Redis module: every rule in one RATELIMIT.RULES".into()
            }
            Subject::Rules(RulesSubject::PerSlot) => {
                "subject: the same rules decided slot by slot, as across Redis Cluster slots".into()
            }
            Subject::Module(_) => format!("the library's algorithm on the Redis module: {}", self.promise()),
            s if s.is_library() => format!("the library's algorithm: {}", s.promise()),
            s => format!("subject: means to be {}, its breaks are findings", s.promise()),
        }
    }

    /// Whether it enforces several rules per request (runs only in the multi-rule scenario,
    /// which runs only these).
    pub fn is_rules(&self) -> bool {
        matches!(self, Subject::Rules(_))
    }

    /// What it promises.
    pub fn promise(&self) -> Promise {
        match self {
            Subject::Library(a) | Subject::Module(a) => Promise::of(*a),
            Subject::Script(f) => f.promise,
            Subject::Client(c) => c.promise(),
            // Each rule makes its own promise; `crate::multi_rule::check` holds them.
            Subject::Rules(_) => Promise::None,
        }
    }

    /// Whether its decisions read the instance's clock whatever the scenario's time source
    /// says (scripts fed the caller's clock, the naive counter's window).
    pub fn forces_client_time(&self) -> bool {
        match self {
            Subject::Library(_) | Subject::Module(_) => false,
            Subject::Script(f) => f.client_time(),
            Subject::Client(c) => c.reads_client_clock(),
            Subject::Rules(_) => false,
        }
    }

    /// Whether its time is chosen by the scenario (only the library's algorithms offer both).
    pub fn has_time_source_choice(&self) -> bool {
        matches!(self, Subject::Library(_) | Subject::Module(_))
    }

    /// Whether its calls can fail over to the scenario's failure policy (the library's, and
    /// every rule of the enforcement point); a subject's caller does what its file says.
    pub fn has_failure_policy_choice(&self) -> bool {
        matches!(self, Subject::Library(_) | Subject::Module(_) | Subject::Rules(_))
    }

    /// The failure policy it really runs with: the scenario's for the library, else the
    /// subject's own (fail open unless its file says deny).
    pub fn effective_policy(&self, scenario: FailurePolicy) -> FailurePolicy {
        match self {
            Subject::Library(_) | Subject::Module(_) | Subject::Rules(_) => scenario,
            Subject::Script(f) if f.on_error == OnError::Deny => FailurePolicy::FailClosed,
            _ => FailurePolicy::FailOpen,
        }
    }

    /// The most one request may cost: 1 for subjects that take no cost.
    pub fn max_cost(&self, q: &Quota) -> u64 {
        match self {
            Subject::Library(a) | Subject::Module(a) => q.capacity(*a),
            Subject::Script(f) if f.takes_cost() => self.promise().capacity(q),
            _ => 1,
        }
    }

    /// The quota it runs with: its own when its file names one, else the scenario's.
    pub fn quota(&self, scenario: Quota) -> Quota {
        match self {
            Subject::Script(f) => f.quota.unwrap_or(scenario),
            _ => scenario,
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// By which clock, and when, a store decision was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    /// Redis's clock, read by the script, at this reading (ms since the Unix epoch).
    Server(u64),
    /// Redis's clock, between these two readings of its `TIME` (µs since the Unix epoch):
    /// the script ran after the first and before the second.
    Between(u64, u64),
    /// The instance's clock, read when the request started.
    Client,
    /// An unknown moment between the request's start and its return (Redis's clock, or a
    /// script that mixes the caller's clock with Redis's expiry).
    Unknown,
}

/// What a subject answered about one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Admitted?
    pub allowed: bool,
    /// Units the answer admitted or denied (a partial grant may cut the request's cost).
    pub cost: u64,
    /// Who decided.
    pub source: Source,
    /// The answer's Retry-After (0 when it has none).
    pub retry_after_ms: u64,
    /// When the store decided.
    pub decided_by: DecidedBy,
    /// Set when the call failed with an error (a script error, a refused command): the text.
    pub error: Option<String>,
    /// For a subject of several rules: each rule's part, in rule order (empty otherwise).
    pub rules: Vec<RuleMark>,
}

/// One rule's part in a multi-rule decision, as Redis (or the failure policy) answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleMark {
    /// Whether this rule alone admitted the request.
    pub allowed: bool,
    /// Whether the request's cost was taken from this rule.
    pub consumed: bool,
}

impl Answer {
    /// The answer of the library's limiter running `algorithm`.
    pub fn of_limiter(
        result: &Result<Decision, Error>,
        cost: u64,
        algorithm: Algorithm,
        time_source: TimeSource,
    ) -> Answer {
        match result {
            Ok(d) => Answer {
                allowed: d.allowed,
                cost,
                source: d.source,
                retry_after_ms: d.retry_after.as_millis() as u64,
                decided_by: match (time_source, algorithm) {
                    // GCRA keeps Redis's time in µs and reports the millisecond it fell in.
                    (TimeSource::Server, Algorithm::Gcra) => {
                        let us = d.decided_at_ms.saturating_mul(1000);
                        DecidedBy::Between(us, us + 999)
                    }
                    (TimeSource::Server, _) => DecidedBy::Server(d.decided_at_ms),
                    _ => DecidedBy::Client,
                },
                error: None,
                rules: Vec::new(),
            },
            Err(e) => Answer {
                allowed: false,
                cost,
                source: Source::Store,
                retry_after_ms: 0,
                decided_by: DecidedBy::Unknown,
                error: Some(e.to_string()),
                rules: Vec::new(),
            },
        }
    }

    /// What a subject's caller does when Redis cannot be asked or refuses the call.
    pub fn failed(allow: bool, cost: u64, error: Option<String>) -> Answer {
        Answer {
            allowed: allow,
            cost,
            source: if allow { Source::FailOpen } else { Source::FailClosed },
            retry_after_ms: 0,
            decided_by: DecidedBy::Unknown,
            error,
            rules: Vec::new(),
        }
    }
}

/// Everything an instance needs to build its caller.
pub struct CallerSpec<'a> {
    /// What to drive.
    pub subject: &'a Subject,
    /// The quota it enforces.
    pub quota: Quota,
    /// The scenario's failure policy (the library's algorithms only).
    pub policy: FailurePolicy,
    /// The scenario's time source (the library's algorithms only).
    pub time_source: TimeSource,
    /// The instance's clock.
    pub clock: Arc<dyn Clock>,
    /// How to reach Redis.
    pub connector: Box<dyn Connector>,
    /// A store to use instead of one over `connector` (a cluster's, whose client dials its
    /// nodes itself); its timeout is set to `timeout`.
    pub store: Option<RedisStore>,
    /// Each call's timeout.
    pub timeout: Duration,
    /// The breaker of the library's limiter.
    pub breaker: BreakerConfig,
    /// A prefix for every key (runs against a shared Redis clean up their own keys).
    pub key_prefix: Option<String>,
    /// What the instance shares with the harness and the run's other instances.
    pub run: RunShared,
    /// Makes request ids unique across instances.
    pub instance: u32,
    /// The library's round-trip mode (the library's algorithms only).
    pub mode: Mode,
    /// Where the library's leases are recorded, outliving the instance (leases only).
    pub lease_ledger: Option<Arc<redis_ratelimit::harness::LeaseLedger>>,
}

/// What every instance of a run shares with the harness.
#[derive(Debug, Clone, Default)]
pub struct RunShared {
    /// Bumped by the harness whenever Redis loses its data: subjects with setup commands send
    /// them again.
    pub data_epoch: Arc<AtomicU64>,
    /// Counts the commands the harness adds to a subject's calls (the `TIME`s it brackets a
    /// script with), so what the run cost Redis leaves them out.
    pub instrument_commands: Arc<AtomicU64>,
}

/// An instance's way of asking about a request.
pub enum Caller {
    /// The library.
    Limiter(Limiter),
    /// A subject file's script.
    Script(script::ScriptCaller),
    /// A client-side subject.
    Client(client::ClientCaller),
    /// The enforcement point.
    Rules(enforcer::RulesCaller),
}

impl Caller {
    /// Builds the caller `spec` describes.
    pub fn build(spec: CallerSpec<'_>) -> anyhow::Result<Caller> {
        // A connector that erases its type, so every store is built the same way.
        struct Boxed(Box<dyn Connector>);
        impl Connector for Boxed {
            fn connect(&self) -> redis_ratelimit::store::ConnectFuture<'_> {
                self.0.connect()
            }
            fn describe(&self) -> String {
                self.0.describe()
            }
        }
        let store = match spec.store {
            Some(store) => store,
            None => RedisStore::new(Boxed(spec.connector)),
        }
        .with_timeout(spec.timeout)?;
        Ok(match spec.subject {
            Subject::Library(algorithm) | Subject::Module(algorithm) => {
                let store = if matches!(spec.subject, Subject::Module(_)) { store.with_module()? } else { store };
                let mut builder = Limiter::builder(*algorithm, spec.quota)
                    .redis(store)
                    .clock(spec.clock)
                    .time_source(spec.time_source)
                    .failure_policy(spec.policy)
                    .breaker(spec.breaker);
                if let Some(prefix) = &spec.key_prefix {
                    builder = builder.key_prefix(prefix);
                }
                if let Some(ledger) = spec.lease_ledger {
                    builder = redis_ratelimit::harness::lease_ledger(builder, ledger);
                }
                Caller::Limiter(spec.mode.configure(builder).build()?)
            }
            Subject::Script(file) => Caller::Script(script::ScriptCaller::new(
                file.clone(),
                store,
                spec.quota,
                spec.clock,
                spec.key_prefix.map(|p| format!("{p}:")).unwrap_or_default(),
                spec.instance,
                spec.run,
            )),
            Subject::Client(kind) => Caller::Client(client::ClientCaller::new(
                *kind,
                store,
                spec.quota,
                spec.clock,
                spec.key_prefix.map(|p| format!("{p}:")).unwrap_or_default(),
            )),
            Subject::Rules(kind) => Caller::Rules(enforcer::RulesCaller::new(
                *kind,
                store,
                spec.quota,
                spec.policy,
                spec.clock,
                spec.breaker,
                spec.key_prefix.as_deref(),
            )?),
        })
    }

    /// Asks about one request of `cost` on `key`; `seq` numbers the instance's requests.
    pub async fn check(&self, key: &str, cost: u64, seq: u64) -> Answer {
        match self {
            Caller::Limiter(l) => Answer::of_limiter(&l.check_n(key, cost).await, cost, l.algorithm(), l.time_source()),
            Caller::Script(s) => s.check(key, cost, seq).await,
            Caller::Client(c) => c.check(key, cost).await,
            Caller::Rules(r) => r.check(key, cost).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ADR-002's script is kept byte for byte; this is the SHA-1 of the text as the record
    /// printed it, so an accidental "fix" of the subject fails here.
    #[test]
    fn adr002_is_the_record_byte_for_byte_and_its_file_is_valid() {
        let sha = sha1_smol::Sha1::from(ADR002.source.as_bytes()).digest().to_string();
        assert_eq!(sha, "3bca5d9a3ab7511baab046228b3b09c899c5e0e5");
        assert!(ADR002.source.contains("math.floor((timePassed * refillRate) / 1000)"));
        assert_eq!(ADR002.promise, Promise::TokenBucket);
        assert!(ADR002.client_time() && ADR002.takes_cost());
    }

    #[test]
    fn the_catalogue_names_each_subject_once_and_finds_it_by_name() {
        let all = Subject::catalogue();
        let names: Vec<&str> = all.iter().map(Subject::name).collect();
        assert_eq!(
            names,
            [
                "fixed-window",
                "sliding-window",
                "sliding-log",
                "token-bucket",
                "gcra",
                "adr002",
                "naive",
                "incr-expire",
                "rules",
                "rules-per-slot"
            ]
        );
        for s in &all {
            assert_eq!(Subject::named(s.name()).as_ref(), Some(s));
        }
        assert!(all.iter().filter(|s| matches!(s, Subject::Library(_))).all(|s| s.has_time_source_choice()));
        // The enforcement point is the library's; its rules read Redis's clock.
        let rules = Subject::named("rules").expect("in the catalogue");
        assert!(rules.is_library() && rules.is_rules() && !rules.has_time_source_choice());
        assert!(!Subject::named("rules-per-slot").expect("in the catalogue").is_library());
        assert_eq!(
            Subject::named("adr002").map(|s| s.effective_policy(FailurePolicy::FailClosed)),
            Some(FailurePolicy::FailOpen)
        );
    }
}
