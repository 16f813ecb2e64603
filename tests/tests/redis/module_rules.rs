//! The module's `RATELIMIT.RULES` is the all-or-nothing script (`lua/all_or_nothing.lua`): on
//! one `redis-server` with the module loaded, generated requests of one to four rules (every
//! algorithm, shadow rules, blockable rules behind blocks that end before, at and after the
//! request, dry runs) go once to the script and once to the command, on keys of their own, in
//! one MULTI/EXEC. The replies must be equal, and so must every rule's keys and blocks: type,
//! value and TTL. Some requests meet foreign state first (as `tests/tests/redis/module.rs` plants
//! it), so an error the script raises midway is the command's too. The Redis model runs the
//! command as Redis does, on the same requests.

// Real Redis keeps real time: TTLs are compared within what a step took.
#![allow(clippy::disallowed_methods)]

use crate::module_support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use redis_ratelimit::harness::rules_script::{self, RuleCall, RulesRequest};
use redis_ratelimit::harness::scripts::{self, Invocation, Request};
use redis_ratelimit::{Algorithm, Quota};

use module_support::{
    assert_same_reply, expire_both_soon, plant, quota, read, real_and_model, send, server, state, Reply, TtlCheck,
    BASE_MS,
};

/// One rule of a generated rule set.
struct Rule {
    algorithm: Algorithm,
    quota: Quota,
    shadow: bool,
    blockable: bool,
}

/// One to four rules of any algorithms, some shadow, some blockable.
fn rule_set(rng: &mut SmallRng) -> Vec<Rule> {
    (0..rng.random_range(1..=4))
        .map(|_| {
            let algorithm = Algorithm::ALL[rng.random_range(0..Algorithm::ALL.len())];
            Rule {
                algorithm,
                quota: quota(rng, algorithm),
                shadow: rng.random_bool(0.2),
                blockable: rng.random_bool(0.3),
            }
        })
        .collect()
}

/// Rule `i`'s stem on `side` for the request's key.
fn stem(side: &str, seed: u64, key: u64, i: usize) -> String {
    format!("{side}:{{k{seed}-{key}}}:r{i}:")
}

/// The request on `stems` (one per rule) with `blocks` (each blockable rule's block key).
fn request<'a>(
    rules: &'a [Rule],
    stems: &'a [String],
    blocks: &'a [String],
    now: u64,
    cost: u64,
    commit: bool,
) -> RulesRequest<'a> {
    let items = rules
        .iter()
        .zip(stems)
        .zip(blocks)
        .map(|((r, stem), block)| RuleCall {
            request: Request { algorithm: r.algorithm, quota: &r.quota, stem, now_ms: Some(now), cost },
            shadow: r.shadow,
            block: r.blockable.then_some(block.as_str()),
        })
        .collect();
    RulesRequest { items, commit }
}

/// Every key a request's rules keep: their state at `now` and their blocks.
fn keys_of(rules: &[Rule], stems: &[String], blocks: &[String], now: u64) -> Vec<String> {
    let mut keys = Vec::new();
    for ((r, stem), block) in rules.iter().zip(stems).zip(blocks) {
        keys.extend(scripts::state_keys(r.algorithm, &r.quota, stem, now));
        keys.push(block.clone());
    }
    keys
}

/// The script's call.
fn eval(pipe: &mut redis::Pipeline, call: &Invocation) {
    pipe.cmd("EVAL").arg(rules_script::source()).arg(call.keys.len()).arg(&call.keys).arg(&call.args);
}

/// The command's call.
fn command(pipe: &mut redis::Pipeline, call: &Invocation) {
    pipe.cmd(rules_script::MODULE_COMMAND).arg(&call.keys).arg(&call.args);
}

/// One generated step of a sequence: what to send and what to plant first.
struct Step {
    key: u64,
    now: u64,
    cost: u64,
    commit: bool,
    /// A rule whose state gets foreign state first.
    plant: Option<usize>,
    /// Blocks to set first: per blockable rule, None or the text to write.
    blocks: Vec<Option<String>>,
    at: String,
}

