//! Attacks and fuzzing: whatever a caller sends (descriptors of any text and size, costs and
//! limits of any value, any metadata) and whatever a configuration file holds, the service
//! answers with a decision or a gRPC status naming what is wrong, and never panics; a
//! configuration is loaded or refused naming its file, never half-loaded.

use std::path::PathBuf;
use std::sync::Arc;

use crate::support::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{Entry, RateLimitOverride};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use proptest::prelude::*;
use redis_ratelimit_server::adapter::Engine;
use redis_ratelimit_server::config::{self, LoadOptions};
use redis_ratelimit_server::server;
use redis_ratelimit_server::service::{Loaded, Options, Service};

const CONFIG: &str = r#"
domain: fuzz
descriptors:
  - key: a
    rate_limit: { unit: second, requests_per_unit: 5, allow_request_limit: true }
  - key: a
    value: "x*y"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 3, algorithm: sliding-log }
  - key: b
    descriptors:
      - key: c
        rate_limit: { unit: hour, requests_per_unit: 2, algorithm: gcra, quota_grants: { lifetime: 100ms } }
  - key: u
    rate_limit: { unlimited: true }
  - key: z
    rate_limit: { unit: day, requests_per_unit: 0 }
"#;

fn service() -> Arc<Service> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fuzz.yaml");
    std::fs::write(&file, CONFIG).unwrap();
    let loaded = server::load(&[file], LoadOptions::default()).unwrap();
    let (on_health, _) = server::store_health();
    let engine = Engine::new(None, None, &Setup::on(None).engine, on_health).unwrap();
    Arc::new(Service::new(loaded, engine, Options::default()))
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        prop::sample::select(vec!["a", "b", "c", "u", "z", "x", "xy", "x}{y", "fuzz", "%7B"]).prop_map(String::from),
        any::<String>(),
        "[\\x00-\\x1f{}%&=:*]{0,8}",
        (1usize..6_000).prop_map(|n| "v".repeat(n)),
    ]
}

fn descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
    (
        prop::collection::vec((text(), text()), 0..6),
        prop::option::of((any::<u32>(), prop_oneof![0..9i32, any::<i32>()])),
        prop::option::of(prop_oneof![0..4u64, any::<u64>()]),
    )
        .prop_map(|(entries, limit, hits)| RateLimitDescriptor {
            entries: entries.into_iter().map(|(key, value)| Entry { key, value }).collect(),
            limit: limit.map(|(requests_per_unit, unit)| RateLimitOverride { requests_per_unit, unit }),
            hits_addend: hits.map(|value| UInt64Value { value }),
        })
}

fn request() -> impl Strategy<Value = RateLimitRequest> {
    (
        prop_oneof![Just("fuzz".to_owned()), text()],
        prop::collection::vec(descriptor(), 0..8),
        prop_oneof![0..3u32, any::<u32>()],
    )
        .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest { domain, descriptors, hits_addend })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn any_request_is_answered_or_refused_by_name_never_a_panic(req in request(), grants in any::<bool>()) {
        let service = service();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        match rt.block_on(service.should_rate_limit(&req, grants)) {
            Ok(r) => {
                prop_assert_eq!(r.statuses.len(), req.descriptors.len());
                prop_assert!(r.overall_code == 1 || r.overall_code == 2);
                for s in &r.statuses {
                    prop_assert!(s.code == 1 || s.code == 2);
                    if let Some(q) = &s.quota {
                        prop_assert!(q.requests > 0);
                    }
                }
            }
            Err(refusal) => {
                prop_assert!(matches!(refusal.code, tonic::Code::InvalidArgument | tonic::Code::NotFound), "{:?}", refusal);
                prop_assert!(!refusal.message.is_empty());
                prop_assert!(refusal.message.len() < 1_000, "a message echoes a client's text at length: {}", refusal.message.len());
            }
        }
    }
}

/// A YAML node built from the configuration's own vocabulary and anything else.
fn yaml_value(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("second".to_owned()),
        Just("minute".to_owned()),
        Just("gcra".to_owned()),
        Just("local-budget".to_owned()),
        Just("true".to_owned()),
        Just("yes".to_owned()),
        Just("~".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[a-z*_./]{0,6}",
        "[\\x20-\\x7e]{0,6}".prop_map(|s| format!("{s:?}")),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let key = prop::sample::select(vec![
        "domain",
        "descriptors",
        "key",
        "value",
        "rate_limit",
        "unit",
        "requests_per_unit",
        "unlimited",
        "name",
        "replaces",
        "shadow_mode",
        "detailed_metric",
        "share_threshold",
        "algorithm",
        "burst",
        "failure_policy",
        "local_budget",
        "quota_grants",
        "lifetime",
        "max_requests",
        "allow_request_limit",
        "blockable",
        "bogus",
    ]);
    prop_oneof![
        leaf,
        prop::collection::vec((key, yaml_value(depth - 1)), 0..5).prop_map(|fields| format!(
            "{{{}}}",
            fields.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
        )),
        prop::collection::vec(yaml_value(depth - 1), 0..4).prop_map(|items| format!("[{}]", items.join(", "))),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn any_configuration_loads_or_is_refused_naming_the_file(body in yaml_value(4), domain in prop::option::of("[a-z]{1,5}")) {
        let text = match domain {
            Some(d) => format!("domain: {d}\ndescriptors: [{body}]\n"),
            None => body,
        };
        let file = PathBuf::from("fuzzed.yaml");
        match config::parse(&[(file, text.clone())], LoadOptions::default()) {
            Ok(c) => {
                // Whatever loaded compiles or is refused by name too.
                if let Err(e) = redis_ratelimit_server::adapter::compile(&c) {
                    prop_assert!(e.to_string().contains(':'), "{}", e);
                } else {
                    let _ = Loaded { rules: redis_ratelimit_server::adapter::compile(&c).unwrap(), config: c };
                }
            }
            Err(e) => prop_assert!(e.to_string().starts_with("fuzzed.yaml: "), "{} for {:?}", e, text),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_metadata_is_only_a_request_for_grants_when_it_says_so() {
    let rls = Rls::start(CONFIG, Setup::on(None)).await;
    let mut c = rls.client().await;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 64, ..ProptestConfig::default() });
    let values =
        prop_oneof!["[\\x20-\\x7e]{0,12}", Just("true".to_owned()), Just("1".to_owned()), Just(" true ".to_owned())];
    let strategy = (values, "[a-z-]{1,20}");
    for _ in 0..64 {
        let (value, name) = proptest::strategy::ValueTree::current(&strategy.new_tree(&mut runner).unwrap());
        let mut r = tonic::Request::new(request_of("b", "c"));
        let Ok(v) = value.parse() else { continue };
        r.metadata_mut().insert("ratelimit-quota-grants", v);
        if let Ok(n) = name.parse::<tonic::metadata::MetadataKey<tonic::metadata::Ascii>>() {
            r.metadata_mut().insert(n, "x".parse().unwrap());
        }
        let answered = c.0.should_rate_limit(r).await.expect("answered").into_inner();
        let asked = matches!(value.trim(), "true" | "1");
        // In process nothing is leased, so a grant never appears; what matters is that any
        // metadata is answered and only the two spellings ask.
        assert!(answered.statuses[0].quota.is_none() || asked, "{value:?} got a quota");
    }
}

fn request_of(k1: &str, k2: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "fuzz".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry { key: k1.into(), value: "1".into() }, Entry { key: k2.into(), value: "2".into() }],
            limit: None,
            hits_addend: None,
        }],
        hits_addend: 0,
    }
}
