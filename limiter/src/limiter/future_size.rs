//! The size of a decision's future (see the test).

use super::*;

/// An in-process decision awaits nothing, so its future should be little more than its
/// arguments: the Redis path (modes, breaker, round trip) is boxed behind it. Unboxed, that
/// path made every `check` future several kilobytes, built and moved on every decision.
#[test]
fn a_decisions_future_is_small_whatever_the_store() {
    let limiter = Limiter::builder(Algorithm::Gcra, Quota::per_second(10)).build().expect("valid");
    let check = std::mem::size_of_val(&limiter.check("k"));
    let with = std::mem::size_of_val(&limiter.check_with("k", Quota::per_second(5)));
    let state = std::mem::size_of_val(&limiter.state("k"));
    eprintln!("futures: check {check} B, check_with {with} B, state {state} B");
    for (what, size) in [("check", check), ("check_with", with), ("state", state)] {
        assert!(size <= 512, "{what}'s future is {size} bytes");
    }
}
