//! Reading a script's reply by the subject file's `[reply]` rules: which element says
//! "allowed" and how, and where the remaining units, Retry-After, reset time and granted units
//! are. Positions are 1-based, as in Lua; a rule without `at` reads a scalar reply. A bulk
//! string holding a number reads as that number.

use redis::Value;

use super::template::{Template, Values};

/// One element of a reply, as the rules compare it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// Lua's nil or false (or a position past the array's end: Redis cuts an array at its
    /// first nil).
    Nil,
    /// An integer, or a string that reads as a number.
    Number(f64),
    /// Any other text.
    Text(Vec<u8>),
    /// A nested array where a scalar was expected.
    Array,
}

impl Scalar {
    /// The element at `at` (None: the reply itself).
    pub fn pick(reply: &Value, at: Option<usize>) -> Scalar {
        let value = match (at, reply) {
            (None, v) => v,
            (Some(i), Value::Array(items)) => match i.checked_sub(1).and_then(|i| items.get(i)) {
                Some(v) => v,
                None => return Scalar::Nil,
            },
            // A scalar reply read by position: Redis would have sent an array if the script
            // had returned a table, so the rule does not fit this reply.
            (Some(_), _) => return Scalar::Array,
        };
        Scalar::of(value)
    }

    fn of(v: &Value) -> Scalar {
        match v {
            Value::Nil => Scalar::Nil,
            Value::Int(n) => Scalar::Number(*n as f64),
            Value::Double(x) => Scalar::Number(*x),
            Value::Boolean(b) => Scalar::Number(f64::from(u8::from(*b))),
            Value::BulkString(bytes) => number(bytes).map_or_else(|| Scalar::Text(bytes.clone()), Scalar::Number),
            Value::SimpleString(s) => {
                number(s.as_bytes()).map_or_else(|| Scalar::Text(s.as_bytes().to_vec()), Scalar::Number)
            }
            Value::Okay => Scalar::Text(b"OK".to_vec()),
            _ => Scalar::Array,
        }
    }

    /// The number, if it is one.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Scalar::Number(x) => Some(*x),
            _ => None,
        }
    }
}

fn number(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    text.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// A value a rule compares with: a number, a text, or a placeholder rendered per request.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A number.
    Number(f64),
    /// A text (compared as bytes).
    Text(String),
    /// A placeholder such as `"{limit}"`, rendered per request and read as a number.
    Template(Template),
}

/// The test `allowed` applies to its element.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// Equal to.
    Equals(Operand),
    /// Not equal to.
    NotEquals(Operand),
    /// At most.
    AtMost(Operand),
    /// Less than.
    LessThan(Operand),
    /// At least.
    AtLeast(Operand),
    /// Nil (or false).
    IsNil,
}

/// The `allowed` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct AllowedRule {
    /// Position (1-based), None for a scalar reply.
    pub at: Option<usize>,
    /// The test.
    pub test: Test,
}

impl AllowedRule {
    /// Whether `reply` says the request was allowed; `v` renders placeholder operands.
    pub fn allowed(&self, reply: &Value, v: &Values<'_>) -> bool {
        let got = Scalar::pick(reply, self.at);
        let operand = |o: &Operand| match o {
            Operand::Number(x) => Scalar::Number(*x),
            Operand::Text(t) => {
                number(t.as_bytes()).map_or_else(|| Scalar::Text(t.as_bytes().to_vec()), Scalar::Number)
            }
            Operand::Template(t) => {
                let text = t.render(v);
                number(text.as_bytes()).map_or_else(|| Scalar::Text(text.into_bytes()), Scalar::Number)
            }
        };
        let ordered = |o: &Operand, pass: fn(f64, f64) -> bool| match (got.as_number(), operand(o).as_number()) {
            (Some(a), Some(b)) => pass(a, b),
            _ => false,
        };
        match &self.test {
            Test::Equals(o) => got == operand(o),
            Test::NotEquals(o) => got != operand(o),
            Test::AtMost(o) => ordered(o, |a, b| a <= b),
            Test::LessThan(o) => ordered(o, |a, b| a < b),
            Test::AtLeast(o) => ordered(o, |a, b| a >= b),
            Test::IsNil => got == Scalar::Nil,
        }
    }
}

/// The unit of a time in a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Microseconds.
    Us,
}

impl TimeUnit {
    /// Milliseconds in one unit.
    pub fn ms(self) -> f64 {
        match self {
            TimeUnit::Ms => 1.0,
            TimeUnit::S => 1000.0,
            TimeUnit::Us => 0.001,
        }
    }
}

/// Where a number is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberField {
    /// Position (1-based), None for a scalar reply.
    pub at: Option<usize>,
}

/// Where a time is, and how to read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeField {
    /// Position (1-based), None for a scalar reply.
    pub at: Option<usize>,
    /// Its unit.
    pub unit: TimeUnit,
    /// An epoch time rather than a duration.
    pub absolute: bool,
}

impl TimeField {
    /// The duration in ms from `now_ms` (on the deciding clock), rounded up: a client told
    /// to wait 0.05 s waits 50 ms, and one told 1.2 ms waits 2. None when absent.
    pub fn read_ms(&self, reply: &Value, now_ms: u64) -> Option<u64> {
        let x = Scalar::pick(reply, self.at).as_number()? * self.unit.ms();
        let ms = if self.absolute { x - now_ms as f64 } else { x };
        Some(ms.max(0.0).ceil() as u64)
    }
}

