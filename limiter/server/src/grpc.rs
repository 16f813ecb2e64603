//! The gRPC face of the service: `envoy.service.ratelimit.v3.RateLimitService` over the
//! [`Service`], and the floor the benchmark measures gRPC itself by.

use std::sync::Arc;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use crate::metrics;
use crate::service::Service;

/// The gRPC metadata with which a proxy asks for quota grants (`true` or `1`): a proxy that
/// honours the response's quotas sets it (Envoy: the rate limit service's `initial_metadata`).
/// A proxy that does not must not, or the units granted to it are never spent.
pub const GRANTS_METADATA: &str = "ratelimit-quota-grants";

/// The path of the floor: the same request and response types, answered OK without deciding.
pub const FLOOR_PATH: &str = "/redis_ratelimit.server.Floor/ShouldRateLimit";
const RLS_PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// `ShouldRateLimit` over a shared [`Service`].
#[derive(Debug, Clone)]
pub struct Rls(pub Arc<Service>);

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let started = tokio::time::Instant::now();
        let grants = request
            .metadata()
            .get(GRANTS_METADATA)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| matches!(v.trim(), "1" | "true"));
        let answer = self.0.should_rate_limit(request.get_ref(), grants).await;
        let outcome = match &answer {
            Ok(r) if r.overall_code == Code::OverLimit as i32 => "over_limit",
            Ok(_) => "ok",
            Err(_) => "error",
        };
        metrics::latency(outcome, started.elapsed().as_secs_f64());
        answer.map(Response::new).map_err(Status::from)
    }
}

/// The service as tonic serves it, its messages bounded to `max_message_bytes`.
pub fn rls_server(service: Arc<Service>, max_message_bytes: usize) -> RateLimitServiceServer<Rls> {
    RateLimitServiceServer::new(Rls(service)).max_decoding_message_size(max_message_bytes)
}

/// Answers every call OK without deciding: what the same server costs per call for gRPC
/// alone, the reference of the benchmark's goals (`--bench-floor`).
#[derive(Debug, Clone, Copy)]
pub struct FloorImpl;

#[tonic::async_trait]
impl RateLimitService for FloorImpl {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let statuses = request.get_ref().descriptors.iter().map(|_| Default::default()).collect();
        Ok(Response::new(RateLimitResponse { overall_code: Code::Ok as i32, statuses, ..Default::default() }))
    }
}

/// The floor under its own service name, [`FLOOR_PATH`].
#[derive(Debug, Clone)]
pub struct Floor(RateLimitServiceServer<FloorImpl>);

impl Floor {
    /// The floor service.
    pub fn new(max_message_bytes: usize) -> Floor {
        Floor(RateLimitServiceServer::new(FloorImpl).max_decoding_message_size(max_message_bytes))
    }
}

impl tonic::server::NamedService for Floor {
    const NAME: &'static str = "redis_ratelimit.server.Floor";
}

impl<B> tonic::codegen::Service<http::Request<B>> for Floor
where
    RateLimitServiceServer<FloorImpl>: tonic::codegen::Service<http::Request<B>>,
{
    type Response = <RateLimitServiceServer<FloorImpl> as tonic::codegen::Service<http::Request<B>>>::Response;
    type Error = <RateLimitServiceServer<FloorImpl> as tonic::codegen::Service<http::Request<B>>>::Error;
    type Future = <RateLimitServiceServer<FloorImpl> as tonic::codegen::Service<http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if req.uri().path() == FLOOR_PATH {
            *req.uri_mut() = http::Uri::from_static(RLS_PATH);
        }
        self.0.call(req)
    }
}
