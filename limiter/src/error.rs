//! The library's errors, in two kinds, each keeping its cause.
//!
//! - [`ConfigError`]: a setting the library cannot work with. Building a limiter, an enforcer,
//!   a rule set or a store refuses it, naming the field and the value.
//! - [`Error`]: what a call could not do. [`Error::kind`] sorts it: a setting given with the
//!   call ([`ErrorKind::Config`]), a request the caller must fix ([`ErrorKind::Request`]),
//!   Redis out of reach for an operation no failure policy can stand in for
//!   ([`ErrorKind::Unavailable`]), or Redis answering with something the caller must hear
//!   about ([`ErrorKind::Redis`]), whose error is kept as [`std::error::Error::source`].
//!
//! A denial is neither: it is a [`crate::Decision`] with `allowed == false`.

use std::error::Error as StdError;
use std::sync::Arc;

/// What an error came from, kept as it came: Redis's error, the TLS library's refusal, a
/// file that could not be read. Shared, so errors stay cheap to clone.
pub(crate) type Cause = Arc<dyn StdError + Send + Sync + 'static>;

/// A setting the library cannot work with: the field at fault and what is wrong with it,
/// with the value given, and the error underneath when there is one (a certificate file that
/// cannot be read, a URL that does not parse).
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration: {field} {message}")]
pub struct ConfigError {
    field: &'static str,
    message: String,
    #[source]
    cause: Option<Cause>,
}

impl ConfigError {
    /// The setting `field` is refused: `message` says why, with the value given.
    pub(crate) fn new(field: &'static str, message: String) -> Self {
        ConfigError { field, message, cause: None }
    }

    /// The same refusal, caused by `cause`.
    pub(crate) fn caused_by(mut self, cause: impl StdError + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    /// The setting at fault (`limit`, `redis_url`, `leases.lifetime`...).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What is wrong with it, with the value given.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// What a call could not do; see the module docs, and [`Error::kind`] to handle it by kind.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting given with the call cannot work: a quota chosen per request, a block on a
    /// key whose limiter or rule reads no blocks, a block too long.
    #[error(transparent)]
    Config(#[from] ConfigError),
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
    /// Redis answered, but not with what the script returns: a garbled or foreign reply.
    #[error("unexpected reply from Redis for {algorithm}: {detail}")]
    UnexpectedReply {
        /// The algorithm (or operation) whose script or commands were running.
        algorithm: &'static str,
        /// What was received instead.
        detail: String,
        /// The error reading the reply.
        #[source]
        cause: Cause,
    },
    /// A key the limiter uses holds a value of another type, so someone else writes there.
    #[error("a key used by {algorithm} holds the wrong type of value (WRONGTYPE)")]
    WrongType {
        /// The algorithm whose keys were touched.
        algorithm: &'static str,
        /// Redis's message.
        detail: String,
        /// Redis's error.
        #[source]
        cause: Cause,
    },
    /// Redis refused a command or a script raised an error.
    #[error("Redis refused the {algorithm} call")]
    Server {
        /// The algorithm (or operation) whose script or commands were running.
        algorithm: &'static str,
        /// Redis's message.
        detail: String,
        /// Redis's error.
        #[source]
        cause: Cause,
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
        /// What was refused: the TLS handshake, or the credentials or permissions.
        detail: String,
        /// Redis's or the TLS library's error.
        #[source]
        cause: Cause,
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
}

/// What kind of trouble an [`Error`] is, for handling it without naming every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A setting given with the call cannot work (a fault in the calling code).
    Config,
    /// The request itself cannot be decided: a bad key, an unknown rule, a cost no quota
    /// holds (a client's fault: answer it 400).
    Request,
    /// Redis could not be asked for an operation no failure policy stands in for (retry later).
    Unavailable,
    /// Redis answered with an error, a reply of the wrong shape, or a refusal of this client
    /// (an operator's to fix: the error's `source()` is Redis's own).
    Redis,
}

impl Error {
    /// What kind of trouble this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config(_) => ErrorKind::Config,
            Error::InvalidKey(_) | Error::UnknownRule(_) | Error::CostExceedsCapacity { .. } => ErrorKind::Request,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::UnexpectedReply { .. }
            | Error::WrongType { .. }
            | Error::Server { .. }
            | Error::Refused { .. }
            | Error::ModuleNotLoaded { .. } => ErrorKind::Redis,
        }
    }

    /// A setting of the call refused (see [`ConfigError`]).
    pub(crate) fn config(field: &'static str, message: String) -> Self {
        Error::Config(ConfigError::new(field, message))
    }
}

/// `error` and every cause under it, joined by `: `, for an operator's one line.
pub(crate) fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_error_is_kept_as_the_source_and_sorted_by_kind() {
        let redis = redis::RedisError::from((redis::ErrorKind::Io, "connection", "reset by peer".to_owned()));
        let e = Error::Server { algorithm: "gcra", detail: redis.to_string(), cause: Arc::new(redis) };
        assert_eq!(e.kind(), ErrorKind::Redis);
        let source = e.source().expect("the Redis error is kept");
        assert!(source.to_string().contains("reset by peer"), "{source}");
        assert!(chain(&e).starts_with("Redis refused the gcra call: "), "{}", chain(&e));
        let io = std::io::Error::other("no such file");
        let config = ConfigError::new("tls.ca", "cannot be read".into()).caused_by(io);
        assert_eq!((config.field(), config.source().map(|s| s.to_string())), ("tls.ca", Some("no such file".into())));
        let call: Error = config.into();
        assert_eq!(call.kind(), ErrorKind::Config);
        assert_eq!(Error::InvalidKey("empty".into()).kind(), ErrorKind::Request);
    }
}
