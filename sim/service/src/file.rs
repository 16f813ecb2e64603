//! The service subject file: how to start a limiter service, how to ask it, how to read its
//! answers, and what it promises. The same family as the script subject files (the `[promise]`
//! and `[quota]` tables are theirs); a file with a `[service]` table is a service subject.
//!
//! ```toml
//! name = "example gateway"
//!
//! [service]
//! # One instance: program and arguments. {port} is the instance's own free port, {redis_url}
//! # its way to the verifier's private Redis (through the instance's fault proxy), {instance}
//! # its number from 0, {scratch} a directory of its own, {dir} this file's directory,
//! # {env:NAME} an environment variable (read when the file is loaded).
//! command = ["{env:RATELIMIT_GATEWAY}", "--listen", "127.0.0.1:{port}", "--redis-url", "{redis_url}"]
//! instances = 2                       # 1 to 8 (default 2)
//! ready = { url = "http://127.0.0.1:{port}/health" }   # or { port = true }: accepts connections
//! ready_within_ms = 30000             # optional (default 30000)
//! setup = [["python3", "-c", "..."]]  # optional: run once, in {dir}, before any instance starts
//! env = { LOG = "warn" }              # optional: added to each instance's environment
//! clock = "redis"                     # optional: whose clock it decides by, redis (default) or
//!                                     # service (each instance's own; skewed in the skew scenario)
//!
//! [ask.http]                          # or [ask.rls]
//! method = "GET"                      # optional (default GET)
//! url = "http://127.0.0.1:{port}/api/hello"
//! headers = { x-tenant = "{key}" }    # optional; {key}, {cost}, {instance}, {port}
//! body = ""                           # optional
//!
//! # [ask.rls]
//! # domain = "edge"
//! # descriptors = [[{ key = "tenant", value = "{key}" }]]
//! # url = "http://127.0.0.1:{port}"   # optional (this is the default)
//!
//! [answer]                            # HTTP statuses, or RLS codes ("OK", "OVER_LIMIT")
//! admitted = [200]                    # default [200] / ["OK"]
//! denied = [429]                      # default [429] / ["OVER_LIMIT"]
//! degraded = [503]                    # optional: a refusal because the limiter could not decide
//! degraded_header = "ratelimit-degraded"  # optional: present on every answer a failure policy gave
//! retry_after_header = "retry-after"  # optional: seconds an obedient client waits after a denial
//!                                     # (or "ratelimit", a draft-11 field: its t parameter)
//!
//! [failure]                           # optional: what the service does without Redis
//! policy = "fail-closed"              # fail-open | fail-closed | local-budget
//! local_budget = { limit = 10, period_ms = 1000 }  # with local-budget: per instance
//! timeout_ms = 250                    # optional (default 1000): how long it waits for Redis
//!
//! [promise]                           # as in a script subject file
//! kind = "token-bucket"
//!
//! [quota]                             # required: the quota the service is configured with
//! limit = 5
//! period_ms = 1000
//! burst = 5
//! ```
//!
//! Every mistake is reported before anything starts, naming the file, the field and the value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use redis_ratelimit::Quota;
use sim_engine::promise::{Promise, Tolerance};
use sim_engine::subject::file::{FileError, PromiseTable, QuotaTable};

pub use crate::answer::{AnswerRules, Failure, Policy};
use crate::answer::{RawAnswer, RawFailure};
pub use crate::template::{Template, Values, Var};
use crate::template::{ASK, SETUP, START};

/// How to know an instance is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Its port accepts connections.
    Port,
    /// An HTTP GET of this URL answers 2xx.
    Url(Template),
}

/// How to start the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// Program and arguments of one instance.
    pub command: Vec<Template>,
    /// How many instances share the one Redis.
    pub instances: usize,
    /// How to know one is ready.
    pub ready: Ready,
    /// How long one may take to be ready.
    pub ready_within: Duration,
    /// Commands run once, in the file's directory, before any instance starts.
    pub setup: Vec<Vec<Template>>,
    /// Added to each instance's environment.
    pub env: Vec<(String, Template)>,
    /// Whose clock its decisions go by.
    pub clock: Clock,
}

/// Whose clock a service decides by (`[service] clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Redis's (`TIME` in its scripts): the instances' clocks do not enter, so skewing them
    /// must change nothing (the default).
    Redis,
    /// Each instance's own: skewed clocks may cost the bound what no design exact on those
    /// clocks can avoid (shown as expected), and no more.
    Service,
}

/// How to ask for one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// An HTTP/1.1 request.
    Http {
        /// `GET`, `POST`...
        method: http::Method,
        /// `http://host:port/path?query`.
        url: Template,
        /// Header names and values.
        headers: Vec<(http::HeaderName, Template)>,
        /// The body (empty for none).
        body: Template,
    },
    /// Envoy's `ShouldRateLimit`.
    Rls {
        /// Where the service listens (`http://127.0.0.1:{port}`).
        url: Template,
        /// The request's domain.
        domain: String,
        /// Descriptors, each a list of entries (key, value).
        descriptors: Vec<Vec<(String, Template)>>,
    },
}

