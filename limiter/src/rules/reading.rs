//! One reading of a request: every value the allow and deny lists and the rules' key parts
//! look at, read once, before any of them looks.
//!
//! Why: when each check reads the request on its own, two checks can read two different values
//! of one identity. A header sent twice is the plain case: a list that looks at every value and
//! a key part that takes the first would let one request carry an allow-listed key for the list
//! and an attacker's key for the limit. So a header that says who the client is (a key part's
//! header, a header the lists compare) must arrive exactly once, or the request is refused
//! naming it; everything downstream reads the one value from here.

use std::net::IpAddr;

use http::Request;

use super::key::{ApiKey, Plan, User};

/// A header that says who the client is arrived more than once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repeated {
    /// The header's name.
    pub(crate) header: String,
    /// How many times it arrived.
    pub(crate) count: usize,
}

/// What the lists and key parts read from one request.
#[derive(Debug)]
pub(crate) struct Reading<'r> {
    /// The client IP (`super::ClientIp`).
    pub(crate) ip: Option<IpAddr>,
    /// The user an authentication layer set.
    pub(crate) user: Option<&'r str>,
    /// The API key an authentication layer verified.
    pub(crate) api_key: Option<&'r str>,
    /// The plan an authentication layer found for the client.
    pub(crate) plan: Option<&'r str>,
    /// Each identifying header and its one value (None: absent, or not text).
    headers: Vec<(&'r str, Option<&'r str>)>,
    /// The path, without the query.
    pub(crate) route: &'r str,
    /// The method.
    pub(crate) method: &'r str,
}

impl<'r> Reading<'r> {
    /// Reads `req`, whose client IP is `ip`; `identifying` names the headers that say who the
    /// client is (lower-case). Err when one of them arrived more than once.
    pub(crate) fn of<B>(req: &'r Request<B>, ip: Option<IpAddr>, identifying: &'r [String]) -> Result<Self, Repeated> {
        let mut headers = Vec::with_capacity(identifying.len());
        for name in identifying {
            let mut values = req.headers().get_all(name.as_str()).iter();
            let first = values.next();
            let more = values.count();
            if more > 0 {
                return Err(Repeated { header: name.clone(), count: more + 1 });
            }
            headers.push((name.as_str(), first.and_then(|v| v.to_str().ok())));
        }
        let ext = req.extensions();
        Ok(Reading {
            ip,
            user: ext.get::<User>().map(|u| u.0.as_str()),
            api_key: ext.get::<ApiKey>().map(|k| k.0.as_str()),
            plan: ext.get::<Plan>().map(|p| p.0.as_str()),
            headers,
            route: req.uri().path(),
            method: req.method().as_str(),
        })
    }

    /// The value of the identifying header `name`, if the request has one that is text.
    pub(crate) fn header(&self, name: &str) -> Option<&'r str> {
        self.headers.iter().find(|(n, _)| *n == name).and_then(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identifying_header_sent_twice_is_refused_by_name_and_others_may_repeat() {
        let names = vec!["x-api-key".to_owned()];
        let twice = Request::builder()
            .header("x-api-key", "a")
            .header("x-api-key", "b")
            .header("accept", "x")
            .body(())
            .unwrap();
        assert_eq!(Reading::of(&twice, None, &names).unwrap_err(), Repeated { header: "x-api-key".into(), count: 2 });
        let once =
            Request::builder().header("x-api-key", "a").header("accept", "x").header("accept", "y").body(()).unwrap();
        let reading = Reading::of(&once, None, &names).expect("one value");
        assert_eq!(reading.header("x-api-key"), Some("a"));
        assert_eq!(reading.header("accept"), None, "not an identifying header");
    }
}
