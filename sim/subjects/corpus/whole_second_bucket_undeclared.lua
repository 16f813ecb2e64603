-- A token bucket on Redis's TIME that reads only its seconds (redis.call('TIME')[1]), as
-- the two-key request_rate_limiter scripts do when the caller sends no time: tokens and
-- last refill (whole seconds) in two keys, `rate` tokens added per elapsed second.
-- FLAW: the script is whole_second_bucket_declared.lua's, but this subject file does not
-- declare that it keeps time in whole seconds (no resolution_ms). A burst at the last ms
-- of one second and the refill at the first ms of the next admit capacity + rate within a
-- millisecond, and within a second it denies what a smooth bucket has already refilled.
-- KEYS[1]: tokens   KEYS[2]: last refill (s, Redis's clock)
-- ARGV[1]: rate (tokens per s)   ARGV[2]: capacity   ARGV[3]: requested
-- returns: {allowed (1/0), tokens left, retry after (s)}
redis.replicate_commands()
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local requested = tonumber(ARGV[3])
local now = tonumber(redis.call('TIME')[1])

local tokens = tonumber(redis.call('GET', KEYS[1]))
local last = tonumber(redis.call('GET', KEYS[2]))
if tokens == nil or last == nil then
  tokens = capacity
  last = now
end
local filled = math.min(capacity, tokens + math.max(0, now - last) * rate)
if filled < requested then
  -- Nothing written; every elapsed second is still counted from `last` next time.
  return {0, filled, math.ceil((requested - filled) / rate)}
end
local left = filled - requested
local stamp = math.max(last, now)
local ttl = (stamp - now) + math.ceil((capacity - left) / rate) + 1
redis.call('SET', KEYS[1], left, 'EX', ttl)
redis.call('SET', KEYS[2], stamp, 'EX', ttl)
return {1, left, 0}
