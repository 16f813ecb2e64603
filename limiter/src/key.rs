//! Turning a user's key (a user id, an IP, an API key, an endpoint) into Redis keys.
//!
//! Layout: `prefix:{escaped user key}:STATE:algorithm-suffix`, where STATE names the limiter's
//! state: its name, or its quota (`scripts::quota_state`), so limiters of different quotas never
//! share keys unless they share a name. The braces are a Redis Cluster hash
//! tag, so all keys of one user key land in one slot and multi-key scripts never fail with
//! CROSSSLOT. The user's text is escaped so it can never close the tag early or collide with
//! another user's keys: `%`, `{` and `}` become `%25`, `%7B` and `%7D`. Escaping is
//! injective, and everything the user wrote sits between our braces, so no key text can
//! reach outside its own tag or prefix.

use crate::error::{ConfigError, Error};

/// Default key prefix, as ADR-002 configures it.
pub(crate) const DEFAULT_PREFIX: &str = "ratelimiter";
/// Default bound on a user key's length in bytes; hostile clients send megabyte keys.
pub(crate) const DEFAULT_MAX_KEY_LEN: usize = 512;

/// The longest name a limiter's state (or a rule) may have.
pub(crate) const MAX_NAME: usize = 64;

/// Refuses a name that could not sit in a key as it is: 1 to [`MAX_NAME`] letters, digits,
/// `.`, `_` or `-` (no separator, no brace, nothing to escape); the message gives the value.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > MAX_NAME
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!("must be 1 to {MAX_NAME} letters, digits, '.', '_' or '-', got {name:?}"));
    }
    Ok(())
}

/// How user keys become Redis keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
    max_key_len: usize,
}

impl Default for KeySpace {
    fn default() -> Self {
        KeySpace { prefix: DEFAULT_PREFIX.into(), max_key_len: DEFAULT_MAX_KEY_LEN }
    }
}

impl KeySpace {
    /// A key space with `prefix` and a bound on user key length. The prefix may not contain
    /// braces (it would move the hash tag) and must not be empty.
    pub fn new(prefix: &str, max_key_len: usize) -> Result<Self, ConfigError> {
        if prefix.is_empty() {
            return Err(ConfigError::new("key_prefix", "must not be empty".into()));
        }
        if prefix.contains(['{', '}']) {
            return Err(ConfigError::new(
                "key_prefix",
                format!("{prefix:?} contains a brace, which would move the Redis Cluster hash tag"),
            ));
        }
        if max_key_len == 0 {
            return Err(ConfigError::new("max_key_len", "must be at least 1, got 0".into()));
        }
        Ok(KeySpace { prefix: prefix.into(), max_key_len })
    }

    /// The key prefix.
    #[cfg(feature = "harness")]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Checks a user key: not empty, not longer than the bound.
    pub fn check(&self, key: &str) -> Result<(), Error> {
        if key.is_empty() {
            return Err(Error::InvalidKey("the key is empty".into()));
        }
        if key.len() > self.max_key_len {
            return Err(Error::InvalidKey(format!(
                "the key is {} bytes long, above the bound of {} (max_key_len)",
                key.len(),
                self.max_key_len
            )));
        }
        Ok(())
    }

    /// `prefix:{escaped key}:` — the stem every Redis key of this user key starts with.
    pub fn stem(&self, key: &str) -> String {
        let mut out = String::with_capacity(self.prefix.len() + key.len() + 4);
        out.push_str(&self.prefix);
        out.push_str(":{");
        for ch in key.chars() {
            match ch {
                '%' => out.push_str("%25"),
                '{' => out.push_str("%7B"),
                '}' => out.push_str("%7D"),
                c => out.push(c),
            }
        }
        out.push_str("}:");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_cannot_close_the_hash_tag() {
        let ks = KeySpace::default();
        let stem = ks.stem("a}b{c%");
        assert_eq!(stem, "ratelimiter:{a%7Db%7Bc%25}:");
        // Exactly one `{` and one `}` in the whole key: the tag is ours.
        assert_eq!(stem.matches('{').count(), 1);
        assert_eq!(stem.matches('}').count(), 1);
    }

    #[test]
    fn escaping_never_maps_two_keys_to_one() {
        let ks = KeySpace::default();
        assert_ne!(ks.stem("%7B"), ks.stem("{"));
        assert_ne!(ks.stem("a}:x"), ks.stem("a"));
    }

    #[test]
    fn rejects_empty_and_overlong_keys_and_braced_prefixes() {
        let ks = KeySpace::new("p", 4).expect("valid");
        assert!(matches!(ks.check(""), Err(Error::InvalidKey(_))));
        assert!(matches!(ks.check("12345"), Err(Error::InvalidKey(m)) if m.contains("5 bytes")));
        assert!(ks.check("1234").is_ok());
        assert!(KeySpace::new("a{b", 4).is_err());
        assert!(KeySpace::new("", 4).is_err());
    }
}
