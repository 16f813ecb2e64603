//! Calling a subject file's script as its library would: KEYS and ARGV rendered for the
//! request, EVALSHA (EVAL when Redis answers NOSCRIPT), the reply read by the file's rules.
//! When the call fails, the caller does what the file's `on_error` says and the error is
//! recorded.
//!
//! A script that reads Redis's clock decides at the moment Redis runs it, which the caller
//! never sees: it only knows when it sent the call and when the answer came. So the harness
//! sends the script between two `TIME`s in one pipeline: Redis runs the script after the
//! first and before the second, and the checkers judge the decision there, on Redis's clock,
//! to the microsecond, whatever the latency (a window that lives on Redis's clock, such as
//! INCR then PEXPIRE on the first hit, is judged where it opened and closed). The script sees
//! nothing of it: `TIME` reads no key and writes nothing.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use redis::Value;
use redis_ratelimit::harness::RawCallError;
use redis_ratelimit::store::StoreConnection;
use redis_ratelimit::{Clock, Quota, RedisStore, Source};

use super::file::{OnError, SubjectFile};
use super::template::Values;
use super::{Answer, DecidedBy};

/// See the module docs.
pub struct ScriptCaller {
    file: Arc<SubjectFile>,
    sha1: String,
    store: RedisStore,
    quota: Quota,
    clock: Arc<dyn Clock>,
    key_prefix: String,
    client_time: bool,
    /// Keys whose setup commands were sent, and the data epoch they were sent in.
    set_up: Mutex<(u64, BTreeSet<String>)>,
    data_epoch: Arc<AtomicU64>,
    instance: u32,
    /// The `TIME`s sent around the script (see the module docs), counted apart.
    instrument_commands: Arc<AtomicU64>,
}

impl ScriptCaller {
    /// A caller of `file`'s script through `store`.
    pub fn new(
        file: Arc<SubjectFile>,
        store: RedisStore,
        quota: Quota,
        clock: Arc<dyn Clock>,
        key_prefix: String,
        instance: u32,
        run: super::RunShared,
    ) -> Self {
        ScriptCaller {
            sha1: sha1_smol::Sha1::from(file.source.as_bytes()).digest().to_string(),
            client_time: file.client_time(),
            file,
            store,
            quota,
            clock,
            key_prefix,
            set_up: Mutex::new((0, BTreeSet::new())),
            data_epoch: run.data_epoch,
            instance,
            instrument_commands: run.instrument_commands,
        }
    }

    /// Asks the script about one request.
    pub async fn check(&self, key: &str, cost: u64, seq: u64) -> Answer {
        let key = format!("{}{key}", self.key_prefix);
        let now_ms = self.clock.now_ms();
        let values = Values {
            key: &key,
            quota: &self.quota,
            now_us: now_ms.saturating_mul(1000),
            cost,
            request_id: (u64::from(self.instance) << 40) | seq,
            instance: self.instance,
            lease_ms: 0,
        };
        if let Err(answer) = self.set_up(&key, &values).await {
            return answer;
        }
        let (keys, argv) = self.file.render(&values);
        let result =
            redis_ratelimit::harness::call_raw(&self.store, |conn| self.run_between_times(conn, keys, argv)).await;
        match result {
            Ok((reply, between)) => self.read(&reply, &values, now_ms, between),
            Err(failure) => self.failed(failure, cost),
        }
    }