/// 80 requests of `seed` on one rule set, each handed to `on` with the generator and the rules.
fn generate(seed: u64, mut on: impl FnMut(&mut SmallRng, &[Rule], Step)) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let rules = rule_set(&mut rng);
    let smallest = rules.iter().map(|r| r.quota.capacity(r.algorithm)).min().unwrap_or(1);
    let shortest = rules.iter().map(|r| r.quota.period_ms()).min().unwrap_or(1_000);
    let (mut now, mut key) = (BASE_MS, 0);
    for i in 0..80 {
        if !rng.random_bool(0.25) {
            now = now.saturating_add_signed(if rng.random_bool(0.1) {
                -rng.random_range(0..300)
            } else {
                rng.random_range(0..shortest as i64 / 2)
            });
            key = rng.random_range(0..2);
        }
        let cost = rng.random_range(0..=smallest);
        let commit = rng.random_bool(0.85);
        let plant = rng.random_bool(0.08).then(|| rng.random_range(0..rules.len()));
        let blocks = rules
            .iter()
            .map(|r| {
                (r.blockable && rng.random_bool(0.15)).then(|| match rng.random_range(0..6) {
                    0 => "soon".to_owned(),
                    1 => now.to_string(),
                    _ => now.saturating_add_signed(rng.random_range(-200..1_500)).to_string(),
                })
            })
            .collect();
        let at = format!("seed {seed} step {i} key {key} now {now} cost {cost} commit {commit}");
        on(&mut rng, &rules, Step { key, now, cost, commit, plant, blocks, at });
    }
}

/// Sets the step's foreign state and blocks under `stems` on each of `conns` (in one
/// transaction per connection when `atomic`).
fn prepare(
    conns: &mut [&mut redis::Connection],
    rng: &mut SmallRng,
    rules: &[Rule],
    step: &Step,
    stems: &[&[String]],
    atomic: bool,
) {
    if let Some(i) = step.plant {
        let at: Vec<&str> = stems.iter().map(|s| s[i].as_str()).collect();
        plant(conns, rng, rules[i].algorithm, &rules[i].quota, step.now, &at, atomic);
    }
    let mut pipe = redis::pipe();
    if atomic {
        pipe.atomic();
    }
    for (i, block) in step.blocks.iter().enumerate() {
        if let Some(value) = block {
            for side in stems {
                pipe.cmd("SET")
                    .arg(scripts::block_key(rules[i].algorithm, &side[i]))
                    .arg(value)
                    .arg("PX")
                    .arg(5_000)
                    .ignore();
            }
        }
    }
    if step.blocks.iter().any(Option::is_some) {
        for conn in conns {
            let _: () = pipe.query(*conn).expect("set the blocks");
        }
    }
}

#[test]
fn the_rules_command_is_the_all_or_nothing_script() {
    let server = server();
    let mut conn = server.client().expect("connect");
    let (mut compared, mut refused, mut denied, mut consumed, mut blocked) = (0, 0, 0, 0, 0);
    let mut ttls = TtlCheck::new();
    for seed in 0..30u64 {
        generate(seed, |rng, rules, step| {
            let side = |s: &str| (0..rules.len()).map(|i| stem(s, seed, step.key, i)).collect::<Vec<_>>();
            let (s_stems, m_stems) = (side("s"), side("m"));
            let block_keys = |stems: &[String]| {
                rules.iter().zip(stems).map(|(r, s)| scripts::block_key(r.algorithm, s)).collect::<Vec<_>>()
            };
            let (s_blocks, m_blocks) = (block_keys(&s_stems), block_keys(&m_stems));
            prepare(&mut [&mut conn], rng, rules, &step, &[&s_stems, &m_stems], true);
            let (s_keys, m_keys) =
                (keys_of(rules, &s_stems, &s_blocks, step.now), keys_of(rules, &m_stems, &m_blocks, step.now));
            expire_both_soon(&mut conn, &s_keys, &m_keys, 5);
            let s_req = request(rules, &s_stems, &s_blocks, step.now, step.cost, step.commit);
            let m_req = request(rules, &m_stems, &m_blocks, step.now, step.cost, step.commit);
            let mut pipe = redis::pipe();
            pipe.atomic().ignore_errors();
            eval(&mut pipe, &s_req.invocation());
            command(&mut pipe, &m_req.module_invocation());
            let sent = std::time::Instant::now();
            let replies: Vec<Value> = pipe.query(&mut conn).expect("EXEC");
            ttls.took(sent.elapsed().as_millis() as i64 + 2);
            let (s, m): (Reply, Reply) = (read(&replies[0]), read(&replies[1]));
            assert_same_reply(&s, &m, &step.at);
            let keys = [s_keys, m_keys].concat();
            let states = state(&mut conn, &keys, true);
            let (s_state, m_state) = states.split_at(states.len() / 2);
            for (i, ((s_type, s_ttl, s_value), (m_type, m_ttl, m_value))) in s_state.iter().zip(m_state).enumerate() {
                assert_eq!((s_type, s_value), (m_type, m_value), "{}: key {}", step.at, keys[i]);
                ttls.pair(*s_ttl, *m_ttl, &format!("{}: key {}", step.at, keys[i]));
            }
            match &m {
                Err(_) => refused += 1,
                Ok(reply) => {
                    let read = m_req.read_reply(reply).expect("the library reads the command's reply");
                    denied += u32::from(!read.allowed);
                    consumed += read.items.iter().filter(|i| i.item.consumed).count();
                    // A rule behind a block set just now that ends after now is refused.
                    for (i, block) in step.blocks.iter().enumerate() {
                        if block.as_ref().and_then(|b| b.parse::<u64>().ok()).is_some_and(|ends| ends > step.now) {
                            assert!(!read.items[i].item.outcome.allowed, "{}: rule {i} is blocked", step.at);
                            blocked += 1;
                        }
                    }
                }
            }
            compared += 1;
        });
    }
    ttls.check("RATELIMIT.RULES");
    println!(
        "module: {compared} rule requests agreed with the all-or-nothing script \
         ({denied} denied, {consumed} rules consumed, {blocked} rules blocked, {refused} refused by both)"
    );
    assert!(denied > 100 && consumed > 500 && blocked > 30 && refused > 0, "too few of each kind to test anything");
}

