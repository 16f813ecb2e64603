//! The enforcer in process, on a manual clock: what each ruling is and what it consumes.

use std::sync::Arc;
use std::time::Duration;

use http::Request;

use super::*;
use crate::clock::ManualClock;
use crate::rules::{AccessList, AccessLists, ApiKey, ClientIp, KeyPart, Match, PeerAddr, Rule, User};
use crate::{Algorithm, Quota};

fn enforcer(rules: RuleSet, clock: &ManualClock) -> Enforcer {
    Enforcer::builder(rules).clock(Arc::new(clock.clone())).build().expect("valid")
}

fn req(key: Option<&str>, peer: &str) -> Request<()> {
    let mut b = Request::builder().uri("/api/hello").extension(PeerAddr(peer.parse().unwrap()));
    if let Some(k) = key {
        b = b.header("x-api-key", k);
    }
    b.body(()).unwrap()
}

async fn decided(e: &Enforcer, r: &Request<()>) -> RulesDecision {
    match e.check(r).await.expect("no error") {
        Ruling::Decided(d) => d,
        other => panic!("expected a decision, got {other:?}"),
    }
}

fn per_key(limit: u64) -> Rule {
    Rule::new("per-key", Algorithm::FixedWindow, Quota::new(limit, Duration::from_secs(60)))
        .key([KeyPart::header("x-api-key")])
}

#[tokio::test]
async fn shadow_rules_count_and_report_but_never_deny() {
    let clock = ManualClock::new(1_000_000);
    let rules = RuleSet::builder()
        .rule(per_key(3))
        .rule(
            Rule::new("dark", Algorithm::FixedWindow, Quota::new(1, Duration::from_secs(60)))
                .key([KeyPart::header("x-api-key")])
                .shadow(true),
        )
        .build()
        .unwrap();
    let e = enforcer(rules, &clock);
    let r = req(Some("k"), "192.0.2.1");
    let first = decided(&e, &r).await;
    assert!(first.allowed && first.rules[1].consumed);
    let second = decided(&e, &r).await;
    // The shadow rule would deny; the request goes through and only the enforced rule pays.
    assert!(second.allowed && !second.rules[1].decision.allowed && !second.rules[1].consumed);
    assert_eq!(second.violated().count(), 0);
    let _spent = decided(&e, &r).await;
    assert!(!decided(&e, &r).await.allowed);
    let m = e.counts();
    assert_eq!((m.rules["dark"].denied, m.rules["dark"].consumed), (3, 1));
    assert_eq!((m.allowed, m.denied), (3, 1));
}

#[tokio::test]
async fn lists_decide_before_any_rule_and_missing_keys_get_their_treatment() {
    let clock = ManualClock::new(0);
    let lists = AccessLists::new()
        .allow(AccessList::new().key("vip"))
        .deny(AccessList::new().net("203.0.113.0/24".parse().unwrap()));
    let rules = RuleSet::builder()
        .rule(per_key(1))
        .rule(
            Rule::new("by-user", Algorithm::FixedWindow, Quota::new(1, Duration::from_secs(60)))
                .matching(Match::any().header("x-user-flag"))
                .key([KeyPart::User])
                .on_missing_key(OnMissingKey::FallbackToIp),
        )
        .access(lists)
        .build()
        .unwrap();
    let e = enforcer(rules, &clock);
    // The allow list trusts the API key an authentication layer verified, not the header.
    let verified = |peer: &str| {
        let mut r = req(Some("vip"), peer);
        r.extensions_mut().insert(ApiKey("vip".into()));
        r
    };
    for _ in 0..3 {
        assert_eq!(e.check(&verified("192.0.2.1")).await.unwrap(), Ruling::Allowlisted);
        assert_eq!(e.check(&verified("203.0.113.9")).await.unwrap(), Ruling::Denylisted);
    }
    let missing = e.check(&req(None, "192.0.2.1")).await.unwrap();
    assert_eq!(missing, Ruling::MissingKey { rule: "per-key".into(), part: "header:x-api-key".into() });
    // Nothing was counted for the listed requests.
    assert!(decided(&e, &req(Some("k"), "192.0.2.1")).await.allowed);
    // No user: counted by IP instead.
    let flagged = Request::builder()
        .header("x-api-key", "k2")
        .header("x-user-flag", "1")
        .extension(PeerAddr("192.0.2.7".parse().unwrap()))
        .body(())
        .unwrap();
    let d = decided(&e, &flagged).await;
    assert_eq!(d.rules[1].identity.text(), "ip=192.0.2.7");
    let m = e.counts();
    assert_eq!((m.allowlisted, m.denylisted, m.missing_key), (3, 3, 1));
    // Claiming the allow-listed key in the header is no key: counted like anyone.
    assert!(decided(&e, &req(Some("vip"), "192.0.2.2")).await.allowed);
    assert!(!decided(&e, &req(Some("vip"), "192.0.2.2")).await.allowed);
    // Two values of the header the rules count by: refused, naming it.
    let mut twice = req(Some("k"), "192.0.2.3");
    twice.headers_mut().append("x-api-key", "vip".parse().unwrap());
    assert_eq!(e.check(&twice).await.unwrap(), Ruling::RepeatedHeader { header: "x-api-key".into(), count: 2 });
    let mut with_user = flagged;
    with_user.extensions_mut().insert(User("ann".into()));
    with_user.headers_mut().insert("x-api-key", "k3".parse().unwrap());
    assert_eq!(decided(&e, &with_user).await.rules[1].identity.text(), "user=ann");
}

