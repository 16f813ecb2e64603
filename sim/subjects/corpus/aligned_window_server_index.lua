-- Fixed windows aligned to multiples of the period, one counter per window named by its
-- index computed from Redis's TIME, in the style of the "rate:{id}:{bucket}" counters;
-- INCRBY first and, as some libraries do, DECRBY back when the request is refused, so the
-- counter holds exactly what was admitted.
-- KEYS[1]: the counters' stem; window i's counter is stem .. ':' .. i
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, retry after (ms), reset after (ms)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / window)
local to_end = (index + 1) * window - now
local key = KEYS[1] .. ':' .. string.format('%d', index)

local count = redis.call('INCRBY', key, cost)
if count == cost then
  redis.call('PEXPIRE', key, to_end)
end
if count > limit then
  redis.call('DECRBY', key, cost)
  return {0, math.max(0, limit - (count - cost)), to_end, to_end}
end
return {1, limit - count, 0, to_end}
