//! Which requests a rule applies to: method, path pattern, host and header presence.

use http::{HeaderName, Method, Request};

/// A path pattern, segment by segment: a literal segment matches itself, `*` matches any one
/// segment, and a final `**` matches any number of segments, none included. `/api/**`
/// matches `/api`, `/api/hello` and `/api/a/b`; `/users/*/posts` matches `/users/42/posts`.
///
/// ```
/// use redis_ratelimit::rules::PathPattern;
/// let p = PathPattern::new("/users/*/posts/**").unwrap();
/// assert!(p.matches("/users/42/posts") && p.matches("/users/42/posts/7"));
/// assert!(!p.matches("/users/42") && !p.matches("/users/42/likes"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    text: String,
    segments: Vec<String>,
}

impl PathPattern {
    /// Parses a pattern; it must start with `/`, and `**` may only end it.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let Some(rest) = pattern.strip_prefix('/') else {
            return Err(format!("must start with '/', got {pattern:?}"));
        };
        let segments: Vec<String> =
            if rest.is_empty() { Vec::new() } else { rest.split('/').map(str::to_owned).collect() };
        if let Some(i) = segments.iter().position(|s| s == "**") {
            if i + 1 != segments.len() {
                return Err(format!("'**' may only be the last segment, got {pattern:?}"));
            }
        }
        if let Some(s) = segments.iter().find(|s| s.contains('*') && *s != "*" && *s != "**") {
            return Err(format!("'*' must be a whole segment, got {s:?} in {pattern:?}"));
        }
        Ok(PathPattern { text: pattern.to_owned(), segments })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `path` (without query) matches.
    pub fn matches(&self, path: &str) -> bool {
        let rest = path.strip_prefix('/').unwrap_or(path);
        let mut parts = if rest.is_empty() { Vec::new() } else { rest.split('/').collect::<Vec<_>>() };
        // A trailing slash names the same resource as the path without it.
        if parts.last() == Some(&"") {
            parts.pop();
        }
        let mut i = 0;
        for (k, seg) in self.segments.iter().enumerate() {
            if seg == "**" && k + 1 == self.segments.len() {
                return true;
            }
            match parts.get(i) {
                Some(p) if seg == "*" || seg == p => i += 1,
                _ => return false,
            }
        }
        i == parts.len()
    }
}

/// Which requests a rule applies to. Every condition given must hold; [`Match::any`] has
/// none and matches every request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Match {
    methods: Vec<String>,
    path: Option<String>,
    host: Option<String>,
    headers: Vec<String>,
    // Parsed when the rule set is built; None until then or when invalid.
    parsed: Option<Parsed>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    methods: Vec<Method>,
    path: Option<PathPattern>,
    headers: Vec<HeaderName>,
}

impl Match {
    /// Matches every request.
    pub fn any() -> Self {
        Match::default()
    }

    /// Also requires one of the methods given (repeatable: `GET` or `HEAD`).
    pub fn method(mut self, method: &str) -> Self {
        self.methods.push(method.to_owned());
        self.parsed = None;
        self
    }

    /// Also requires the path to match `pattern` ([`PathPattern`]).
    pub fn path(mut self, pattern: &str) -> Self {
        self.path = Some(pattern.to_owned());
        self.parsed = None;
        self
    }

    /// Also requires this host (case-insensitive, port ignored), from `Host` or the URI.
    pub fn host(mut self, host: &str) -> Self {
        self.host = Some(host.to_ascii_lowercase());
        self
    }

    /// Also requires the header to be present (repeatable).
    pub fn header(mut self, name: &str) -> Self {
        self.headers.push(name.to_owned());
        self.parsed = None;
        self
    }

    /// The path pattern, as written.
    pub fn path_pattern(&self) -> Option<&str> {
        self.path.as_deref()
    }

