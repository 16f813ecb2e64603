//! Production connections: a `redis-server --tls-port` with certificates this test generates
//! (a CA, a server certificate for 127.0.0.1, a client certificate: nothing committed), and a
//! second server with an ACL user. The limiter decides through each; an untrusted certificate,
//! a missing client certificate and a wrong password are clear errors on the first call (not
//! a failure policy quietly answering), and no password ever shows in a `Debug` form or an
//! error message.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use redis_ratelimit::store::Tls;
use redis_ratelimit::{Algorithm, Error, FailurePolicy, Limiter, Quota, RedisStore, Source};
use sim_real::process::{free_port, ServerProcess};

const PASSWORD: &str = "s3cret-Pa55word";

struct Certs {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a PEM file");
    path
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, all
/// signed by the CA.
fn certificates() -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "limiter test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issue = |names: Vec<String>, cn: &str| {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(names).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &ca, &ca_key).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_pem, server_key) = issue(vec!["127.0.0.1".into(), "localhost".into()], "redis");
    let (client_pem, client_key) = issue(vec!["client".into()], "limiter");
    Certs {
        ca: write(dir.path(), "ca.pem", &ca.pem()),
        server_cert: write(dir.path(), "server.pem", &server_pem),
        server_key: write(dir.path(), "server.key", &server_key),
        client_cert: write(dir.path(), "client.pem", &client_pem),
        client_key: write(dir.path(), "client.key", &client_key),
        _dir: dir,
    }
}

/// `redis-server` on a TLS port only, requiring a client certificate signed by the CA.
fn tls_server(certs: &Certs) -> ServerProcess {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let port = free_port().expect("port").to_string();
    let extra: Vec<&OsStr> = vec![
        OsStr::new("--port"),
        OsStr::new("0"),
        OsStr::new("--tls-port"),
        OsStr::new(&port),
        OsStr::new("--tls-cert-file"),
        certs.server_cert.as_os_str(),
        OsStr::new("--tls-key-file"),
        certs.server_key.as_os_str(),
        OsStr::new("--tls-ca-cert-file"),
        certs.ca.as_os_str(),
        OsStr::new("--tls-auth-clients"),
        OsStr::new("yes"),
    ];
    let port: u16 = port.parse().expect("port");
    ServerProcess::start("redis-server", port, &extra, "Debian's `redis-server`, built with TLS").expect("TLS server")
}

/// `redis-server` whose default user is off and whose user `limiter` has a password.
fn acl_server() -> ServerProcess {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let password = format!(">{PASSWORD}");
    let args = ["--user", "default", "off", "--user", "limiter", "on", password.as_str(), "~*", "+@all"];
    let extra: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    ServerProcess::start("redis-server", free_port().expect("port"), &extra, "Debian's `redis-server`").expect("server")
}