#[tokio::test]
async fn cost_zero_peeks_every_rule_and_reloads_keep_counters() {
    let clock = ManualClock::new(0);
    let peek = Rule::new("status", Algorithm::SlidingLog, Quota::new(2, Duration::from_secs(60)))
        .key([KeyPart::header("x-api-key")])
        .cost(0);
    let e = enforcer(RuleSet::builder().rule(per_key(2)).build().unwrap(), &clock);
    let r = req(Some("k"), "192.0.2.1");
    let _spent = decided(&e, &r).await;
    // A new rule, and the old one with a larger quota: its window's count carries over.
    e.replace_rules(RuleSet::builder().rule(per_key(3)).rule(peek).build().unwrap());
    let d = decided(&e, &r).await;
    assert!(d.allowed);
    assert_eq!((d.rules[0].decision.remaining, d.rules[1].decision.remaining), (1, 2));
    assert!(!d.rules[1].consumed);
    assert!(decided(&e, &r).await.allowed);
    assert!(!decided(&e, &r).await.allowed, "3 per window, counted across the reload");
}

#[tokio::test]
async fn client_ip_is_the_peer_unless_a_trusted_proxy_says_otherwise() {
    let clock = ManualClock::new(0);
    let rules = RuleSet::builder()
        .rule(
            Rule::new("per-ip", Algorithm::FixedWindow, Quota::new(1, Duration::from_secs(60)))
                .key([KeyPart::ClientIp]),
        )
        .client_ip(ClientIp::new().trust("10.0.0.0/8".parse().unwrap()))
        .build()
        .unwrap();
    let e = enforcer(rules, &clock);
    let spoof = |claimed: &str| {
        Request::builder()
            .header("x-forwarded-for", claimed)
            .extension(PeerAddr("198.51.100.1".parse().unwrap()))
            .body(())
            .unwrap()
    };
    assert!(decided(&e, &spoof("1.1.1.1")).await.allowed);
    // Another claimed address from the same untrusted peer is the same client.
    let d = decided(&e, &spoof("2.2.2.2")).await;
    assert!(!d.allowed);
    assert_eq!(d.rules[0].identity.text(), "ip=198.51.100.1");
}

#[tokio::test]
async fn memory_stays_bounded_under_a_flood_of_keys() {
    let clock = ManualClock::new(0);
    let e = Enforcer::builder(RuleSet::builder().rule(per_key(5)).build().unwrap())
        .clock(Arc::new(clock.clone()))
        .max_local_keys(50)
        .build()
        .unwrap();
    for i in 0..2_000 {
        let _spent = decided(&e, &req(Some(&format!("hostile-{i}")), "192.0.2.1")).await;
    }
    let held = e.shared.gate.keys_held().expect("in process");
    assert!(held <= 50, "{held}");
    let long = "x".repeat(600);
    assert!(matches!(e.check(&req(Some(&long), "192.0.2.1")).await, Err(Error::InvalidKey(_))));
}

