//! Placeholders in a subject file's keys, arguments and setup commands: `{key}`, `{limit}`,
//! `{now_ms}`, `{interval_us:ceil}`... parsed once when the file is loaded, rendered per
//! request from the quota the scenario drives and the deciding instance's own clock.
//!
//! `{{` and `}}` are literal braces (a Redis Cluster hash tag is `{{{key}}}`). A numeric
//! placeholder takes `:floor` or `:ceil`; otherwise it renders as the shortest decimal that
//! reads back as the same double, an integer where it is one (Rust's `Display` for `f64`).

use std::fmt::{self, Write};

use redis_ratelimit::Quota;

/// A value a placeholder names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placeholder {
    /// The limited identity (user, IP, API key).
    Key,
    /// L, units per period.
    Limit,
    /// B, the burst.
    Burst,
    /// T in ms.
    PeriodMs,
    /// T in µs.
    PeriodUs,
    /// T in seconds (may be fractional).
    PeriodS,
    /// L / T per second.
    RatePerS,
    /// L / T per ms.
    RatePerMs,
    /// T / L in ms (the emission interval).
    IntervalMs,
    /// T / L in µs.
    IntervalUs,
    /// The instance's clock in ms.
    NowMs,
    /// The instance's clock in µs.
    NowUs,
    /// The instance's clock in whole seconds.
    NowS,
    /// The instance's clock in seconds with fraction.
    NowSFrac,
    /// The request's cost.
    Cost,
    /// floor(now / T): the window the caller names.
    Window,
    /// The window before it.
    WindowPrev,
    /// Unique per request.
    RequestId,
    /// Extension: the calling instance's number, for keys a library makes per client.
    Instance,
    /// An in-flight limit's lease, in ms (`kind = "concurrency"` only).
    LeaseMs,
}

impl Placeholder {
    /// Every placeholder, for messages.
    pub const ALL: [Placeholder; 20] = [
        Placeholder::Key,
        Placeholder::Limit,
        Placeholder::Burst,
        Placeholder::PeriodMs,
        Placeholder::PeriodUs,
        Placeholder::PeriodS,
        Placeholder::RatePerS,
        Placeholder::RatePerMs,
        Placeholder::IntervalMs,
        Placeholder::IntervalUs,
        Placeholder::NowMs,
        Placeholder::NowUs,
        Placeholder::NowS,
        Placeholder::NowSFrac,
        Placeholder::Cost,
        Placeholder::Window,
        Placeholder::WindowPrev,
        Placeholder::RequestId,
        Placeholder::Instance,
        Placeholder::LeaseMs,
    ];

    /// Its name inside the braces.
    pub const fn name(self) -> &'static str {
        match self {
            Placeholder::Key => "key",
            Placeholder::Limit => "limit",
            Placeholder::Burst => "burst",
            Placeholder::PeriodMs => "period_ms",
            Placeholder::PeriodUs => "period_us",
            Placeholder::PeriodS => "period_s",
            Placeholder::RatePerS => "rate_per_s",
            Placeholder::RatePerMs => "rate_per_ms",
            Placeholder::IntervalMs => "interval_ms",
            Placeholder::IntervalUs => "interval_us",
            Placeholder::NowMs => "now_ms",
            Placeholder::NowUs => "now_us",
            Placeholder::NowS => "now_s",
            Placeholder::NowSFrac => "now_s_frac",
            Placeholder::Cost => "cost",
            Placeholder::Window => "window",
            Placeholder::WindowPrev => "window_prev",
            Placeholder::RequestId => "request_id",
            Placeholder::Instance => "instance",
            Placeholder::LeaseMs => "lease_ms",
        }
    }

    /// Whether it reads the instance's clock: a subject using any such placeholder runs on
    /// client time.
    pub const fn reads_the_clock(self) -> bool {
        matches!(
            self,
            Placeholder::NowMs
                | Placeholder::NowUs
                | Placeholder::NowS
                | Placeholder::NowSFrac
                | Placeholder::Window
                | Placeholder::WindowPrev
        )
    }

    /// The coarsest step, in ms, in which its value can move with time: a subject fed whole
    /// seconds cannot tell two readings within one second apart.
    pub const fn time_resolution_ms(self) -> u64 {
        match self {
            Placeholder::NowS => 1_000,
            _ => 1,
        }
    }

    /// Whether it is a number (so `:floor`/`:ceil` apply).
    const fn numeric(self) -> bool {
        !matches!(self, Placeholder::Key)
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a number renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Shortest decimal that reads back as the same double.
    Exact,
    /// Rounded down to an integer.
    Floor,
    /// Rounded up to an integer.
    Ceil,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Text(String),
    Value(Placeholder, Rounding),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    source: String,
    segments: Vec<Segment>,
}

