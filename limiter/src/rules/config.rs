//! Rules from a TOML file (feature `config`). Every problem is a [`RuleError`] naming the
//! rule and the field, with the value given; a file that does not parse names the line.
//!
//! ```toml
//! [client_ip]
//! trusted_proxies = ["10.0.0.0/8"]     # believe X-Forwarded-For only from these peers
//! header = "x-forwarded-for"           # or "forwarded" (RFC 7239)
//!
//! [access]
//! allow_keys = ["internal-batch"]      # compared with the verified user and API key
//! deny_keys = ["revoked"]              # the same, and with the values of key_headers
//! deny_ips = ["203.0.113.0/24"]        # also allow_ips
//! # key_headers = ["x-client-id"]      # raw headers for the deny list; refused with allow_keys
//!
//! [[rule]]
//! name = "hello-per-key"
//! match = { method = ["GET"], path = "/api/hello" }   # also host, headers (present)
//! key = ["api-key"]                   # user, api-key, ip, route, method, header:NAME, const:TEXT
//! algorithm = "token-bucket"
//! limit = 5
//! period = "1s"                       # a whole number and its unit: "250ms", "30s", "5m", "1h", "1d"
//! burst = 5                           # bucket algorithms; defaults to limit
//! cost = 1                            # default 1; 0 peeks
//! failure_policy = "fail-open"        # fail-closed, or local-budget with
//! # local_budget = { limit = 2, period = "1s" }
//! time_source = "server"              # or client
//! shadow = false
//! blockable = false                   # true: its keys can be blocked (Enforcer::block)
//! on_missing_key = "reject"           # fallback-ip, skip
//! # real_cost_header = "x-tokens-used" # the upstream states the real cost: reconciled with it
//! # Other quotas by the client's plan, which the authentication layer sets (`rules::Plan`);
//! # period defaults to the rule's, burst to the tier's limit.
//! tiers = { pro = { limit = 50 }, enterprise = { limit = 500, period = "1s", burst = 100 } }
//!
//! [[in_flight]]                       # at most `limit` requests of a key in flight at once
//! name = "exports-per-key"            # unique among every rule of the file
//! match = { path = "/api/export" }    # as a rule's
//! key = ["api-key"]                   # as a rule's
//! limit = 2
//! lease = "60s"                       # a permit whose holder died comes back after this
//! failure_policy = "fail-closed"      # as a rule's (a local budget lends its own `limit`)
//! on_missing_key = "reject"           # as a rule's
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use super::{
    AccessList, AccessLists, ClientIp, ForwardedHeader, InFlightRule, KeyPart, Match, OnMissingKey, Rule, RuleError,
    RuleSet,
};
use crate::clock::TimeSource;
use crate::policy::FailurePolicy;
use crate::quota::{Algorithm, Quota};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    client_ip: Option<ClientIpConfig>,
    #[serde(default)]
    access: Option<AccessConfig>,
    // Each rule is read on its own, so its errors can name it.
    #[serde(default)]
    rule: Vec<toml::Value>,
    #[serde(default)]
    in_flight: Vec<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientIpConfig {
    #[serde(default)]
    trusted_proxies: Vec<String>,
    #[serde(default)]
    header: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccessConfig {
    #[serde(default)]
    key_headers: Vec<String>,
    #[serde(default)]
    allow_keys: Vec<String>,
    #[serde(default)]
    allow_ips: Vec<String>,
    #[serde(default)]
    deny_keys: Vec<String>,
    #[serde(default)]
    deny_ips: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleConfig {
    name: String,
    #[serde(default, rename = "match")]
    matcher: MatchConfig,
    key: Vec<String>,
    algorithm: String,
    limit: u64,
    period: Period,
    #[serde(default)]
    burst: Option<u64>,
    #[serde(default)]
    cost: Option<u64>,
    #[serde(default)]
    failure_policy: Option<String>,
    #[serde(default)]
    local_budget: Option<LocalBudgetConfig>,
    #[serde(default)]
    time_source: Option<String>,
    #[serde(default)]
    shadow: bool,
    #[serde(default)]
    blockable: bool,
    #[serde(default)]
    on_missing_key: Option<String>,
    #[serde(default)]
    tiers: BTreeMap<String, TierConfig>,
    #[serde(default)]
    real_cost_header: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InFlightConfig {
    name: String,
    #[serde(default, rename = "match")]
    matcher: MatchConfig,
    key: Vec<String>,
    limit: u64,
    lease: Period,
    #[serde(default)]
    failure_policy: Option<String>,
    #[serde(default)]
    local_budget: Option<LocalBudgetConfig>,
    #[serde(default)]
    on_missing_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TierConfig {
    limit: u64,
    #[serde(default)]
    period: Option<Period>,
    #[serde(default)]
    burst: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MatchConfig {
    #[serde(default)]
    method: OneOrMany,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    headers: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LocalBudgetConfig {
    limit: u64,
    period: Period,
}

/// `"GET"` or `["GET", "HEAD"]`.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum OneOrMany {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

/// A period as a rules file writes it: text with a unit ([`crate::duration`]). A number is read
/// too, only to refuse it by name: `30` could be seconds or milliseconds.
#[derive(Deserialize)]
#[serde(untagged)]
enum Period {
    Number(f64),
    Text(String),
}

impl Period {
    fn ms(&self) -> Result<u64, String> {
        match self {
            Period::Number(n) => Err(format!(
                "{n} has no unit: write it as text with one, e.g. \"{n}s\" or \"{n}ms\" (units: ms, s, m, h, d)"
            )),
            Period::Text(t) => crate::duration::parse_ms(t),
        }
    }
}

/// An address (`192.0.2.1`, a /32) or a range (`10.0.0.0/8`).
fn net(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is neither an IP address nor a CIDR range"))
}

/// The path of the field a serde error is about, and its message.
fn located<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> (String, String) {
    // toml adds "in `field`" on a line of its own; the field is reported separately.
    let message = e.inner().to_string().lines().next().unwrap_or_default().trim().to_owned();
    let mut path = e.path().to_string();
    if path == "." || path.is_empty() {
        // Unknown and missing fields are reported at their table; their name is in the message.
        path = message.split('`').nth(1).unwrap_or("(table)").to_owned();
    }
    (path, message)
}

fn file_error(field: impl Into<String>, message: impl Into<String>) -> RuleError {
    RuleError::new(None, field, message)
}

impl RuleSet {
    /// Reads and checks a rules file; see the module docs of `redis_ratelimit::rules` for the format.
    ///
    /// ```
    /// let rules = redis_ratelimit::rules::RuleSet::from_toml(r#"
    ///     [[rule]]
    ///     name = "per-ip"
    ///     key = ["ip"]
    ///     algorithm = "gcra"
    ///     limit = 10
    ///     period = "1s"
    /// "#).unwrap();
    /// assert_eq!(rules.rules()[0].name(), "per-ip");
    ///
    /// let bad = redis_ratelimit::rules::RuleSet::from_toml(r#"
    ///     [[rule]]
    ///     name = "per-ip"
    ///     key = ["ip"]
    ///     algorithm = "gcra"
    ///     limit = "ten"
    ///     period = "1s"
    /// "#).unwrap_err();
    /// assert_eq!((bad.rule.as_deref(), bad.field.as_str()), (Some("per-ip"), "limit"));
    /// ```
    pub fn from_toml(text: &str) -> Result<RuleSet, RuleError> {
        let value: toml::Value = toml::from_str(text).map_err(|e| file_error("(file)", e.to_string().trim_end()))?;
        let file: File = serde_path_to_error::deserialize(value).map_err(|e| {
            let (path, message) = located(e);
            file_error(path, message)
        })?;
        let mut builder = RuleSet::builder();
        if let Some(c) = file.client_ip {
            let mut client_ip = ClientIp::new();
            for (i, text) in c.trusted_proxies.iter().enumerate() {
                client_ip =
                    client_ip.trust(net(text).map_err(|m| file_error(format!("client_ip.trusted_proxies[{i}]"), m))?);
            }
            client_ip = client_ip.header(match c.header.as_deref() {
                None | Some("x-forwarded-for") => ForwardedHeader::XForwardedFor,
                Some("forwarded") => ForwardedHeader::Forwarded,
                Some(other) => {
                    return Err(file_error(
                        "client_ip.header",
                        format!("{other:?} is not a forwarding header; expected \"x-forwarded-for\" or \"forwarded\""),
                    ))
                }
            });
            builder = builder.client_ip(client_ip);
        }
        if let Some(a) = file.access {
            let list = |keys: &[String], ips: &[String], field: &str| -> Result<AccessList, RuleError> {
                let mut list = AccessList::new();
                for k in keys {
                    list = list.key(k);
                }
                for (i, text) in ips.iter().enumerate() {
                    list = list.net(net(text).map_err(|m| file_error(format!("access.{field}[{i}]"), m))?);
                }
                Ok(list)
            };
            let mut lists = AccessLists::new().allow(list(&a.allow_keys, &a.allow_ips, "allow_ips")?).deny(list(
                &a.deny_keys,
                &a.deny_ips,
                "deny_ips",
            )?);
            for (i, h) in a.key_headers.iter().enumerate() {
                if http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                    return Err(file_error(format!("access.key_headers[{i}]"), format!("{h:?} is not a header name")));
                }
                lists = lists.key_header(h);
            }
            builder = builder.access(lists);
        }
        for (i, value) in file.rule.into_iter().enumerate() {
            builder = builder.rule(rule(i, value)?);
        }
        for (i, value) in file.in_flight.into_iter().enumerate() {
            builder = builder.in_flight(in_flight(i, value)?);
        }
        builder.build()
    }
}

/// A table read on its own, so its errors can name it: the config and the error maker.
fn table<T: serde::de::DeserializeOwned>(
    index: usize,
    value: toml::Value,
) -> Result<(T, impl Fn(&str, String) -> RuleError), RuleError> {
    let label = value
        .get("name")
        .and_then(toml::Value::as_str)
        .filter(|n| !n.is_empty())
        .map_or_else(|| format!("#{}", index + 1), str::to_owned);
    let err = move |field: &str, message: String| RuleError::in_rule(&label, field, message);
    let c: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let (path, message) = located(e);
        err(&path, message)
    })?;
    Ok((c, err))
}

/// One `[[rule]]` table.
fn rule(index: usize, value: toml::Value) -> Result<Rule, RuleError> {
    let (c, err) = table::<RuleConfig>(index, value)?;
    let algorithm: Algorithm = c.algorithm.parse().map_err(|_| {
        let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        err("algorithm", format!("unknown algorithm {:?}; expected one of {}", c.algorithm, names.join(", ")))
    })?;
    let period = c.period.ms().map_err(|m| err("period", m))?;
    let quota = Quota::new(c.limit, Duration::from_millis(period)).with_burst(c.burst.unwrap_or(c.limit));
    let policy = failure_policy(c.failure_policy.as_deref(), c.local_budget, &err)?;
    let time_source = match c.time_source.as_deref() {
        None | Some("server") => TimeSource::Server,
        Some("client") => TimeSource::Client,
        Some(other) => {
            return Err(err("time_source", format!("{other:?} is not a time source; expected server or client")))
        }
    };
    let mut rule = Rule::new(&c.name, algorithm, quota);
    if let Some(header) = &c.real_cost_header {
        rule = rule.real_cost_header(header);
    }
    for (plan, t) in &c.tiers {
        let period = match &t.period {
            Some(p) => p.ms().map_err(|m| err(&format!("tiers.{plan}.period"), m))?,
            None => period,
        };
        rule =
            rule.tier(plan, Quota::new(t.limit, Duration::from_millis(period)).with_burst(t.burst.unwrap_or(t.limit)));
    }
    Ok(rule
        .matching(matcher(c.matcher))
        .key(key_parts(&c.key, &err)?)
        .cost(c.cost.unwrap_or(1))
        .failure_policy(policy)
        .time_source(time_source)
        .shadow(c.shadow)
        .blockable(c.blockable)
        .on_missing_key(missing_key(c.on_missing_key.as_deref(), &err)?))
}

/// One `[[in_flight]]` table.
fn in_flight(index: usize, value: toml::Value) -> Result<InFlightRule, RuleError> {
    let (c, err) = table::<InFlightConfig>(index, value)?;
    let lease = c.lease.ms().map_err(|m| err("lease", m))?;
    Ok(InFlightRule::new(&c.name, c.limit, Duration::from_millis(lease))
        .matching(matcher(c.matcher))
        .key(key_parts(&c.key, &err)?)
        .failure_policy(failure_policy(c.failure_policy.as_deref(), c.local_budget, &err)?)
        .on_missing_key(missing_key(c.on_missing_key.as_deref(), &err)?))
}

fn failure_policy(
    name: Option<&str>,
    local_budget: Option<LocalBudgetConfig>,
    err: &dyn Fn(&str, String) -> RuleError,
) -> Result<FailurePolicy, RuleError> {
    Ok(match name {
        None | Some("fail-open" | "fail-closed") if local_budget.is_some() => {
            return Err(err("local_budget", "applies only to failure_policy = \"local-budget\"".into()))
        }
        None | Some("fail-open") => FailurePolicy::FailOpen,
        Some("fail-closed") => FailurePolicy::FailClosed,
        Some("local-budget") => match local_budget {
            Some(b) => FailurePolicy::LocalBudget {
                limit: b.limit,
                period: Duration::from_millis(b.period.ms().map_err(|m| err("local_budget.period", m))?),
            },
            None => return Err(err("local_budget", "is required with failure_policy = \"local-budget\"".into())),
        },
        Some(other) => {
            return Err(err(
                "failure_policy",
                format!("unknown policy {other:?}; expected fail-open, fail-closed or local-budget"),
            ))
        }
    })
}

fn missing_key(name: Option<&str>, err: &dyn Fn(&str, String) -> RuleError) -> Result<OnMissingKey, RuleError> {
    match name {
        None | Some("reject") => Ok(OnMissingKey::Reject),
        Some("fallback-ip") => Ok(OnMissingKey::FallbackToIp),
        Some("skip") => Ok(OnMissingKey::Skip),
        Some(other) => {
            Err(err("on_missing_key", format!("{other:?} is not a treatment; expected reject, fallback-ip or skip")))
        }
    }
}

fn key_parts(key: &[String], err: &dyn Fn(&str, String) -> RuleError) -> Result<Vec<KeyPart>, RuleError> {
    key.iter().enumerate().map(|(i, k)| KeyPart::parse(k).map_err(|m| err(&format!("key[{i}]"), m))).collect()
}

fn matcher(c: MatchConfig) -> Match {
    let mut matcher = Match::any();
    let methods = match c.method {
        OneOrMany::None => Vec::new(),
        OneOrMany::One(m) => vec![m],
        OneOrMany::Many(ms) => ms,
    };
    for m in &methods {
        matcher = matcher.method(m);
    }
    if let Some(p) = &c.path {
        matcher = matcher.path(p);
    }
    if let Some(h) = &c.host {
        matcher = matcher.host(h);
    }
    for h in &c.headers {
        matcher = matcher.header(h);
    }
    matcher
}

#[cfg(test)]
mod tests;