#[cfg(feature = "config")]
#[tokio::test]
async fn a_bad_file_leaves_the_rules_in_force_and_the_watch_reports_each_change_once() {
    use std::sync::Mutex;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.toml");
    let good =
        "[[rule]]\nname = \"r\"\nkey = [\"header:x-api-key\"]\nalgorithm = \"fixed-window\"\nlimit = 1\nperiod = \"60s\"\n";
    std::fs::write(&path, good).unwrap();
    let clock = ManualClock::new(0);
    let e = enforcer(RuleSet::from_toml(good).unwrap(), &clock);
    std::fs::write(&path, good.replace("limit = 1", "limit = -1")).unwrap();
    let err = e.reload_from_file(&path).unwrap_err();
    assert!(err.to_string().contains("rule \"r\", field limit: invalid value"), "{err}");
    assert_eq!(e.rules().rules()[0].quota().limit(), 1, "the old rules stay");
    assert!(matches!(e.reload_from_file(&dir.path().join("missing.toml")), Err(ReloadError::Read { .. })));

    // The watch takes the file as it finds it for what is in force.
    std::fs::write(&path, good).unwrap();
    let heard: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = heard.clone();
    let watch = e.watch(&path, Duration::from_millis(5), move |outcome| {
        let line = match outcome {
            Ok(rules) => format!("ok {}", rules.rules()[0].quota().limit()),
            Err(e) => format!("err {e}"),
        };
        log.lock().unwrap().push(line);
    });
    let wait_for = |n: usize| {
        let heard = heard.clone();
        async move {
            for _ in 0..2_000 {
                if heard.lock().unwrap().len() >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("the watch reported {:?}, expected {n} reports", heard.lock().unwrap());
        }
    };
    // A bad file is reported once, however many polls see it.
    std::fs::write(&path, good.replace("limit = 1", "limit = 0")).unwrap();
    wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::write(&path, good.replace("limit = 1", "limit = 4")).unwrap();
    wait_for(2).await;
    drop(watch);
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(heard[0].starts_with("err ") && heard[1] == "ok 4", "{heard:?}");
    assert_eq!(e.rules().rules()[0].quota().limit(), 4);
}

#[tokio::test]
async fn a_tier_is_chosen_by_the_plan_an_authentication_layer_set_never_by_a_header() {
    let clock = ManualClock::new(0);
    let rules = RuleSet::builder()
        .rule(
            Rule::new("api", Algorithm::SlidingLog, Quota::new(1, Duration::from_secs(60)))
                .key([KeyPart::User])
                .tier("pro", Quota::new(3, Duration::from_secs(60))),
        )
        .build()
        .unwrap();
    let e = enforcer(rules, &clock);
    let on = |user: &str, plan: Option<&str>| {
        let mut r = req(None, "192.0.2.1");
        r.headers_mut().insert("x-plan", "pro".parse().unwrap());
        r.extensions_mut().insert(User(user.into()));
        if let Some(plan) = plan {
            r.extensions_mut().insert(crate::rules::Plan(plan.into()));
        }
        r
    };
    // A header naming the plan is only what the client says: the rule's own quota applies.
    assert!(decided(&e, &on("free", None)).await.allowed);
    let refused = decided(&e, &on("free", None)).await;
    assert_eq!((refused.allowed, refused.rules[0].decision.capacity), (false, 1));
    let admitted: Vec<_> = admissions(&e, &on("paying", Some("pro")), 4).await;
    assert_eq!(admitted, [true, true, true, false]);
    let d = decided(&e, &on("paying", Some("pro"))).await;
    assert_eq!(
        (d.rules[0].quota, d.rules[0].decision.capacity),
        (Quota::new(3, Duration::from_secs(60)), 3),
        "the tier is reported"
    );
    // A plan the rule does not name gets its own quota; the tiers share a key's state, so the
    // free user moving to pro has used one of its three.
    assert!(!decided(&e, &on("paying", Some("gold"))).await.allowed);
    assert_eq!(admissions(&e, &on("free", Some("pro")), 3).await, [true, true, false]);
}

/// Whether each of `n` copies of `r` is admitted, in turn.
async fn admissions(e: &Enforcer, r: &Request<()>, n: usize) -> Vec<bool> {
    let mut admitted = Vec::new();
    for _ in 0..n {
        admitted.push(decided(e, r).await.allowed);
    }
    admitted
}

/// A state read, a reset and a refund reach the state one identity's checks count against under
/// one rule, under its plan's tier, and no other identity's; errors name the rule or the
/// missing part.
#[tokio::test]
async fn a_state_read_a_reset_and_a_refund_reach_one_identitys_state_under_one_rule() {
    let clock = ManualClock::new(1_000_000);
    let rule = per_key(2).tier("pro", Quota::new(3, Duration::from_secs(60)));
    let e = enforcer(RuleSet::builder().rule(rule).build().unwrap(), &clock);
    let alice = req(Some("alice"), "192.0.2.1");
    let spend = |key: &'static str| {
        let e = e.clone();
        async move {
            let mut admitted = 0;
            for _ in 0..4 {
                admitted += usize::from(decided(&e, &req(Some(key), "192.0.2.1")).await.allowed);
            }
            admitted
        }
    };
    assert_eq!((spend("alice").await, spend("bob").await), (2, 2));
    let state = e.state("per-key", &alice).await.expect("state");
    assert_eq!((state.capacity, state.remaining), (2, 0), "alice's state, spent");
    assert!(e.refund("per-key", &alice, 1).await.expect("refund"));
    let state = e.state("per-key", &alice).await.expect("state");
    assert_eq!(state.remaining, 1, "the unit given back, read without consuming it");
    assert_eq!(spend("alice").await, 1, "one given back");
    e.reset("per-key", &alice).await.expect("reset");
    assert_eq!((spend("alice").await, spend("bob").await), (2, 0), "alice afresh, bob untouched");
    // The pro tier's state is the one a pro request counts against.
    let mut pro = req(Some("carol"), "192.0.2.1");
    pro.extensions_mut().insert(crate::rules::Plan("pro".into()));
    for _ in 0..3 {
        assert!(decided(&e, &pro).await.allowed);
    }
    assert!(!decided(&e, &pro).await.allowed);
    assert_eq!(e.state("per-key", &pro).await.expect("state").capacity, 3, "the state under the pro tier's quota");
    assert!(e.refund("per-key", &pro, 10).await.expect("refund"));
    assert_eq!(decided(&e, &pro).await.rules[0].decision.remaining, 2, "the tier's quota, not above it");
    assert!(matches!(e.reset("nope", &alice).await.unwrap_err(), Error::UnknownRule(r) if r == "nope"));
    let anonymous = req(None, "192.0.2.1");
    let missing = e.refund("per-key", &anonymous, 1).await.unwrap_err();
    assert!(
        matches!(&missing, Error::InvalidKey(m) if m.contains("header:x-api-key") && m.contains("per-key")),
        "{missing}"
    );
}

