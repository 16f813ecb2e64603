//! The rate limit configuration: envoyproxy/ratelimit's YAML, read as that service reads it,
//! plus this project's optional fields.
//!
//! One file holds one domain:
//!
//! ```yaml
//! domain: messaging
//! descriptors:
//!   - key: message_type
//!     value: marketing
//!     descriptors:
//!       - key: to_number
//!         rate_limit: { unit: day, requests_per_unit: 5 }
//!   - key: to_number
//!     rate_limit:
//!       unit: day
//!       requests_per_unit: 100
//!       algorithm: gcra              # this project's: any of the five (fixed-window by default)
//! ```
//!
//! Every field the reference documents means what it means there: `key`, `value` (exact, or
//! with `*` wildcards), `rate_limit` (`unit`, `requests_per_unit`, `unlimited`, `name`,
//! `replaces`), `shadow_mode`, `detailed_metric`, `value_to_metric`, `share_threshold`,
//! `metadata`, nested `descriptors`. The project's fields, all optional, go in `rate_limit`:
//! `algorithm`, `burst`, `failure_policy` (`fail-open`, `fail-closed`, `local-budget` with
//! `local_budget: { requests_per_unit, unit }`), `blockable`, `allow_request_limit` (a
//! descriptor's own `limit` is honoured here) and `quota_grants` (`{ lifetime, max_requests }`).
//!
//! A mistake is refused naming the file, the path inside it (`descriptors[1].rate_limit.unit`),
//! the line and the value. A field the reference knows but ignores where it stands (its key
//! check is one list for every level) is accepted as the reference accepts it, with a warning.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

mod yaml;

/// The unit of a limit, as the protocol names it (a month is 30 days, a year 365, as in the
/// reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// One minute.
    Minute,
    /// One hour.
    Hour,
    /// One day.
    Day,
    /// Seven days.
    Week,
    /// Thirty days.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// The unit's length in milliseconds.
    pub const fn ms(self) -> u64 {
        match self {
            Unit::Second => 1_000,
            Unit::Minute => 60_000,
            Unit::Hour => 3_600_000,
            Unit::Day => 86_400_000,
            Unit::Week => 7 * 86_400_000,
            Unit::Month => 30 * 86_400_000,
            Unit::Year => 365 * 86_400_000,
        }
    }

    /// Reads a unit as the file writes it (any case), None for anything else.
    pub fn parse(text: &str) -> Option<Unit> {
        Some(match text.to_ascii_lowercase().as_str() {
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        })
    }

    /// The protocol's number for the unit (`RateLimitResponse.RateLimit.Unit`).
    pub const fn proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The unit of the protocol's number, None for UNKNOWN or a number it does not define.
    pub const fn from_proto(n: i32) -> Option<Unit> {
        Some(match n {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    /// The unit's name, lower case.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }
}

pub(crate) const UNITS: &str = "second, minute, hour, day, week, month or year";

/// What a limit answers when Redis cannot be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// OK, unchecked (the default).
    FailOpen,
    /// OVER_LIMIT, with the reason in the response.
    FailClosed,
    /// Each service instance admits up to `requests` per `unit` per key on its own.
    LocalBudget {
        /// Requests per unit per instance.
        requests: u64,
        /// The unit.
        unit: Unit,
    },
}

/// Quota grants of a limit (see the guide): how long a grant lives and the most one holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// How long a grant may be spent after it is made, as written (`250ms`, `1s`); read when
    /// the configuration is compiled.
    pub lifetime: String,
    /// Where `lifetime` stands, for a message.
    pub place: Place,
    /// The most requests one grant holds.
    pub max_requests: u64,
}

