//! Differential test with rate-limiter scripts written the way users write them (the shapes found
//! in public code: INCR + EXPIRE windows, GET-then-INCRBY, sorted-set logs, token buckets in a
//! hash, GCRA on a stored TAT, list-based leaky buckets, set-based concurrency limits, results
//! encoded with cjson): each runs a generated sequence of calls on a real `redis-server` and on the
//! model, and every reply must be byte-identical. The model must also know every command they
//! call (`script_unknown_command` stays empty).
//!
//! The scripts take "now" from ARGV, and every key lives for seconds or more, so real time does
//! not enter the comparison.

use crate::conformance_support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use conformance_support::{show, Pair};

/// Scripts and how to call them: (name, body, number of keys).
const SCRIPTS: &[(&str, &str, usize)] = &[
    (
        "fixed window, INCR then EXPIRE",
        r#"
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then return {0, n, redis.call('TTL', KEYS[1])} end
return {1, n, redis.call('TTL', KEYS[1])}
"#,
        1,
    ),
    (
        "GET, compare, INCRBY",
        r#"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current + 1 > tonumber(ARGV[1]) then return 0 end
redis.call('INCRBY', KEYS[1], '1')
redis.call('EXPIRE', KEYS[1], ARGV[2])
return current + 1
"#,
        1,
    ),
    (
        "sliding log in a sorted set",
        r#"
local key, now, window, limit = KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[2]) * 1000, tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
if count < limit then
  redis.call('ZADD', key, now, now .. '-' .. count)
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - 1, oldest[2] or false}
end
return {0, 0, redis.call('ZREVRANGE', key, 0, 1), redis.call('ZRANK', key, oldest[1])}
"#,
        1,
    ),
    (
        "token bucket in a hash",
        r#"
local capacity, rate, now, cost = tonumber(ARGV[1]), tonumber(ARGV[1]) / tonumber(ARGV[2]), tonumber(ARGV[3]), 1
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(state[1]) or capacity, tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) / 1000 * rate)
local allowed = tokens >= cost
if allowed then tokens = tokens - cost end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000) + 1000)
return {allowed and 1 or 0, tostring(tokens), redis.call('HLEN', KEYS[1]), redis.call('HKEYS', KEYS[1])}
"#,
        1,
    ),
    (
        "GCRA on a stored TAT",
        r#"
redis.replicate_commands()
local limit, period, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) / 1000
local interval = period / limit
local burst = interval * limit
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
tat = math.max(tat, now)
local new_tat = tat + interval
local allow_at = new_tat - burst
if now < allow_at then
  return {1, 0, tostring(allow_at - now), tostring(tat - now)}
end
redis.call('SET', KEYS[1], string.format('%.6f', new_tat), 'EX', math.ceil(new_tat - now + 1))
return {0, math.floor((now - allow_at) / interval), '-1', tostring(new_tat - now)}
"#,
        1,
    ),
    (
        "leaky bucket in a list",
        r#"
local limit, now = tonumber(ARGV[1]), ARGV[3]
local len = redis.call('LLEN', KEYS[1])
if len >= limit then
  local oldest = redis.call('LINDEX', KEYS[1], -1)
  if tonumber(oldest) + tonumber(ARGV[2]) * 1000 > tonumber(now) then
    return {0, len, oldest, redis.call('LRANGE', KEYS[1], 0, 2)}
  end
  redis.call('RPOP', KEYS[1], 1)
end
redis.call('LPUSH', KEYS[1], now)
redis.call('LTRIM', KEYS[1], 0, limit - 1)
redis.call('EXPIRE', KEYS[1], ARGV[2])
return {1, redis.call('LLEN', KEYS[1]), redis.call('LPOP', 'no-such-list')}
"#,
        1,
    ),
    (
        "concurrency slots in a set, cjson result",
        r#"
-- Integer slot ids: Redis keeps the set as an intset, whose SMEMBERS order is defined.
local slot = tostring(tonumber(ARGV[3]) % 7)
if redis.call('SISMEMBER', KEYS[1], slot) == 1 then
  redis.call('SREM', KEYS[1], slot)
  return cjson.encode({released = slot, held = redis.call('SCARD', KEYS[1])})
end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return cjson.encode({denied = true, held = redis.call('SMEMBERS', KEYS[1])})
end
redis.call('SADD', KEYS[1], slot)
redis.call('EXPIRE', KEYS[1], ARGV[2], 'NX')
return cjson.encode({acquired = slot, at = tonumber(ARGV[3]) / 1000})
"#,
        1,
    ),
    (
        "cooldown with SETEX, GETSET and GETDEL",
        r#"
local last = redis.call('GETSET', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 1 then
  local strikes = redis.call('INCR', KEYS[1] .. ':strikes')
  if strikes > tonumber(ARGV[1]) then return {0, redis.call('GETDEL', KEYS[1]), last} end
  return {0, strikes, last}
end
redis.call('SETEX', KEYS[1], ARGV[2], 'cooling')
redis.call('PSETEX', KEYS[1] .. ':strikes', tonumber(ARGV[2]) * 1000, 0)
return {1, redis.call('GETEX', KEYS[1], 'EX', ARGV[2]), last or false}
"#,
        2,
    ),
];

#[test]
fn user_style_limiter_scripts_answer_like_redis() {
    let mut pair = Pair::start();
    let seed = std::env::var("CONFORMANCE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(11);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut calls = 0;
    for (name, body, nkeys) in SCRIPTS {
        pair.reset();
        let limit = rng.random_range(1..=5).to_string();
        let window_s = rng.random_range(10..=120).to_string();
        let mut now: u64 = 1_700_000_000_000 + rng.random_range(0..1_000_000);
        for call in 0..200 {
            now += match rng.random_range(0..4) {
                0 => 0,
                1 => rng.random_range(1..50),
                2 => rng.random_range(50..5_000),
                _ => rng.random_range(5_000..200_000),
            };
            let user = rng.random_range(0..3);
            let keys: Vec<String> = (0..*nkeys).map(|k| format!("rl:{{u{user}}}:{k}")).collect();
            let now_text = now.to_string();
            let nkeys_text = nkeys.to_string();
            let mut args: Vec<&[u8]> = vec![b"EVAL", body.as_bytes(), nkeys_text.as_bytes()];
            args.extend(keys.iter().map(|k| k.as_bytes()));
            args.extend([limit.as_bytes(), window_s.as_bytes(), now_text.as_bytes()]);
            let (r, m) = pair.both(&args);
            assert_eq!(show(&r), show(&m), "{name}, call {call} (seed {seed})");
            assert!(!r.starts_with(b"-"), "{name} failed on Redis: {}", show(&r));
            assert_eq!(pair.model_server.handle.script_unknown_command(), None, "{name}");
            calls += 1;
        }
    }
    println!("conformance: {calls} calls of {} user-style scripts, {calls} agreed", SCRIPTS.len());
}