    fn parse(&self) -> Result<Parsed, (&'static str, String)> {
        let methods = self
            .methods
            .iter()
            .map(|m| {
                let upper = m.to_ascii_uppercase();
                Method::from_bytes(upper.as_bytes())
                    .map_err(|_| ("match.method", format!("{m:?} is not an HTTP method")))
            })
            .collect::<Result<_, _>>()?;
        let path = self.path.as_deref().map(PathPattern::new).transpose().map_err(|e| ("match.path", e))?;
        let headers = self
            .headers
            .iter()
            .map(|h| {
                HeaderName::from_bytes(h.as_bytes())
                    .map_err(|_| ("match.header", format!("{h:?} is not a header name")))
            })
            .collect::<Result<_, _>>()?;
        if let Some(host) = &self.host {
            if host.is_empty() || host.contains(['/', ' ']) {
                return Err(("match.host", format!("{host:?} is not a host name")));
            }
        }
        Ok(Parsed { methods, path, headers })
    }

    /// Parses everything, naming the field at fault; keeps the parsed form for matching.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        self.parse().map(|_| ())
    }

    /// Prepares the matcher for use (after [`Match::validate`] accepted it).
    pub(crate) fn prepared(mut self) -> Self {
        self.parsed = self.parse().ok();
        self
    }

    /// Whether `req` is one of the requests this matcher applies to.
    pub fn matches<B>(&self, req: &Request<B>) -> bool {
        let owned;
        let parsed = match &self.parsed {
            Some(p) => p,
            None => match self.parse() {
                Ok(p) => {
                    owned = p;
                    &owned
                }
                // An invalid matcher never made it into a rule set; alone it matches nothing.
                Err(_) => return false,
            },
        };
        if !parsed.methods.is_empty() && !parsed.methods.contains(req.method()) {
            return false;
        }
        if let Some(p) = &parsed.path {
            if !p.matches(req.uri().path()) {
                return false;
            }
        }
        if let Some(host) = &self.host {
            if request_host(req).as_deref() != Some(host.as_str()) {
                return false;
            }
        }
        parsed.headers.iter().all(|h| req.headers().contains_key(h))
    }
}

/// The request's host, lower-case, without port: the `Host` header, else the URI's.
fn request_host<B>(req: &Request<B>) -> Option<String> {
    let raw = match req.headers().get(http::header::HOST).and_then(|v| v.to_str().ok()) {
        Some(h) => h.to_owned(),
        None => req.uri().host()?.to_owned(),
    };
    let host = if raw.starts_with('[') {
        // An IPv6 literal: the port follows the closing bracket.
        raw.split(']').next().map(|h| format!("{h}]"))?
    } else {
        raw.split(':').next()?.to_owned()
    };
    Some(host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, uri: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).expect("request")
    }

    #[test]
    fn patterns_match_segments_literally_one_star_per_segment_and_a_final_double_star() {
        let p = PathPattern::new("/api/**").unwrap();
        for yes in ["/api", "/api/", "/api/hello", "/api/a/b"] {
            assert!(p.matches(yes), "{yes}");
        }
        for no in ["/", "/apis", "/ap", "/x/api"] {
            assert!(!p.matches(no), "{no}");
        }
        let exact = PathPattern::new("/login").unwrap();
        assert!(exact.matches("/login") && exact.matches("/login/") && !exact.matches("/login/x"));
        assert!(PathPattern::new("/").unwrap().matches("/"));
        assert!(PathPattern::new("api").is_err());
        assert!(PathPattern::new("/a/**/b").is_err());
        assert!(PathPattern::new("/a*").is_err());
    }

    #[test]
    fn every_condition_must_hold() {
        let m = Match::any().method("get").path("/api/**").host("API.example.com").header("x-api-key").prepared();
        let good = req("GET", "/api/hello?x=1", &[("host", "api.example.com:8080"), ("x-api-key", "k")]);
        assert!(m.matches(&good));
        assert!(!m.matches(&req("POST", "/api/hello", &[("host", "api.example.com"), ("x-api-key", "k")])));
        assert!(!m.matches(&req("GET", "/web", &[("host", "api.example.com"), ("x-api-key", "k")])));
        assert!(!m.matches(&req("GET", "/api/hello", &[("host", "other.example.com"), ("x-api-key", "k")])));
        assert!(!m.matches(&req("GET", "/api/hello", &[("host", "api.example.com")])));
        assert!(Match::any().matches(&req("DELETE", "/anything", &[])));
        assert_eq!(Match::any().method("G E T").validate().unwrap_err().0, "match.method");
    }
}