/// A limit of one configuration entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// Requests per unit (0 refuses every request, as in the reference).
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
    /// `rate_limit.name`, which `replaces` names.
    pub name: Option<String>,
    /// The names of the limits this one replaces.
    pub replaces: Vec<String>,
    /// Reported and counted, never refuses.
    pub shadow: bool,
    /// The algorithm's name (`fixed-window` unless the file says).
    pub algorithm: String,
    /// The bucket's burst (the token bucket and GCRA; the limit by default).
    pub burst: Option<u64>,
    /// The failure policy.
    pub policy: Policy,
    /// Whether its keys can be blocked.
    pub blockable: bool,
    /// Whether a descriptor's own `limit` is honoured under this entry.
    pub allow_request_limit: bool,
    /// Quota grants, when the entry allows them.
    pub grants: Option<Grants>,
    /// Where the entry's `rate_limit` stands, for messages.
    pub place: Place,
}

/// An in-flight limit of one configuration entry (`rate_limit: { in_flight: N, lease: .. }`):
/// at most `permits` requests of a key at once, each holding a permit until the proxy's call at
/// its stream's end releases it (see the guide), or its lease ends.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    /// Requests of one key in flight at once.
    pub permits: u64,
    /// How long a permit is held when no release comes (a proxy that died, a call lost).
    pub lease: std::time::Duration,
    /// `rate_limit.name`, which `replaces` names.
    pub name: Option<String>,
    /// The names of the limits this one replaces.
    pub replaces: Vec<String>,
    /// Reported and counted, never refuses.
    pub shadow: bool,
    /// The failure policy; a local budget's `requests` are permits per instance (its unit is
    /// not used).
    pub policy: Policy,
    /// Where the entry's `rate_limit` stands, for messages.
    pub place: Place,
}

/// What one entry says about the requests it matches.
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// Limited.
    Limited(Box<Limit>),
    /// Limited in flight: `in_flight: N`.
    InFlight(Box<InFlight>),
    /// `unlimited: true`: always OK, never counted in Redis.
    Unlimited {
        /// `rate_limit.name`.
        name: Option<String>,
        /// The names it replaces.
        replaces: Vec<String>,
    },
}

/// Where something stands in the configuration: the file, the path inside it and the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file.
    pub file: PathBuf,
    /// The path inside it, `descriptors[0].rate_limit`.
    pub path: String,
    /// The line (1-based).
    pub line: usize,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (line {})", self.file.display(), self.path, self.line)
    }
}

/// A configuration refused: where, and what is wrong with the value found there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct ConfigError {
    /// Where.
    pub place: Place,
    /// What is wrong, with the value.
    pub message: String,
}

/// A wildcard value: the pattern split at each `*` (each matches zero or more characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    parts: Vec<String>,
}

impl Pattern {
    pub(crate) fn new(text: &str) -> Pattern {
        Pattern { text: text.to_owned(), parts: text.split('*').map(str::to_owned).collect() }
    }

    /// The pattern as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `value` matches: the first part is a prefix, the last a suffix, and the ones
    /// between appear in order in what is left.
    pub fn matches(&self, value: &str) -> bool {
        let parts = &self.parts;
        let (first, last) = (&parts[0], &parts[parts.len() - 1]);
        if parts.len() == 1 {
            return value == first;
        }
        let fixed: usize = parts.iter().map(String::len).sum();
        if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
            return false;
        }
        let mut rest = &value[first.len()..value.len() - last.len()];
        for part in &parts[1..parts.len() - 1] {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// One configuration entry and the entries nested in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The entry's key.
    pub key: String,
    /// Its value: None matches any value of the key.
    pub value: Option<String>,
    /// The reference's name for the entry in statistics: `domain.key_value.key2`.
    pub stat: String,
    /// What it says about the requests it matches, if anything.
    pub rate: Option<Rate>,
    /// Metrics per value even where the entry has none (`detailed_metric`).
    pub detailed_metric: bool,
    /// The request's value in the metrics (`value_to_metric`).
    pub value_to_metric: bool,
    /// Every value this wildcard matches counts as one (`share_threshold`).
    pub share_threshold: bool,
    /// The entries nested in it.
    pub children: Children,
    /// Where it stands.
    pub place: Place,
}

/// The entries of one level: found by key and value, by wildcard (in file order), then by key.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Children {
    exact: HashMap<String, HashMap<String, Node>>,
    wildcards: Vec<(Pattern, Node)>,
    by_key: HashMap<String, Node>,
}

