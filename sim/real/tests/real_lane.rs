//! The real-Redis lane agrees with the model lane on every known positive: each scenario
//! runs against private `redis-server` processes (started on free loopback ports, killed on
//! drop, also on panic) through fault-injecting proxies, in real time; and the naive subject
//! over-admits against mini-redis too.
//!
//! Every run of the file is started at once (each run has its own server and ports, and
//! spends its time sleeping), so the whole file takes about as long as its longest run
//! (clock-skew, 12 s). Real timing is noisy: the margins below are wide, and each is far
//! from what the opposite verdict would give (numbers seen are in the comments).

use std::sync::OnceLock;

use redis_ratelimit::FailurePolicy;
use sim_engine::results::{RunResult, Verdict};
use sim_engine::run::{self, is_failure};
use sim_engine::scenario::{self, RunSpec};
use sim_engine::subject::Subject;

fn specs(name: &str, subjects: &[&str], duration_ms: u64) -> Vec<RunSpec> {
    let subjects: Vec<Subject> = subjects.iter().map(|s| Subject::named(s).expect("a catalogue subject")).collect();
    scenario::find(name).expect("scenario exists").runs(&subjects, &[1], None, duration_ms)
}

struct Lane {
    redis: Vec<RunResult>,
    mini: RunResult,
}

/// Every real-lane run of this file, run once, concurrently, by whichever test gets here
/// first; the other tests wait for it.
fn lane() -> &'static Lane {
    static LANE: OnceLock<Lane> = OnceLock::new();
    LANE.get_or_init(|| {
        sim_real::process::require_for_tests("redis-server", "redis-server");
        let mut all = Vec::new();
        all.extend(specs("get-set-race", &["naive", "fixed-window", "gcra"], 4_000));
        all.extend(specs("steady-trickle", &["adr002", "token-bucket"], 6_000));
        all.extend(specs("window-boundary", &["fixed-window", "sliding-log"], 6_000));
        // Client time breaks GCRA's bound only once the drift has run a while (the model
        // lane needs the same 12 s).
        all.extend(specs("clock-skew", &["token-bucket", "gcra", "adr002"], 12_000));
        // Outage from 3 s to 7 s, then 2 s to see recovery.
        all.extend(specs("redis-outage", &["gcra"], 9_000));
        let mini_spec = specs("get-set-race", &["naive"], 4_000).remove(0);
        std::thread::scope(|s| {
            let mini = s.spawn(|| {
                let out = sim_real::execute_mini(&mini_spec).expect("mini-redis run");
                run::judge(&mini_spec, out)
            });
            let redis = run::run_many_with(&all, all.len(), &|| {}, &sim_real::execute).expect("real-Redis runs");
            for r in &redis {
                println!(
                    "{} {} {} {}: {} requests, admitted {} (oracle {}), wrong allow {:.1}%, wrong limit {:.1}%, \
                     peak {}, bound {} ({}), policy {} ({}), recover {:?}",
                    r.scenario,
                    r.subject,
                    r.policy,
                    r.time_source,
                    r.requests,
                    r.admitted,
                    r.oracle_admitted,
                    r.wrong_allow_pct,
                    r.wrong_limit_pct,
                    r.peak_per_period,
                    r.bound,
                    r.bound_detail,
                    r.policy_check,
                    r.policy_detail,
                    r.recover_ms
                );
            }
            Lane { redis, mini: mini.join().expect("mini-redis thread") }
        })
    })
}

fn one(scenario: &str, subject: &str, pred: impl Fn(&RunResult) -> bool) -> &'static RunResult {
    lane().redis.iter().find(|r| r.scenario == scenario && r.subject == subject && pred(r)).expect("result present")
}

/// A positive (a bound the subject should break) that the concurrent lane did not show, run
/// once more alone: twenty runs at once on two cores can stretch a run's requests apart enough
/// to hide a break by one request (seen once: worst 19 against a bound of 20), as the real
/// lanes of `cargo xtask test` also run a hidden positive once more, alone, before failing.
fn breaking(scenario: &str, subject: &str, pred: impl Fn(&RunResult) -> bool) -> RunResult {
    let first = one(scenario, subject, &pred);
    if first.bound == Verdict::Broken {
        return first.clone();
    }
    println!(
        "{scenario} {subject}: the break did not show beside the other runs ({}); once more, alone",
        first.bound_detail
    );
    let spec = specs(scenario, &[subject], 12_000)
        .into_iter()
        .find(|s| s.time_source.name() == first.time_source && s.policy.name() == first.policy)
        .expect("the run's spec");
    run::judge(&spec, sim_real::execute(&spec).expect("a real-Redis run"))
}

#[test]
fn no_real_run_returns_an_error_instead_of_a_decision() {
    for r in lane().redis.iter().chain([&lane().mini]) {
        assert_eq!(r.errors, 0, "{} {} {}: {} errors", r.scenario, r.subject, r.policy, r.errors);
        assert!(r.requests > 0);
    }
}

#[test]
fn naive_get_set_over_admits_against_real_redis_while_atomic_scripts_hold() {
    let naive = one("get-set-race", "naive", |_| true);
    assert_eq!(naive.bound, Verdict::Broken, "{naive:?}");
    // Seen: 195 admitted where the oracle admits 80.
    assert!(
        naive.admitted > naive.oracle_admitted + naive.oracle_admitted / 5,
        "naive {} vs oracle {}",
        naive.admitted,
        naive.oracle_admitted
    );
    for a in ["fixed-window", "gcra"] {
        let r = one("get-set-race", a, |_| true);
        assert_eq!(r.bound, Verdict::Held, "{a}: {}", r.bound_detail);
        assert!(
            r.admitted <= r.oracle_admitted + r.oracle_admitted / 50,
            "{a}: {} vs {}",
            r.admitted,
            r.oracle_admitted
        );
    }
}

