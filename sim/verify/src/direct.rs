//! A subject file's script on an in-process Redis model at exact times: no network, no other
//! instance, the model's clock set to each request's moment. What the search, the calibration
//! and the profile run, so a decision's time is known to the microsecond and a schedule replays
//! identically.
//!
//! A schedule names milliseconds; Redis's `TIME` has microseconds, and as on a real server no
//! two commands read the same one, so requests at one millisecond run a few microseconds
//! apart. Each decision records the microsecond its script ran at ([`Decided::at_us`]): a
//! script that keeps Redis's time in microseconds decided there, one that keeps milliseconds
//! at the millisecond; the checks take either reading. The script is loaded before the first
//! request, so every call runs its script at the same offset from its millisecond (no first
//! call one command later for meeting NOSCRIPT).

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use redis::Value;
use redis_ratelimit::Quota;

use redis_model::{ManualServerClock, ModelHandle, Reply};
use sim_engine::simclock::EPOCH_MS;
use sim_engine::subject::template::Values;
use sim_engine::subject::SubjectFile;

/// What the script answered about one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// Admitted? (A script error counts as the file's `on_error` says.)
    pub allowed: bool,
    /// Units admitted or denied.
    pub cost: u64,
    /// Its Retry-After when denied, if the reply has one.
    pub retry_after_ms: Option<u64>,
    /// The remaining units it reported, if it reports them.
    pub remaining: Option<f64>,
    /// The script's error, when it raised one.
    pub error: Option<String>,
    /// The command the script called that the Redis model does not implement, when that was
    /// the error: the script cannot be judged on the model.
    pub unknown_command: Option<String>,
    /// Whether it found a key of its state gone that an earlier request had left (expired by
    /// its TTL, or lost with Redis's data) and wrote it again: a fresh start.
    pub restarted: bool,
    /// The microsecond its script ran at, since the run's start (Redis's clock).
    pub at_us: u64,
}

/// See the module docs.
pub struct Direct {
    file: Arc<SubjectFile>,
    quota: Quota,
    clock: ManualServerClock,
    model: ModelHandle,
    sha1: Bytes,
    set_up: BTreeSet<String>,
    requests: u64,
    /// Every key a request has left behind so far.
    seen: BTreeSet<Bytes>,
}

impl Direct {
    /// A fresh model, its clock at the run's epoch, for `file` driven with `quota`.
    pub fn new(file: Arc<SubjectFile>, quota: Quota) -> Direct {
        let (clock, model) = SPARE.with_borrow_mut(Vec::pop).unwrap_or_else(|| {
            let clock = ManualServerClock::from_millis(EPOCH_MS);
            let model = ModelHandle::new(clock.clone());
            (clock, model)
        });
        let sha1 = Bytes::from(sha1_smol::Sha1::from(file.source.as_bytes()).digest().to_string());
        // A script that does not compile is refused before anything runs (`preflight`).
        model.call(&[b"SCRIPT", b"LOAD", file.source.as_bytes()]);
        Direct { file, quota, clock, model, sha1, set_up: BTreeSet::new(), requests: 0, seen: BTreeSet::new() }
    }

    /// The request of `cost` on `key` at `t_ms` after the epoch, the caller's clock reading
    /// `client_offset_ms` off the true time (client-time subjects send it).
    pub fn request(&mut self, t_ms: u64, client_offset_ms: i64, key: &str, cost: u64) -> Decided {
        self.request_at_us(t_ms * 1000, client_offset_ms, key, cost)
    }

    /// [`Direct::request`] at `t_us` µs after the epoch: a client that waits exactly what it
    /// was told from the microsecond it was told.
    pub fn request_at_us(&mut self, t_us: u64, client_offset_ms: i64, key: &str, cost: u64) -> Decided {
        let t_ms = t_us / 1000;
        self.clock.set_micros(EPOCH_MS * 1000 + t_us);
        let client_ms = (EPOCH_MS + t_ms).saturating_add_signed(client_offset_ms);
        self.requests += 1;
        let values = Values {
            key,
            quota: &self.quota,
            now_us: client_ms * 1000,
            cost,
            request_id: self.requests,
            instance: 0,
            lease_ms: 0,
        };
        if !self.file.setup.is_empty() && self.set_up.insert(key.to_owned()) {
            for command in self.file.render_setup(&values) {
                let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
                if let Reply::Error(e) = self.model.call(&args) {
                    return self.failed(cost, String::from_utf8_lossy(&e).into_owned());
                }
            }
        }
        let before = self.live_keys();
        let (keys, argv) = self.file.render(&values);
        let mut args: Vec<&[u8]> = vec![b"EVALSHA", &self.sha1];
        let n = keys.len().to_string();
        args.push(n.as_bytes());
        args.extend(keys.iter().chain(&argv).map(|a| a.as_bytes()));
        let mut reply = self.model.call(&args);
        if matches!(&reply, Reply::Error(e) if e.starts_with(b"NOSCRIPT")) {
            args[0] = b"EVAL";
            args[1] = self.file.source.as_bytes();
            reply = self.model.call(&args);
        }
        let at_us = self.model.last_command_started_us().saturating_sub(EPOCH_MS * 1000);
        let after = self.live_keys();
        let restarted = after.iter().any(|k| !before.contains(k) && self.seen.contains(k));
        self.seen.extend(after);
        match to_value(&reply) {
            Ok(value) => {
                // The script decided by the caller's clock in client time, by Redis's (the
                // true time here) in server time: epoch times in the reply are read so.
                let now_ms = if self.file.client_time() { client_ms } else { EPOCH_MS + t_ms };
                let read = self.file.reply.read(&value, &values, now_ms);
                Decided {
                    allowed: read.allowed,
                    cost: read.cost,
                    retry_after_ms: read.retry_after_ms,
                    remaining: read.remaining,
                    error: None,
                    unknown_command: None,
                    restarted,
                    at_us,
                }
            }
            Err(text) => match self.model.script_unknown_command() {
                Some(command) => Decided {
                    unknown_command: Some(command.clone()),
                    at_us,
                    ..self.failed(
                        cost,
                        format!("{text} (the script called `{command}`, which the Redis model does not implement)"),
                    )
                },
                None => Decided { at_us, ..self.failed(cost, text) },
            },
        }
    }