impl Children {
    /// The entry the request's `(key, value)` matches at this level, and the wildcard it
    /// matched through, if it did.
    pub fn find(&self, key: &str, value: &str) -> Option<(&Node, Option<&Pattern>)> {
        if let Some(n) = self.exact.get(key).and_then(|m| m.get(value)) {
            return Some((n, None));
        }
        if let Some((p, n)) = self.wildcards.iter().find(|(p, n)| n.key == key && p.matches(value)) {
            return Some((n, Some(p)));
        }
        self.by_key.get(key).map(|n| (n, None))
    }

    /// Every entry of this level.
    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.exact
            .values()
            .flat_map(|m| m.values())
            .chain(self.wildcards.iter().map(|(_, n)| n))
            .chain(self.by_key.values())
    }

    /// Whether the level is empty.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcards.is_empty() && self.by_key.is_empty()
    }
}

/// One domain's entries.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    /// The domain.
    pub name: String,
    /// Its top level.
    pub root: Children,
}

/// Every domain loaded, and what the files said that is worth a warning.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// The domains by name.
    pub domains: BTreeMap<String, Domain>,
    /// Fields the reference ignores where they stand, and values it reads as it does but that
    /// are likely mistakes: logged once per load.
    pub warnings: Vec<String>,
}

impl Config {
    /// Every limited entry, in no particular order.
    pub fn limits(&self) -> Vec<&Node> {
        fn walk<'a>(c: &'a Children, out: &mut Vec<&'a Node>) {
            for n in c.iter() {
                if matches!(n.rate, Some(Rate::Limited(_) | Rate::InFlight(_))) {
                    out.push(n);
                }
                walk(&n.children, out);
            }
        }
        let mut out = Vec::new();
        for d in self.domains.values() {
            walk(&d.root, &mut out);
        }
        out
    }
}

/// How files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Several files may hold one domain: their entries are merged (a duplicate entry is still
    /// refused).
    pub merge_domains: bool,
}

/// The files `paths` name: each a file, or a directory whose `*.yaml` and `*.yml` files are
/// read (not its subdirectories, nor hidden files), in name order.
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ConfigError> {
    let mut out = Vec::new();
    for path in paths {
        let unreadable = |e: std::io::Error| ConfigError {
            place: Place { file: path.clone(), path: "(file)".into(), line: 0 },
            message: format!("cannot be read: {e}"),
        };
        let meta = std::fs::metadata(path).map_err(unreadable)?;
        if !meta.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(unreadable)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml")) && p.is_file()
            })
            .collect();
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// Reads every file `paths` name into one configuration, or refuses it with the first mistake.
pub fn load(paths: &[PathBuf], options: LoadOptions) -> Result<Config, ConfigError> {
    let mut texts = Vec::new();
    for file in files(paths)? {
        let text = std::fs::read_to_string(&file).map_err(|e| ConfigError {
            place: Place { file: file.clone(), path: "(file)".into(), line: 0 },
            message: format!("cannot be read: {e}"),
        })?;
        texts.push((file, text));
    }
    parse(&texts, options)
}

