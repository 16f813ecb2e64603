//! Running the service: TLS and mutual TLS on the gRPC listener, the standard health service
//! (and Redis's health beside it), a graceful shutdown, and the binary itself: checking a
//! configuration, refusing a bad one, serving metrics per domain and descriptor, keeping a
//! Redis password out of its output, and stopping on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use redis_ratelimit_server::server::{Tls, RLS_SERVICE, STORE_SERVICE};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

const CONFIG: &str = r#"
domain: ops
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: stream
    rate_limit: { in_flight: 1 }
"#;

struct Certs {
    ca: String,
    server: (std::path::PathBuf, std::path::PathBuf),
    client: (String, String),
    _dir: tempfile::TempDir,
}

/// A CA, a server certificate for localhost and 127.0.0.1, and a client certificate.
fn certificates() -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "rls test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issue = |names: Vec<String>| {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(names).expect("params").signed_by(&key, &ca, &ca_key).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_pem, server_key) = issue(vec!["localhost".into(), "127.0.0.1".into()]);
    let client = issue(vec!["envoy".into()]);
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("written");
        p
    };
    let server = (write("server.pem", &server_pem), write("server.key", &server_key));
    Certs { ca: ca.pem(), server, client, _dir: dir }
}

async fn tls_channel(
    rls: &Rls,
    ca: &str,
    identity: Option<&(String, String)>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)).domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Channel::from_shared(format!("https://{}", rls.addr)).expect("a URI").tls_config(tls)?.connect().await
}

async fn answered(channel: Channel) -> Result<(), tonic::Status> {
    let mut c = Client(
        envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient::new(channel),
    );
    c.call(request("ops", &[&[("user", "tls")]])).await.map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_mutual_tls_guard_the_listener() {
    let certs = certificates();
    let mut setup = Setup::on(None);
    setup.listen.tls = Some(Tls { cert: certs.server.0.clone(), key: certs.server.1.clone(), client_ca: None });
    let rls = Rls::start(CONFIG, setup.clone()).await;
    answered(tls_channel(&rls, &certs.ca, None).await.expect("a TLS client connects"))
        .await
        .expect("answered over TLS");
    // Plain text to a TLS listener gets nothing.
    let plain = Channel::from_shared(format!("http://{}", rls.addr)).unwrap().connect().await;
    assert!(match plain {
        Ok(ch) => answered(ch).await.is_err(),
        Err(_) => true,
    });

    setup.listen.tls = Some(Tls { client_ca: Some(certs.dir_ca()), ..setup.listen.tls.clone().unwrap() });
    let mutual = Rls::start(CONFIG, setup).await;
    let without = match tls_channel(&mutual, &certs.ca, None).await {
        Ok(ch) => answered(ch).await.is_err(),
        Err(_) => true,
    };
    assert!(without, "a client without a certificate is refused");
    let with = tls_channel(&mutual, &certs.ca, Some(&certs.client)).await.expect("connects with a certificate");
    answered(with).await.expect("answered with a client certificate");
}

impl Certs {
    fn dir_ca(&self) -> std::path::PathBuf {
        let p = self._dir.path().join("ca.pem");
        std::fs::write(&p, &self.ca).expect("written");
        p
    }
}

async fn health(channel: Channel, service: &str) -> Result<ServingStatus, tonic::Status> {
    let r = HealthClient::new(channel).check(HealthCheckRequest { service: service.into() }).await?;
    Ok(ServingStatus::try_from(r.into_inner().status).unwrap_or(ServingStatus::Unknown))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_serving_follows_redis_and_drains_on_shutdown() {
    let mut redis = redis();
    let mut setup = Setup::on(Some(&redis.url()));
    setup.listen.drain = Duration::from_millis(500);
    let rls = Rls::start(CONFIG, setup).await;
    let ch = rls.channel().await;
    for service in ["", RLS_SERVICE, STORE_SERVICE] {
        assert_eq!(health(ch.clone(), service).await.unwrap(), ServingStatus::Serving, "{service:?}");
    }
    // Redis down: the service still answers (its limits' failure policies), the store's
    // health says so.
    redis.kill();
    let mut c = rls.client().await;
    for _ in 0..4 {
        assert_eq!(c.code("ops", &[&[("user", "x")]]).await, RlsCode::Ok);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while health(ch.clone(), STORE_SERVICE).await.unwrap() != ServingStatus::NotServing {
        assert!(Instant::now() < deadline, "the store's health never said NOT_SERVING");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(health(ch.clone(), "").await.unwrap(), ServingStatus::Serving);
    // Shutdown: NOT_SERVING while it drains, still answering, then closed.
    let stopping = tokio::spawn(rls.stop());
    let deadline = Instant::now() + Duration::from_millis(400);
    loop {
        if health(ch.clone(), "").await.unwrap() == ServingStatus::NotServing {
            break;
        }
        assert!(Instant::now() < deadline, "never NOT_SERVING while draining");
    }
    assert_eq!(c.code("ops", &[&[("user", "y")]]).await, RlsCode::Ok, "answered while draining");
    stopping.await.unwrap().expect("a clean shutdown");
}

/// The service binary, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scrape(addr: std::net::SocketAddr) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("the exposition listens");
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").expect("request");
    let mut body = String::new();
    stream.read_to_string(&mut body).expect("response");
    body
}

#[test]
fn the_binary_checks_a_configuration_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, CONFIG).unwrap();
    let out = Command::new(binary()).arg("--config").arg(&good).arg("--check").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("configuration ok"));
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "domain: ops\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: many }\n",
    )
    .unwrap();
    let out = Command::new(binary()).arg("--config").arg(&bad).arg("--check").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("bad.yaml: descriptors[0].rate_limit.requests_per_unit (line 4)") && said.contains("\"many\""),
        "{said}"
    );
}

