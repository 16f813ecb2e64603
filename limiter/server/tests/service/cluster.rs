//! The service on a real Redis Cluster the test starts (three primaries): descriptors whose
//! counts live on different primaries are still decided all-or-nothing when nothing else takes
//! their units between the passes (see the library's per-slot path), grants lease there too,
//! a request across slots charged nothing when refused, and in-flight permits of tenants on
//! every primary are taken, refused when full and given back by their tickets.

use crate::support::*;
use redis_ratelimit_server::adapter::{StoreSettings, Topology};
use sim_real::redis_cluster::RedisCluster;

const CONFIG: &str = r#"
domain: c
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 4, algorithm: sliding-window }
  - key: route
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: hot
    rate_limit:
      unit: second
      requests_per_unit: 100
      algorithm: gcra
      quota_grants: { lifetime: 100ms, max_requests: 20 }
  - key: tenant
    rate_limit: { in_flight: 2, lease: 30s }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_on_different_primaries_are_decided_all_or_nothing() {
    sim_real::process::require_for_tests("redis-server", "redis-server");
    let cluster = RedisCluster::start(3, 0).expect("a cluster starts");
    let mut setup = Setup::on(None);
    setup.store = Some(StoreSettings {
        topology: Topology::Cluster(cluster.urls()),
        tls_ca: None,
        tls_client: None,
        timeout: std::time::Duration::from_millis(500),
        module: false,
    });
    let rls = Rls::start(CONFIG, setup).await;
    let mut c = rls.client().await;
    // Many users and routes, so their counts land on every primary.
    for n in 0..12 {
        let (user, route) = (format!("u{n}"), format!("/r{n}"));
        let both = || request("c", &[&[("user", &user)], &[("route", &route)]]);
        for _ in 0..2 {
            assert_eq!(overall(&c.call(both()).await.unwrap()), RlsCode::Ok);
        }
        let refused = c.call(both()).await.unwrap();
        assert_eq!(overall(&refused), RlsCode::OverLimit);
        // The user limit admitted it alone and was charged nothing for it.
        assert_eq!((code_of(&refused.statuses[0]), refused.statuses[0].limit_remaining), (RlsCode::Ok, 2), "{user}");
    }
    let r = c.call_with_grants(request("c", &[&[("hot", "k")]])).await.unwrap();
    assert!(r.statuses[0].quota.as_ref().is_some_and(|q| q.requests > 0), "{r:?}");

    // In-flight permits, their tenants' sets spread over the primaries.
    for n in 0..12 {
        let tenant = format!("t{n}");
        let acquire = || request("c", &[&[("tenant", &tenant)]]);
        let mut tickets = Vec::new();
        for _ in 0..2 {
            let r = c.call(acquire()).await.unwrap();
            assert_eq!(overall(&r), RlsCode::Ok, "{tenant}");
            tickets.push(permit_tickets(&r).expect("a ticket"));
        }
        assert_eq!(overall(&c.call(acquire()).await.unwrap()), RlsCode::OverLimit, "{tenant}");
        let release = request("c", &[&[("ratelimit.permits", &tickets.join(" "))]]);
        assert_eq!(overall(&c.call(release).await.unwrap()), RlsCode::Ok);
        assert_eq!(overall(&c.call(acquire()).await.unwrap()), RlsCode::Ok, "{tenant}: given back");
    }
}
