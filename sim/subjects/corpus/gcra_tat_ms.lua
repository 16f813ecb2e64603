-- GCRA on Redis's TIME with the TAT in integer milliseconds, in the style of the many
-- GCRA ports that keep "tat" as epoch ms: new_tat = max(tat, now) + cost * interval,
-- admitted while new_tat - now stays within the tolerance burst * interval.
-- KEYS[1]: the TAT (epoch ms)
-- ARGV[1]: emission interval (ms)   ARGV[2]: burst   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, retry after (ms), reset after (ms)}
redis.replicate_commands()
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tolerance = burst * interval

local tat = tonumber(redis.call('GET', KEYS[1])) or now
tat = math.max(tat, now)
local new_tat = tat + cost * interval
local allow_at = new_tat - tolerance
if now < allow_at then
  -- Denied: nothing stored changes; it fits once now reaches allow_at.
  return {0, math.max(0, math.floor((now + tolerance - tat) / interval)), allow_at - now, tat - now}
end
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', new_tat - now)
return {1, math.floor((now - allow_at) / interval), 0, new_tat - now}
