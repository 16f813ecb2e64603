-- A token bucket in one hash fed the caller's clock in ms, in the style of the HMGET /
-- HSET buckets of many framework throttles, float tokens refilled at `rate` per ms; the
-- admitting branch keeps the stored time from moving back with math.max.
-- FLAW: only the admitting branch uses math.max. The denying branch stores the caller's
-- time as it is, so a denied caller whose clock lags writes an earlier time back, and the
-- next caller with a faster clock refills that stretch a second time. Correct while all
-- clocks agree.
-- KEYS[1]: hash {tokens, ts (ms, caller's clock)}
-- ARGV[1]: rate (tokens per ms)   ARGV[2]: capacity   ARGV[3]: now (ms, caller)   ARGV[4]: cost
-- returns: {allowed (1/0), whole tokens left}
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(bucket[1]) or capacity
local ts = tonumber(bucket[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)

local allowed = 0
if tokens >= cost then
  allowed = 1
  tokens = tokens - cost
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', math.max(ts, now))
else
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
end
local ttl = math.ceil((capacity - tokens) / rate) + math.max(0, ts - now)
redis.call('PEXPIRE', KEYS[1], math.max(1, ttl))
return {allowed, math.floor(tokens)}
