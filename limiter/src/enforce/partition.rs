//! The secret the RateLimit fields' partition keys (`pk`) are keyed with.
//!
//! A `pk` tells a client which partition of a policy it is counted in, without naming it: the
//! header must never echo an API key, and must not let anyone recover an IP address either. An
//! unkeyed digest does not do that: `ip=ADDRESS` has only 2^32 values for IPv4, so every one
//! can be hashed and matched in seconds. Keyed with a secret only the deployment knows
//! (HMAC-SHA-256, truncated to 8 bytes, plenty to tell partitions apart), a `pk` cannot be
//! tested against a guess. Every gateway of a deployment is given the same secret, so they name
//! a partition alike; without one, the fields carry no `pk` at all.

use ring::hmac;

use crate::error::ConfigError;
use crate::rules::Identity;

/// A partition-key secret; see the module docs. Its `Debug` form never shows it.
#[derive(Clone)]
pub struct PartitionSecret {
    key: hmac::Key,
}

impl std::fmt::Debug for PartitionSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PartitionSecret(..)")
    }
}

impl PartitionSecret {
    /// The fewest bytes a secret may have: shorter ones can be guessed.
    pub const MIN_LEN: usize = 16;

    /// A secret of at least [`PartitionSecret::MIN_LEN`] bytes (a random string from the
    /// deployment's configuration). The error names the field and the length, never the bytes.
    pub fn new(secret: &[u8]) -> Result<Self, ConfigError> {
        if secret.len() < Self::MIN_LEN {
            return Err(ConfigError::new(
                "partition_key_secret",
                format!("must be at least {} bytes, got {}", Self::MIN_LEN, secret.len()),
            ));
        }
        Ok(PartitionSecret { key: hmac::Key::new(hmac::HMAC_SHA256, secret) })
    }

    /// The `pk` of `identity`: the first 8 bytes of its HMAC; None for a constant key, which
    /// every request shares.
    pub fn partition_key(&self, identity: &Identity) -> Option<[u8; 8]> {
        if identity.is_constant() {
            return None;
        }
        let tag = hmac::sign(&self.key, identity.text().as_bytes());
        let mut pk = [0u8; 8];
        pk.copy_from_slice(&tag.as_ref()[..8]);
        Some(pk)
    }
}