/// The Redis model runs `RATELIMIT.RULES` (the module's code over the model's commands) as
/// `redis-server --loadmodule` does: the same replies and the same keys.
#[test]
fn the_model_runs_the_rules_command_as_redis_with_the_module_does() {
    let (_servers, mut real, mut modeled) = real_and_model();
    let mut ttls = TtlCheck::new();
    let mut compared = 0;
    for seed in 100..110u64 {
        generate(seed, |rng, rules, step| {
            let stems: Vec<String> = (0..rules.len()).map(|i| stem("c", seed, step.key, i)).collect();
            let blocks: Vec<String> =
                rules.iter().zip(&stems).map(|(r, s)| scripts::block_key(r.algorithm, s)).collect();
            let started = std::time::Instant::now();
            prepare(&mut [&mut real, &mut modeled], rng, rules, &step, &[&stems], false);
            let call = request(rules, &stems, &blocks, step.now, step.cost, step.commit).module_invocation();
            let command = rules_script::MODULE_COMMAND;
            let (on_real, on_model) = (send(&mut real, command, &call), send(&mut modeled, command, &call));
            let keys = keys_of(rules, &stems, &blocks, step.now);
            let (real_state, model_state) = (state(&mut real, &keys, false), state(&mut modeled, &keys, false));
            ttls.took(started.elapsed().as_millis() as i64 + 2);
            assert_eq!(on_real, on_model, "{}", step.at);
            for (i, ((r_type, r_ttl, r_value), (m_type, m_ttl, m_value))) in
                real_state.iter().zip(&model_state).enumerate()
            {
                assert_eq!((r_type, r_value), (m_type, m_value), "{}: key {}", step.at, keys[i]);
                ttls.pair(*r_ttl, *m_ttl, &format!("{}: key {}", step.at, keys[i]));
            }
            compared += 1;
        });
    }
    ttls.check("RATELIMIT.RULES on the model");
    println!("module: {compared} rule requests alike on the model and on Redis");
}

/// Arguments that do not describe rules are refused by name, and nothing is written.
#[test]
fn the_rules_command_refuses_what_describes_no_rules() {
    let server = server();
    let mut conn = server.client().expect("connect");
    let rule = ["gcra", "0", "0", "1", "4", "", "1000", "3", "1"];
    let with = |head: &[&str], rules: &[&[&str]]| -> Vec<String> {
        head.iter().chain(rules.iter().flat_map(|r| r.iter())).map(|s| s.to_string()).collect()
    };
    for (args, says) in [
        (with(&["k"], &[]), "wrong number of arguments"),
        (with(&["k", "0", "1", "1"], &[&rule]), "numkeys 0 is not between 1 and the"),
        (with(&["k", "99", "1", "1"], &[&rule]), "numkeys 99 is not between 1 and the"),
        (with(&["k", "1", "1", "2"], &[&rule]), "commit must be 0 or 1, not '2'"),
        (
            with(&["k", "1", "1", "1"], &[&["xx", "0", "0", "1", "4", "", "1000", "3", "1"]]),
            "rule 1's algorithm 'xx' is unknown",
        ),
        (with(&["k", "1", "2", "1"], &[&rule]), "wrong number of arguments"),
        (
            with(&["k", "2", "k2", "1", "1"], &[&rule]),
            "the rules name 1 keys and 11 arguments after the keys, not 2 and 11",
        ),
        (
            with(&["k", "1", "1", "1"], &[&["gcra", "0", "0", "1", "4", "", "1000", "3", "9"]]),
            "cost 9 exceeds the burst 3",
        ),
        (
            with(&["k", "1", "1", "1"], &[&["gcra", "0", "1", "1", "4", "", "1000", "3", "1"]]),
            "rule 1 has 1 keys, not 2 (its key and its block)",
        ),
    ] {
        let err = redis::cmd(rules_script::MODULE_COMMAND).arg(&args).query::<Value>(&mut conn).expect_err("refused");
        assert!(err.to_string().contains(says), "{args:?}: {err}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");
}
