//! Allow and deny lists: keys, IPs and CIDR ranges that skip or block every rule before Redis
//! is asked. The deny list wins over the allow list.

use std::collections::BTreeSet;
use std::net::IpAddr;

use http::Request;
use ipnet::IpNet;

use super::key::User;

/// Keys (API keys, user ids) and IP ranges (a single address is a /32 or /128 range).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessList {
    keys: BTreeSet<String>,
    nets: Vec<IpNet>,
}

impl AccessList {
    /// An empty list.
    pub fn new() -> Self {
        AccessList::default()
    }

    /// Adds a key (compared exactly with the user and the key headers' values).
    pub fn key(mut self, key: &str) -> Self {
        self.keys.insert(key.to_owned());
        self
    }

    /// Adds an IP range.
    pub fn net(mut self, net: IpNet) -> Self {
        self.nets.push(net);
        self
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.nets.is_empty()
    }

    fn holds_ip(&self, ip: Option<IpAddr>) -> bool {
        ip.is_some_and(|ip| self.nets.iter().any(|n| n.contains(&ip)))
    }
}

/// What the lists say about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// On the deny list: refused before any rule.
    Denied,
    /// On the allow list: no rule applies.
    Allowed,
    /// On neither: the rules decide.
    Unlisted,
}

/// The allow and deny lists, and the request headers whose values their keys are compared
/// with (besides the [`User`]).
///
/// ```
/// use redis_ratelimit::rules::{AccessList, AccessLists};
/// let lists = AccessLists::new()
///     .key_header("x-api-key")
///     .allow(AccessList::new().key("internal-batch"))
///     .deny(AccessList::new().net("203.0.113.0/24".parse().unwrap()));
/// assert_eq!(lists.key_headers(), ["x-api-key"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessLists {
    allow: AccessList,
    deny: AccessList,
    key_headers: Vec<String>,
}

impl AccessLists {
    /// Empty lists.
    pub fn new() -> Self {
        AccessLists::default()
    }

    /// The allow list.
    pub fn allow(mut self, list: AccessList) -> Self {
        self.allow = list;
        self
    }

    /// The deny list.
    pub fn deny(mut self, list: AccessList) -> Self {
        self.deny = list;
        self
    }

    /// A header whose value the lists' keys are compared with (repeatable).
    pub fn key_header(mut self, name: &str) -> Self {
        self.key_headers.push(name.to_ascii_lowercase());
        self
    }

    /// The headers compared with the lists' keys.
    pub fn key_headers(&self) -> &[String] {
        &self.key_headers
    }

    /// What the lists say about `req`, whose client IP is `ip`.
    pub fn check<B>(&self, req: &Request<B>, ip: Option<IpAddr>) -> Access {
        if self.allow.is_empty() && self.deny.is_empty() {
            return Access::Unlisted;
        }
        let user = req.extensions().get::<User>().map(|u| u.0.as_str());
        let headers =
            self.key_headers.iter().flat_map(|h| req.headers().get_all(h.as_str())).filter_map(|v| v.to_str().ok());
        let keys: Vec<&str> = user.into_iter().chain(headers).collect();
        let listed = |list: &AccessList| list.holds_ip(ip) || keys.iter().any(|k| list.keys.contains(*k));
        if listed(&self.deny) {
            Access::Denied
        } else if listed(&self.allow) {
            Access::Allowed
        } else {
            Access::Unlisted
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_and_keys_match_headers_and_users() {
        let lists = AccessLists::new()
            .key_header("x-api-key")
            .allow(AccessList::new().key("good").net("10.0.0.0/8".parse().unwrap()))
            .deny(AccessList::new().key("stolen").net("10.6.6.6/32".parse().unwrap()));
        let req = |key: &str| Request::builder().header("x-api-key", key).body(()).unwrap();
        let ip = |s: &str| Some(s.parse().unwrap());
        assert_eq!(lists.check(&req("good"), None), Access::Allowed);
        assert_eq!(lists.check(&req("stolen"), ip("10.1.1.1")), Access::Denied);
        assert_eq!(lists.check(&req("other"), ip("10.1.1.1")), Access::Allowed);
        assert_eq!(lists.check(&req("good"), ip("10.6.6.6")), Access::Denied);
        assert_eq!(lists.check(&req("other"), ip("192.0.2.1")), Access::Unlisted);
        let user = Request::builder().extension(User("stolen".into())).body(()).unwrap();
        assert_eq!(lists.check(&user, None), Access::Denied);
    }
}
