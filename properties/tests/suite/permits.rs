//! Concurrency permits on the Redis model are their twin's: over generated acquires, renewals,
//! releases and peeks by a few holders on two keys, `lua/concurrency.lua` on Redis's own clock
//! (the model's, moved by the test to the millisecond, and now and then stepped back) answers
//! exactly what `algo::concurrency` answers, and never more holders are live than the limit.
//! A lease reclaimed a millisecond early or late, a release that freed someone else's permit, a
//! retried acquire that took a second one, or a peek that wrote, would show as a reply the
//! twin does not give.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use redis_model::{ManualServerClock, ModelHandle, Reply};
use redis_ratelimit::harness::algo::concurrency::{self, PermitOp, Permits};
use redis_ratelimit::harness::scripts;

const BASE_MS: u64 = 1_767_225_600_000;

/// One step: after `dt` ms (negative: Redis's clock steps back), holder `holder` does `op` on
/// key `key`.
#[derive(Debug, Clone)]
struct Step {
    dt: i64,
    key: u8,
    holder: u8,
    op: PermitOp,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![8 => 0i64..400, 1 => -200i64..0];
    let op = prop_oneof![
        3 => Just(PermitOp::Acquire),
        1 => Just(PermitOp::Renew),
        2 => Just(PermitOp::Release),
        1 => Just(PermitOp::Peek),
    ];
    let step = (dt, 0u8..2, 0u8..5, op).prop_map(|(dt, key, holder, op)| Step { dt, key, holder, op });
    proptest::collection::vec(step, 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/concurrency.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn slots_on_the_model_are_the_twins_and_never_more_than_the_limit_are_held(
        limit in 1u64..=4,
        lease in 1u64..=1_500,
        steps in steps(),
    ) {
        let clock = ManualServerClock::from_millis(BASE_MS);
        let model = ModelHandle::new(clock.clone());
        let mut twins: BTreeMap<u8, Option<Permits>> = BTreeMap::new();
        let mut now = BASE_MS;
        for (i, s) in steps.iter().enumerate() {
            now = now.saturating_add_signed(s.dt);
            clock.set_micros(now * 1000);
            let (key, holder) = (format!("permits:{{k{}}}", s.key), format!("holder-{}", s.holder));
            let (limit_arg, lease_arg) = (limit.to_string(), lease.to_string());
            // "" for now: the script reads Redis's TIME, the clock a concurrency limit runs on.
            let argv: [&[u8]; 9] = [
                b"EVAL", scripts::CONCURRENCY.as_bytes(), b"1", key.as_bytes(), b"",
                limit_arg.as_bytes(), lease_arg.as_bytes(), holder.as_bytes(), s.op.name().as_bytes(),
            ];
            let reply = model.call(&argv);
            let twin = twins.entry(s.key).or_default();
            let want = concurrency::step(limit, lease, twin, now, s.op, &holder);
            let ints = [u64::from(want.allowed), want.remaining, want.retry_after_ms, want.reset_after_ms, now];
            let want_reply = Reply::Array(ints.iter().map(|&n| Reply::Integer(n as i64)).collect());
            prop_assert_eq!(reply, want_reply, "limit {} lease {} step #{} ({:?})", limit, lease, i, s);
            let held = twin.as_ref().map_or(0, |t| concurrency::count_held(t, now));
            prop_assert!(held <= limit, "{} held at step #{}", held, i);
        }
    }
}