/// All of `[reply]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyRules {
    /// Required.
    pub allowed: AllowedRule,
    /// Units still available.
    pub remaining: Option<NumberField>,
    /// When a denied request may retry.
    pub retry_after: Option<TimeField>,
    /// When the key is back at rest.
    pub reset_after: Option<TimeField>,
    /// Units granted, for scripts that grant part of a cost.
    pub granted: Option<NumberField>,
}

/// What a reply says about one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Read {
    /// Admitted?
    pub allowed: bool,
    /// Units the reply admitted or denied: the request's cost, or what a partial grant gave.
    pub cost: u64,
    /// When denied, the reply's Retry-After in ms, if it has one.
    pub retry_after_ms: Option<u64>,
    /// The units the reply says remain, if it says.
    pub remaining: Option<f64>,
}

impl ReplyRules {
    /// Reads `reply` to a request of `values.cost`, decided at `now_ms` on the clock the script
    /// read (for epoch times in the reply).
    pub fn read(&self, reply: &Value, values: &Values<'_>, now_ms: u64) -> Read {
        let mut allowed = self.allowed.allowed(reply, values);
        let mut cost = values.cost;
        if let Some(granted) = self.granted {
            let units = Scalar::pick(reply, granted.at).as_number().unwrap_or(0.0);
            let units = (units.max(0.0) as u64).min(cost);
            allowed &= units > 0 || cost == 0;
            if allowed {
                cost = units;
            }
        }
        let retry_after_ms = if allowed { None } else { self.retry_after.and_then(|f| f.read_ms(reply, now_ms)) };
        let remaining = self.remaining.and_then(|f| Scalar::pick(reply, f.at).as_number());
        Read { allowed, cost, retry_after_ms, remaining }
    }

    /// Every position a rule reads, with the rule's name.
    pub fn positions(&self) -> Vec<(&'static str, Option<usize>)> {
        let mut out = vec![("reply.allowed", self.allowed.at)];
        out.extend(self.remaining.map(|f| ("reply.remaining", f.at)));
        out.extend(self.retry_after.map(|f| ("reply.retry_after", f.at)));
        out.extend(self.reset_after.map(|f| ("reply.reset_after", f.at)));
        out.extend(self.granted.map(|f| ("reply.granted", f.at)));
        out
    }
}

#[cfg(test)]
mod tests {
    use redis_ratelimit::Quota;

    use super::*;

    fn v(q: &Quota) -> Values<'_> {
        Values { key: "k", quota: q, now_us: 5_000_000, cost: 1, request_id: 1, instance: 0, lease_ms: 0 }
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn positions_are_one_based_and_strings_holding_numbers_read_as_numbers() {
        let reply = Value::Array(vec![Value::Int(1), bulk("2.5"), bulk("x")]);
        assert_eq!(Scalar::pick(&reply, Some(1)), Scalar::Number(1.0));
        assert_eq!(Scalar::pick(&reply, Some(2)), Scalar::Number(2.5));
        assert_eq!(Scalar::pick(&reply, Some(3)), Scalar::Text(b"x".to_vec()));
        assert_eq!(Scalar::pick(&reply, Some(4)), Scalar::Nil, "past the end reads as nil");
        assert_eq!(Scalar::pick(&Value::Int(0), None), Scalar::Number(0.0));
        assert_eq!(Scalar::pick(&Value::Int(0), Some(1)), Scalar::Array, "a position on a scalar does not fit");
    }

    #[test]
    fn allowed_rules_compare_with_numbers_texts_and_placeholders() {
        let q = Quota::new(10, std::time::Duration::from_secs(1));
        let reply = Value::Array(vec![Value::Int(7), Value::Nil]);
        let rule = |at, test| AllowedRule { at: Some(at), test };
        let limit = Operand::Template(Template::parse("{limit}").unwrap());
        assert!(rule(1, Test::AtMost(limit.clone())).allowed(&reply, &v(&q)));
        assert!(!rule(1, Test::AtLeast(limit)).allowed(&reply, &v(&q)));
        assert!(rule(1, Test::Equals(Operand::Text("7".into()))).allowed(&reply, &v(&q)));
        assert!(rule(1, Test::NotEquals(Operand::Number(0.0))).allowed(&reply, &v(&q)));
        assert!(rule(1, Test::LessThan(Operand::Number(8.0))).allowed(&reply, &v(&q)));
        assert!(rule(2, Test::IsNil).allowed(&reply, &v(&q)));
        assert!(!rule(1, Test::IsNil).allowed(&reply, &v(&q)));
        let ok = AllowedRule { at: None, test: Test::Equals(Operand::Text("OK".into())) };
        assert!(ok.allowed(&Value::Okay, &v(&q)));
    }

    #[test]
    fn times_read_in_their_unit_rounded_up_and_relative_to_now_when_absolute() {
        let reply = Value::Array(vec![bulk("0.0504"), Value::Int(1_700_000_001)]);
        let rel = TimeField { at: Some(1), unit: TimeUnit::S, absolute: false };
        assert_eq!(rel.read_ms(&reply, 0), Some(51));
        let abs = TimeField { at: Some(2), unit: TimeUnit::S, absolute: true };
        assert_eq!(abs.read_ms(&reply, 1_700_000_000_250), Some(750));
        assert_eq!(TimeField { at: Some(3), ..rel }.read_ms(&reply, 0), None);
    }
}
