-- In the style of microsecond-precise token buckets that read Redis's TIME (so callers'
-- clocks never enter) and keep their state in one hash, in integer units: one token is
-- period_us units and `limit` units accrue per microsecond.
-- KEYS[1]: hash {units, ts (µs, Redis's clock)}
-- ARGV[1]: limit   ARGV[2]: period (ms)   ARGV[3]: burst   ARGV[4]: cost
-- returns: {allowed (1/0), whole tokens left, retry after (ms), reset after (ms)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local period_us = tonumber(ARGV[2]) * 1000
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local cap = burst * period_us
local need = cost * period_us
local state = redis.call('HMGET', KEYS[1], 'units', 'ts')
local units = tonumber(state[1]) or cap
local ts = tonumber(state[2]) or now
if now > ts then
  units = math.min(cap, units + (now - ts) * limit)
  ts = now
end
local ahead = ts - now  -- only if Redis's clock stepped back

local function ms_up(us) return math.ceil(us / 1000) end
if units < need then
  return {0, math.floor(units / period_us), ms_up(ahead + math.ceil((need - units) / limit)),
          ms_up(ahead + math.ceil((cap - units) / limit))}
end
units = units - need
local reset = ms_up(ahead + math.ceil((cap - units) / limit))
redis.call('HSET', KEYS[1], 'units', string.format('%d', units), 'ts', string.format('%d', ts))
redis.call('PEXPIRE', KEYS[1], reset)
return {1, math.floor(units / period_us), 0, reset}