#[test]
fn naive_get_set_over_admits_against_mini_redis_too() {
    let naive = &lane().mini;
    assert_eq!(naive.bound, Verdict::Broken, "{naive:?}");
    // Seen: 193 admitted where the oracle admits 80.
    assert!(
        naive.admitted > naive.oracle_admitted + naive.oracle_admitted / 5,
        "naive on mini-redis {} vs oracle {}",
        naive.admitted,
        naive.oracle_admitted
    );
}

#[test]
fn adr002_starves_a_steady_trickle_on_real_redis_that_a_correct_bucket_serves() {
    let adr = one("steady-trickle", "adr002", |_| true);
    let tb = one("steady-trickle", "token-bucket", |_| true);
    // Seen: 59% and 0%; 21 admitted against 139.
    assert!(adr.wrong_limit_pct > 30.0, "adr002 wrongly limited only {:.1}%", adr.wrong_limit_pct);
    assert!(tb.wrong_limit_pct < 5.0, "token bucket wrongly limited {:.1}%", tb.wrong_limit_pct);
    assert!(adr.admitted * 2 < tb.admitted, "adr002 {} vs token bucket {}", adr.admitted, tb.admitted);
}

#[test]
fn fixed_window_admits_up_to_twice_its_limit_across_a_real_window_boundary() {
    let fw = one("window-boundary", "fixed-window", |_| true);
    let log = one("window-boundary", "sliding-log", |_| true);
    // Seen: 40 for a limit of 20, and 20 for the sliding log.
    assert!(fw.peak_per_period > fw.limit * 3 / 2, "fixed window peak {} for limit {}", fw.peak_per_period, fw.limit);
    // Real time is noisy: a call that stalls past the timeout is admitted by the fail-open
    // policy, so the peaks (every admission) allow for those; the store-decided bounds
    // are exact.
    assert!(fw.peak_per_period <= 2 * fw.limit + fw.sources.fail_open, "fixed window peak {}", fw.peak_per_period);
    assert_eq!(fw.bound, Verdict::Held, "its promise allows the boundary double: {}", fw.bound_detail);
    assert_eq!(log.bound, Verdict::Held, "{}", log.bound_detail);
    assert!(log.peak_per_period <= log.limit + log.sources.fail_open, "sliding log peak {}", log.peak_per_period);
}

#[test]
fn client_time_over_admits_under_real_clock_skew_while_server_time_holds() {
    let (mut client_admitted, mut server_admitted) = (0, 0);
    for a in ["token-bucket", "gcra"] {
        let server = one("clock-skew", a, |r| r.time_source == "server");
        let client = breaking("clock-skew", a, |r| r.time_source == "client");
        assert_eq!(server.bound, Verdict::Held, "{a} server: {}", server.bound_detail);
        assert_eq!(client.bound, Verdict::Broken, "{a} client: {}", client.bound_detail);
        assert!(client.expected_finding && !is_failure(&client));
        // Seen: about 22% wrongly allowed in client time, 1-2.5% in server time.
        assert!(client.wrong_allow_pct > 10.0, "{a} client wrongly allowed only {:.1}%", client.wrong_allow_pct);
        assert!(server.wrong_allow_pct < 5.0, "{a} server wrongly allowed {:.1}%", server.wrong_allow_pct);
        client_admitted += client.admitted;
        server_admitted += server.admitted;
    }
    // Seen: 540 against 516.
    assert!(client_admitted > server_admitted, "client {client_admitted} vs server {server_admitted}");
    let adr = one("clock-skew", "adr002", |_| true);
    assert!(
        adr.wrong_allow_pct + adr.wrong_limit_pct > 5.0,
        "adr002 decided wrongly only {:.1}% + {:.1}%",
        adr.wrong_allow_pct,
        adr.wrong_limit_pct
    );
}

#[test]
fn fail_open_is_unbounded_while_real_redis_is_down_and_the_local_budget_holds() {
    let open = one("redis-outage", "gcra", |r| r.policy == FailurePolicy::FailOpen.name());
    let closed = one("redis-outage", "gcra", |r| r.policy == FailurePolicy::FailClosed.name());
    let budget = one("redis-outage", "gcra", |r| r.policy == "local-budget");
    // Seen: 36% of all requests wrongly allowed by fail-open.
    assert!(open.sources.fail_open > 0 && open.wrong_allow > open.requests / 10, "{open:?}");
    assert_eq!(open.bound, Verdict::Held, "{}", open.bound_detail);
    assert_eq!(closed.policy_check, Verdict::Held, "{}", closed.policy_detail);
    assert!(closed.sources.fail_closed > 0);
    assert_eq!(budget.policy_check, Verdict::Held, "{}", budget.policy_detail);
    assert!(budget.sources.local_budget > 0);
    assert!(budget.wrong_allow < open.wrong_allow, "budget {} vs open {}", budget.wrong_allow, open.wrong_allow);
    // Seen: about 45 ms from the restart to the first store-decided admission.
    for r in [open, closed, budget] {
        assert!(r.recover_ms.is_some_and(|ms| ms < 2_000), "{} recovered in {:?}", r.policy, r.recover_ms);
    }
}