    /// `TIME`, the script (EVALSHA, or EVAL when Redis answers NOSCRIPT), `TIME`, in one
    /// pipeline: the script's reply, and the two readings of Redis's clock (µs) it ran
    /// between, when both came back as `TIME` replies.
    async fn run_between_times(
        &self,
        mut conn: StoreConnection,
        keys: Vec<String>,
        argv: Vec<String>,
    ) -> redis::RedisResult<(Value, Option<(u64, u64)>)> {
        let mut reply: Vec<Value> = self.pipeline("EVALSHA", &self.sha1, &keys, &argv).query_async(&mut conn).await?;
        self.instrument_commands.fetch_add(2, Ordering::Relaxed);
        if matches!(reply.get(1), Some(Value::ServerError(e)) if e.kind() == Some(redis::ServerErrorKind::NoScript)) {
            reply = self.pipeline("EVAL", &self.file.source, &keys, &argv).query_async(&mut conn).await?;
            self.instrument_commands.fetch_add(2, Ordering::Relaxed);
        }
        let [before, script, after]: [Value; 3] = reply.try_into().map_err(|got: Vec<Value>| {
            redis::RedisError::from((redis::ErrorKind::Parse, "a pipeline of three commands", format!("{got:?}")))
        })?;
        if let Value::ServerError(e) = script {
            return Err(e.into());
        }
        Ok((script, time_us(&before).zip(time_us(&after))))
    }

    fn pipeline(&self, verb: &str, body: &str, keys: &[String], argv: &[String]) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.cmd("TIME");
        pipe.cmd(verb).arg(body).arg(keys.len()).arg(keys).arg(argv);
        pipe.cmd("TIME");
        pipe
    }

    /// Sends the setup commands for `key` unless they were sent since Redis last lost its
    /// data. A failure to send them is the request's failure.
    async fn set_up(&self, key: &str, values: &Values<'_>) -> Result<(), Answer> {
        if self.file.setup.is_empty() {
            return Ok(());
        }
        let epoch = self.data_epoch.load(Ordering::Acquire);
        {
            let mut done = self.set_up.lock().unwrap_or_else(|p| p.into_inner());
            if done.0 != epoch {
                *done = (epoch, BTreeSet::new());
            }
            if done.1.contains(key) {
                return Ok(());
            }
        }
        let commands = self.file.render_setup(values);
        let sent = redis_ratelimit::harness::call_raw(&self.store, |mut conn| async move {
            let mut pipe = redis::pipe();
            for command in &commands {
                let mut cmd = redis::cmd(&command[0]);
                for arg in &command[1..] {
                    cmd.arg(arg);
                }
                pipe.add_command(cmd).ignore();
            }
            pipe.query_async::<()>(&mut conn).await
        })
        .await;
        match sent {
            Ok(()) => {
                let mut done = self.set_up.lock().unwrap_or_else(|p| p.into_inner());
                if done.0 == epoch {
                    done.1.insert(key.to_owned());
                }
                Ok(())
            }
            Err(failure) => Err(self.failed(failure, values.cost)),
        }
    }

    fn read(&self, reply: &Value, values: &Values<'_>, now_ms: u64, between: Option<(u64, u64)>) -> Answer {
        // An epoch time in the reply is read against the clock the script decided by: the
        // caller's in client time, Redis's (the true time, here) in server time.
        let read = self.file.reply.read(reply, values, now_ms);
        Answer {
            allowed: read.allowed,
            cost: read.cost,
            source: Source::Store,
            retry_after_ms: read.retry_after_ms.unwrap_or(0),
            // A script fed the caller's clock decides by it, but what it keeps expires by
            // Redis's: somewhere between sending and the answer.
            decided_by: match between {
                Some((lo, hi)) if !self.client_time => DecidedBy::Between(lo, hi),
                _ => DecidedBy::Unknown,
            },
            error: None,
            rules: Vec::new(),
        }
    }

    fn failed(&self, failure: RawCallError, cost: u64) -> Answer {
        let allow = self.file.on_error == OnError::Allow;
        match failure {
            RawCallError::Unavailable(_) => Answer::failed(allow, cost, None),
            RawCallError::Refused(e) => Answer::failed(allow, cost, Some(e.to_string())),
        }
    }
}

/// A `TIME` reply in microseconds since the epoch.
fn time_us(reply: &Value) -> Option<u64> {
    let Value::Array(parts) = reply else { return None };
    let number = |v: &Value| match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse::<u64>().ok(),
        _ => None,
    };
    match parts.as_slice() {
        [s, us] => Some(number(s)?.checked_mul(1_000_000)? + number(us)?),
        _ => None,
    }
}
