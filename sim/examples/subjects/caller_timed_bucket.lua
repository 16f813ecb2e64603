-- A token bucket in the style of many web frameworks' Redis limiters: the caller sends its
-- own clock; the bucket keeps its tokens and the time they were counted, each with a TTL of
-- twice the time it takes to fill.
-- KEYS[1]: tokens   KEYS[2]: when they were counted (ms)
-- ARGV[1]: refill rate (tokens per second)   ARGV[2]: capacity   ARGV[3]: now (ms)
-- ARGV[4]: tokens requested
-- returns: {allowed (1/0), whole tokens left}
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])
local ttl = math.ceil(capacity / rate * 2)

local tokens = tonumber(redis.call('GET', KEYS[1])) or capacity
local last = tonumber(redis.call('GET', KEYS[2])) or now
-- A caller whose clock lags neither refills nor moves the time back.
local elapsed = math.max(0, now - last)
local filled = math.min(capacity, tokens + elapsed * rate / 1000)
local allowed = filled >= requested
if allowed then
  filled = filled - requested
end
redis.call('SET', KEYS[1], filled, 'EX', ttl)
redis.call('SET', KEYS[2], math.max(last, now), 'EX', ttl)
return {allowed and 1 or 0, math.floor(filled)}
