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
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use super::{
    AccessList, AccessLists, ClientIp, ForwardedHeader, KeyPart, Match, OnMissingKey, Rule, RuleError, RuleSet,
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
        builder.build()
    }
}

/// One `[[rule]]` table.
fn rule(index: usize, value: toml::Value) -> Result<Rule, RuleError> {
    let label = value
        .get("name")
        .and_then(toml::Value::as_str)
        .filter(|n| !n.is_empty())
        .map_or_else(|| format!("#{}", index + 1), str::to_owned);
    let err = |field: &str, message: String| RuleError::in_rule(&label, field, message);
    let c: RuleConfig = serde_path_to_error::deserialize(value).map_err(|e| {
        let (path, message) = located(e);
        err(&path, message)
    })?;
    let algorithm: Algorithm = c.algorithm.parse().map_err(|_| {
        let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        err("algorithm", format!("unknown algorithm {:?}; expected one of {}", c.algorithm, names.join(", ")))
    })?;
    let period = c.period.ms().map_err(|m| err("period", m))?;
    let quota = Quota::new(c.limit, Duration::from_millis(period)).with_burst(c.burst.unwrap_or(c.limit));
    let policy = match c.failure_policy.as_deref() {
        None | Some("fail-open" | "fail-closed") if c.local_budget.is_some() => {
            return Err(err("local_budget", "applies only to failure_policy = \"local-budget\"".into()))
        }
        None | Some("fail-open") => FailurePolicy::FailOpen,
        Some("fail-closed") => FailurePolicy::FailClosed,
        Some("local-budget") => match c.local_budget {
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
    };
    let time_source = match c.time_source.as_deref() {
        None | Some("server") => TimeSource::Server,
        Some("client") => TimeSource::Client,
        Some(other) => {
            return Err(err("time_source", format!("{other:?} is not a time source; expected server or client")))
        }
    };
    let on_missing_key = match c.on_missing_key.as_deref() {
        None | Some("reject") => OnMissingKey::Reject,
        Some("fallback-ip") => OnMissingKey::FallbackToIp,
        Some("skip") => OnMissingKey::Skip,
        Some(other) => {
            return Err(err(
                "on_missing_key",
                format!("{other:?} is not a treatment; expected reject, fallback-ip or skip"),
            ))
        }
    };
    let key = c
        .key
        .iter()
        .enumerate()
        .map(|(i, k)| KeyPart::parse(k).map_err(|m| err(&format!("key[{i}]"), m)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut matcher = Match::any();
    let methods = match c.matcher.method {
        OneOrMany::None => Vec::new(),
        OneOrMany::One(m) => vec![m],
        OneOrMany::Many(ms) => ms,
    };
    for m in &methods {
        matcher = matcher.method(m);
    }
    if let Some(p) = &c.matcher.path {
        matcher = matcher.path(p);
    }
    if let Some(h) = &c.matcher.host {
        matcher = matcher.host(h);
    }
    for h in &c.matcher.headers {
        matcher = matcher.header(h);
    }
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
        .matching(matcher)
        .key(key)
        .cost(c.cost.unwrap_or(1))
        .failure_policy(policy)
        .time_source(time_source)
        .shadow(c.shadow)
        .blockable(c.blockable)
        .on_missing_key(on_missing_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        [client_ip]
        trusted_proxies = ["10.0.0.0/8", "192.0.2.1"]

        [access]
        key_headers = ["x-client-id"]
        deny_keys = ["revoked"]
        deny_ips = ["203.0.113.0/24"]

        [[rule]]
        name = "hello"
        match = { method = "GET", path = "/api/hello" }
        key = ["header:x-api-key"]
        algorithm = "token-bucket"
        limit = 5
        period = "1s"
        tiers = { pro = { limit = 50 }, enterprise = { limit = 500, period = "1m", burst = 100 } }

        [[rule]]
        name = "daily"
        match = { method = ["GET", "POST"], path = "/api/**", headers = ["x-api-key"] }
        key = ["header:x-api-key", "route"]
        algorithm = "sliding-window"
        limit = 1000
        period = "1d"
        failure_policy = "local-budget"
        local_budget = { limit = 10, period = "1m" }
        time_source = "client"
        shadow = true
        blockable = true
        on_missing_key = "fallback-ip"
        real_cost_header = "x-rows-read"
    "#;

    #[test]
    fn a_whole_file_reads_into_rules_lists_and_proxies() {
        let set = RuleSet::from_toml(GOOD).unwrap();
        let hello = set.rule("hello").unwrap();
        assert_eq!((hello.algorithm(), hello.quota()), (Algorithm::TokenBucket, Quota::per_second(5)));
        assert_eq!(hello.quota_for(Some("pro")), Quota::per_second(50), "the rule's period, a burst of the limit");
        assert_eq!(hello.quota_for(Some("enterprise")), Quota::per_minute(500).with_burst(100));
        assert_eq!(hello.quota_for(None), hello.quota());
        let daily = set.rule("daily").unwrap();
        assert_eq!(daily.quota(), Quota::new(1000, Duration::from_secs(86_400)));
        assert_eq!(daily.policy(), FailurePolicy::LocalBudget { limit: 10, period: Duration::from_secs(60) });
        assert!(daily.is_shadow());
        assert!(daily.is_blockable() && !hello.is_blockable());
        assert_eq!((daily.real_cost_header_name(), hello.real_cost_header_name()), (Some("x-rows-read"), None));
        assert_eq!(daily.missing_key(), OnMissingKey::FallbackToIp);
        assert_eq!(daily.key_parts(), [KeyPart::header("x-api-key"), KeyPart::Route]);
        assert_eq!(set.client_ip().trusted().len(), 2);
        assert_eq!(set.access().key_headers(), ["x-client-id"]);
        assert_eq!(set.identifying_headers(), ["x-api-key", "x-client-id"]);
    }

    #[test]
    fn every_mistake_names_its_rule_and_field() {
        let rule = |extra: &str| {
            format!(
                "[[rule]]\nname = \"r1\"\nkey = [\"ip\"]\nalgorithm = \"gcra\"\nlimit = 5\nperiod = \"1s\"\n{extra}"
            )
        };
        let cases: &[(String, Option<&str>, &str)] = &[
            (rule("burst = \"five\""), Some("r1"), "burst"),
            (rule("limt = 3"), Some("r1"), "limt"),
            (rule("match = { path = \"api\" }"), Some("r1"), "match.path"),
            (rule("match = { methd = \"GET\" }"), Some("r1"), "match.methd"),
            (rule("failure_policy = \"fail-sideways\""), Some("r1"), "failure_policy"),
            (rule("failure_policy = \"local-budget\""), Some("r1"), "local_budget"),
            (rule("time_source = \"moon\""), Some("r1"), "time_source"),
            (rule("on_missing_key = \"ignore\""), Some("r1"), "on_missing_key"),
            (rule("cost = 9"), Some("r1"), "cost"),
            (rule("").replace("\"gcra\"", "\"leaky\""), Some("r1"), "algorithm"),
            (rule("").replace("\"1s\"", "\"1 fortnight\""), Some("r1"), "period"),
            (rule("").replace("\"1s\"", "30"), Some("r1"), "period"),
            (rule("").replace("\"1s\"", "\"0ms\""), Some("r1"), "period"),
            (rule("").replace("[\"ip\"]", "[\"ip\", \"cookie\"]"), Some("r1"), "key[1]"),
            (rule("").replace("name = \"r1\"\n", ""), Some("#1"), "name"),
            (rule("tiers = { pro = { limit = 0 } }"), Some("r1"), "tiers.pro.limit"),
            (rule("tiers = { pro = { limit = 9, period = \"9\" } }"), Some("r1"), "tiers.pro.period"),
            (rule("tiers = { pro = { limt = 9 } }"), Some("r1"), "tiers.pro.limt"),
            (rule("tiers = { \"a:b\" = { limit = 9 } }"), Some("r1"), "tiers"),
            // A bucket's capacity is its burst (the tier's limit unless given); a window's its limit.
            (rule("cost = 2\ntiers = { basic = { limit = 1 } }"), Some("r1"), "tiers.basic.burst"),
            (
                rule("cost = 2\ntiers = { basic = { limit = 1 } }").replace("\"gcra\"", "\"fixed-window\""),
                Some("r1"),
                "tiers.basic.limit",
            ),
            ("[client_ip]\ntrusted_proxies = [\"10.0.0.0/33\"]".into(), None, "client_ip.trusted_proxies[0]"),
            ("[access]\ndeny_ips = [\"x\"]".into(), None, "access.deny_ips[0]"),
            ("[access]\nkey_headers = [\"x-k\"]\nallow_keys = [\"vip\"]".into(), None, "access.allow_keys"),
            ("[acess]\n".into(), None, "acess"),
            ("[[rule]\nname = ".into(), None, "(file)"),
        ];
        for (text, rule, field) in cases {
            let e = RuleSet::from_toml(text).expect_err(field);
            assert_eq!((e.rule.as_deref(), e.field.as_str()), (*rule, *field), "{e}\n{text}");
        }
        let e = RuleSet::from_toml(&rule("burst = \"five\"")).unwrap_err();
        assert_eq!(e.to_string(), "rule \"r1\", field burst: invalid type: string \"five\", expected u64");
        let bare = RuleSet::from_toml(&rule("").replace("\"1s\"", "30")).unwrap_err().to_string();
        assert!(
            bare.contains("30 has no unit") && bare.contains("\"30s\"") && bare.contains("ms, s, m, h, d"),
            "{bare}"
        );
    }

    #[test]
    fn sub_second_periods_are_read_and_the_policy_field_names_the_seconds_that_hold_them() {
        let set = RuleSet::from_toml(
            "[[rule]]\nname = \"burst\"\nkey = [\"ip\"]\nalgorithm = \"sliding-log\"\nlimit = 5\nperiod = \"250ms\"\n\
             failure_policy = \"local-budget\"\nlocal_budget = { limit = 2, period = \"1500ms\" }\n",
        )
        .expect("valid");
        let r = &set.rules()[0];
        assert_eq!(r.quota().period_ms(), 250);
        assert_eq!(r.policy(), FailurePolicy::LocalBudget { limit: 2, period: Duration::from_millis(1500) });
        assert_eq!(r.window_secs(), 1);
    }
}
