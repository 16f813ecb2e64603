-- In the style of the classic two-key request_rate_limiter script (tokens in one key, last
-- refill in another), moved onto Redis's TIME instead of the caller's clock; tokens are a
-- float refilled at `rate` per ms.
-- KEYS[1]: tokens   KEYS[2]: last refill (ms, Redis's clock, fractional)
-- ARGV[1]: rate (tokens per ms)   ARGV[2]: capacity   ARGV[3]: requested
-- returns: {allowed (1/0), whole tokens left}
redis.replicate_commands()
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local requested = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

local tokens = tonumber(redis.call('GET', KEYS[1]))
local last = tonumber(redis.call('GET', KEYS[2]))
if tokens == nil or last == nil then
  tokens = capacity
  last = now
end
local filled = math.min(capacity, tokens + math.max(0, now - last) * rate)
local allowed = filled >= requested
if allowed then
  filled = filled - requested
end
-- Both keys live until the bucket is full again; a full bucket needs no state at all.
local ttl = math.ceil((capacity - filled) / rate)
if ttl > 0 then
  redis.call('SET', KEYS[1], filled, 'PX', ttl)
  redis.call('SET', KEYS[2], math.max(last, now), 'PX', ttl)
else
  redis.call('DEL', KEYS[1], KEYS[2])
end
return {allowed and 1 or 0, math.floor(filled)}
