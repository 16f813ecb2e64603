//! The file format is a contract between two crates and every results file already written:
//! field names and order are pinned here, and a partial file reads with defaults.

use results::{
    FaultWindow, RacePoint, RedisCost, Results, RuleBound, RulesResult, RunResult, Series, SkewPoint, Sources, Verdict,
    SCHEMA,
};

#[test]
fn a_run_serialises_with_the_field_names_and_order_of_the_schema() {
    let run = RunResult {
        scenario: "partition".into(),
        subject: "gcra".into(),
        seed: 7,
        recover_ms: Some(40),
        sources: Sources { store: 3, fail_open: 1, fail_closed: 0, local_budget: 0, ..Sources::default() },
        series: Some(Series { bucket_ms: 500, admitted: vec![1], oracle_admitted: vec![2], limit_per_bucket: 10.0 }),
        redis: Some(RedisCost {
            commands: 4,
            bytes_in: 5,
            bytes_out: 6,
            keys: 1,
            memory_bytes: 64,
            keys_without_ttl: 1,
            keys_without_ttl_sample: vec!["rl:{k}".into()],
            ..RedisCost::default()
        }),
        faults: vec![FaultWindow { kind: "hold".into(), at_ms: 1, until_ms: 2 }],
        ..RunResult::default()
    };
    let text = serde_json::to_string(&run).unwrap();
    let fields = "scenario,description,subject,library,policy,time_source,seed,instances,limit,period_ms,burst,\
                  requests,admitted,oracle_admitted,wrong_allow,wrong_limit,wrong_allow_pct,wrong_limit_pct,bound,\
                  bound_detail,expected_finding,beyond_clock_trust,beyond_clock_trust_detail,policy_check,policy_detail,liveness,liveness_detail,peak_per_period,\
                  recover_ms,sources,errors,replay,trace_hash,series,redis,faults,mode,round_trips,mode_check,\
                  mode_detail,under_admitted,lease_unspent";
    // In this order in the text (serde writes fields in declaration order), and no others.
    let mut at = 0;
    for field in fields.split(',') {
        let found = text[at..].find(&format!("\"{field}\":"));
        at += found.unwrap_or_else(|| panic!("{field} missing or out of order in {text}"));
    }
    let count = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text).unwrap().len();
    assert_eq!(count, fields.split(',').count(), "{text}");
    assert!(
        text.contains(
            r#""sources":{"store":3,"fail_open":1,"fail_closed":0,"local_budget":0,"lease":0,"denial_cache":0}"#
        ),
        "{text}"
    );
    assert!(text.contains(r#""faults":[{"kind":"hold","at_ms":1,"until_ms":2}]"#), "{text}");
    assert_eq!(serde_json::from_str::<RunResult>(&text).unwrap(), run);
}

#[test]
fn a_partial_file_reads_with_defaults_and_round_trips() {
    let r: Results = serde_json::from_str(
        r#"{"schema": "rate-limit-sim/3", "results": [{"scenario": "x", "recover_ms": null}],
            "race_sweep": [{"subject": "naive", "instances": 4}],
            "skew_sweep": [{"subject": "gcra", "skew_ms": -250}]}"#,
    )
    .unwrap();
    assert_eq!(r.schema, SCHEMA);
    assert_eq!(r.results[0].scenario, "x");
    assert_eq!(r.results[0].series, None);
    // Written before the round-trip modes: no mode, no calls counted, no mode check.
    assert_eq!((r.results[0].mode.as_str(), r.results[0].round_trips, r.results[0].mode_check), ("", 0, Verdict::None));
    assert_eq!(r.race_sweep, vec![RacePoint { subject: "naive".into(), instances: 4, ..RacePoint::default() }]);
    assert_eq!(r.skew_sweep, vec![SkewPoint { subject: "gcra".into(), skew_ms: -250, ..SkewPoint::default() }]);
    let again: Results = serde_json::from_str(&serde_json::to_string_pretty(&r).unwrap()).unwrap();
    assert_eq!(again, r);
}

#[test]
fn a_multi_rule_run_adds_its_rules_and_older_files_read_without_them() {
    let run = RunResult {
        scenario: "multi-rule".into(),
        rules: Some(RulesResult {
            all_or_nothing: Verdict::Held,
            split_requests: 0,
            all_or_nothing_detail: "none split".into(),
            rules: vec![RuleBound {
                name: "per-user".into(),
                consumed: 9,
                bound: Verdict::Held,
                ..RuleBound::default()
            }],
        }),
        ..RunResult::default()
    };
    let text = serde_json::to_string(&run).unwrap();
    assert!(
        text.contains(
            r#""rules":{"all_or_nothing":"held","split_requests":0,"all_or_nothing_detail":"none split","rules":[{"name":"per-user","algorithm":"","limit":0,"period_ms":0,"burst":0,"consumed":9,"bound":"held","bound_detail":""}]},"#
        ),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<RunResult>(&text).unwrap(), run);
    // A run without rules writes no `rules` member, as every file before it.
    assert!(!serde_json::to_string(&RunResult::default()).unwrap().contains("\"rules\""));
    let old: RunResult = serde_json::from_str(r#"{"scenario": "baseline"}"#).unwrap();
    assert_eq!(old.rules, None);
}