/// A block stops one identity under one blockable rule, on every tier and until it ends, with
/// a Retry-After of its end; the other rules of the request consume nothing meanwhile (all or
/// nothing), another identity is untouched, and a lifted or ended block lets the quota decide.
/// A rule that is not blockable refuses to be blocked, naming why.
#[tokio::test]
async fn a_block_stops_one_identity_under_one_rule_until_it_ends() {
    let clock = ManualClock::new(1_000_000);
    let global = Rule::new("global", Algorithm::SlidingLog, Quota::new(100, Duration::from_secs(60)));
    let rules = RuleSet::builder()
        .rule(per_key(5).tier("pro", Quota::new(50, Duration::from_secs(60))).blockable(true))
        .rule(global)
        .build()
        .unwrap();
    let e = enforcer(rules, &clock);
    let alice = req(Some("alice"), "192.0.2.1");
    let mut pro = req(Some("alice"), "192.0.2.1");
    pro.extensions_mut().insert(crate::rules::Plan("pro".into()));
    assert!(decided(&e, &alice).await.allowed);
    e.block("per-key", &alice, Duration::from_secs(30)).await.expect("blocks");
    for r in [&alice, &pro] {
        let d = decided(&e, r).await;
        assert!(!d.allowed, "{d:?}");
        let per_key = &d.rules[0].decision;
        assert_eq!((per_key.remaining, per_key.retry_after), (0, Duration::from_secs(30)), "{d:?}");
        assert!(d.rules.iter().all(|r| !r.consumed), "nothing consumed: {d:?}");
    }
    assert!(decided(&e, &req(Some("bob"), "192.0.2.1")).await.allowed, "another identity");
    clock.advance(30_000);
    assert!(decided(&e, &alice).await.allowed, "the block ended");
    e.block("per-key", &alice, Duration::from_secs(30)).await.expect("blocks");
    e.block("per-key", &alice, Duration::ZERO).await.expect("lifts");
    assert!(decided(&e, &alice).await.allowed, "lifted");
    e.block("per-key", &alice, Duration::from_secs(30)).await.expect("blocks");
    e.reset("per-key", &alice).await.expect("reset");
    assert_eq!(decided(&e, &alice).await.rules[0].decision.remaining, 4, "the reset forgot the block and the state");
    let refused = e.block("global", &alice, Duration::from_secs(1)).await.unwrap_err();
    assert!(
        matches!(&refused, Error::Config(c) if c.field() == "blockable" && c.message().contains("\"global\"")),
        "{refused}"
    );
}

