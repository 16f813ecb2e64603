-- GCRA on Redis's TIME with the theoretical arrival time (TAT) in integer microseconds,
-- replying in the shape of redis-cell's CL.THROTTLE: limited first (0 = allowed), then the
-- limit, the remaining, retry-after and reset-after in whole seconds rounded up (-1 when
-- there is nothing to wait for).
-- KEYS[1]: the TAT (µs)
-- ARGV[1]: burst   ARGV[2]: emission interval (µs)   ARGV[3]: quantity
-- returns: {limited (0/1), burst, remaining, retry after (s, -1 if allowed), reset after (s)}
redis.replicate_commands()
local burst = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local quantity = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tau = burst * interval

local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then
  tat = now
end
local new_tat = tat + quantity * interval
local allow_at = new_tat - tau

local function secs_up(us) return math.ceil(us / 1000000) end
if allow_at > now then
  local remaining = 0
  if now + tau > tat then remaining = math.floor((now + tau - tat) / interval) end
  return {1, burst, remaining, secs_up(allow_at - now), secs_up(tat - now)}
end
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return {0, burst, math.floor((now + tau - new_tat) / interval), -1, secs_up(new_tat - now)}
