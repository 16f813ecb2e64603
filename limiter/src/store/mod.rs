//! Where key state lives: in Redis ([`RedisStore`]: one server reached through a
//! [`Connector`] or a URL, with [`Tls`] when it asks for it, the primary Sentinel names, or a
//! Redis Cluster) or in this process ([`AtomicLimiter`] for one lock-free key; the in-process store behind
//! [`crate::LimiterBuilder::local`] for many). Both implement `StateStore`, the one interface every
//! operation goes through.

mod atomic;
mod cluster;
mod connector;
mod dial;
#[cfg_attr(not(feature = "harness"), allow(unreachable_pub))]
pub(crate) mod eval;
mod loaded;
#[cfg_attr(not(feature = "harness"), allow(dead_code, unreachable_pub))]
pub(crate) mod local;
mod modes;
pub(crate) mod module;
mod node;
pub(crate) mod redis;
mod refusal;
mod state;
mod tls;

pub use atomic::AtomicLimiter;
pub use connector::{BoxedStream, ConnectFuture, Connector, Stream, TcpConnector};
pub use redis::{RedisStore, DEFAULT_TIMEOUT};
// The harness's own callers run their scripts on the store's connection
// (`harness::call_raw`); users never see it, so redis-rs types stay out of the surface.
#[cfg(feature = "harness")]
pub use redis::StoreConnection;
pub use tls::Tls;

use std::future::Future;

use crate::algo::concurrency::PermitOp;
use crate::algo::Outcome;
use crate::charge::{Charge, Claim};
use crate::decision::Degraded;
use crate::error::Error;
use crate::key::KeySpace;
use crate::rules_script::RulesReply;

/// Where state lives, as every operation of a front door reaches it: implemented once in
/// process ([`local::LocalStore`]) and once on Redis ([`RedisStore`], by scripts or the
/// module's commands). A store only decides; the breaker, the failure policy and the metrics
/// around it are `crate::gate`'s. `keys` names a charge's Redis keys; every time is in ms
/// on this instance's clock (a server-time charge sends none, and Redis reads its own).
pub(crate) trait StateStore {
    /// Decides one charge (cost 0 peeks): its outcome and the clock reading it was decided by.
    fn decide(
        &self,
        charge: &Charge<'_>,
        keys: &KeySpace,
        now_ms: u64,
    ) -> impl Future<Output = Result<(Outcome, u64), StoreError>> + Send;

    /// Decides several charges of one request all-or-nothing (`algo::all_or_nothing`).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    fn decide_all(
        &self,
        charges: &[Charge<'_>],
        keys: &KeySpace,
        now_ms: u64,
    ) -> impl Future<Output = Result<RulesReply, StoreError>> + Send;

    /// Forgets the charge's state and its key's block.
    fn reset(
        &self,
        charge: &Charge<'_>,
        keys: &KeySpace,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives `units` back to the charge's state (at most its capacity): whether any was.
    fn refund(
        &self,
        charge: &Charge<'_>,
        keys: &KeySpace,
        now_ms: u64,
        units: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Charges `units` to the charge's state whether they fit or not, up to one capacity owed
    /// (`algo::debit`): the units charged.
    fn debit(
        &self,
        charge: &Charge<'_>,
        keys: &KeySpace,
        now_ms: u64,
        units: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Blocks the charge's key for `duration_ms` from `now_ms` (0 lifts the block).
    fn block(
        &self,
        charge: &Charge<'_>,
        keys: &KeySpace,
        now_ms: u64,
        duration_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Runs `op` for `holder` on the permits `claim` names (`algo::concurrency`): its outcome
    /// and the clock reading it was decided by.
    fn permit(
        &self,
        claim: &Claim<'_>,
        keys: &KeySpace,
        now_ms: u64,
        op: PermitOp,
        holder: &str,
    ) -> impl Future<Output = Result<(Outcome, u64), StoreError>> + Send;
}

/// Why a store call produced no decision.
#[derive(Debug, Clone)]
pub(crate) enum StoreError {
    /// Redis could not be asked (down, slow, partitioned): the failure policy answers.
    Unavailable(Degraded),
    /// Redis or its TLS handshake refused this client (an `Error::Refused`): an outage too, the
    /// failure policy answers, and the error says why for the store's events.
    Refused(Error),
    /// Redis answered with something the caller must know about (wrong type, bad reply).
    Fatal(Error),
}

impl StoreError {
    /// Why the failure policy answers instead of Redis, or None when Redis answered.
    pub(crate) fn degraded(&self) -> Option<Degraded> {
        match self {
            StoreError::Unavailable(why) => Some(*why),
            StoreError::Refused(_) => Some(Degraded::Refused),
            StoreError::Fatal(_) => None,
        }
    }

    /// The error a caller hears when `operation` could not happen.
    pub(crate) fn into_error(self, operation: &'static str) -> Error {
        match self {
            StoreError::Unavailable(why) => Error::Unavailable { operation, why },
            StoreError::Refused(e) | StoreError::Fatal(e) => e,
        }
    }
}
