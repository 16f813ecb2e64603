//! TLS settings for `rediss://` servers, as managed Redis services require: whom to trust (a
//! CA certificate, or the trust roots this system has) and, optionally, a client certificate
//! for mutual TLS. The handshake itself is `redis`'s, over rustls.

use std::path::Path;

use crate::error::ConfigError;

/// Whom a `rediss://` connection trusts and how it proves who it is.
///
/// ```
/// use redis_ratelimit::store::Tls;
/// let tls = Tls::system_roots().with_ca_pem(b"-----BEGIN CERTIFICATE-----...".to_vec());
/// assert!(format!("{tls:?}").contains("ca"));
/// ```
#[derive(Clone, Default)]
#[must_use = "TLS settings apply only once a store is given them (RedisStore::with_tls)"]
pub struct Tls {
    pub(crate) ca_pem: Option<Vec<u8>>,
    pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Tls {
    // A client key is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &if self.ca_pem.is_some() { "given" } else { "system roots" })
            .field("client_certificate", &self.client.is_some())
            .finish()
    }
}

impl Tls {
    /// Trusts the system's root certificates (the default for `rediss://`).
    pub fn system_roots() -> Self {
        Tls::default()
    }

    /// Trusts the CA certificate(s) in PEM `pem` instead of the system's roots.
    pub fn with_ca_pem(mut self, pem: Vec<u8>) -> Self {
        self.ca_pem = Some(pem);
        self
    }

    /// Trusts the CA certificate(s) in the PEM file at `path`.
    pub fn with_ca_file(self, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let pem = read_pem("tls.ca_file", path.as_ref())?;
        Ok(self.with_ca_pem(pem))
    }

    /// Presents the client certificate `cert_pem` with its private key `key_pem` (mutual TLS).
    pub fn with_client_pem(mut self, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        self.client = Some((cert_pem, key_pem));
        self
    }

    /// Presents the client certificate and key in these PEM files (mutual TLS).
    pub fn with_client_files(self, cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let cert = read_pem("tls.client_cert", cert.as_ref())?;
        let key = read_pem("tls.client_key", key.as_ref())?;
        Ok(self.with_client_pem(cert, key))
    }

    /// In `redis`'s terms.
    pub(crate) fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client
                .clone()
                .map(|(client_cert, client_key)| redis::ClientTlsConfig { client_cert, client_key }),
            root_cert: self.ca_pem.clone(),
        }
    }
}

fn read_pem(field: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let pem = std::fs::read(path)
        .map_err(|e| ConfigError::new(field, format!("cannot read {}", path.display())).caused_by(e))?;
    if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(ConfigError::new(field, format!("{} holds no PEM block (-----BEGIN ...)", path.display())));
    }
    Ok(pem)
}

/// Whether `e` (or what caused it) is rustls refusing the server's certificate or the
/// handshake: a setting to fix, not an outage to ride out.
///
/// `redis` keeps the I/O error in an `Arc` that hides its type from `downcast_ref`, and an
/// `io::Error` reports its inner error's source rather than the inner error itself, so the
/// rustls error cannot be reached by type: it is recognised by the words rustls's `Display`
/// gives each of its refusals.
pub(crate) fn is_tls_refusal(e: &redis::RedisError) -> Option<redis::RedisError> {
    const RUSTLS_REFUSALS: [&str; 6] = [
        "invalid peer certificate",
        "received fatal alert",
        "peer sent no certificates",
        "peer is incompatible",
        "peer misbehaved",
        "received corrupt message",
    ];
    if e.kind() != redis::ErrorKind::Io {
        return None;
    }
    let text = e.to_string();
    RUSTLS_REFUSALS.iter().any(|r| text.contains(r)).then(|| e.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_without_pem_and_missing_files_are_named() {
        let dir = std::env::temp_dir().join(format!("limiter-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").expect("write");
        let e = Tls::system_roots().with_ca_file(&junk).expect_err("no PEM");
        assert!(e.to_string().contains("tls.ca_file") && e.to_string().contains("no PEM block"), "{e}");
        let e = Tls::system_roots().with_client_files(dir.join("missing.pem"), &junk).expect_err("missing");
        assert!(e.to_string().contains("tls.client_cert") && e.to_string().contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_client_key_never_shows_in_debug() {
        let tls = Tls::system_roots().with_client_pem(b"CERT".to_vec(), b"SECRET-KEY".to_vec());
        let shown = format!("{tls:?}");
        assert!(!shown.contains("SECRET") && shown.contains("client_certificate: true"), "{shown}");
    }
}
