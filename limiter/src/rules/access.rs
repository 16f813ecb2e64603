//! Allow and deny lists: keys, IPs and CIDR ranges that skip or block every rule before Redis
//! is asked. The deny list wins over the allow list.
//!
//! An allow list grants a request every rule's worth, so it trusts only what the client cannot
//! make up: the client IP (the peer, or what trusted proxies say) and the identities an
//! authentication layer put in the request's extensions ([`User`], [`ApiKey`]). A header is
//! only what the client says: an allow list on one would let anyone who learns (or guesses) an
//! allow-listed name skip every limit, so a rule set that compares allow-listed keys with a
//! header is refused when it is built. The deny list may read headers too ([`AccessLists::key_header`]):
//! a client can only refuse itself with one.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::reading::Reading;
use super::RuleError;
#[cfg(doc)]
use super::{ApiKey, User};

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

    /// Adds a key (compared exactly with the request's [`User`] and [`ApiKey`], and for the deny
    /// list with the key headers' values too).
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

    fn holds_key(&self, key: Option<&str>) -> bool {
        key.is_some_and(|k| self.keys.contains(k))
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

/// The allow and deny lists, and the request headers whose values the deny list's keys are
/// compared with (besides the [`User`] and the [`ApiKey`]).
///
/// ```
/// use redis_ratelimit::rules::{AccessList, AccessLists, RuleSet};
/// let lists = AccessLists::new()
///     .allow(AccessList::new().key("internal-batch")) // a User or ApiKey an auth layer set
///     .deny(AccessList::new().net("203.0.113.0/24".parse().unwrap()));
/// assert!(RuleSet::builder().access(lists.clone()).build().is_ok());
///
/// // Compared with a header, the allow list would trust what any client sends: refused.
/// let e = RuleSet::builder().access(lists.key_header("x-api-key")).build().unwrap_err();
/// assert_eq!(e.field, "access.allow_keys");
/// assert!(e.message.contains("any client can send"), "{e}");
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

    /// A header whose value the deny list's keys are compared with (repeatable). Refused beside
    /// allow-listed keys (see the module docs).
    pub fn key_header(mut self, name: &str) -> Self {
        self.key_headers.push(name.to_ascii_lowercase());
        self
    }

    /// The headers compared with the deny list's keys.
    pub fn key_headers(&self) -> &[String] {
        &self.key_headers
    }

    /// Refuses an allow list whose keys would be compared with a header.
    pub(crate) fn validate(&self) -> Result<(), RuleError> {
        if let (false, Some(header)) = (self.allow.keys.is_empty(), self.key_headers.first()) {
            return Err(RuleError::new(
                None,
                "access.allow_keys",
                format!(
                    "cannot be compared with the header {header:?} (access.key_headers): any client can send a header, \
                     so an allow list on one lets anyone who names an allow-listed key skip every rule; allow lists \
                     match only the user and API key an authentication layer verified (rules::User, rules::ApiKey) \
                     and the client IP. Keep key_headers for a deny list alone, or authenticate the header first"
                ),
            ));
        }
        Ok(())
    }

    /// What the lists say about the request `reading` read.
    pub(crate) fn check(&self, reading: &Reading<'_>) -> Access {
        if self.allow.is_empty() && self.deny.is_empty() {
            return Access::Unlisted;
        }
        let verified = |list: &AccessList| {
            list.holds_ip(reading.ip) || list.holds_key(reading.user) || list.holds_key(reading.api_key)
        };
        let claimed = || self.key_headers.iter().any(|h| self.deny.holds_key(reading.header(h)));
        if verified(&self.deny) || claimed() {
            Access::Denied
        } else if verified(&self.allow) {
            Access::Allowed
        } else {
            Access::Unlisted
        }
    }
}

#[cfg(test)]
mod tests {
    use http::Request;

    use super::*;
    use crate::rules::{ApiKey, User};

    fn check(lists: &AccessLists, req: &Request<()>, ip: Option<IpAddr>) -> Access {
        let reading = Reading::of(req, ip, lists.key_headers()).expect("no repeated header");
        lists.check(&reading)
    }

    #[test]
    fn deny_wins_and_keys_match_verified_identities() {
        let lists = AccessLists::new()
            .allow(AccessList::new().key("good").net("10.0.0.0/8".parse().unwrap()))
            .deny(AccessList::new().key("stolen").net("10.6.6.6/32".parse().unwrap()));
        let key = |k: &str| Request::builder().extension(ApiKey(k.into())).body(()).unwrap();
        let ip = |s: &str| Some(s.parse().unwrap());
        assert_eq!(check(&lists, &key("good"), None), Access::Allowed);
        assert_eq!(check(&lists, &key("stolen"), ip("10.1.1.1")), Access::Denied);
        assert_eq!(check(&lists, &key("other"), ip("10.1.1.1")), Access::Allowed);
        assert_eq!(check(&lists, &key("good"), ip("10.6.6.6")), Access::Denied);
        assert_eq!(check(&lists, &key("other"), ip("192.0.2.1")), Access::Unlisted);
        let user = Request::builder().extension(User("stolen".into())).body(()).unwrap();
        assert_eq!(check(&lists, &user, None), Access::Denied);
        // What the client merely sends is no key.
        let claimed = Request::builder().header("x-api-key", "good").body(()).unwrap();
        assert_eq!(check(&lists, &claimed, None), Access::Unlisted);
    }

    #[test]
    fn a_deny_list_may_read_a_header_and_an_allow_list_may_not() {
        let lists = AccessLists::new().key_header("x-client").deny(AccessList::new().key("banned"));
        let req = |v: &str| Request::builder().header("x-client", v).body(()).unwrap();
        assert_eq!(check(&lists, &req("banned"), None), Access::Denied);
        assert_eq!(check(&lists, &req("fine"), None), Access::Unlisted);
        assert!(lists.validate().is_ok());
        let e = lists.allow(AccessList::new().key("vip")).validate().unwrap_err();
        assert_eq!((e.rule.as_deref(), e.field.as_str()), (None, "access.allow_keys"));
        assert!(e.message.contains("\"x-client\"") && e.message.contains("any client can send"), "{e}");
    }
}
