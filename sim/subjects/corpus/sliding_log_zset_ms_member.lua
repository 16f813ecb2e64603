-- A sliding log in a sorted set, in the style of the ZREMRANGEBYSCORE / ZCARD / ZADD
-- recipes that use the timestamp as both score and member ("ZADD key now now").
-- FLAW: the member is Redis's time in whole milliseconds. Two requests in the same
-- millisecond write the same member, so ZADD only updates it: the log holds one entry for
-- both, ZCARD under-counts, and a burst within one millisecond is admitted without limit.
-- KEYS[1]: the log
-- ARGV[1]: limit   ARGV[2]: window (ms)
-- returns: {allowed (1/0), remaining}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  redis.call('ZADD', KEYS[1], now, now)
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, limit - count - 1}
end
return {0, 0}
