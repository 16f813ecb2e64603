-- In the style of the hash-based token buckets many web frameworks' Redis throttles use
-- (HMGET the state, refill by the caller's clock, HSET it back), kept in integer units: one
-- token is `period` units and `limit` units accrue per ms, so no refill is rounded away.
-- KEYS[1]: hash {units, ts (ms, caller's clock)}
-- ARGV[1]: limit   ARGV[2]: period (ms)   ARGV[3]: burst   ARGV[4]: now (ms, caller)
-- ARGV[5]: cost
-- returns: {allowed (1/0), whole tokens left, retry after (ms; 0 when allowed)}
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])

local cap = burst * period
local need = cost * period
local state = redis.call('HMGET', KEYS[1], 'units', 'ts')
local units = tonumber(state[1])
local ts = tonumber(state[2])
if units == nil or ts == nil then
  units = cap
  ts = now
end

-- A caller whose clock reads earlier than the stored time refills nothing and moves
-- nothing back.
if now > ts then
  units = math.min(cap, units + (now - ts) * limit)
  ts = now
end
local ahead = ts - now

if units < need then
  -- Nothing written: the refill is recomputed from the stored time next call.
  return {0, math.floor(units / period), ahead + math.ceil((need - units) / limit)}
end
units = units - need
redis.call('HSET', KEYS[1], 'units', units, 'ts', ts)
-- Kept until the bucket is full again; after that a missing key reads as full.
redis.call('PEXPIRE', KEYS[1], ahead + math.ceil((cap - units) / limit))
return {1, math.floor(units / period), 0}