/// Everything a template renders from, for one request.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The limited identity as the subject sees it.
    pub key: &'a str,
    /// The quota the scenario drives.
    pub quota: &'a Quota,
    /// The deciding instance's clock, µs since the Unix epoch.
    pub now_us: u64,
    /// The request's cost.
    pub cost: u64,
    /// Unique per request.
    pub request_id: u64,
    /// The calling instance's number.
    pub instance: u32,
    /// An in-flight limit's lease (ms); 0 for a rate limit.
    pub lease_ms: u64,
}

impl Template {
    /// Parses `source`; the error says what is wrong (an unknown name, an unclosed brace).
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut segments = Vec::new();
        let mut text = String::new();
        let mut chars = source.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|&(_, n)| n) == Some('{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek().map(|&(_, n)| n) == Some('}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => return Err(format!("a lone `}}` at byte {at} (write `}}}}` for a literal brace)")),
                '{' => {
                    let rest = &source[at + 1..];
                    let Some(end) = rest.find('}') else {
                        return Err(format!("`{{` at byte {at} is never closed (write `{{{{` for a literal brace)"));
                    };
                    let inner = &rest[..end];
                    for _ in 0..inner.chars().count() + 1 {
                        chars.next();
                    }
                    if !text.is_empty() {
                        segments.push(Segment::Text(std::mem::take(&mut text)));
                    }
                    segments.push(parse_placeholder(inner)?);
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            segments.push(Segment::Text(text));
        }
        Ok(Template { source: source.to_owned(), segments })
    }

    /// The text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The placeholders it uses.
    pub fn placeholders(&self) -> impl Iterator<Item = Placeholder> + '_ {
        self.segments.iter().filter_map(|s| match s {
            Segment::Value(p, _) => Some(*p),
            Segment::Text(_) => None,
        })
    }

    /// Renders it into `out` (cleared first).
    pub fn render_into(&self, v: &Values<'_>, out: &mut String) {
        out.clear();
        for segment in &self.segments {
            match segment {
                Segment::Text(t) => out.push_str(t),
                Segment::Value(Placeholder::Key, _) => out.push_str(v.key),
                Segment::Value(p, rounding) => write_number(out, value_of(*p, v), *rounding),
            }
        }
    }

    /// Renders it.
    pub fn render(&self, v: &Values<'_>) -> String {
        let mut out = String::new();
        self.render_into(v, &mut out);
        out
    }
}

fn parse_placeholder(inner: &str) -> Result<Segment, String> {
    let (name, rounding) = match inner.split_once(':') {
        None => (inner, Rounding::Exact),
        Some((name, "floor")) => (name, Rounding::Floor),
        Some((name, "ceil")) => (name, Rounding::Ceil),
        Some((_, other)) => return Err(format!("`{{{inner}}}`: unknown rounding `{other}`; expected floor or ceil")),
    };
    let Some(p) = Placeholder::ALL.into_iter().find(|p| p.name() == name) else {
        let names: Vec<&str> = Placeholder::ALL.iter().map(|p| p.name()).collect();
        return Err(format!("unknown placeholder `{{{inner}}}`; expected one of {}", names.join(", ")));
    };
    if rounding != Rounding::Exact && !p.numeric() {
        return Err(format!("`{{{inner}}}`: `{name}` is not a number, so it cannot be rounded"));
    }
    Ok(Segment::Value(p, rounding))
}

/// The value of a numeric placeholder, as a double (every quota value is below 2^53).
pub fn value_of(p: Placeholder, v: &Values<'_>) -> f64 {
    let q = v.quota;
    let (limit, period_ms) = (q.limit() as f64, q.period_ms() as f64);
    let now_ms = (v.now_us / 1000) as f64;
    let window = (v.now_us / 1000 / q.period_ms()) as f64;
    match p {
        Placeholder::Key => f64::NAN,
        Placeholder::Limit => limit,
        Placeholder::Burst => q.burst() as f64,
        Placeholder::PeriodMs => period_ms,
        Placeholder::PeriodUs => period_ms * 1000.0,
        Placeholder::PeriodS => period_ms / 1000.0,
        Placeholder::RatePerS => limit * 1000.0 / period_ms,
        Placeholder::RatePerMs => limit / period_ms,
        Placeholder::IntervalMs => period_ms / limit,
        Placeholder::IntervalUs => period_ms * 1000.0 / limit,
        Placeholder::NowMs => now_ms,
        Placeholder::NowUs => v.now_us as f64,
        Placeholder::NowS => (v.now_us / 1_000_000) as f64,
        Placeholder::NowSFrac => v.now_us as f64 / 1e6,
        Placeholder::Cost => v.cost as f64,
        Placeholder::Window => window,
        Placeholder::WindowPrev => window - 1.0,
        Placeholder::RequestId => v.request_id as f64,
        Placeholder::Instance => f64::from(v.instance),
        Placeholder::LeaseMs => v.lease_ms as f64,
    }
}

