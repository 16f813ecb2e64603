//! The sliding-window counter promises "about `limit`" in any window. Measured here on
//! seeded Poisson traffic (cost 1, from a fifth of the rate to five times it) against an
//! exact sliding window, and held to its hard bound of `2 * limit`.
//!
//! Two error measures per request, as a share of all requests:
//! - *wrongly allowed / denied*: the counter's decision against the exact window
//!   `(t - W, t]` over the counter's own admissions (how Cloudflare judged theirs);
//! - *differs*: the counter's decision against an exact sliding log fed the same requests
//!   (two limiters whose states drift apart under overload).

use properties::accuracy::{sliding_window_error, traffic, Accuracy, SplitMix};
use redis_ratelimit::Quota;

#[test]
fn sliding_window_error_against_an_exact_sliding_log_stays_within_twice_the_limit() {
    let quotas = [Quota::per_second(10), Quota::per_minute(100), Quota::per_second(1000)];
    let loads = [0.2, 0.9, 1.0, 1.1, 2.0, 5.0];
    let mut rng = SplitMix::new(0x51de_0acc);
    let mut total = Accuracy::default();
    let mut lines = Vec::new();
    for q in quotas {
        for load in loads {
            let reqs = traffic(&q, load, 40, &mut rng);
            let acc = sliding_window_error(&q, &reqs);
            assert!(
                acc.worst_window_units <= 2 * u128::from(q.limit()),
                "{} units in one window under limit {} at load {load}",
                acc.worst_window_units,
                q.limit()
            );
            lines.push(row(&format!("{:>4} per {:>5} ms, load {load:>3}", q.limit(), q.period_ms()), &acc, q.limit()));
            total.add(&acc);
        }
    }
    println!(
        "properties: accuracy sliding-window {} requests: {:.3}% wrongly allowed, {:.3}% wrongly denied, {:.3}% differ from an exact sliding log\n  {:<27} {:>8} {:>9} {:>8} {:>8} {:>12} {:>11}\n{}",
        total.requests,
        pct(total.wrongly_allowed, total.requests),
        pct(total.wrongly_denied, total.requests),
        pct(total.differs_from_log, total.requests),
        "quota, load",
        "requests",
        "w.allowed",
        "w.denied",
        "differs",
        "admitted/log",
        "worst/limit",
        lines.join("\n")
    );
}

fn row(label: &str, acc: &Accuracy, limit: u64) -> String {
    format!(
        "  {label:<27} {:>8} {:>8.2}% {:>7.2}% {:>7.2}% {:>12.3} {:>11.2}",
        acc.requests,
        pct(acc.wrongly_allowed, acc.requests),
        pct(acc.wrongly_denied, acc.requests),
        pct(acc.differs_from_log, acc.requests),
        acc.admitted as f64 / acc.log_admitted.max(1) as f64,
        acc.worst_window_units as f64 / limit as f64,
    )
}

fn pct(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}