/// An in-flight rule's permits, all or nothing across rules; the lists apply as to the rate
/// rules; a reload that keeps a rule's name, limit, lease and policy keeps its holders, even
/// with a new matcher.
#[tokio::test]
async fn in_flight_permits_are_taken_all_or_nothing_and_a_kept_rule_keeps_its_holders() {
    use crate::rules::InFlightRule;
    let clock = ManualClock::new(1_000_000);
    let one = |name: &str| InFlightRule::new(name, 1, Duration::from_secs(30)).key([KeyPart::header("x-api-key")]);
    let rules = |matcher: Match| {
        RuleSet::builder()
            .in_flight(one("per-key").matching(matcher))
            .in_flight(one("exports").matching(Match::any().path("/export")))
            .access(AccessLists::new().deny(AccessList::new().key("banned")).key_header("x-api-key"))
            .build()
            .unwrap()
    };
    let e = enforcer(rules(Match::any()), &clock);
    let at = |path: &str, key: &str| Request::builder().uri(path).header("x-api-key", key).body(()).unwrap();
    let Acquisition::Held(export) = e.acquire(&at("/export", "k1")).await.unwrap() else { panic!("held") };
    assert_eq!(export.len(), 2, "a permit of each matching rule");
    // Both of k1's permits are held: a request needing either takes neither.
    assert!(
        matches!(e.acquire(&at("/other", "k1")).await.unwrap(), Acquisition::Full { rule, .. } if rule == "per-key")
    );
    assert!(matches!(e.acquire(&at("/export", "k2")).await.unwrap(), Acquisition::Held(p) if p.len() == 2));
    assert!(matches!(e.acquire(&at("/export", "banned")).await.unwrap(), Acquisition::Denylisted));
    let keyless = Request::builder().uri("/export").body(()).unwrap();
    assert!(matches!(e.acquire(&keyless).await.unwrap(), Acquisition::MissingKey { rule, .. } if rule == "per-key"));
    // A new matcher keeps the rule's limiter, and so k1's holder.
    e.replace_rules(rules(Match::any().path("/**")));
    assert!(matches!(e.acquire(&at("/other", "k1")).await.unwrap(), Acquisition::Full { .. }));
    drop(export);
    assert!(matches!(e.acquire(&at("/other", "k1")).await.unwrap(), Acquisition::Held(p) if p.len() == 1));
}
