//! Reading a configuration file: YAML with every node's place kept, each field checked as the
//! reference reads it, a mistake refused with the file, the path, the line and the value.

use std::path::Path;

use saphyr::{MarkedYaml, Scalar, ScalarStyle, YamlData};

use super::{
    Children, Config, ConfigError, Domain, Grants, InFlight, Limit, LoadOptions, Node, Pattern, Place, Policy, Rate,
    Unit, UNITS,
};

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
    "in_flight",
    "lease",
];

/// An in-flight limit's lease when the file names none: a permit whose release never came is
/// reclaimed a minute after it was taken.
const IN_FLIGHT_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// The fields of a `rate_limit` that an in-flight limit reads; the others count over time.
const IN_FLIGHT_KEYS: &[&str] = &["in_flight", "lease", "name", "replaces", "failure_policy", "local_budget"];

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

pub(super) fn parse_file(
    config: &mut Config,
    file: &Path,
    text: &str,
    options: LoadOptions,
) -> Result<(), ConfigError> {
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
    if let Some(permits) = get("in_flight") {
        if let Some((key, other)) = fields.iter().find(|(k, _)| !IN_FLIGHT_KEYS.contains(&k.as_str())) {
            return Err(other.err(format!(
                "{key} does not apply to an in_flight limit, which counts requests at once, not over time; \
                 it reads {}",
                IN_FLIGHT_KEYS.join(", ")
            )));
        }
        let n = permits.number(u64::from(u32::MAX))?;
        if n == 0 {
            return Err(permits.err("must be at least 1 request in flight (a limit of 0 would refuse everything)"));
        }
        let lease = match get("lease") {
            Some(l) => {
                let text = l.string()?;
                let ms = redis_ratelimit::duration::parse_ms(&text).map_err(|m| l.err(m))?;
                let lease = std::time::Duration::from_millis(ms);
                if ms == 0 || lease > redis_ratelimit::ConcurrencyLimiter::MAX_LEASE {
                    return Err(l.err(format!("is {text}; a lease is from 1ms to 366d")));
                }
                lease
            }
            None => IN_FLIGHT_LEASE,
        };
        let policy = load_policy(get("failure_policy"), get("local_budget"), at, true, warnings)?;
        return Ok(Rate::InFlight(Box::new(InFlight {
            permits: n,
            lease,
            name,
            replaces,
            shadow,
            policy,
            place: at.place(),
        })));
    }
    if let Some(l) = get("lease") {
        return Err(l.err("applies only to an in_flight limit; this limit counts requests per unit"));
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
    let policy = load_policy(get("failure_policy"), get("local_budget"), at, false, warnings)?;
    let grants = match get("quota_grants") {
        Some(g) if !g.is_null() => Some(load_grants(g, &algorithm, warnings)?),
        _ => None,
    };
    Ok(Rate::Limited(Box::new(Limit {
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
    })))
}

/// A failure policy; `in_flight` for an in-flight limit, whose local budget is
/// `{ in_flight: N }`, permits per instance.
fn load_policy(
    policy: Option<&At<'_, '_>>,
    budget: Option<&At<'_, '_>>,
    at: &At<'_, '_>,
    in_flight: bool,
    warnings: &mut Vec<String>,
) -> Result<Policy, ConfigError> {
    let text = policy.map(At::string).transpose()?.unwrap_or_else(|| "fail-open".into());
    match (text.as_str(), budget) {
        ("fail-open" | "fail-closed", Some(b)) => {
            Err(b.err(format!("applies only to failure_policy: local-budget; this limit's policy is {text}")))
        }
        ("fail-open", None) => Ok(Policy::FailOpen),
        ("fail-closed", None) => Ok(Policy::FailClosed),
        ("local-budget", None) if in_flight => Err(policy
            .unwrap_or(at)
            .err("is local-budget, which needs local_budget: { in_flight } (what each instance admits at once per key)")),
        ("local-budget", None) => Err(policy.unwrap_or(at).err(
            "is local-budget, which needs local_budget: { requests_per_unit, unit } (what each instance admits per key)",
        )),
        ("local-budget", Some(b)) if in_flight => {
            let fields = b.mapping(&["in_flight"], warnings)?;
            let n = fields.first().ok_or_else(|| b.err("needs in_flight"))?.1.number(u64::from(u32::MAX))?;
            if n == 0 {
                return Err(b.err("in_flight must be at least 1 (use failure_policy: fail-closed to admit nothing)"));
            }
            Ok(Policy::LocalBudget { requests: n, unit: Unit::Second })
        }
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
    let (lifetime, place) = match get("lifetime") {
        Some(l) => (l.string()?, l.place()),
        None => ("1s".to_owned(), at.place()),
    };
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
    Ok(Grants { lifetime, place, max_requests })
}
