-- A window from each key's first request in the idiom of the INCR documentation's rate
-- limiter pattern: "current = INCR(key); if current == 1 then EXPIRE(key, ...)", here with
-- INCRBY for weighted requests.
-- FLAW: the expiry is set only when the count is exactly 1. A window whose first request
-- costs 2 or more jumps past 1, so its counter never gets a TTL: the key is immortal, and
-- once it reaches the limit every later request is denied forever (lost capacity).
-- KEYS[1]: the counter
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining}
local limit = tonumber(ARGV[1])
local current = redis.call('INCRBY', KEYS[1], ARGV[3])
if current == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if current > limit then
  return {0, 0}
end
return {1, limit - current}
