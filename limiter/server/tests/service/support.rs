//! What the service's tests share: a service on a free loopback port (in this process, or the
//! built binary), stopped when its handle drops whatever the test did, and a gRPC client.

#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{Entry, RateLimitOverride};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use redis_ratelimit_server::adapter::{EngineSettings, StoreSettings, Topology};
use redis_ratelimit_server::config::LoadOptions;
use redis_ratelimit_server::server::{self, Listen};
use redis_ratelimit_server::service::{Options, Service};
use tonic::transport::Channel;

pub use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as RlsCode;

/// A service running in this process on a free loopback port, with the configuration file it
/// reads. Dropping it stops it (the listener closes, the reload task ends).
pub struct Rls {
    pub addr: std::net::SocketAddr,
    pub service: Arc<Service>,
    pub config: PathBuf,
    pub dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for Rls {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.abort();
        }
        self.watch.abort();
    }
}

/// How a test's service is set up.
#[derive(Clone)]
pub struct Setup {
    pub options: Options,
    pub engine: EngineSettings,
    pub store: Option<StoreSettings>,
    pub listen: Listen,
    pub reload: Duration,
}

impl Setup {
    /// Defaults, on the Redis at `url` (None: in process).
    pub fn on(url: Option<&str>) -> Setup {
        Setup {
            options: Options::default(),
            engine: EngineSettings {
                key_prefix: "rls-test".into(),
                max_key_bytes: 2_048,
                breaker_failures: 3,
                breaker_open: Duration::from_millis(300),
                near_limit_ratio: 0.8,
                partition_key_secret: None,
            },
            store: url.map(|u| StoreSettings {
                topology: Topology::Single(u.to_owned()),
                tls_ca: None,
                tls_client: None,
                timeout: Duration::from_millis(200),
                module: false,
            }),
            listen: Listen {
                tls: None,
                max_message_bytes: 1 << 20,
                floor: false,
                drain: Duration::ZERO,
                grace: Duration::from_secs(2),
            },
            reload: Duration::from_millis(50),
        }
    }
}

impl Rls {
    /// Starts a service reading `yaml` (written to a file of its own) as `setup` says.
    pub async fn start(yaml: &str, setup: Setup) -> Rls {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, yaml).expect("the configuration is written");
        let paths = vec![config.clone()];
        let loaded = server::load(&paths, LoadOptions::default()).expect("the configuration loads");
        let (on_health, health) = server::store_health();
        let engine = server::engine(setup.store.clone(), &setup.engine, on_health).expect("the engine builds");
        let service = Arc::new(Service::new(loaded, engine, setup.options.clone()));
        let watch = server::watch(service.clone(), paths, LoadOptions::default(), setup.reload);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let addr = listener.local_addr().expect("its address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(server::serve(service.clone(), listener, setup.listen.clone(), health, async move {
            let _ = stopped.await;
        }));
        Rls { addr, service, config, dir, stop: Some(stop), served: Some(served), watch }
    }

    /// A plain-text channel to it.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr)).expect("a URI").connect().await.expect("connects")
    }

    /// A plain-text client.
    pub async fn client(&self) -> Client {
        Client(RateLimitServiceClient::new(self.channel().await))
    }

    /// Rewrites the configuration file (the service reloads it).
    pub fn rewrite(&self, yaml: &str) {
        let tmp = self.dir.path().join("config.yaml.new");
        std::fs::write(&tmp, yaml).expect("written");
        std::fs::rename(&tmp, &self.config).expect("moved into place");
    }

    /// Stops it now and waits for the server to finish the calls in flight.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.served.take() {
            Some(served) => served.await.expect("the server task ends"),
            None => Ok(()),
        }
    }
}

/// A gRPC client of the service.
#[derive(Clone)]
pub struct Client(pub RateLimitServiceClient<Channel>);

impl Client {
    pub async fn call(&mut self, req: RateLimitRequest) -> Result<RateLimitResponse, tonic::Status> {
        self.0.should_rate_limit(req).await.map(tonic::Response::into_inner)
    }

    /// A call asking for quota grants.
    pub async fn call_with_grants(&mut self, req: RateLimitRequest) -> Result<RateLimitResponse, tonic::Status> {
        let mut r = tonic::Request::new(req);
        r.metadata_mut().insert("ratelimit-quota-grants", "true".parse().expect("ascii"));
        self.0.should_rate_limit(r).await.map(tonic::Response::into_inner)
    }

    /// The overall code of a request of these descriptors.
    pub async fn code(&mut self, domain: &str, descriptors: &[&[(&str, &str)]]) -> Code {
        let r = self.call(request(domain, descriptors)).await.expect("answered");
        Code::try_from(r.overall_code).expect("a known code")
    }
}

/// A descriptor of these entries.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries.iter().map(|(k, v)| Entry { key: (*k).into(), value: (*v).into() }).collect(),
        limit: None,
        hits_addend: None,
    }
}

/// The same descriptor with its own cost.
pub fn costing(mut d: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    d.hits_addend = Some(UInt64Value { value: hits });
    d
}

/// The same descriptor with its own limit (requests per unit; 1 second, 2 minute, 3 hour...).
pub fn limited(mut d: RateLimitDescriptor, requests: u32, unit: i32) -> RateLimitDescriptor {
    d.limit = Some(RateLimitOverride { requests_per_unit: requests, unit });
    d
}

/// A request of these descriptors.
pub fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: descriptors.iter().map(|d| descriptor(d)).collect(),
        hits_addend: 0,
    }
}

/// A status's code.
pub fn code_of(s: &DescriptorStatus) -> Code {
    Code::try_from(s.code).expect("a known code")
}

/// The overall code of a response.
pub fn overall(r: &RateLimitResponse) -> Code {
    Code::try_from(r.overall_code).expect("a known code")
}

/// A header the response adds for the client.
pub fn response_header<'a>(r: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    r.response_headers_to_add.iter().find(|h| h.key == name).map(|h| h.value.as_str())
}

/// A header the response adds to the request for the upstream.
pub fn request_header<'a>(r: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    r.request_headers_to_add.iter().find(|h| h.key == name).map(|h| h.value.as_str())
}

/// A real redis-server on a free port, stopped when dropped.
pub fn redis() -> redis_tests::RedisServer {
    redis_tests::RedisServer::start_real().expect("redis-server starts")
}

/// The built service binary (cargo builds it for integration tests).
pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_redis-ratelimit-server"))
}

/// The tickets an admitted request's metadata carries, for the call at its stream's end.
pub fn permit_tickets(r: &RateLimitResponse) -> Option<String> {
    let meta = r.dynamic_metadata.as_ref()?;
    match meta.fields.get("ratelimit.permits")?.kind.as_ref()? {
        envoy_types::pb::google::protobuf::value::Kind::StringValue(s) => Some(s.clone()),
        other => panic!("not a string: {other:?}"),
    }
}