fn limiter(store: RedisStore) -> Limiter {
    Limiter::builder(Algorithm::TokenBucket, Quota::per_second(2))
        .redis(store)
        // Fail-open is the policy that would hide a broken connection best: it must not here.
        .failure_policy(FailurePolicy::FailOpen)
        .build()
        .expect("valid limiter")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

#[test]
fn the_limiter_decides_over_tls_with_the_ca_and_a_client_certificate() {
    let certs = certificates();
    let server = tls_server(&certs);
    let url = format!("rediss://127.0.0.1:{}/", server.port());
    let tls = Tls::system_roots()
        .with_ca_file(&certs.ca)
        .expect("CA")
        .with_client_files(&certs.client_cert, &certs.client_key)
        .expect("client cert");
    let l = limiter(RedisStore::from_url(&url).expect("URL").with_tls(&tls).expect("TLS"));
    let rt = runtime();
    let decisions: Vec<_> = (0..3).map(|_| rt.block_on(l.check("tls-user", 1)).expect("a decision")).collect();
    assert!(decisions.iter().all(|d| d.source == Source::Store), "{decisions:?}");
    assert_eq!(decisions.iter().map(|d| d.allowed).collect::<Vec<_>>(), [true, true, false]);
}

#[test]
fn an_untrusted_certificate_or_a_missing_client_certificate_is_an_error_on_the_first_call() {
    let certs = certificates();
    let server = tls_server(&certs);
    let url = format!("rediss://127.0.0.1:{}/", server.port());
    let rt = runtime();

    // The system's roots do not know the test's CA.
    let untrusted = limiter(RedisStore::from_url(&url).expect("URL"));
    let e = rt.block_on(untrusted.check("k", 1)).expect_err("an untrusted certificate must not decide");
    assert!(matches!(e, Error::Refused { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("TLS") && text.contains(&format!("127.0.0.1:{}", server.port())), "{text}");
    assert!(text.contains("certificate") || text.contains("UnknownIssuer"), "{text}");

    // Trusted, but without the client certificate the server requires.
    let tls = Tls::system_roots().with_ca_file(&certs.ca).expect("CA");
    let anonymous = limiter(RedisStore::from_url(&url).expect("URL").with_tls(&tls).expect("TLS"));
    match rt.block_on(anonymous.check("k", 1)) {
        Err(e) => assert!(matches!(e, Error::Refused { .. }), "{e:?}"),
        // The server may close the connection after the handshake instead of failing it:
        // then the failure policy answers, and `degraded` says why.
        Ok(d) => assert!(d.source != Source::Store && d.degraded.is_some(), "{d:?}"),
    }

    // TLS settings on a plain URL are refused when the store is built.
    let e = RedisStore::from_url("redis://127.0.0.1:1/").expect("URL").with_tls(&tls).expect_err("plain URL");
    assert!(e.to_string().contains("rediss://"), "{e}");
}

#[test]
fn an_acl_user_decides_and_a_wrong_password_is_an_error_that_never_shows_it() {
    let server = acl_server();
    let rt = runtime();
    let good = format!("redis://limiter:{PASSWORD}@127.0.0.1:{}/", server.port());
    let store = RedisStore::from_url(&good).expect("URL");
    let shown = format!("{store:?}");
    assert!(!shown.contains(PASSWORD) && shown.contains(&server.port().to_string()), "{shown}");
    let l = limiter(store);
    assert!(!format!("{l:?}").contains(PASSWORD));
    let d = rt.block_on(l.check("acl-user", 1)).expect("a decision");
    assert_eq!((d.source, d.allowed), (Source::Store, true), "{d:?}");

    let wrong = "wrong-Pa55word-xyz";
    let bad = RedisStore::from_url(&format!("redis://limiter:{wrong}@127.0.0.1:{}/", server.port())).expect("URL");
    assert!(!format!("{bad:?}").contains(wrong));
    let l = limiter(bad);
    let e = rt.block_on(l.check("acl-user", 1)).expect_err("a wrong password must not decide, nor fail open");
    assert!(matches!(e, Error::Refused { .. }), "{e:?}");
    for shown in [e.to_string(), format!("{e:?}")] {
        assert!(!shown.contains(wrong) && !shown.contains(PASSWORD), "{shown}");
        assert!(shown.contains(&server.port().to_string()), "names the server: {shown}");
    }
    // No user at all: the default user is off.
    let anonymous = limiter(RedisStore::from_url(&server.url()).expect("URL"));
    let e = rt.block_on(anonymous.check("acl-user", 1)).expect_err("no credentials");
    assert!(matches!(e, Error::Refused { .. }), "{e:?}");

    // A URL that cannot be used is refused by name, with the password masked.
    let e = RedisStore::from_url(&format!("redis://limiter:{PASSWORD}@127.0.0.1:notaport/")).expect_err("bad port");
    assert!(!e.to_string().contains(PASSWORD) && e.to_string().contains("redis_url"), "{e}");
    let e = RedisStore::cluster([format!("redis://limiter:{PASSWORD}@[::1/")]).expect_err("bad URL");
    assert!(!e.to_string().contains(PASSWORD), "{e}");
}
