//! The subject file: a TOML file beside a rate-limiter script saying how a calling library
//! invokes it, how to read its reply, and what it promises. This format is a contract: files
//! written to it must keep working.
//!
//! ```toml
//! name = "my token bucket"
//! script = "bucket.lua"                 # path relative to this file
//! keys = ["rl:{key}:tokens", "rl:{key}:ts"]
//! argv = ["{rate_per_s}", "{burst}", "{now_s}", "{cost}"]
//! on_error = "allow"                    # optional (default allow): what the caller does when
//!                                       # the script errors; the error is reported either way
//! setup = [["HSETNX", "rl:{key}:cfg", "rate", "{limit}"]]  # optional: sent before a key's
//!                                       # first request, and again after Redis loses its data
//!
//! [reply]                               # 1-based positions; omit `at` for a scalar reply
//! allowed = { at = 1, equals = 1 }      # or not_equals / at_most / less_than / at_least, or is_nil = true
//! remaining = { at = 2 }                # optional
//! retry_after = { at = 3, unit = "ms" } # optional: ms | s | us; absolute = true for an epoch time
//! reset_after = { at = 4, unit = "s" }  # optional, same form
//! granted = { at = 5 }                  # optional: units granted of the cost
//!
//! [promise]
//! kind = "token-bucket"                 # token-bucket | gcra | fixed-window | sliding-window | sliding-log | none
//!                                       # (or concurrency, an in-flight limit: see `super::release`)
//! windows = "aligned"                   # fixed windows only: aligned (default) | first-hit
//!
//! [quota]                               # optional: the quota the script is meant for
//! limit = 10
//! period_ms = 1000
//! burst = 10
//! ```
//!
//! The placeholders are [`super::template`]'s. Every mistake is reported before anything runs,
//! naming the file, the field and the value.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use redis_ratelimit::{Algorithm, Quota};

use super::release::{refuse_in_flight_parts, InFlightCall, ReleaseTable};
use super::reply::{AllowedRule, NumberField, Operand, ReplyRules, Test, TimeField, TimeUnit};
use super::template::{Placeholder, Template, Values};
use crate::promise::{Counts, Promise, Tolerance};

/// A subject file that cannot be used: the file, the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The subject file.
    pub file: PathBuf,
    /// The field at fault (`argv[2]`, `reply.allowed`), or empty for the whole file.
    pub field: String,
    /// What is wrong, with the value.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}: `{}`: {}", self.file.display(), self.field, self.message)
        }
    }
}

impl std::error::Error for FileError {}

/// What the calling library does when the script call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Admits the request (fails open).
    Allow,
    /// Denies it (fails closed).
    Deny,
}

/// A validated subject file with its script.
#[derive(Debug, Clone, PartialEq)]
pub struct SubjectFile {
    /// `name`.
    pub name: String,
    /// Where the subject file is (for messages and replay commands).
    pub path: PathBuf,
    /// The script's text.
    pub source: String,
    /// KEYS, per request.
    pub keys: Vec<Template>,
    /// ARGV, per request.
    pub argv: Vec<Template>,
    /// What the caller does when the call fails.
    pub on_error: OnError,
    /// Commands sent before a key's first request.
    pub setup: Vec<Vec<Template>>,
    /// How to read the reply.
    pub reply: ReplyRules,
    /// What it promises.
    pub promise: Promise,
    /// The quota it is meant for, replacing each scenario's.
    pub quota: Option<Quota>,
    /// How coarsely it keeps time: what the file declares (`[promise] resolution_ms`), and
    /// nothing it does not.
    pub tolerance: Tolerance,
    /// What its windows count (`[promise] counts`).
    pub counts: Counts,
    /// For an in-flight limit (`kind = "concurrency"`, whose `promise` is then `none`): its N,
    /// its lease and its release.
    pub in_flight: Option<InFlightCall>,
}

