//! Sending a script: EVALSHA by its SHA-1, and EVAL of the whole text when Redis answers
//! NOSCRIPT (after `SCRIPT FLUSH`, a restart, a failover). On a cluster the EVAL goes where
//! the EVALSHA went (the slot of the first key), so each node loads what it lacks.
//!
//! redis-rs's own `Script` answers NOSCRIPT with `SCRIPT LOAD` and then EVALSHA again: two
//! round trips, and a flush that lands between them fails the call with a second NOSCRIPT
//! (the simulator found one). One EVAL loads and runs in one atomic step, so nothing can come
//! between.

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};

/// A script ready to send.
#[derive(Debug, Clone)]
pub struct EvalScript {
    source: String,
    sha1: String,
}

impl EvalScript {
    /// The script `source`.
    pub fn new(source: &str) -> Self {
        EvalScript { source: source.to_owned(), sha1: redis::Script::new(source).get_hash().to_owned() }
    }

    /// Its text.
    #[cfg(test)]
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Runs it with `keys` and `args`: EVALSHA, or EVAL when Redis does not have it.
    pub async fn run<S: AsRef<[u8]>>(
        &self,
        conn: &mut impl ConnectionLike,
        keys: &[S],
        args: &[S],
    ) -> RedisResult<Value> {
        match self.command("EVALSHA", &self.sha1, keys, args).query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                crate::metrics::noscript_reload();
                self.command("EVAL", &self.source, keys, args).query_async(conn).await
            }
            other => other,
        }
    }

    fn command<S: AsRef<[u8]>>(&self, verb: &str, body: &str, keys: &[S], args: &[S]) -> redis::Cmd {
        let mut cmd = redis::cmd(verb);
        cmd.arg(body).arg(keys.len());
        for k in keys {
            cmd.arg(k.as_ref());
        }
        for a in args {
            cmd.arg(a.as_ref());
        }
        cmd
    }
}

/// What a call sends: a script, or the Redis module's command taking the script's KEYS and
/// ARGV (`RedisStore::with_module`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sent<'a> {
    /// EVALSHA of the script (EVAL when Redis lacks it).
    Script(&'a EvalScript),
    /// The command, then KEYS, then ARGV.
    Command(&'static str),
    /// These commands, pipelined (no KEYS or ARGV of their own): an array of their replies.
    Pipeline(&'a redis::Pipeline),
}

impl Sent<'_> {
    /// Sends it with `keys` and `args`.
    pub(crate) async fn run<S: AsRef<[u8]>>(
        self,
        conn: &mut impl ConnectionLike,
        keys: &[S],
        args: &[S],
    ) -> RedisResult<Value> {
        match self {
            Sent::Script(script) => script.run(conn, keys, args).await,
            Sent::Command(name) => {
                let mut cmd = redis::cmd(name);
                for part in keys.iter().chain(args) {
                    cmd.arg(part.as_ref());
                }
                cmd.query_async(conn).await
            }
            Sent::Pipeline(pipe) => pipe.query_async(conn).await,
        }
    }
}
