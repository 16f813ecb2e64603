-- A sliding log in a sorted set timed by the caller's clock, in the style of the most common
-- public sorted-set limiters: drop what the caller's own reading puts out of the window,
-- count what is left, add the request, and let the key expire one window after it.
-- FLAW: every caller trims by its own reading. A caller whose clock runs ahead deletes
-- entries the others' readings still count, and they admit again. Correct while all clocks
-- agree.
-- KEYS[1]: the log (sorted set, scored by the caller's ms)
-- ARGV[1]: now (ms, caller)   ARGV[2]: window (ms)   ARGV[3]: limit   ARGV[4]: request id
-- returns: 1 allowed, 0 denied
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return 1
