-- Fixed windows named by the caller: the key carries the window number floor(now / period)
-- that the calling library computed from its own clock, as "rate:{id}:{window}" counters
-- do. The counter is kept two periods on Redis's clock, long after its window ends.
-- KEYS[1]: this window's counter (named by the caller)
-- ARGV[1]: limit   ARGV[2]: period (ms)   ARGV[3]: now (ms, caller)   ARGV[4]: window number
-- ARGV[5]: cost
-- returns: {allowed (1/0), remaining, retry after (ms)}
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])

local count = tonumber(redis.call('GET', KEYS[1])) or 0
if count + cost > limit then
  return {0, math.max(0, limit - count), (window + 1) * period - now}
end
redis.call('INCRBY', KEYS[1], cost)
if count == 0 then
  redis.call('PEXPIRE', KEYS[1], 2 * period)
end
return {1, limit - count - cost, 0}
