use super::*;

const GOOD: &str = r#"
    [client_ip]
    trusted_proxies = ["10.0.0.0/8", "192.0.2.1"]

    [access]
    key_headers = ["x-client-id"]
    deny_keys = ["revoked"]
    deny_ips = ["203.0.113.0/24"]

    [[rule]]
    name = "hello"
    match = { method = "GET", path = "/api/hello" }
    key = ["header:x-api-key"]
    algorithm = "token-bucket"
    limit = 5
    period = "1s"
    tiers = { pro = { limit = 50 }, enterprise = { limit = 500, period = "1m", burst = 100 } }

    [[rule]]
    name = "daily"
    match = { method = ["GET", "POST"], path = "/api/**", headers = ["x-api-key"] }
    key = ["header:x-api-key", "route"]
    algorithm = "sliding-window"
    limit = 1000
    period = "1d"
    failure_policy = "local-budget"
    local_budget = { limit = 10, period = "1m" }
    time_source = "client"
    shadow = true
    blockable = true
    on_missing_key = "fallback-ip"
    real_cost_header = "x-rows-read"
"#;

#[test]
fn a_whole_file_reads_into_rules_lists_and_proxies() {
    let set = RuleSet::from_toml(GOOD).unwrap();
    let hello = set.rule("hello").unwrap();
    assert_eq!((hello.algorithm(), hello.quota()), (Algorithm::TokenBucket, Quota::per_second(5)));
    assert_eq!(hello.quota_for(Some("pro")), Quota::per_second(50), "the rule's period, a burst of the limit");
    assert_eq!(hello.quota_for(Some("enterprise")), Quota::per_minute(500).with_burst(100));
    assert_eq!(hello.quota_for(None), hello.quota());
    let daily = set.rule("daily").unwrap();
    assert_eq!(daily.quota(), Quota::new(1000, Duration::from_secs(86_400)));
    assert_eq!(daily.policy(), FailurePolicy::LocalBudget { limit: 10, period: Duration::from_secs(60) });
    assert!(daily.is_shadow());
    assert!(daily.is_blockable() && !hello.is_blockable());
    assert_eq!((daily.real_cost_header_name(), hello.real_cost_header_name()), (Some("x-rows-read"), None));
    assert_eq!(daily.missing_key(), OnMissingKey::FallbackToIp);
    assert_eq!(daily.key_parts(), [KeyPart::header("x-api-key"), KeyPart::Route]);
    assert_eq!(set.client_ip().trusted().len(), 2);
    assert_eq!(set.access().key_headers(), ["x-client-id"]);
    assert_eq!(set.identifying_headers(), ["x-api-key", "x-client-id"]);
}

#[test]
fn every_mistake_names_its_rule_and_field() {
    let rule = |extra: &str| {
        format!("[[rule]]\nname = \"r1\"\nkey = [\"ip\"]\nalgorithm = \"gcra\"\nlimit = 5\nperiod = \"1s\"\n{extra}")
    };
    let cases: &[(String, Option<&str>, &str)] = &[
        (rule("burst = \"five\""), Some("r1"), "burst"),
        (rule("limt = 3"), Some("r1"), "limt"),
        (rule("match = { path = \"api\" }"), Some("r1"), "match.path"),
        (rule("match = { methd = \"GET\" }"), Some("r1"), "match.methd"),
        (rule("failure_policy = \"fail-sideways\""), Some("r1"), "failure_policy"),
        (rule("failure_policy = \"local-budget\""), Some("r1"), "local_budget"),
        (rule("time_source = \"moon\""), Some("r1"), "time_source"),
        (rule("on_missing_key = \"ignore\""), Some("r1"), "on_missing_key"),
        (rule("cost = 9"), Some("r1"), "cost"),
        (rule("").replace("\"gcra\"", "\"leaky\""), Some("r1"), "algorithm"),
        (rule("").replace("\"1s\"", "\"1 fortnight\""), Some("r1"), "period"),
        (rule("").replace("\"1s\"", "30"), Some("r1"), "period"),
        (rule("").replace("\"1s\"", "\"0ms\""), Some("r1"), "period"),
        (rule("").replace("[\"ip\"]", "[\"ip\", \"cookie\"]"), Some("r1"), "key[1]"),
        (rule("").replace("name = \"r1\"\n", ""), Some("#1"), "name"),
        (rule("tiers = { pro = { limit = 0 } }"), Some("r1"), "tiers.pro.limit"),
        (rule("tiers = { pro = { limit = 9, period = \"9\" } }"), Some("r1"), "tiers.pro.period"),
        (rule("tiers = { pro = { limt = 9 } }"), Some("r1"), "tiers.pro.limt"),
        (rule("tiers = { \"a:b\" = { limit = 9 } }"), Some("r1"), "tiers"),
        // A bucket's capacity is its burst (the tier's limit unless given); a window's its limit.
        (rule("cost = 2\ntiers = { basic = { limit = 1 } }"), Some("r1"), "tiers.basic.burst"),
        (
            rule("cost = 2\ntiers = { basic = { limit = 1 } }").replace("\"gcra\"", "\"fixed-window\""),
            Some("r1"),
            "tiers.basic.limit",
        ),
        ("[client_ip]\ntrusted_proxies = [\"10.0.0.0/33\"]".into(), None, "client_ip.trusted_proxies[0]"),
        ("[access]\ndeny_ips = [\"x\"]".into(), None, "access.deny_ips[0]"),
        ("[access]\nkey_headers = [\"x-k\"]\nallow_keys = [\"vip\"]".into(), None, "access.allow_keys"),
        ("[acess]\n".into(), None, "acess"),
        ("[[rule]\nname = ".into(), None, "(file)"),
    ];
    for (text, rule, field) in cases {
        let e = RuleSet::from_toml(text).expect_err(field);
        assert_eq!((e.rule.as_deref(), e.field.as_str()), (*rule, *field), "{e}\n{text}");
    }
    let e = RuleSet::from_toml(&rule("burst = \"five\"")).unwrap_err();
    assert_eq!(e.to_string(), "rule \"r1\", field burst: invalid type: string \"five\", expected u64");
    let bare = RuleSet::from_toml(&rule("").replace("\"1s\"", "30")).unwrap_err().to_string();
    assert!(bare.contains("30 has no unit") && bare.contains("\"30s\"") && bare.contains("ms, s, m, h, d"), "{bare}");
}