fn write_number(out: &mut String, x: f64, rounding: Rounding) {
    let x = match rounding {
        Rounding::Exact => x,
        Rounding::Floor => x.floor(),
        Rounding::Ceil => x.ceil(),
    };
    // Display prints the shortest decimal that parses back to the same double, with no
    // exponent and no ".0" on integers: "20", "0.05", "1700000000000".
    let _ = write!(out, "{x}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(quota: &Quota) -> Values<'_> {
        Values {
            key: "user-7",
            quota,
            now_us: 1_700_000_000_123_456,
            cost: 2,
            request_id: 42,
            instance: 3,
            lease_ms: 0,
        }
    }

    #[test]
    fn placeholders_render_from_the_quota_and_the_clock() {
        let q = Quota::new(20, std::time::Duration::from_secs(1)).with_burst(5);
        let v = values(&q);
        let r = |s: &str| Template::parse(s).expect(s).render(&v);
        assert_eq!(r("rl:{key}:tokens"), "rl:user-7:tokens");
        assert_eq!(r("{limit} {burst} {period_ms} {period_us} {period_s}"), "20 5 1000 1000000 1");
        assert_eq!(r("{rate_per_s} {rate_per_ms} {interval_ms} {interval_us}"), "20 0.02 50 50000");
        assert_eq!(
            r("{now_ms} {now_us} {now_s} {now_s_frac}"),
            "1700000000123 1700000000123456 1700000000 1700000000.123456"
        );
        assert_eq!(r("{cost} {window} {window_prev} {request_id} {instance}"), "2 1700000000 1699999999 42 3");
    }

    #[test]
    fn rounding_and_shortest_decimals() {
        let q = Quota::new(3, std::time::Duration::from_secs(1));
        let v = values(&q);
        let r = |s: &str| Template::parse(s).expect(s).render(&v);
        assert_eq!(r("{interval_us}"), "333333.3333333333");
        assert_eq!(r("{interval_us:ceil} {interval_us:floor}"), "333334 333333");
        assert_eq!(r("{period_s:floor} {rate_per_ms}"), "1 0.003");
        let slow = Quota::new(1, std::time::Duration::from_millis(1_500));
        assert_eq!(Template::parse("{period_s}").unwrap().render(&values(&slow)), "1.5");
    }

    #[test]
    fn doubled_braces_are_literal_so_a_hash_tag_can_wrap_the_key() {
        let q = Quota::new(1, std::time::Duration::from_secs(1));
        let t = Template::parse("rl.{{{key}}}.tokens").expect("valid");
        assert_eq!(t.render(&values(&q)), "rl.{user-7}.tokens");
        assert_eq!(t.placeholders().collect::<Vec<_>>(), [Placeholder::Key]);
    }

    #[test]
    fn mistakes_are_named() {
        let err = |s: &str| Template::parse(s).expect_err(s);
        assert!(err("{nwo_ms}").contains("unknown placeholder `{nwo_ms}`"), "{}", err("{nwo_ms}"));
        assert!(err("{now_ms:round}").contains("unknown rounding `round`"));
        assert!(err("{key:ceil}").contains("not a number"));
        assert!(err("rl:{key").contains("never closed"));
        assert!(err("rl:key}").contains("lone `}`"));
    }

    #[test]
    fn clock_placeholders_are_known_as_such() {
        let uses = |s: &str| Template::parse(s).unwrap().placeholders().any(Placeholder::reads_the_clock);
        assert!(uses("{now_s}") && uses("{window_prev}") && uses("a{now_us:ceil}"));
        assert!(!uses("{key}:{limit}:{request_id}"));
        assert_eq!(Placeholder::NowS.time_resolution_ms(), 1_000);
    }
}