#[test]
fn the_binary_serves_metrics_keeps_the_password_out_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ops.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let redis = redis();
    let password = "s3cret-passw0rd-for-the-test";
    let mut admin = redis.client().unwrap();
    redis::cmd("CONFIG").arg("SET").arg("requirepass").arg(password).query::<()>(&mut admin).unwrap();
    let url_file = dir.path().join("redis-url");
    std::fs::write(&url_file, format!("redis://:{password}@127.0.0.1:{}/", redis.port())).unwrap();
    let metrics_port = redis_tests::free_port().unwrap();
    let mut child = Process(
        Command::new(binary())
            .args(["--listen", "127.0.0.1:0", "--log-format", "json", "--shutdown-grace", "1s", "--config"])
            .arg(&config)
            .arg("--redis-url-file")
            .arg(&url_file)
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let addr = loop {
        let line = lines.next().expect("the service says where it listens").unwrap();
        said.push(line.clone());
        if let Some(rest) = line.strip_prefix("redis-ratelimit-server listening on ") {
            break rest.trim().to_owned();
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let ch = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        let mut c = Client(
            envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient::new(ch),
        );
        for code in [RlsCode::Ok, RlsCode::Ok, RlsCode::OverLimit] {
            assert_eq!(c.code("ops", &[&[("user", "m")]]).await, code);
        }
        // The last admitted cost 4, not 1: of its excess of 3, one request's most (the limit's
        // capacity, 2) is charged, and 1 is not.
        let settle = costing(descriptor(&[("user", "m"), ("ratelimit.reserved", "1")]), 4);
        let req = envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
            domain: "ops".into(),
            descriptors: vec![settle],
            hits_addend: 0,
        };
        assert_eq!(overall(&c.call(req).await.unwrap()), RlsCode::Ok);
        // A permit taken and sent back twice: released, then gone.
        let held = c.call(request("ops", &[&[("stream", "s")]])).await.unwrap();
        let back = permit_tickets(&held).expect("a ticket");
        for _ in 0..2 {
            c.call(request("ops", &[&[("ratelimit.permits", &back)]])).await.unwrap();
        }
    });
    let exposition = scrape(format!("127.0.0.1:{metrics_port}").parse().unwrap());
    for line in [
        r#"ratelimit_hits_total{domain="ops",descriptor="ops.user"} 3"#,
        r#"ratelimit_within_limit_total{domain="ops",descriptor="ops.user"} 2"#,
        r#"ratelimit_over_limit_total{domain="ops",descriptor="ops.user"} 1"#,
        r#"ratelimit_within_limit_total{domain="ops",descriptor="ops.stream"} 1"#,
        r#"ratelimit_permits_released_total{domain="ops",result="released"} 1"#,
        r#"ratelimit_permits_released_total{domain="ops",result="gone"} 1"#,
        r#"ratelimit_settled_units_total{domain="ops",descriptor="ops.user",result="charged"} 2"#,
        r#"ratelimit_settled_units_total{domain="ops",descriptor="ops.user",result="uncharged"} 1"#,
    ] {
        assert!(exposition.contains(line), "{line} not in:\n{exposition}");
    }
    assert!(exposition.contains("ratelimit_decision_seconds"), "{exposition}");
    // SIGTERM: a clean exit.
    let pid = child.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the service did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    said.extend(lines.map_while(Result::ok));
    let all = said.join("\n");
    assert!(!all.contains(password), "the password reached the log:\n{all}");
    assert!(
        all.lines().all(|l| l.starts_with('{') || l.starts_with("redis-ratelimit-server listening")),
        "JSON lines:\n{all}"
    );
}
