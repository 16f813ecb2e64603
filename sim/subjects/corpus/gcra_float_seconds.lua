-- GCRA on Redis's TIME with the TAT in float seconds, in the style of go-redis/redis_rate:
-- emission interval = period / rate, tolerance = interval * burst, time counted from a
-- recent epoch so the float keeps sub-microsecond precision; the reply gives the number
-- allowed (0 or the cost) and Retry-After / Reset-After in seconds.
-- KEYS[1]: the TAT (s since 2017-01-01, float)
-- ARGV[1]: burst   ARGV[2]: rate (per period)   ARGV[3]: period (s)   ARGV[4]: cost
-- returns: {allowed (0 or cost), remaining, retry after (s, -1 if allowed), reset after (s)}
redis.replicate_commands()
local jan_1_2017 = 1483228800
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local t = redis.call('TIME')
local now = (tonumber(t[1]) - jan_1_2017) + tonumber(t[2]) / 1000000
local interval = period / rate
local increment = interval * cost
local tolerance = interval * burst

local tat = tonumber(redis.call('GET', KEYS[1])) or now
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - tolerance
local diff = now - allow_at
if diff < 0 then
  return {0, 0, tostring(-diff), tostring(tat - now)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call('SET', KEYS[1], new_tat, 'EX', math.ceil(reset_after))
end
return {cost, math.floor(diff / interval), -1, tostring(reset_after)}
