//! What a rule counts by: key parts, and the identity they make for one request.
//!
//! A rule's key is a list of parts; each part is read from the request and written as
//! `name=value`, the values escaped so no two different keys can make the same text. The
//! first part is the *tag*: it goes between the braces of the Redis key
//! (`prefix:{tag}:rest:rule:`), the Redis Cluster hash tag, so the keys of every rule whose
//! first part agrees (say, the API key) land in one slot and can be decided in one script
//! call on a cluster too. The other parts follow the braces.

use std::fmt::Write;
use std::net::IpAddr;

use http::HeaderName;

use super::reading::Reading;

/// The authenticated user of a request, put in its extensions by the application's
/// authentication layer (one that checked a password, a session or a signed token); the
/// [`KeyPart::User`] part and the allow and deny lists read it. Never set it from a value the
/// client merely sent: the allow list trusts it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User(pub String);

/// The API key of a request, verified by the application's authentication layer (a tower layer
/// that looked the key up, say) and put in its extensions: the key's name or id, or the key
/// itself. The [`KeyPart::ApiKey`] part and the allow and deny lists read it. A header carrying
/// an API key is only what the client says until such a layer checked it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiKey(pub String);

/// The plan (tier) of a request's client, put in its extensions by the authentication layer
/// that knows it (from the account a verified key or token belongs to): a rule with tiers
/// ([`crate::rules::Rule::tier`]) enforces that plan's quota. Like [`User`], never set it from
/// a value the client merely sent, or anyone could name the largest plan.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Plan(pub String);

/// One part of a rule's key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyPart {
    /// The [`User`] in the request's extensions.
    User,
    /// The [`ApiKey`] in the request's extensions.
    ApiKey,
    /// The value of a request header (lower-case name), as the client sent it, unverified. Fine
    /// to count by (a client who changes it only spreads its own requests over more keys, so
    /// limit by IP too), never a privilege: allow lists refuse headers.
    Header(String),
    /// The client IP, as [`super::ClientIp`] finds it.
    ClientIp,
    /// The request's path (without query): a limit per route.
    Route,
    /// The request's method.
    Method,
    /// A constant: every request the rule matches shares it (a global cap).
    Const(String),
}

impl KeyPart {
    /// The value of the header `name`.
    pub fn header(name: &str) -> Self {
        KeyPart::Header(name.to_ascii_lowercase())
    }

    /// The part as the rules file writes it: `user`, `api-key`, `header:x-client-id`, `ip`,
    /// `route`, `method`, `const:global`.
    pub fn spec(&self) -> String {
        match self {
            KeyPart::User => "user".into(),
            KeyPart::ApiKey => "api-key".into(),
            KeyPart::Header(h) => format!("header:{h}"),
            KeyPart::ClientIp => "ip".into(),
            KeyPart::Route => "route".into(),
            KeyPart::Method => "method".into(),
            KeyPart::Const(c) => format!("const:{c}"),
        }
    }

    /// Reads a part as the rules file writes it (see [`KeyPart::spec`]).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let part = match spec {
            "user" => KeyPart::User,
            "api-key" => KeyPart::ApiKey,
            "ip" => KeyPart::ClientIp,
            "route" => KeyPart::Route,
            "method" => KeyPart::Method,
            other => match other.split_once(':') {
                Some(("header", h)) => KeyPart::header(h),
                Some(("const", c)) => KeyPart::Const(c.to_owned()),
                _ => {
                    return Err(format!(
                    "{spec:?} is not a key part; expected user, api-key, ip, route, method, header:NAME or const:TEXT"
                ))
                }
            },
        };
        part.validate()?;
        Ok(part)
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        match self {
            KeyPart::Header(h) if HeaderName::from_bytes(h.as_bytes()).is_err() => {
                Err(format!("{:?} is not a header name", self.spec()))
            }
            KeyPart::Const(c) if c.is_empty() => Err("a constant key part must not be empty".into()),
            _ => Ok(()),
        }
    }

    /// The short name written before the value in keys.
    fn label(&self) -> &str {
        match self {
            KeyPart::User => "user",
            KeyPart::ApiKey => "api-key",
            KeyPart::Header(h) => h,
            KeyPart::ClientIp => "ip",
            KeyPart::Route => "route",
            KeyPart::Method => "method",
            KeyPart::Const(_) => "const",
        }
    }

    /// This part's value in `reading`; None when the request has none usable (no header, a
    /// header that is not text or is empty, no user or API key, no client IP).
    pub(crate) fn value(&self, reading: &Reading<'_>) -> Option<String> {
        let v = match self {
            KeyPart::User => reading.user.map(str::to_owned),
            KeyPart::ApiKey => reading.api_key.map(str::to_owned),
            KeyPart::Header(h) => reading.header(h).map(str::to_owned),
            KeyPart::ClientIp => reading.ip.map(|ip| ip.to_string()),
            KeyPart::Route => Some(reading.route.to_owned()),
            KeyPart::Method => Some(reading.method.to_owned()),
            KeyPart::Const(c) => Some(c.clone()),
        };
        v.filter(|v| !v.is_empty())
    }

    /// The header this part reads, if it reads one.
    pub(crate) fn header_name(&self) -> Option<&str> {
        match self {
            KeyPart::Header(h) => Some(h),
            _ => None,
        }
    }
}

/// The key one request has under one rule: the tag (first part) and the rest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Identity {
    tag: String,
    rest: String,
    constant: bool,
}

