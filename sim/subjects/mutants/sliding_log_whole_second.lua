-- MUTANT of lua/sliding_log.lua: Redis's time read in whole seconds
-- name: sliding_log
-- Sliding log: one sorted-set member per admitted unit, scored by admission time (ms).
-- Members are numbered from a per-key sequence so equal times never collide.
-- KEYS[1]: the log, a sorted set   KEYS[2]: the member sequence counter
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: limit per window   ARGV[3]: window in ms   ARGV[4]: cost (0 = peek)
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  -- BUG: Redis's time in whole seconds
  now = tonumber(t[1]) * 1000
end
local limit = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

-- The member sequence is ours; a value anyone else wrote (text, a number past 2^52, where
-- a double can no longer count by one and the loop below would never end) means neither
-- key can be trusted: both read as absent.
local seq_now = redis.call('GET', KEYS[2])
if seq_now then
  local n = tonumber(seq_now)
  if not (n and n >= 0 and n < 4503599627370496 and n == math.floor(n)) then
    redis.call('DEL', KEYS[1], KEYS[2])
  end
end

if now >= w then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - w))
end
local count = redis.call('ZCARD', KEYS[1])

local function reset_after()
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if newest[2] then return tonumber(newest[2]) + w - now end
  return 0
end

if count + cost <= limit then
  if cost > 0 then
    local seq = redis.call('INCRBY', KEYS[2], cost)
    local score = string.format('%d', now)
    for i = seq - cost + 1, seq do
      redis.call('ZADD', KEYS[1], score, string.format('%d', i))
    end
  end
  local reset = reset_after()
  if cost > 0 then
    redis.call('PEXPIRE', KEYS[1], reset)
    redis.call('PEXPIRE', KEYS[2], reset)
  end
  return {1, limit - count - cost, 0, reset, now}
end

-- The oldest (count + cost - limit) units must leave first; the last of them leaves when
-- now - window reaches its score.
local k = count + cost - limit
local kth = redis.call('ZRANGE', KEYS[1], k - 1, k - 1, 'WITHSCORES')
local retry = tonumber(kth[2]) + w - now
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return {0, remaining, retry, reset_after(), now}
