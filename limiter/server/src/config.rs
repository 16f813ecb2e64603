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
use std::path::{Path, PathBuf};

use saphyr::{MarkedYaml, Scalar, ScalarStyle, YamlData};

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

const UNITS: &str = "second, minute, hour, day, week, month or year";

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grants {
    /// How long a grant may be spent after it is made (ms).
    pub lifetime_ms: u64,
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

/// What one entry says about the requests it matches.
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// Limited.
    Limited(Limit),
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
    fn new(text: &str) -> Pattern {
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
                if matches!(n.rate, Some(Rate::Limited(_))) {
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
        parse_file(&mut config, file, text, options)?;
    }
    Ok(config)
}

/// The fields the reference knows at any level (its key check is one list).
const REFERENCE_KEYS: &[&str] = &[
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

const ROOT_KEYS: &[&str] = &["domain", "descriptors"];
const ENTRY_KEYS: &[&str] = &[
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "shadow_mode",
    "quota_mode",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];
const RATE_KEYS: &[&str] = &[
    "unit",
    "requests_per_unit",
    "unlimited",
    "name",
    "replaces",
    // This project's.
    "algorithm",
    "burst",
    "failure_policy",
    "local_budget",
    "blockable",
    "allow_request_limit",
    "quota_grants",
];

/// A node and where it stands.
struct At<'a, 'y> {
    node: &'a MarkedYaml<'y>,
    file: &'a Path,
    path: String,
}

impl<'a, 'y> At<'a, 'y> {
    fn place(&self) -> Place {
        Place { file: self.file.to_path_buf(), path: self.path.clone(), line: self.node.span.start.line() }
    }

    fn err(&self, message: impl Into<String>) -> ConfigError {
        ConfigError { place: self.place(), message: message.into() }
    }

    fn field(&self, name: &str, node: &'a MarkedYaml<'y>) -> At<'a, 'y> {
        let path = if self.path.is_empty() { name.to_owned() } else { format!("{}.{name}", self.path) };
        At { node, file: self.file, path }
    }

    fn item(&self, i: usize, node: &'a MarkedYaml<'y>) -> At<'a, 'y> {
        At { node, file: self.file, path: format!("{}[{i}]", self.path) }
    }

    /// What the node is, for messages.
    fn shown(&self) -> String {
        match &self.node.data {
            YamlData::Representation(text, ..) => format!("{text:?}"),
            YamlData::Value(v) => format!("{v:?}"),
            YamlData::Sequence(_) => "a list".into(),
            YamlData::Mapping(_) => "a mapping".into(),
            _ => "an unusable value".into(),
        }
    }

    fn scalar(&self) -> Option<&str> {
        match &self.node.data {
            YamlData::Representation(text, ..) => Some(text),
            YamlData::Value(Scalar::String(text)) => Some(text),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        match &self.node.data {
            YamlData::Representation(text, ScalarStyle::Plain, _) => {
                matches!(&**text, "" | "~" | "null" | "Null" | "NULL")
            }
            YamlData::Value(Scalar::Null) => true,
            _ => false,
        }
    }

    /// A string field: any scalar, as written (the reference reads a number or a boolean into
    /// a string field as its text).
    fn string(&self) -> Result<String, ConfigError> {
        if self.is_null() {
            return Ok(String::new());
        }
        self.scalar().map(str::to_owned).ok_or_else(|| self.err(format!("must be a string, got {}", self.shown())))
    }

    /// A boolean, as YAML 1.1 writes them (the reference's parser reads `yes`, `on` and `y`).
    fn boolean(&self) -> Result<bool, ConfigError> {
        if self.is_null() {
            return Ok(false);
        }
        let text = self.scalar().ok_or_else(|| self.err(format!("must be true or false, got {}", self.shown())))?;
        match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" => Ok(true),
            "false" | "no" | "off" | "n" => Ok(false),
            _ => Err(self.err(format!("must be true or false, got {text:?}"))),
        }
    }

    /// A whole number from 0 to `max`.
    fn number(&self, max: u64) -> Result<u64, ConfigError> {
        if self.is_null() {
            return Ok(0);
        }
        let text = self.scalar().ok_or_else(|| self.err(format!("must be a whole number, got {}", self.shown())))?;
        let parsed = if let Some(hex) = text.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).ok()
        } else {
            text.strip_prefix('+').unwrap_or(text).replace('_', "").parse::<u64>().ok()
        };
        match parsed {
            Some(n) if n <= max => Ok(n),
            Some(n) => Err(self.err(format!("must be at most {max}, got {n}"))),
            None => Err(self.err(format!("must be a whole number from 0 to {max}, got {text:?}"))),
        }
    }

    fn list(&self) -> Result<Vec<At<'a, 'y>>, ConfigError> {
        if self.is_null() {
            return Ok(Vec::new());
        }
        match &self.node.data {
            YamlData::Sequence(items) => Ok(items.iter().enumerate().map(|(i, n)| self.item(i, n)).collect()),
            _ => Err(self.err(format!("must be a list, got {}", self.shown()))),
        }
    }

    /// The mapping's fields in file order; every key must be one of `allowed`, or one the
    /// reference ignores at this level (a warning), else it is refused.
    fn mapping(&self, allowed: &[&str], warnings: &mut Vec<String>) -> Result<Vec<(String, At<'a, 'y>)>, ConfigError> {
        let YamlData::Mapping(map) = &self.node.data else {
            return Err(self.err(format!("must be a mapping, got {}", self.shown())));
        };
        let mut out = Vec::new();
        for (k, v) in map {
            let key_at = At { node: k, file: self.file, path: self.path.clone() };
            let Some(key) = key_at.scalar().map(str::to_owned) else {
                return Err(key_at.err(format!("a key must be a string, got {}", key_at.shown())));
            };
            let at = self.field(&key, v);
            if allowed.contains(&key.as_str()) {
                out.push((key, at));
            } else if REFERENCE_KEYS.contains(&key.as_str()) {
                warnings
                    .push(format!("{}: ignored here (envoyproxy/ratelimit ignores it at this level too)", at.place()));
            } else {
                let mut known: Vec<&str> = allowed.to_vec();
                known.sort_unstable();
                return Err(at.err(format!("unknown field {key:?}; expected one of {}", known.join(", "))));
            }
        }
        Ok(out)
    }
}