impl Ask {
    /// `http` or `rls`.
    pub fn kind(&self) -> &'static str {
        match self {
            Ask::Http { .. } => "http",
            Ask::Rls { .. } => "rls",
        }
    }
}

/// A validated service subject file.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceFile {
    /// `name`.
    pub name: String,
    /// Where the file is (for messages and re-drive commands).
    pub path: PathBuf,
    /// Its directory: commands run there.
    pub dir: PathBuf,
    /// How to start it.
    pub start: Start,
    /// How to ask it.
    pub ask: Ask,
    /// How to read its answers.
    pub answer: AnswerRules,
    /// What it does without Redis, if the file says.
    pub failure: Option<Failure>,
    /// What it promises.
    pub promise: Promise,
    /// How coarsely it keeps time, as declared.
    pub tolerance: Tolerance,
    /// The quota it is configured with.
    pub quota: Quota,
}

/// Whether the TOML file at `path` describes a service (has a `[service]` table); false when
/// it cannot be read or parsed (the script loader then names the problem).
pub fn is_service_file(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| toml::from_str::<toml::Table>(&text).ok())
        .is_some_and(|t| t.contains_key("service"))
}

impl ServiceFile {
    /// Reads and validates the service file at `path`, its `{env:NAME}` placeholders from the
    /// process's environment.
    pub fn load(path: &Path) -> Result<ServiceFile, FileError> {
        Self::load_with(path, &|name| std::env::var(name).ok())
    }

