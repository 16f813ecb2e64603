-- GCRA on Redis's own clock, in the style of go-redis's redis_rate: one key holds the
-- theoretical arrival time (TAT) in seconds, a float; its TTL is the time until it is at rest.
-- KEYS[1]: the TAT
-- ARGV[1]: burst   ARGV[2]: requests per period   ARGV[3]: period (seconds)   ARGV[4]: cost
-- returns: {allowed (1/0), remaining, retry after (s; -1 when allowed), reset after (s)}
redis.replicate_commands()
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local interval = period / rate
local tolerance = interval * burst
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local new_tat = tat + interval * cost
local diff = now - (new_tat - tolerance)
if diff < 0 then
  -- Denied: it may come back once the TAT has moved `-diff` seconds closer.
  return {0, 0, tostring(-diff), tostring(tat - now)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call('SET', KEYS[1], string.format('%.6f', new_tat), 'PX', math.ceil(reset_after * 1000))
end
return {1, math.floor(diff / interval), -1, tostring(reset_after)}