fn parse_file(config: &mut Config, file: &Path, text: &str, options: LoadOptions) -> Result<(), ConfigError> {
    let place = |line: usize, message: String| ConfigError {
        place: Place { file: file.to_path_buf(), path: "(document)".into(), line },
        message,
    };
    let mut parser = saphyr_parser::Parser::new_from_str(text);
    let mut loader: saphyr::YamlLoader<'_, MarkedYaml<'_>> = saphyr::YamlLoader::default();
    loader.early_parse(false);
    if let Err(e) = parser.load(&mut loader, true) {
        return Err(place(e.marker().line(), format!("is not YAML: {}", e.info())));
    }
    if let Some(e) = loader.error() {
        return Err(place(e.marker().line(), format!("is not YAML: {}", e.info())));
    }
    let docs = loader.into_documents();
    let Some(doc) = docs.first() else {
        return Err(place(1, "is empty: a configuration file names a domain and its descriptors".into()));
    };
    if docs.len() > 1 {
        return Err(place(
            docs[1].span.start.line(),
            "holds more than one YAML document; put each domain in a file of its own".into(),
        ));
    }
    let root = At { node: doc, file, path: String::new() };
    let mut domain = None;
    let mut descriptors = Vec::new();
    let mut root_at = None;
    for (k, at) in root.mapping(ROOT_KEYS, &mut config.warnings)? {
        match k.as_str() {
            "domain" => domain = Some((at.string()?, at)),
            "descriptors" => descriptors = at.list()?,
            _ => {}
        }
    }
    let Some((name, domain_at)) = domain.filter(|(d, _)| !d.is_empty()) else {
        let at = root_at.get_or_insert(At { node: doc, file, path: "domain".into() });
        return Err(at.err("must name the domain: a configuration file cannot have an empty domain"));
    };
    let entry = match config.domains.get_mut(&name) {
        Some(existing) if options.merge_domains => existing,
        Some(_) => {
            return Err(domain_at.err(format!(
                "the domain {name:?} is already defined by another file (pass --merge-domains to merge files of one domain)"
            )))
        }
        None => config.domains.entry(name.clone()).or_insert(Domain { name: name.clone(), root: Children::default() }),
    };
    let mut root_children = std::mem::take(&mut entry.root);
    let result = load_entries(&mut root_children, &descriptors, &name, &mut config.warnings);
    let entry = config.domains.get_mut(&name).expect("inserted above");
    entry.root = root_children;
    result
}

