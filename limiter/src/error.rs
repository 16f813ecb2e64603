//! The library's error type. A denial is not an error: it is a [`crate::Decision`] with
//! `allowed == false`. Errors are for things the caller must fix or know about.

/// Everything that can go wrong in a limiter call or while building one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value the limiter cannot enforce; names the field and the value.
    #[error("invalid configuration: {field} {message}")]
    Config {
        /// The configuration field at fault.
        field: &'static str,
        /// What is wrong with it, including the value given.
        message: String,
    },
    /// A rate-limit key that cannot be used (empty, too long).
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// An operation named a rule the rules in force do not have.
    #[error("no rule is named {0:?}")]
    UnknownRule(String),
    /// A request costing more than the limiter could ever admit.
    #[error("cost {cost} exceeds the capacity {capacity}: such a request could never be admitted")]
    CostExceedsCapacity {
        /// The requested cost.
        cost: u64,
        /// The most one request can cost under this quota and algorithm.
        capacity: u64,
    },
    /// Redis answered, but not with what the script returns: a garbled or foreign reply.
    #[error("unexpected reply from Redis for {algorithm}: {detail}")]
    UnexpectedReply {
        /// The algorithm whose script or commands were running.
        algorithm: &'static str,
        /// What was received instead.
        detail: String,
    },
    /// A key the limiter uses holds a value of another type, so someone else writes there.
    #[error("a key used by {algorithm} holds the wrong type of value (WRONGTYPE): {detail}")]
    WrongType {
        /// The algorithm whose keys were touched.
        algorithm: &'static str,
        /// Redis's message.
        detail: String,
    },
    /// Redis, or the TLS handshake with it, refused this client: a wrong user or password, a
    /// missing ACL permission, a certificate the client does not trust. A limiter treats it as
    /// an outage (the failure policy answers, `Degraded::Refused`, and the store backs off before
    /// dialing again); this error is the cause its `StoreEvent` reports, once per change, for
    /// the setting to be fixed. Never carries a password.
    #[error("Redis at {redis} refused this client: {detail}")]
    Refused {
        /// Where (host and port, no credentials).
        redis: String,
        /// What was refused.
        detail: String,
    },
    /// Redis could not be asked (down, slow, partitioned, refusing this client, or the breaker
    /// open), so an operation that no failure policy can stand in for did not happen: a
    /// [`crate::Limiter::reset`] that Redis never heard.
    #[error("Redis could not be asked ({why:?}), so {operation} did not happen")]
    Unavailable {
        /// What did not happen.
        operation: &'static str,
        /// Why Redis could not be asked.
        why: crate::Degraded,
    },
    /// The store decides with the Redis module's commands ([`crate::store::RedisStore::with_module`])
    /// and this Redis does not have them: the module is not loaded there (or an ACL hides it).
    /// The store never falls back to the scripts by itself.
    #[error(
        "the Redis module `ratelimit` is not loaded on {redis} ({detail}): load it with \
         `redis-server --loadmodule /path/to/libredis_ratelimit_module.so` or `MODULE LOAD`, or build \
         the store without with_module() to decide with scripts"
    )]
    ModuleNotLoaded {
        /// Where (host and port, no credentials).
        redis: String,
        /// What showed it.
        detail: String,
    },
    /// Redis refused a command or a script raised an error.
    #[error("Redis refused the {algorithm} call: {detail}")]
    Server {
        /// The algorithm whose script or commands were running.
        algorithm: &'static str,
        /// Redis's message.
        detail: String,
    },
}

impl Error {
    pub(crate) fn config(field: &'static str, message: String) -> Self {
        Error::Config { field, message }
    }
}