impl Identity {
    /// The identity of the request `reading` read under `parts`, or the first part it has no
    /// value for.
    pub(crate) fn of<'p>(parts: &'p [KeyPart], reading: &Reading<'_>) -> Result<Identity, &'p KeyPart> {
        let mut tag = String::new();
        let mut rest = String::new();
        for (i, part) in parts.iter().enumerate() {
            let value = part.value(reading).ok_or(part)?;
            let out = if i == 0 { &mut tag } else { &mut rest };
            if !out.is_empty() {
                out.push('&');
            }
            escape_into(out, part.label());
            out.push('=');
            escape_into(out, &value);
        }
        Ok(Identity { tag, rest, constant: parts.iter().all(|p| matches!(p, KeyPart::Const(_))) })
    }

    /// The identity of a key given as labelled values rather than read from an HTTP request
    /// (the entries of a gRPC rate limit service's descriptor, say): `(label, value)` pairs in
    /// order, the first of them the hash tag, each written `label=value` and escaped as a
    /// request's key parts are, so two different lists never make the same identity. None for
    /// an empty list.
    ///
    /// ```
    /// use redis_ratelimit::rules::Identity;
    /// let id = Identity::from_values([("to_number", "2061111111"), ("message_type", "a&b")]).unwrap();
    /// assert_eq!((id.tag(), id.rest()), ("to_number=2061111111", "message_type=a%26b"));
    /// assert!(Identity::from_values([]).is_none());
    /// ```
    pub fn from_values<'a>(values: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<Identity> {
        let mut tag = String::new();
        let mut rest = String::new();
        let mut any = false;
        for (i, (label, value)) in values.into_iter().enumerate() {
            any = true;
            let out = if i == 0 { &mut tag } else { &mut rest };
            if !out.is_empty() {
                out.push('&');
            }
            escape_into(out, label);
            out.push('=');
            escape_into(out, value);
        }
        any.then_some(Identity { tag, rest, constant: false })
    }

    /// The identity a request falls back to by client IP.
    pub(crate) fn of_ip(ip: IpAddr) -> Identity {
        Identity { tag: format!("ip={ip}"), rest: String::new(), constant: false }
    }

    /// The hash-tag part.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The parts after the tag, `&`-separated (empty if the key has one part).
    pub fn rest(&self) -> &str {
        &self.rest
    }

    /// Whether every request of the rule shares this identity (a constant key).
    pub fn is_constant(&self) -> bool {
        self.constant
    }

    /// The whole identity as one text: what the key bound applies to.
    pub fn text(&self) -> String {
        if self.rest.is_empty() {
            self.tag.clone()
        } else {
            format!("{}&{}", self.tag, self.rest)
        }
    }
}

/// Percent-escapes what separates parts (`%`, `&`, `=`, `:`), the hash-tag braces, spaces,
/// controls and non-ASCII bytes, so the escaped text is unambiguous and fits in a Redis key.
fn escape_into(out: &mut String, value: &str) {
    for b in value.bytes() {
        if b.is_ascii_graphic() && !matches!(b, b'%' | b'&' | b'=' | b':' | b'{' | b'}') {
            out.push(b as char);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// For tests: the identity of `req` under `parts`, its headers read as the enforcer reads them.
#[cfg(test)]
pub(crate) fn identity_of<'p, B>(
    parts: &'p [KeyPart],
    req: &http::Request<B>,
    ip: Option<IpAddr>,
) -> Result<Identity, &'p KeyPart> {
    let names: Vec<String> = parts.iter().filter_map(KeyPart::header_name).map(str::to_owned).collect();
    let reading = Reading::of(req, ip, &names).expect("no repeated header");
    Identity::of(parts, &reading)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    #[test]
    fn the_first_part_is_the_tag_and_values_cannot_forge_separators() {
        let req = Request::builder()
            .uri("/api/x")
            .header("x-api-key", "a&route=/b")
            .extension(User("ünï {x}".into()))
            .body(())
            .unwrap();
        let parts = [KeyPart::header("X-Api-Key"), KeyPart::Route];
        let id = identity_of(&parts, &req, None).unwrap();
        assert_eq!(id.tag(), "x-api-key=a%26route%3D/b");
        assert_eq!(id.rest(), "route=/api/x");
        let user = identity_of(&[KeyPart::User], &req, None).unwrap();
        assert_eq!(user.tag(), "user=%C3%BCn%C3%AF%20%7Bx%7D");
        assert!(!user.is_constant());
        assert!(identity_of(&[KeyPart::Const("g".into())], &req, None).unwrap().is_constant());
    }

    #[test]
    fn a_missing_or_empty_value_names_its_part() {
        let req = Request::builder().header("x-api-key", "").body(()).unwrap();
        let parts = [KeyPart::Route, KeyPart::header("x-api-key")];
        assert_eq!(identity_of(&parts, &req, None), Err(&parts[1]));
        assert_eq!(identity_of(&[KeyPart::ClientIp], &req, None), Err(&KeyPart::ClientIp));
        assert_eq!(identity_of(&[KeyPart::User], &req, None), Err(&KeyPart::User));
    }

    #[test]
    fn parts_parse_back_from_their_spec() {
        for p in [
            KeyPart::User,
            KeyPart::ApiKey,
            KeyPart::header("x-k"),
            KeyPart::ClientIp,
            KeyPart::Route,
            KeyPart::Const("g".into()),
        ] {
            assert_eq!(KeyPart::parse(&p.spec()), Ok(p));
        }
        assert!(KeyPart::parse("cookie").unwrap_err().contains("not a key part"));
        assert!(KeyPart::parse("header:bad name").is_err());
    }
}