    /// The script's raw reply to a first request of cost 1 (None if it raised an error), for
    /// checking the reply rules fit it.
    pub fn first_reply(&mut self) -> Option<Value> {
        self.clock.set_micros(EPOCH_MS * 1000);
        let values = Values {
            key: "user-0",
            quota: &self.quota,
            now_us: EPOCH_MS * 1000,
            cost: 1,
            request_id: 0,
            instance: 0,
            lease_ms: 0,
        };
        for command in self.file.render_setup(&values) {
            let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
            self.model.call(&args);
        }
        let (keys, argv) = self.file.render(&values);
        let n = keys.len().to_string();
        let mut args: Vec<&[u8]> = vec![b"EVAL", self.file.source.as_bytes(), n.as_bytes()];
        args.extend(keys.iter().chain(&argv).map(|a| a.as_bytes()));
        to_value(&self.model.call(&args)).ok()
    }

    fn failed(&self, cost: u64, error: String) -> Decided {
        let allowed = self.file.on_error == sim_engine::subject::OnError::Allow;
        Decided {
            allowed,
            cost,
            retry_after_ms: None,
            remaining: None,
            error: Some(error),
            unknown_command: None,
            restarted: false,
            at_us: 0,
        }
    }

    /// Redis loses every key (a restart without persistence): setup is sent again.
    pub fn lose_data(&mut self) {
        self.model.call(&[b"FLUSHALL"]);
        self.set_up.clear();
    }

    /// `SCRIPT FLUSH`: the next call meets NOSCRIPT.
    pub fn flush_scripts(&mut self) {
        self.model.flush_scripts();
    }

    /// The keys alive now, in order.
    fn live_keys(&self) -> BTreeSet<Bytes> {
        let Reply::Array(keys) = self.model.call(&[b"KEYS", b"*"]) else { return BTreeSet::new() };
        keys.into_iter()
            .filter_map(|k| match k {
                Reply::Bulk(name) => Some(name),
                _ => None,
            })
            .collect()
    }

    /// The keys that will never expire, at `t_ms`.
    pub fn keys_without_ttl(&self, t_ms: u64) -> Vec<String> {
        self.clock.set_micros((EPOCH_MS + t_ms) * 1000);
        self.live_keys()
            .iter()
            .filter(|name| self.model.call(&[b"PTTL", name]) == Reply::Integer(-1))
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect()
    }

    /// The keys alive at `t_ms` and the bytes Redis's `MEMORY USAGE` counts for them.
    pub fn memory(&self, t_ms: u64) -> (usize, usize) {
        self.clock.set_micros((EPOCH_MS + t_ms) * 1000);
        let keys = self.live_keys();
        let bytes = keys.iter().filter_map(|name| self.model.memory_usage(name)).sum();
        (keys.len(), bytes)
    }
}