    /// As [`ServiceFile::load`], reading `{env:NAME}` with `env`.
    pub fn load_with(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<ServiceFile, FileError> {
        let text = std::fs::read_to_string(path).map_err(|e| FileError {
            file: path.to_owned(),
            field: String::new(),
            message: format!("cannot read the service file: {e}"),
        })?;
        let mut file = Self::parse(path, &text, env)?;
        // Absolute, so {dir} means the same inside the instances' working directory (which is
        // this one).
        if let Ok(dir) = std::fs::canonicalize(&file.dir) {
            file.dir = dir;
        }
        Ok(file)
    }

    /// Validates service-file `text` (shown as `path` in messages), reading `{env:NAME}` with
    /// `env`.
    pub fn parse(path: &Path, text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<ServiceFile, FileError> {
        let at = |field: &str, message: String| FileError { file: path.to_owned(), field: field.to_owned(), message };
        let raw: RawFile = toml::from_str(text).map_err(|e| at("", format!("not a valid service file: {e}")))?;
        if raw.name.trim().is_empty() {
            return Err(at("name", "must not be empty".into()));
        }
        let template =
            |field: &str, text: &str, allowed: &[Var]| Template::parse(text, allowed, env).map_err(|m| at(field, m));
        let list = |field: &str, items: &[String], allowed: &[Var]| -> Result<Vec<Template>, FileError> {
            items.iter().enumerate().map(|(i, s)| template(&format!("{field}[{i}]"), s, allowed)).collect()
        };

        let s = raw.service;
        if s.command.is_empty() {
            return Err(at("service.command", "is empty: give the program and its arguments".into()));
        }
        let command = list("service.command", &s.command, START)?;
        if !command.iter().any(|t| t.uses(Var::Port)) {
            return Err(at(
                "service.command",
                "never uses {port}: each instance must listen on the port the verifier gives it".into(),
            ));
        }
        if !command.iter().any(|t| t.uses(Var::RedisUrl) || t.uses(Var::RedisPort))
            && !s.env.values().any(|v| v.contains("{redis_url}") || v.contains("{redis_port}"))
        {
            return Err(at(
                "service.command",
                "never uses {redis_url} or {redis_port} (nor does `service.env`): an instance must reach Redis \
                 through the fault proxy the verifier gives it"
                    .into(),
            ));
        }
        let instances = s.instances.unwrap_or(2);
        if !(1..=8).contains(&instances) {
            return Err(at("service.instances", format!("{instances}: expected 1 to 8")));
        }
        let ready = match s.ready {
            RawReady { port: Some(true), url: None } => Ready::Port,
            RawReady { port: None | Some(false), url: Some(url) } => {
                let t = template("service.ready.url", &url, START)?;
                if !url.starts_with("http://") {
                    return Err(at("service.ready.url", format!("{url:?}: only http:// URLs are asked")));
                }
                Ready::Url(t)
            }
            _ => return Err(at("service.ready", "give exactly one of port = true or url = \"http://...\"".into())),
        };
        let ready_within_ms = s.ready_within_ms.unwrap_or(30_000);
        if !(100..=600_000).contains(&ready_within_ms) {
            return Err(at("service.ready_within_ms", format!("{ready_within_ms}: expected 100 to 600000")));
        }
        let mut setup = Vec::new();
        for (i, c) in s.setup.iter().enumerate() {
            if c.is_empty() {
                return Err(at(&format!("service.setup[{i}]"), "is an empty command".into()));
            }
            setup.push(list(&format!("service.setup[{i}]"), c, SETUP)?);
        }
        let mut env_vars = Vec::new();
        for (name, value) in &s.env {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(at("service.env", format!("{name:?} is not an environment variable's name")));
            }
            env_vars.push((name.clone(), template(&format!("service.env.{name}"), value, START)?));
        }

        let clock = match s.clock.as_deref() {
            None | Some("redis") => Clock::Redis,
            Some("service") => Clock::Service,
            Some(other) => {
                return Err(at("service.clock", format!("{other:?}: expected redis (the default) or service")))
            }
        };

        let ask = match (raw.ask.http, raw.ask.rls) {
            (Some(h), None) => {
                let method = h.method.as_deref().unwrap_or("GET");
                let method = http::Method::from_bytes(method.as_bytes())
                    .map_err(|_| at("ask.http.method", format!("{method:?} is not an HTTP method")))?;
                if !h.url.starts_with("http://") {
                    return Err(at("ask.http.url", format!("{:?}: only http:// URLs are asked", h.url)));
                }
                let url = template("ask.http.url", &h.url, ASK)?;
                let mut headers = Vec::new();
                for (name, value) in &h.headers {
                    let field = format!("ask.http.headers.{name}");
                    let header = http::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| at(&field, format!("{name:?} is not a header name")))?;
                    headers.push((header, template(&field, value, ASK)?));
                }
                let body = template("ask.http.body", h.body.as_deref().unwrap_or(""), ASK)?;
                Ask::Http { method, url, headers, body }
            }
            (None, Some(r)) => {
                if r.domain.is_empty() {
                    return Err(at("ask.rls.domain", "must not be empty".into()));
                }
                if r.descriptors.is_empty() {
                    return Err(at("ask.rls.descriptors", "is empty: give at least one descriptor".into()));
                }
                let mut descriptors = Vec::new();
                for (i, d) in r.descriptors.iter().enumerate() {
                    if d.is_empty() {
                        return Err(at(&format!("ask.rls.descriptors[{i}]"), "has no entries".into()));
                    }
                    let mut entries = Vec::new();
                    for (j, e) in d.iter().enumerate() {
                        let field = format!("ask.rls.descriptors[{i}][{j}]");
                        if e.key.is_empty() {
                            return Err(at(&format!("{field}.key"), "must not be empty".into()));
                        }
                        entries.push((e.key.clone(), template(&format!("{field}.value"), &e.value, ASK)?));
                    }
                    descriptors.push(entries);
                }
                let url = template("ask.rls.url", r.url.as_deref().unwrap_or("http://127.0.0.1:{port}"), ASK)?;
                Ask::Rls { url, domain: r.domain, descriptors }
            }
            (None, None) => return Err(at("ask", "give [ask.http] or [ask.rls]".into())),
            (Some(_), Some(_)) => return Err(at("ask", "give one of [ask.http] and [ask.rls], not both".into())),
        };
        let uses_key = match &ask {
            Ask::Http { url, headers, body, .. } => {
                url.uses(Var::Key) || body.uses(Var::Key) || headers.iter().any(|(_, t)| t.uses(Var::Key))
            }
            Ask::Rls { descriptors, .. } => descriptors.iter().flatten().any(|(_, t)| t.uses(Var::Key)),
        };
        if !uses_key {
            return Err(at(
                "ask",
                "never uses {key}: each scenario limits a key of its own, so the request must carry it".into(),
            ));
        }

        let answer = raw.answer.unwrap_or_default().validate(matches!(ask, Ask::Rls { .. }), &at)?;
        let failure = raw.failure.map(|f| f.validate(&at)).transpose()?;
        if raw.promise.counts.is_some() {
            return Err(at(
                "promise.counts",
                "applies to script subjects; a service is judged on what it admitted".into(),
            ));
        }
        let tolerance = raw.promise.tolerance(&at)?;
        let promise = raw.promise.validate(&at)?;
        let Some(quota) = raw.quota else {
            return Err(at("quota", "is missing: say the quota the service is configured with".into()));
        };
        let quota = quota.validate(promise, &at)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned();
        Ok(ServiceFile {
            name: raw.name,
            path: path.to_owned(),
            dir,
            start: Start {
                command,
                instances,
                ready,
                ready_within: Duration::from_millis(ready_within_ms),
                setup,
                env: env_vars,
                clock,
            },
            ask,
            answer,
            failure,
            promise,
            tolerance,
            quota,
        })
    }
}

// ------------------------------------------------------------------------------ raw TOML

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: String,
    service: RawService,
    ask: RawAsk,
    answer: Option<RawAnswer>,
    failure: Option<RawFailure>,
    promise: PromiseTable,
    quota: Option<QuotaTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    command: Vec<String>,
    instances: Option<usize>,
    ready: RawReady,
    ready_within_ms: Option<u64>,
    clock: Option<String>,
    #[serde(default)]
    setup: Vec<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReady {
    port: Option<bool>,
    url: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAsk {
    http: Option<RawHttp>,
    rls: Option<RawRls>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    method: Option<String>,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    body: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRls {
    url: Option<String>,
    domain: String,
    descriptors: Vec<Vec<RawEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    key: String,
    value: String,
}

#[cfg(test)]
mod tests;
