-- Fixed windows named by the caller ("rate:{id}:{window}", the number computed from the
-- caller's clock), in the style of counters that pin their expiry to the window's end with
-- PEXPIREAT so no counter outlives its window.
-- FLAW: the window's end is computed from the caller's clock but enforced by Redis's. A
-- caller whose clock lags by more than what is left of its window sets a deadline already
-- past: Redis deletes the counter at once, so that caller finds it empty every time and is
-- admitted every time. Correct while all clocks agree.
-- KEYS[1]: this window's counter (named by the caller)
-- ARGV[1]: limit   ARGV[2]: period (ms)   ARGV[3]: window number   ARGV[4]: cost
-- returns: {allowed (1/0), remaining}
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local count = tonumber(redis.call('GET', KEYS[1])) or 0
if count + cost > limit then
  return {0, math.max(0, limit - count)}
end
redis.call('INCRBY', KEYS[1], cost)
if count == 0 then
  redis.call('PEXPIREAT', KEYS[1], (window + 1) * period)
end
return {1, limit - count - cost}