impl SubjectFile {
    /// Reads and validates the subject file at `path` and the script it names.
    pub fn load(path: &Path) -> Result<SubjectFile, FileError> {
        let err = |message: String| FileError { file: path.to_owned(), field: String::new(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read the subject file: {e}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(path, &text, |script| {
            let at = dir.join(script);
            std::fs::read_to_string(&at).map_err(|e| format!("cannot read the script {}: {e}", at.display()))
        })
    }

    /// Validates subject-file `text` (shown as `path` in messages); `read_script` fetches the
    /// script the file names.
    pub fn parse(
        path: &Path,
        text: &str,
        mut read_script: impl FnMut(&str) -> Result<String, String>,
    ) -> Result<SubjectFile, FileError> {
        let at = |field: &str, message: String| FileError { file: path.to_owned(), field: field.to_owned(), message };
        let raw: RawFile = toml::from_str(text).map_err(|e| at("", format!("not a valid subject file: {e}")))?;
        if raw.name.trim().is_empty() {
            return Err(at("name", "must not be empty".into()));
        }
        let source = read_script(&raw.script).map_err(|m| at("script", m))?;
        let templates = |field: &str, list: &[String]| -> Result<Vec<Template>, FileError> {
            list.iter()
                .enumerate()
                .map(|(i, s)| Template::parse(s).map_err(|m| at(&format!("{field}[{i}]"), format!("{s:?}: {m}"))))
                .collect()
        };
        let keys = templates("keys", &raw.keys)?;
        let argv = templates("argv", &raw.argv)?;
        let mut setup = Vec::new();
        for (i, command) in raw.setup.iter().enumerate() {
            if command.is_empty() {
                return Err(at(&format!("setup[{i}]"), "is an empty command".into()));
            }
            setup.push(templates(&format!("setup[{i}]"), command)?);
        }
        let reply = raw.reply.validate(&at)?;
        let (promise, quota, tolerance, counts, in_flight) = if raw.promise.kind == "concurrency" {
            let rate_parts = (!setup.is_empty(), raw.quota.is_some());
            let acquire = (&keys[..], &argv[..], &source[..]);
            let call = InFlightCall::validate(&raw.promise, raw.release, acquire, rate_parts, &mut read_script, &at)?;
            (Promise::None, None, Tolerance::EXACT, Counts::Either, Some(call))
        } else {
            let setup_calls: Vec<(&str, &[Template])> = setup.iter().map(|c| ("setup", &c[..])).collect();
            let calls = [[("keys", &keys[..]), ("argv", &argv[..])].as_slice(), &setup_calls].concat();
            refuse_in_flight_parts(&raw.promise, raw.release.is_some(), &calls, &at)?;
            let (promise, quota, tolerance, counts) = rate_promise(raw.promise, raw.quota, &at)?;
            (promise, quota, tolerance, counts, None)
        };
        Ok(SubjectFile {
            name: raw.name,
            path: path.to_owned(),
            source,
            keys,
            argv,
            on_error: raw.on_error.unwrap_or(OnError::Allow),
            setup,
            reply,
            promise,
            quota,
            tolerance,
            counts,
            in_flight,
        })
    }

    /// KEYS and ARGV for one request.
    pub fn render(&self, v: &Values<'_>) -> (Vec<String>, Vec<String>) {
        (self.keys.iter().map(|t| t.render(v)).collect(), self.argv.iter().map(|t| t.render(v)).collect())
    }

    /// The setup commands for one key.
    pub fn render_setup(&self, v: &Values<'_>) -> Vec<Vec<String>> {
        self.setup.iter().map(|c| c.iter().map(|t| t.render(v)).collect()).collect()
    }

    fn call_templates(&self) -> impl Iterator<Item = &Template> {
        self.keys.iter().chain(&self.argv).chain(self.setup.iter().flatten())
    }

    /// Whether the caller sends its own clock (some `{now_*}`/`{window*}` placeholder);
    /// otherwise the script reads Redis's `TIME`.
    pub fn client_time(&self) -> bool {
        self.call_templates().flat_map(Template::placeholders).any(Placeholder::reads_the_clock)
    }

    /// Whether requests may cost more than 1 (the file passes `{cost}`).
    pub fn takes_cost(&self) -> bool {
        self.call_templates().flat_map(Template::placeholders).any(|p| p == Placeholder::Cost)
    }

    /// The coarsest step of the time the caller sends (1 ms unless it sends whole seconds).
    pub fn client_time_resolution_ms(&self) -> u64 {
        self.call_templates()
            .flat_map(Template::placeholders)
            .filter(|p| p.reads_the_clock())
            .map(Placeholder::time_resolution_ms)
            .max()
            .unwrap_or(1)
    }
}

/// A rate limit's promise, quota, declared time resolution and what its windows count.
fn rate_promise(
    table: PromiseTable,
    quota: Option<QuotaTable>,
    at: &At<'_>,
) -> Result<(Promise, Option<Quota>, Tolerance, Counts), FileError> {
    let tolerance = table.tolerance(at)?;
    let counts = match table.counts.as_deref() {
        None => Counts::Either,
        Some("admitted") => Counts::Admitted,
        Some("requests") => Counts::Requests,
        Some(other) => {
            return Err(at(
                "promise.counts",
                format!(
                    "{other:?}: expected admitted (only admitted units count) or requests (denied units count too)"
                ),
            ))
        }
    };
    let promise = table.validate(at)?;
    if counts != Counts::Either && (promise.is_bucket() || promise == Promise::None) {
        return Err(at("promise.counts", format!("applies to windows and logs, not to kind = {:?}", promise.kind())));
    }
    let quota = quota.map(|q| q.validate(promise, at)).transpose()?;
    Ok((promise, quota, tolerance, counts))
}

// ------------------------------------------------------------------------------ raw TOML

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: String,
    script: String,
    keys: Vec<String>,
    argv: Vec<String>,
    on_error: Option<OnError>,
    #[serde(default)]
    setup: Vec<Vec<String>>,
    reply: RawReply,
    promise: PromiseTable,
    quota: Option<QuotaTable>,
    release: Option<ReleaseTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReply {
    allowed: RawAllowed,
    remaining: Option<RawNumber>,
    retry_after: Option<RawTime>,
    reset_after: Option<RawTime>,
    granted: Option<RawNumber>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllowed {
    at: Option<i64>,
    equals: Option<toml::Value>,
    not_equals: Option<toml::Value>,
    at_most: Option<toml::Value>,
    less_than: Option<toml::Value>,
    at_least: Option<toml::Value>,
    is_nil: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNumber {
    at: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTime {
    at: Option<i64>,
    unit: Option<String>,
    #[serde(default)]
    absolute: bool,
}

/// A file's `[promise]` table, as written (service subject files share it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromiseTable {
    /// `token-bucket`, `gcra`, `fixed-window`, `sliding-window`, `sliding-log` or `none`.
    pub kind: String,
    /// Fixed windows only: `aligned` or `first-hit`.
    pub windows: Option<String>,
    /// The coarsest step of the time the script decides by (whole seconds, a refill once a
    /// period): declared, or the promise is held to the millisecond.
    pub resolution_ms: Option<u64>,
    /// What a window counts: admitted or requests (default: judged by both).
    pub counts: Option<String>,
    /// `kind = "concurrency"` only: N, the slots held at once at most.
    pub limit: Option<u64>,
    /// `kind = "concurrency"` only: how long a dead holder's slot may stay taken (ms).
    pub lease_ms: Option<u64>,
}

/// A file's `[quota]` table, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaTable {
    /// L, per period.
    pub limit: u64,
    /// T, in ms.
    pub period_ms: u64,
    /// B (default L).
    pub burst: Option<u64>,
}

/// Makes the error for one field of the file being read: the field's path and the message.
pub type At<'a> = dyn Fn(&str, String) -> FileError + 'a;

fn position(field: &str, at: Option<i64>, err: &At<'_>) -> Result<Option<usize>, FileError> {
    match at {
        None => Ok(None),
        Some(n) if (1..=1_000_000).contains(&n) => Ok(Some(n as usize)),
        Some(n) => Err(err(&format!("{field}.at"), format!("{n} is not a position: positions start at 1, as in Lua"))),
    }
}

fn operand(field: &str, v: &toml::Value, err: &At<'_>) -> Result<Operand, FileError> {
    match v {
        toml::Value::Integer(n) => Ok(Operand::Number(*n as f64)),
        toml::Value::Float(x) if x.is_finite() => Ok(Operand::Number(*x)),
        toml::Value::String(s) if s.contains('{') || s.contains('}') => {
            Template::parse(s).map(Operand::Template).map_err(|m| err(field, format!("{s:?}: {m}")))
        }
        toml::Value::String(s) => Ok(Operand::Text(s.clone())),
        toml::Value::Boolean(b) => Ok(Operand::Number(f64::from(u8::from(*b)))),
        other => Err(err(field, format!("a TOML {} is not a value a reply can be compared with", other.type_str()))),
    }
}

impl RawReply {
    fn validate(self, err: &At<'_>) -> Result<ReplyRules, FileError> {
        let a = self.allowed;
        let mut tests = Vec::new();
        let pairs = [
            ("equals", &a.equals, Test::Equals as fn(Operand) -> Test),
            ("not_equals", &a.not_equals, Test::NotEquals),
            ("at_most", &a.at_most, Test::AtMost),
            ("less_than", &a.less_than, Test::LessThan),
            ("at_least", &a.at_least, Test::AtLeast),
        ];
        for (name, value, make) in pairs {
            if let Some(v) = value {
                tests.push((name, make(operand(&format!("reply.allowed.{name}"), v, err)?)));
            }
        }
        match a.is_nil {
            Some(true) => tests.push(("is_nil", Test::IsNil)),
            Some(false) => {
                return Err(err(
                    "reply.allowed.is_nil",
                    "false is not a test: write is_nil = true or another test".into(),
                ))
            }
            None => {}
        }
        let test = match tests.len() {
            1 => tests.remove(0).1,
            0 => {
                return Err(err(
                    "reply.allowed",
                    "needs one test: equals, not_equals, at_most, less_than, at_least or is_nil = true".into(),
                ))
            }
            _ => {
                let names: Vec<&str> = tests.iter().map(|(n, _)| *n).collect();
                return Err(err(
                    "reply.allowed",
                    format!("has {} tests ({}); give exactly one", names.len(), names.join(", ")),
                ));
            }
        };
        let time = |field: &str, t: Option<RawTime>| -> Result<Option<TimeField>, FileError> {
            let Some(t) = t else { return Ok(None) };
            let unit = match t.unit.as_deref() {
                None | Some("ms") => TimeUnit::Ms,
                Some("s") => TimeUnit::S,
                Some("us") => TimeUnit::Us,
                Some(other) => return Err(err(&format!("{field}.unit"), format!("{other:?}: expected ms, s or us"))),
            };
            Ok(Some(TimeField { at: position(field, t.at, err)?, unit, absolute: t.absolute }))
        };
        let number = |field: &str, n: Option<RawNumber>| -> Result<Option<NumberField>, FileError> {
            n.map(|n| Ok(NumberField { at: position(field, n.at, err)? })).transpose()
        };
        Ok(ReplyRules {
            allowed: AllowedRule { at: position("reply.allowed", a.at, err)?, test },
            remaining: number("reply.remaining", self.remaining)?,
            retry_after: time("reply.retry_after", self.retry_after)?,
            reset_after: time("reply.reset_after", self.reset_after)?,
            granted: number("reply.granted", self.granted)?,
        })
    }
}

impl PromiseTable {
    /// The time resolution the file declares (exact when it declares none).
    pub fn tolerance(&self, err: &At<'_>) -> Result<Tolerance, FileError> {
        match self.resolution_ms {
            Some(0) => Err(err("promise.resolution_ms", "must be at least 1 ms, got 0".into())),
            r => Ok(Tolerance { resolution_ms: r.unwrap_or(0) }),
        }
    }

    /// The promise the table names.
    pub fn validate(self, err: &At<'_>) -> Result<Promise, FileError> {
        for (field, given) in [("promise.limit", self.limit.is_some()), ("promise.lease_ms", self.lease_ms.is_some())] {
            if given {
                let only = format!("applies to kind = \"concurrency\" only, not {:?}", self.kind);
                return Err(err(field, only));
            }
        }
        let promise = match self.kind.as_str() {
            "token-bucket" => Promise::TokenBucket,
            "gcra" => Promise::Gcra,
            "fixed-window" => Promise::FixedWindow { first_hit: false },
            "sliding-window" => Promise::SlidingWindow,
            "sliding-log" => Promise::SlidingLog,
            "none" => Promise::None,
            other => {
                return Err(err(
                    "promise.kind",
                    format!(
                        "{other:?}: expected token-bucket, gcra, fixed-window, sliding-window, sliding-log, none or \
                         concurrency"
                    ),
                ))
            }
        };
        match (promise, self.windows.as_deref()) {
            (_, None) => Ok(promise),
            (Promise::FixedWindow { .. }, Some("aligned")) => Ok(promise),
            (Promise::FixedWindow { .. }, Some("first-hit")) => Ok(Promise::FixedWindow { first_hit: true }),
            (Promise::FixedWindow { .. }, Some(other)) => {
                Err(err("promise.windows", format!("{other:?}: expected aligned or first-hit")))
            }
            (_, Some(w)) => Err(err(
                "promise.windows",
                format!("{w:?}: windows only apply to kind = \"fixed-window\", not {:?}", promise.kind()),
            )),
        }
    }
}

impl QuotaTable {
    /// The quota, checked as the library checks the promise's algorithm.
    pub fn validate(self, promise: Promise, err: &At<'_>) -> Result<Quota, FileError> {
        let q =
            Quota::new(self.limit, Duration::from_millis(self.period_ms)).with_burst(self.burst.unwrap_or(self.limit));
        // Checked as the library checks the algorithm of the same promise, so the oracle
        // computes exactly.
        let algorithm = promise.twin().unwrap_or(Algorithm::FixedWindow);
        q.validate(algorithm).map_err(|e| err(&format!("quota.{}", e.field()), e.message().to_owned()))?;
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUCKET: &str = r#"
name = "my token bucket"
script = "bucket.lua"
keys = ["rl:{key}:tokens", "rl:{key}:ts"]
argv = ["{rate_per_s}", "{burst}", "{now_s}", "{cost}"]
on_error = "allow"
setup = [["HSETNX", "rl:{key}:cfg", "rate", "{limit}"]]

[reply]
allowed = { at = 1, equals = 1 }
remaining = { at = 2 }
retry_after = { at = 3, unit = "ms" }
reset_after = { at = 4, unit = "s" }
granted = { at = 5 }

[promise]
kind = "token-bucket"
"#;

    fn parse(text: &str) -> Result<SubjectFile, FileError> {
        SubjectFile::parse(Path::new("subjects/x.toml"), text, |script| {
            if script == "missing.lua" {
                Err("cannot read the script subjects/missing.lua: No such file".into())
            } else {
                Ok("return {1}".into())
            }
        })
    }

    #[test]
    fn the_contract_example_parses_as_written() {
        let f = parse(BUCKET).expect("the issue's example is valid");
        assert_eq!(f.name, "my token bucket");
        assert_eq!(f.keys.len(), 2);
        assert_eq!(f.on_error, OnError::Allow);
        assert_eq!(f.promise, Promise::TokenBucket);
        assert!(f.client_time() && f.takes_cost());
        assert_eq!(f.client_time_resolution_ms(), 1_000);
        assert_eq!(f.reply.retry_after, Some(TimeField { at: Some(3), unit: TimeUnit::Ms, absolute: false }));
        assert_eq!(f.reply.reset_after.map(|t| t.unit), Some(TimeUnit::S));
        assert_eq!(f.reply.granted, Some(NumberField { at: Some(5) }));
    }

    #[test]
    fn server_time_and_windows_are_read_from_the_file() {
        let text = BUCKET
            .replace("\"{now_s}\"", "\"x\"")
            .replace("kind = \"token-bucket\"", "kind = \"fixed-window\"\nwindows = \"first-hit\"");
        let f = parse(&text).expect("valid");
        assert!(!f.client_time());
        assert_eq!(f.promise, Promise::FixedWindow { first_hit: true });
    }

    #[test]
    fn every_mistake_names_the_file_the_field_and_the_value() {
        let cases = [
            (BUCKET.replace("{now_s}", "{nwo_s}"), "`argv[2]`", "unknown placeholder `{nwo_s}`"),
            (BUCKET.replace("bucket.lua", "missing.lua"), "`script`", "cannot read the script"),
            (BUCKET.replace("equals = 1", "equals = 1, at_most = 2"), "`reply.allowed`", "exactly one"),
            (BUCKET.replace("at = 1, equals = 1", "at = 0, equals = 1"), "`reply.allowed.at`", "0 is not a position"),
            (BUCKET.replace("unit = \"ms\"", "unit = \"minutes\""), "`reply.retry_after.unit`", "\"minutes\""),
            (BUCKET.replace("token-bucket", "leaky-bucket"), "`promise.kind`", "\"leaky-bucket\""),
            (BUCKET.replace("\"allow\"", "\"maybe\""), "x.toml", "maybe"),
            (
                BUCKET.replace("kind = \"token-bucket\"", "kind = \"gcra\"\nwindows = \"first-hit\""),
                "`promise.windows`",
                "only apply",
            ),
            (BUCKET.replace("[promise]", "[promise]\nfoo = 1"), "x.toml", "foo"),
            (format!("{BUCKET}\n[quota]\nlimit = 0\nperiod_ms = 1000\n"), "`quota.limit`", "got 0"),
            (BUCKET.replace("setup = [[", "setup = [[], ["), "`setup[0]`", "empty command"),
        ];
        for (text, field, detail) in cases {
            let e = parse(&text).expect_err(field).to_string();
            assert!(e.starts_with("subjects/x.toml"), "{e}");
            assert!(e.contains(field) && e.contains(detail), "expected {field} and {detail:?} in: {e}");
        }
    }
}