fn load_entries(
    into: &mut Children,
    entries: &[At<'_, '_>],
    parent_stat: &str,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    for at in entries {
        let node = load_entry(at, parent_stat, warnings)?;
        let dup = |what: &str| {
            at.err(format!(
                "duplicate descriptor {what}: another entry of this level has the same key and value ({})",
                node.stat
            ))
        };
        match &node.value {
            None => {
                if into.by_key.contains_key(&node.key) {
                    return Err(dup("key"));
                }
                into.by_key.insert(node.key.clone(), node);
            }
            Some(v) if v.contains('*') => {
                if into.wildcards.iter().any(|(p, n)| n.key == node.key && p.text() == v) {
                    return Err(dup("key and value"));
                }
                let pattern = Pattern::new(v);
                into.wildcards.push((pattern, node));
            }
            Some(v) => {
                let level = into.exact.entry(node.key.clone()).or_default();
                if level.contains_key(v) {
                    return Err(dup("key and value"));
                }
                level.insert(v.clone(), node);
            }
        }
    }
    Ok(())
}

fn load_entry(at: &At<'_, '_>, parent_stat: &str, warnings: &mut Vec<String>) -> Result<Node, ConfigError> {
    let fields = at.mapping(ENTRY_KEYS, warnings)?;
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let key_at = get("key").ok_or_else(|| at.err("has no key: every descriptor entry needs one"))?;
    let key = key_at.string()?;
    if key.is_empty() {
        return Err(key_at.err("is empty: a descriptor entry needs a key"));
    }
    let value = match get("value") {
        Some(v) => Some(v.string()?).filter(|v| !v.is_empty()),
        None => None,
    };
    let flag = |name: &str| get(name).map_or(Ok(false), At::boolean);
    let shadow = flag("shadow_mode")?;
    if flag("quota_mode")? {
        return Err(get("quota_mode").expect("read above").err(
            "quota_mode is not supported by this service: a descriptor that only limits when every quota \
             descriptor is over cannot be decided all-or-nothing; remove it or set it to false",
        ));
    }
    let share_threshold = flag("share_threshold")?;
    if share_threshold && !value.as_deref().is_some_and(|v| v.contains('*')) {
        return Err(get("share_threshold").expect("read above").err(format!(
            "applies only to a wildcard value (one with '*'); this entry's value is {:?}",
            value.clone().unwrap_or_default()
        )));
    }
    if let Some(m) = get("metadata") {
        if !matches!(m.node.data, YamlData::Mapping(_)) && !m.is_null() {
            return Err(m.err(format!("must be a mapping, got {}", m.shown())));
        }
    }
    let stat = match &value {
        Some(v) => format!("{parent_stat}.{key}_{v}"),
        None => format!("{parent_stat}.{key}"),
    };
    let rate = match get("rate_limit") {
        Some(r) if !r.is_null() => Some(load_rate(r, shadow, warnings)?),
        _ => None,
    };
    let mut children = Children::default();
    if let Some(d) = get("descriptors") {
        load_entries(&mut children, &d.list()?, &stat, warnings)?;
    }
    Ok(Node {
        key,
        value,
        stat,
        rate,
        detailed_metric: flag("detailed_metric")?,
        value_to_metric: flag("value_to_metric")?,
        share_threshold,
        children,
        place: at.place(),
    })
}

const ALGORITHMS: [&str; 5] = ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "gcra"];

fn load_rate(at: &At<'_, '_>, shadow: bool, warnings: &mut Vec<String>) -> Result<Rate, ConfigError> {
    let fields = at.mapping(RATE_KEYS, warnings)?;
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let name = get("name").map(At::string).transpose()?.filter(|n| !n.is_empty());
    let mut replaces = Vec::new();
    if let Some(r) = get("replaces") {
        for item in r.list()? {
            let fields = item.mapping(&["name"], warnings)?;
            let n = match fields.first() {
                Some((_, n)) => n.string()?,
                None => String::new(),
            };
            if n.is_empty() {
                return Err(item.err("must name the limit it replaces: a replaces entry cannot be empty"));
            }
            if name.as_deref() == Some(n.as_str()) {
                return Err(item.err(format!("names this limit itself ({n:?}): a limit cannot replace itself")));
            }
            replaces.push(n);
        }
    }
    let unit_at = get("unit");
    let unit_text = unit_at.map(At::string).transpose()?.unwrap_or_default();
    let unit = Unit::parse(&unit_text);
    if get("unlimited").map_or(Ok(false), At::boolean)? {
        if unit.is_some() {
            return Err(unit_at
                .expect("a unit was read")
                .err(format!("is {unit_text:?}, but the limit is unlimited: an unlimited limit has no unit")));
        }
        return Ok(Rate::Unlimited { name, replaces });
    }
    let Some(unit) = unit else {
        let at = unit_at.unwrap_or(at);
        return Err(at.err(format!("invalid rate limit unit {unit_text:?}; expected {UNITS}")));
    };
    let requests_per_unit = match get("requests_per_unit") {
        Some(r) => u32::try_from(r.number(u64::from(u32::MAX))?).unwrap_or(u32::MAX),
        None => {
            warnings.push(format!(
                "{}: has no requests_per_unit, so its limit is 0 and it refuses every request (as envoyproxy/ratelimit reads it)",
                at.place()
            ));
            0
        }
    };
    let algorithm = match get("algorithm") {
        Some(a) => {
            let text = a.string()?;
            if !ALGORITHMS.contains(&text.as_str()) {
                return Err(a.err(format!("unknown algorithm {text:?}; expected one of {}", ALGORITHMS.join(", "))));
            }
            text
        }
        None => "fixed-window".to_owned(),
    };
    let burst = get("burst").map(|b| b.number(u64::from(u32::MAX))).transpose()?;
    if let (Some(_), false) = (burst, matches!(algorithm.as_str(), "token-bucket" | "gcra")) {
        return Err(get("burst").expect("read above").err(format!(
            "applies to the token-bucket and gcra algorithms only; this limit's algorithm is {algorithm}"
        )));
    }
    let policy = load_policy(get("failure_policy"), get("local_budget"), at, warnings)?;
    let grants = match get("quota_grants") {
        Some(g) if !g.is_null() => Some(load_grants(g, &algorithm, warnings)?),
        _ => None,
    };
    Ok(Rate::Limited(Limit {
        requests_per_unit,
        unit,
        name,
        replaces,
        shadow,
        algorithm,
        burst,
        policy,
        blockable: get("blockable").map_or(Ok(false), At::boolean)?,
        allow_request_limit: get("allow_request_limit").map_or(Ok(false), At::boolean)?,
        grants,
        place: at.place(),
    }))
}

