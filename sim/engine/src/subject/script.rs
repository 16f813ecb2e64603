//! Calling a subject file's script as its library would: KEYS and ARGV rendered for the
//! request, EVALSHA (EVAL when Redis answers NOSCRIPT), the reply read by the file's rules.
//! When the call fails, the caller does what the file's `on_error` says and the error is
//! recorded.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use redis::Value;
use redis_ratelimit::harness::{EvalScript, RawCallError};
use redis_ratelimit::{Clock, Quota, RedisStore, Source};

use super::file::{OnError, SubjectFile};
use super::template::Values;
use super::{Answer, DecidedBy};

/// See the module docs.
pub struct ScriptCaller {
    file: Arc<SubjectFile>,
    script: EvalScript,
    store: RedisStore,
    quota: Quota,
    clock: Arc<dyn Clock>,
    key_prefix: String,
    client_time: bool,
    /// Keys whose setup commands were sent, and the data epoch they were sent in.
    set_up: Mutex<(u64, BTreeSet<String>)>,
    data_epoch: Arc<AtomicU64>,
    instance: u32,
}

impl ScriptCaller {
    /// A caller of `file`'s script through `store`.
    pub fn new(
        file: Arc<SubjectFile>,
        store: RedisStore,
        quota: Quota,
        clock: Arc<dyn Clock>,
        key_prefix: String,
        data_epoch: Arc<AtomicU64>,
        instance: u32,
    ) -> Self {
        ScriptCaller {
            script: EvalScript::new(&file.source),
            client_time: file.client_time(),
            file,
            store,
            quota,
            clock,
            key_prefix,
            set_up: Mutex::new((0, BTreeSet::new())),
            data_epoch,
            instance,
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
        };
        if let Err(answer) = self.set_up(&key, &values).await {
            return answer;
        }
        let (keys, argv) = self.file.render(&values);
        let script = &self.script;
        let result = self.store.call_raw(|mut conn| async move { script.run(&mut conn, &keys, &argv).await }).await;
        match result {
            Ok(reply) => self.read(&reply, &values, now_ms),
            Err(failure) => self.failed(failure, cost),
        }
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
        let sent = self
            .store
            .call_raw(|mut conn| async move {
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

    fn read(&self, reply: &Value, values: &Values<'_>, now_ms: u64) -> Answer {
        // An epoch time in the reply is read against the clock the script decided by: the
        // caller's in client time, Redis's (the true time, here) in server time.
        let read = self.file.reply.read(reply, values, now_ms);
        Answer {
            allowed: read.allowed,
            cost: read.cost,
            source: Source::Store,
            retry_after_ms: read.retry_after_ms.unwrap_or(0),
            decided_by: if self.client_time { DecidedBy::Client } else { DecidedBy::Unknown },
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