#[test]
fn in_flight_tables_read_into_in_flight_rules_and_name_their_mistakes() {
    let table = |extra: &str| {
        format!(
            "[[in_flight]]\nname = \"exports\"\nmatch = {{ path = \"/api/export\" }}\nkey = [\"header:x-api-key\"]\n\
             limit = 2\nlease = \"1m\"\n{extra}"
        )
    };
    let set = RuleSet::from_toml(&table("failure_policy = \"fail-closed\"\non_missing_key = \"skip\"")).unwrap();
    let r = &set.in_flight_rules()[0];
    assert_eq!((r.name(), r.limit(), r.lease()), ("exports", 2, Duration::from_secs(60)));
    assert_eq!((r.policy(), r.missing_key()), (FailurePolicy::FailClosed, OnMissingKey::Skip));
    assert_eq!(set.identifying_headers(), ["x-api-key"], "its key's header says who the client is");
    let cases = [
        (table("").replace("lease = \"1m\"\n", ""), "exports", "lease"),
        (table("").replace("\"1m\"", "60"), "exports", "lease"),
        (table("").replace("\"1m\"", "\"0ms\""), "exports", "lease"),
        (table("").replace("limit = 2", "limit = 0"), "exports", "limit"),
        (table("period = \"1s\""), "exports", "period"),
        (table("failure_policy = \"local-budget\""), "exports", "local_budget"),
        (table("").replace("\"header:x-api-key\"", "\"cookie\""), "exports", "key[0]"),
        // One name names one rule's state, whatever its kind.
        (
            table("")
                + "[[rule]]\nname = \"exports\"\nkey = [\"ip\"]\nalgorithm = \"gcra\"\nlimit = 5\nperiod = \"1s\"\n",
            "exports",
            "name",
        ),
    ];
    for (text, rule, field) in cases {
        let e = RuleSet::from_toml(&text).expect_err(field);
        assert_eq!((e.rule.as_deref(), e.field.as_str()), (Some(rule), field), "{e}\n{text}");
    }
}

#[test]
fn sub_second_periods_are_read_and_the_policy_field_names_the_seconds_that_hold_them() {
    let set = RuleSet::from_toml(
        "[[rule]]\nname = \"burst\"\nkey = [\"ip\"]\nalgorithm = \"sliding-log\"\nlimit = 5\nperiod = \"250ms\"\n\
         failure_policy = \"local-budget\"\nlocal_budget = { limit = 2, period = \"1500ms\" }\n",
    )
    .expect("valid");
    let r = &set.rules()[0];
    assert_eq!(r.quota().period_ms(), 250);
    assert_eq!(r.policy(), FailurePolicy::LocalBudget { limit: 2, period: Duration::from_millis(1500) });
    assert_eq!(r.window_secs(), 1);
}