/// Reads configuration texts (a file name and its contents each) into one configuration.
pub fn parse(texts: &[(PathBuf, String)], options: LoadOptions) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    for (file, text) in texts {
        yaml::parse_file(&mut config, file, text, options)?;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<Config, ConfigError> {
        parse(&[(PathBuf::from("cfg.yaml"), text.to_owned())], LoadOptions::default())
    }

    #[test]
    fn wildcards_match_prefix_suffix_and_middle_in_order() {
        let p = Pattern::new("/api/*/resource/*/action");
        assert!(p.matches("/api/v1/resource/123/action"));
        assert!(!p.matches("/api/v1/resource/123/other"));
        assert!(Pattern::new("value*").matches("value"));
        assert!(Pattern::new("value*").matches("valueXYZ"));
        assert!(!Pattern::new("value*").matches("valu"));
        // The fixed parts cannot overlap: "ab*ba" needs four characters.
        assert!(!Pattern::new("ab*ba").matches("aba"));
        assert!(Pattern::new("*").matches(""));
    }

    #[test]
    fn mistakes_name_the_file_the_path_the_line_and_the_value() {
        let e = one(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: secnd\n      requests_per_unit: 1\n",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "cfg.yaml: descriptors[0].rate_limit.unit (line 5): invalid rate limit unit \"secnd\"; expected second, minute, hour, day, week, month or year");
        let e = one("domain: d\ndescriptors:\n  - key: k\n    rate_limt: {}\n").unwrap_err();
        assert!(e.to_string().contains("descriptors[0].rate_limt (line 4): unknown field \"rate_limt\""), "{e}");
        let e = one("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: -1 }\n")
            .unwrap_err();
        assert!(e.to_string().contains("rate_limit.requests_per_unit (line 4): must be a whole number"), "{e}");
        let e = one("descriptors: []\n").unwrap_err();
        assert!(e.to_string().contains("empty domain"), "{e}");
        let e = one("domain: d\ndescriptors:\n  - key: k\n  - key: k\n").unwrap_err();
        assert!(e.to_string().contains("descriptors[1] (line 4): duplicate descriptor key"), "{e}");
        let e = one("domain: [\n").unwrap_err();
        assert!(e.to_string().contains("is not YAML"), "{e}");
        let e = one("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, unit: second }\n")
            .unwrap_err();
        assert!(e.to_string().contains("an unlimited limit has no unit"), "{e}");
        let e = one("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, algorithm: leaky }\n").unwrap_err();
        assert!(e.to_string().contains("unknown algorithm \"leaky\""), "{e}");
    }

    #[test]
    fn what_the_reference_ignores_is_accepted_with_a_warning() {
        let c = one("domain: d\nunit: second\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    rate_limit: { unit: SECOND }\n").unwrap();
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        let Some(Rate::Limited(l)) = &c.domains["d"].root.find("k", "x").unwrap().0.rate else { panic!() };
        assert_eq!((l.requests_per_unit, l.unit, l.shadow), (0, Unit::Second, true));
    }

    #[test]
    fn in_flight_limits_read_their_own_fields_and_refuse_the_rest_by_name() {
        let rate =
            |fields: &str| one(&format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{ {fields} }}\n"));
        let c = rate("in_flight: 3, lease: 90s, failure_policy: local-budget, local_budget: { in_flight: 1 }").unwrap();
        let Some(Rate::InFlight(f)) = &c.domains["d"].root.find("k", "x").unwrap().0.rate else { panic!() };
        assert_eq!((f.permits, f.lease), (3, std::time::Duration::from_secs(90)));
        assert_eq!(f.policy, Policy::LocalBudget { requests: 1, unit: Unit::Second });
        let c = rate("in_flight: 1").unwrap();
        let Some(Rate::InFlight(f)) = &c.domains["d"].root.find("k", "x").unwrap().0.rate else { panic!() };
        assert_eq!((f.lease, f.policy), (std::time::Duration::from_secs(60), Policy::FailOpen));
        for (fields, said) in [
            ("in_flight: 3, unit: second", "unit does not apply to an in_flight limit"),
            ("in_flight: 3, algorithm: gcra", "algorithm does not apply"),
            ("in_flight: 0", "must be at least 1 request in flight"),
            ("in_flight: 3, lease: 0s", "a lease is from 1ms to 366d"),
            ("in_flight: 3, lease: 400d", "a lease is from 1ms to 366d"),
            ("in_flight: 3, lease: soon", "rate_limit.lease (line 4)"),
            ("in_flight: 3, failure_policy: local-budget", "needs local_budget: { in_flight }"),
            ("in_flight: 3, failure_policy: local-budget, local_budget: { in_flight: 0 }", "at least 1"),
            ("unit: second, requests_per_unit: 1, lease: 1s", "applies only to an in_flight limit"),
        ] {
            let e = rate(fields).expect_err(fields);
            assert!(e.to_string().contains(said), "{fields}: {e}");
        }
    }
}
