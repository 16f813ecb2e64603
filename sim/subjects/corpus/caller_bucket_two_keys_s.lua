-- In the style of the widely copied two-key request_rate_limiter script (Spring Cloud
-- Gateway's shape): one key holds the tokens, one the time of the last refill, the caller
-- sends its clock in whole seconds; here the stored time only ever moves forward.
-- KEYS[1]: tokens   KEYS[2]: last refill (s, caller's clock)
-- ARGV[1]: rate (tokens per s)   ARGV[2]: capacity   ARGV[3]: now (whole s, caller)
-- ARGV[4]: requested
-- returns: {allowed (1/0), tokens left}
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])

local tokens = tonumber(redis.call('GET', KEYS[1]))
local last = tonumber(redis.call('GET', KEYS[2]))
if tokens == nil or last == nil then
  tokens = capacity
  last = now
end

local elapsed = math.max(0, now - last)
local filled = math.min(capacity, tokens + elapsed * rate)
local allowed = filled >= requested
local left = filled
if allowed then
  left = filled - requested
end
local stamp = math.max(last, now)
-- Until the bucket is full again by the stored time, plus one second for the caller's
-- rounding to whole seconds.
local ttl = (stamp - now) + math.ceil((capacity - left) / rate) + 1
redis.call('SET', KEYS[1], left, 'EX', ttl)
redis.call('SET', KEYS[2], stamp, 'EX', ttl)
return {allowed and 1 or 0, math.floor(left)}
