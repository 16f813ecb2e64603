-- GCRA on Redis's TIME with every identity's TAT (µs) as its score in one sorted set per
-- rule, in the style of limiters that keep one structure per rule: ZADD ... GT (6.2+) so a
-- TAT only ever moves forward, ZREMRANGEBYSCORE drops identities at rest, and PEXPIRE ...
-- NX then PEXPIRE ... GT (7.0) keep the set alive exactly as long as its furthest TAT (GT
-- alone never sets an expiry on a key that has none).
-- KEYS[1]: the rule's sorted set (member: identity, score: its TAT in µs)
-- ARGV[1]: identity   ARGV[2]: emission interval (µs)   ARGV[3]: burst   ARGV[4]: cost
-- returns: {allowed (1/0), remaining, retry after (µs), reset after (µs)}
redis.replicate_commands()
local id = ARGV[1]
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tau = burst * interval

-- A TAT at or before now is at rest: the same as no entry.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local tat = tonumber(redis.call('ZSCORE', KEYS[1], id)) or now
local new_tat = math.max(tat, now) + cost * interval
if new_tat - now > tau then
  local remaining = math.max(0, math.floor((now + tau - math.max(tat, now)) / interval))
  return {0, remaining, new_tat - tau - now, math.max(tat, now) - now}
end
redis.call('ZADD', KEYS[1], 'GT', new_tat, id)
local ttl = math.ceil((new_tat - now) / 1000)
redis.call('PEXPIRE', KEYS[1], ttl, 'NX')
redis.call('PEXPIRE', KEYS[1], ttl, 'GT')
return {1, math.floor((now + tau - new_tat) / interval), 0, new_tat - now}
