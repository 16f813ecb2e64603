//! The library as the harness sees it (feature `harness`): building blocks a user never needs,
//! which the simulator, the property suites and the conformance tests drive directly.
//!
//! - [`algo`]: each algorithm's pure twin, `step(quota, &mut state, now_ms, cost)`, with time
//!   as an argument; the oracle replays requests through them.
//! - [`scripts`]: the Lua scripts and their wire contract: the KEYS and ARGV a
//!   [`scripts::Request`] is sent with, and how a reply is read back. [`crate::RedisStore`]
//!   uses exactly this, so a suite that sends the same call tests what the library sends.
//! - [`CircuitBreaker`] and its [`Attempt`]s, [`LocalStore`] and [`KeySpace`]: the pieces a
//!   [`crate::Limiter`] is made of, for the loom models and for tests that need one alone.
//!
//! Nothing here is covered by semver; `docs/ARCHITECTURE.md` says who may import it.

/// The pure algorithm twins; see [`crate::harness`].
pub mod algo {
    pub use crate::algo::*;
}

/// The Lua scripts and their wire contract; see [`crate::harness`].
pub mod scripts {
    pub use crate::scripts::*;
}

/// The all-or-nothing script of several rules and its wire contract; see [`crate::harness`].
pub mod rules_script {
    pub use crate::rules_script::*;
}

/// The round-trip modes' scripts (leases, batches) and their wire contract; see
/// [`crate::modes`].
pub mod mode_scripts {
    pub use crate::modes::wire::*;
}

pub use crate::breaker::{Attempt, CircuitBreaker};
pub use crate::key::KeySpace;
pub use crate::modes::lease::{LeaseLedger, LedgerEntry};
pub use crate::store::eval::EvalScript;
pub use crate::store::local::LocalStore;
pub use crate::store::redis::RawCallError;

/// `store`, deciding the charges of each hash tag of a request in their own calls, in two
/// passes, as a store does by itself on a Redis Cluster (see [`crate::enforce`]): over one
/// Redis, to check what that costs.
pub fn split_by_tag(store: crate::RedisStore) -> crate::RedisStore {
    store.split_by_tag()
}

/// `builder`, recording what its leases do, per key, in `ledger`, which outlives the limiter
/// (and a crashed instance): the harness holds the instances to what leasing cost.
pub fn lease_ledger(builder: crate::LimiterBuilder, ledger: std::sync::Arc<LeaseLedger>) -> crate::LimiterBuilder {
    builder.lease_ledger(ledger)
}

/// Runs `call` on `store`'s connection with the store's timeout, connecting and reconnecting
/// exactly as the store's own calls do: for the harness's subjects that are not one of the
/// library's scripts. A failure is [`RawCallError::Unavailable`] when a failure policy would
/// answer (the connection is then dropped, as after the store's own calls), or
/// [`RawCallError::Refused`] with Redis's error when Redis answered with one.
pub async fn call_raw<T, F, Fut>(store: &crate::RedisStore, call: F) -> Result<T, RawCallError>
where
    F: FnOnce(crate::store::StoreConnection) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    store.call_raw(call).await
}
