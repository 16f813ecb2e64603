-- A token bucket on Redis's TIME in integer units (one token = period units, `limit` units
-- per ms), in the style of the integer-exact buckets of many Go and Java ports; state in
-- one hash.
-- FLAW: the test is "units > need" where "units >= need" belongs: a request that would
-- take the bucket to exactly zero is denied. The burst admits only burst - 1 at once, and
-- a client asking exactly when a token has accrued is refused (lost capacity).
-- KEYS[1]: hash {units, ts (ms, Redis's clock)}
-- ARGV[1]: limit   ARGV[2]: period (ms)   ARGV[3]: burst   ARGV[4]: cost
-- returns: {allowed (1/0), whole tokens left}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local cap = burst * period
local need = cost * period
local state = redis.call('HMGET', KEYS[1], 'units', 'ts')
local units = tonumber(state[1]) or cap
local ts = tonumber(state[2]) or now
if now > ts then
  units = math.min(cap, units + (now - ts) * limit)
  ts = now
end
if units > need then
  units = units - need
  redis.call('HSET', KEYS[1], 'units', units, 'ts', ts)
  redis.call('PEXPIRE', KEYS[1], (ts - now) + math.ceil((cap - units) / limit))
  return {1, math.floor(units / period)}
end
return {0, math.floor(units / period)}
