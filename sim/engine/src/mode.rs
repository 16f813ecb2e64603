//! The library's round-trip modes as the simulator runs them (`redis_ratelimit::modes`): each scenario
//! lists the modes it runs beside the plain library, and each mode is held to its own promise
//! on top of the algorithm's bound:
//!
//! - **denial cache**: every denial the cache answered is one Redis would have answered too. At
//!   each such decision the harness asks the model itself, at that very instant and outside the
//!   network, whether the algorithm's script would have admitted the request (a peek, which
//!   writes nothing); any yes breaks the mode. A Redis that lost its data forgives every key at
//!   once, which the cache cannot know: decisions until one period after such a loss are not
//!   held to it.
//! - **leases**: the instances together still keep the algorithm's bound (the bound check counts lease
//!   decisions as store decisions), and the net under-admission against the exact oracle (what
//!   a failure policy denied left out) is at most the units leased and never spent, plus one
//!   lifetime's refill each time a key comes within a lifetime of rest (`oracle::near_rest`).
//! - **batching**: no promise beyond the algorithm's; the batch script's decisions are checked
//!   against the requests' own calls by the conformance and property suites.

use std::fmt;
use std::time::Duration;

use redis_ratelimit::modes::{Batching, DenialCache, Leases};
use redis_ratelimit::{Algorithm, LimiterBuilder, Quota};

/// The lease lifetime the simulator runs leases with.
pub const LEASE_LIFETIME_MS: u64 = 100;

/// A round-trip mode of the library, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Mode {
    /// No mode: one script call per decision.
    #[default]
    Plain,
    /// The denial cache.
    DenialCache,
    /// Leases (token bucket and GCRA).
    Lease,
    /// Batching.
    Batch,
}

impl Mode {
    /// Every mode, plain first.
    pub const ALL: [Mode; 4] = [Mode::Plain, Mode::DenialCache, Mode::Lease, Mode::Batch];

    /// The name in tables, results and `--mode` (plain is the empty mode of the results).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::DenialCache => "denial-cache",
            Mode::Lease => "lease",
            Mode::Batch => "batch",
        }
    }

    /// The name results carry: empty for plain, so older files read the same.
    pub fn results_name(self) -> &'static str {
        match self {
            Mode::Plain => "",
            other => other.name(),
        }
    }

    /// Looks a mode up by name.
    pub fn named(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// What one sentence says the mode does, for `--help` and `--list`.
    pub fn description(self) -> &'static str {
        match self {
            Mode::Plain => "one script call per decision",
            Mode::DenialCache => "a key Redis just denied is denied locally until its Retry-After",
            Mode::Lease => "instances lease units of busy keys and spend them locally (token bucket, GCRA)",
            Mode::Batch => "concurrent checks of one instance go to Redis as one script call",
        }
    }

    /// `builder` with this mode on, as the simulator configures it.
    pub fn configure(self, builder: LimiterBuilder) -> LimiterBuilder {
        match self {
            Mode::Plain => builder,
            Mode::DenialCache => builder.denial_cache(DenialCache::default()),
            Mode::Lease => builder.leases(Leases::default().with_lifetime(Duration::from_millis(LEASE_LIFETIME_MS))),
            Mode::Batch => builder.batching(Batching::default()),
        }
    }

    /// Units of burst a lease cannot use when a key comes near rest: one lifetime's refill.
    pub fn near_rest_cost(self, algorithm: Algorithm, q: &Quota) -> u64 {
        match self {
            Mode::Lease => {
                q.capacity(algorithm)
                    - Leases::default().with_lifetime(Duration::from_millis(LEASE_LIFETIME_MS)).capacity(algorithm, q)
            }
            _ => 0,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