thread_local! {
    /// Models a dropped run left, recycled ([`redis_model::Model::recycle`]): a verification runs
    /// thousands of schedules, each on a model of its own, and making a model (a Lua state with
    /// Redis's libraries loaded) was a seventh of its time. A recycled model answers every
    /// command as a new one does. A run takes one at a time, so a thread needs few.
    static SPARE: std::cell::RefCell<Vec<(ManualServerClock, ModelHandle)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The most models a thread keeps spare.
const MOST_SPARE: usize = 2;

impl Drop for Direct {
    fn drop(&mut self) {
        // The run's handle is the model's only one (no method lends it out), and no fault
        // was set on it. A model a panic left mid-command is not one to run again.
        if std::thread::panicking() {
            return;
        }
        self.clock.set_micros(EPOCH_MS * 1000);
        self.model.with_model(redis_model::Model::recycle);
        let spare = (self.clock.clone(), self.model.clone());
        SPARE.with_borrow_mut(|models| {
            if models.len() < MOST_SPARE {
                models.push(spare);
            }
        });
    }
}

/// A model reply as redis-rs reads it off the wire (RESP2, as the model would send it), or
/// the error's text.
fn to_value(reply: &Reply) -> Result<Value, String> {
    if let Reply::Error(e) = reply {
        return Err(String::from_utf8_lossy(e).into_owned());
    }
    if let Some(value) = plain_value(reply) {
        return Ok(value);
    }
    off_the_wire(reply)
}

/// What redis-rs reads for the replies limiter scripts give (integers, bulk strings, nils and
/// arrays of them), built without the wire: encoding each reply and parsing it back was an
/// eighth of a verification's time. None for any other reply (a status, an error inside an
/// array, a RESP3 type), which takes the wire, where redis-rs's own reading of it decides
/// (`Okay` for `+OK`, a server error's kind).
fn plain_value(reply: &Reply) -> Option<Value> {
    Some(match reply {
        Reply::Integer(i) => Value::Int(*i),
        Reply::Bulk(b) => Value::BulkString(b.to_vec()),
        Reply::Nil | Reply::NilArray => Value::Nil,
        Reply::Array(items) => Value::Array(items.iter().map(plain_value).collect::<Option<_>>()?),
        _ => return None,
    })
}

/// [`to_value`] the long way: the RESP2 bytes, read by redis-rs.
fn off_the_wire(reply: &Reply) -> Result<Value, String> {
    match redis::parse_redis_value(&reply.to_resp2()) {
        // Errors inside an array read as values; the rules see them as text.
        Ok(value) => Ok(value),
        Err(e) => Err(format!("the reply could not be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Replies of every kind the model gives, nested.
    fn reply() -> impl Strategy<Value = Reply> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..8).prop_map(Bytes::from);
        let leaf = prop_oneof![
            any::<i64>().prop_map(Reply::Integer),
            bytes().prop_map(Reply::Bulk),
            Just(Reply::Nil),
            Just(Reply::NilArray),
            prop_oneof![Just(Bytes::from_static(b"OK")), bytes()].prop_map(Reply::Status),
            bytes().prop_map(|e| Reply::Error([&b"ERR "[..], &e].concat().into())),
            any::<f64>().prop_map(Reply::Double),
            any::<bool>().prop_map(Reply::Bool),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Reply::Array),
                proptest::collection::vec(inner, 0..4).prop_map(Reply::Set),
            ]
        })
    }

    proptest! {
        /// The shortcut reads every reply as redis-rs reads its bytes, or leaves it to them.
        #[test]
        fn a_reply_reads_as_redis_rs_reads_it_off_the_wire(r in reply()) {
            if let Some(value) = plain_value(&r) {
                prop_assert_eq!(Ok(value), off_the_wire(&r));
            }
            if !matches!(r, Reply::Error(_)) {
                prop_assert_eq!(to_value(&r), off_the_wire(&r));
            }
        }
    }

    /// A run on a recycled model decides as one on a new model, to the microsecond: the
    /// second run below takes the model the first one left (one thread, nothing else spare),
    /// and without the recycling its counter would go on from the first run's and its
    /// `math.random` sequence with it.
    #[test]
    fn a_run_on_a_recycled_model_decides_as_one_on_a_new_model() {
        let toml = "name = \"t\"\nscript = \"t.lua\"\nkeys = [\"{key}\"]\nargv = [\"{cost}\"]\n\
                    [reply]\nallowed = { at = 1, equals = 1 }\nremaining = { at = 2 }\n\
                    [promise]\nkind = \"fixed-window\"\n";
        let lua = "local t = redis.call('TIME') local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
                   redis.call('PEXPIRE', KEYS[1], 1000) \
                   return {n <= 3 and 1 or 0, t[2] % 1000 + math.random(1000000)}";
        let file = SubjectFile::parse(std::path::Path::new("t.toml"), toml, |_| Ok(lua.to_owned())).expect("valid");
        let file = Arc::new(file);
        let run = || {
            let mut direct = Direct::new(file.clone(), Quota::per_second(3));
            (0..6).map(|i| direct.request(i * 300, 0, "k", 1)).collect::<Vec<_>>()
        };
        SPARE.with_borrow_mut(Vec::clear);
        let first = run();
        assert_eq!(SPARE.with_borrow(Vec::len), 1, "the first run's model is kept");
        assert_eq!(run(), first);
        assert!(first.iter().any(|d| !d.allowed) && first.iter().all(|d| d.error.is_none()), "{first:?}");
    }

    #[test]
    fn the_shortcut_takes_what_limiter_scripts_reply() {
        let typical = Reply::Array(vec![Reply::Integer(1), Reply::Bulk(Bytes::from_static(b"2.5")), Reply::Nil]);
        assert!(plain_value(&typical).is_some());
        assert!(plain_value(&Reply::Status(Bytes::from_static(b"OK"))).is_none(), "redis-rs reads +OK as Okay");
    }
}
