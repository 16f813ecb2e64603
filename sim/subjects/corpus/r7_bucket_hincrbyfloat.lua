-- A token bucket on Redis's TIME whose token count is only ever moved with HINCRBYFLOAT
-- (the refill added, the cost taken), in the style of buckets that never rewrite the
-- count; the stored time only moves forward, and the key lives until the bucket is full.
-- KEYS[1]: hash {tokens (float, as HINCRBYFLOAT prints it), ts (ms, Redis's clock)}
-- ARGV[1]: rate (tokens per ms)   ARGV[2]: capacity   ARGV[3]: cost
-- returns: {allowed (1/0), tokens left (text)}
redis.replicate_commands()
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  redis.call('HSET', KEYS[1], 'tokens', capacity, 'ts', now)
  tokens = capacity
  ts = now
end
if now > ts then
  local refill = math.min(capacity - tokens, (now - ts) * rate)
  if refill > 0 then
    tokens = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], 'tokens', refill))
  end
  redis.call('HSET', KEYS[1], 'ts', now)
end
local allowed = 0
if tokens >= cost then
  allowed = 1
  tokens = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], 'tokens', -cost))
end
local ttl = math.ceil((capacity - tokens) / rate)
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('DEL', KEYS[1])
end
return {allowed, tostring(tokens)}