fn load_policy(
    policy: Option<&At<'_, '_>>,
    budget: Option<&At<'_, '_>>,
    at: &At<'_, '_>,
    warnings: &mut Vec<String>,
) -> Result<Policy, ConfigError> {
    let text = policy.map(At::string).transpose()?.unwrap_or_else(|| "fail-open".into());
    match (text.as_str(), budget) {
        ("fail-open" | "fail-closed", Some(b)) => {
            Err(b.err(format!("applies only to failure_policy: local-budget; this limit's policy is {text}")))
        }
        ("fail-open", None) => Ok(Policy::FailOpen),
        ("fail-closed", None) => Ok(Policy::FailClosed),
        ("local-budget", None) => Err(policy.unwrap_or(at).err(
            "is local-budget, which needs local_budget: { requests_per_unit, unit } (what each instance admits per key)",
        )),
        ("local-budget", Some(b)) => {
            let fields = b.mapping(&["requests_per_unit", "unit"], warnings)?;
            let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
            let requests = get("requests_per_unit").ok_or_else(|| b.err("needs requests_per_unit"))?;
            let n = requests.number(u64::from(u32::MAX))?;
            if n == 0 {
                return Err(requests.err("must be at least 1 (use failure_policy: fail-closed to admit nothing)"));
            }
            let unit_at = get("unit").ok_or_else(|| b.err(format!("needs a unit: {UNITS}")))?;
            let unit_text = unit_at.string()?;
            let unit = Unit::parse(&unit_text)
                .ok_or_else(|| unit_at.err(format!("invalid unit {unit_text:?}; expected {UNITS}")))?;
            Ok(Policy::LocalBudget { requests: n, unit })
        }
        (other, _) => Err(policy.unwrap_or(at).err(format!(
            "unknown failure policy {other:?}; expected fail-open, fail-closed or local-budget"
        ))),
    }
}

fn load_grants(at: &At<'_, '_>, algorithm: &str, warnings: &mut Vec<String>) -> Result<Grants, ConfigError> {
    if !matches!(algorithm, "token-bucket" | "gcra") {
        return Err(at.err(format!(
            "quota grants need the token-bucket or gcra algorithm (a lease of a window could be spent in the next \
             window); this limit's algorithm is {algorithm}"
        )));
    }
    let fields = at.mapping(&["lifetime", "max_requests"], warnings)?;
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let lifetime_ms = match get("lifetime") {
        Some(l) => {
            let text = l.string()?;
            let d = crate::adapter::parse_duration(&text).map_err(|m| l.err(m))?;
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
        }
        None => 1_000,
    };
    if lifetime_ms == 0 {
        return Err(get("lifetime").unwrap_or(at).err("must be at least 1ms"));
    }
    let max_requests = match get("max_requests") {
        Some(m) => {
            let n = m.number(u64::from(u32::MAX))?;
            if n == 0 {
                return Err(m.err("must be at least 1"));
            }
            n
        }
        None => 1_000,
    };
    Ok(Grants { lifetime_ms, max_requests })
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
}
