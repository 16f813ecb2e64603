-- A window kept as {start, count} in a hash and timed by the caller's clock, in the style
-- of the "window start + counter" limiters that open a new window whenever a request
-- falls outside the current one.
-- FLAW: "outside" includes before the start: a caller whose clock reads earlier than the
-- stored start resets the window too (start = its now, count = 0). Two callers whose
-- clocks differ by more than the window reset it for each other on every request, so
-- while they alternate every request is admitted. Correct while all clocks agree.
-- KEYS[1]: hash {start (ms, caller's clock), count}
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: now (ms, caller)   ARGV[4]: cost
-- returns: {allowed (1/0), remaining}
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local state = redis.call('HMGET', KEYS[1], 'start', 'count')
local start = tonumber(state[1])
local count = tonumber(state[2]) or 0
if start == nil or now - start >= window or now < start then
  start = now
  count = 0
end
if count + cost > limit then
  return {0, math.max(0, limit - count)}
end
count = count + cost
redis.call('HSET', KEYS[1], 'start', start, 'count', count)
-- Housekeeping only: the window itself ends by the callers' clocks.
redis.call('PEXPIRE', KEYS[1], 2 * window)
return {1, limit - count}
