-- MUTANT of lua/sliding_log.lua: Redis's time read in whole seconds
-- name: sliding_log
-- Sliding log: one sorted-set member per admitted unit, scored by admission time (ms).
-- KEYS[1]: the log, a sorted set
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: limit per window   ARGV[3]: window in ms   ARGV[4]: cost (0 = peek)
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
-- Every read comes before every write, and no write's reply is used: the all-or-nothing
-- script runs this body once per rule and writes only if every rule fits. Entries at or
-- before the log's time - window are counted out by every read (ZCOUNT's exclusive lower bound) and
-- trimmed by the next admission; a denial writes nothing.
-- The log decides by the latest reading it has seen: a reading behind its newest entry (a
-- caller whose clock is behind another's, or Redis's clock stepped back) is taken as that
-- entry's time. So no caller's clock puts entries out of reach that a later reading still
-- counts, and whatever the callers' clocks, every window of the log's own time holds at most
-- the limit. The waits it answers (Retry-After, the reset, the TTL) are counted from the
-- caller's own reading, which is what its own clock and Redis's run on from.
-- Its key expires on Redis's clock when the newest entry leaves the writer's window: fed the
-- callers' clocks, a caller behind the writer may find it gone while its own reading would
-- still count the entries (the verifier names that a break beyond the clock trust).
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  -- BUG: Redis's time in whole seconds
  now = tonumber(t[1]) * 1000
end
local limit = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local newest_at = tonumber(newest[2])
local at = now
if newest_at and newest_at > now then at = newest_at end
local live = '(' .. string.format('%d', at - w)
local count = redis.call('ZCOUNT', KEYS[1], live, '+inf')
if newest_at and newest_at <= at - w then newest_at = nil end

if count + cost <= limit then
  if cost > 0 then
    -- A member is "score:n". Names at one score must differ, and no sequence key is kept:
    -- n counts on from the entries scored at its score or later. A trim takes whole scores from the
    -- lowest up, so while the entries already at this score remain, so do all the later
    -- ones counted with them, and the count only grows: each new name is past the old ones.
    local after = 0
    if newest_at and newest_at >= at then after = redis.call('ZCOUNT', KEYS[1], at, '+inf') end
    local score = string.format('%d', at)
    newest_at = at
    if newest[2] and at >= w then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', at - w)) end
    -- One ZADD per 1,000 members: unpack must stay within Lua's stack.
    for first = 1, cost, 1000 do
      local add = {}
      for i = first, math.min(cost, first + 999) do
        add[#add + 1] = score
        add[#add + 1] = score .. ':' .. string.format('%d', after + i)
      end
      redis.call('ZADD', KEYS[1], unpack(add))
    end
    redis.call('PEXPIRE', KEYS[1], newest_at + w - now)
  end
  local reset = 0
  if newest_at then reset = newest_at + w - now end
  return {1, limit - count - cost, 0, reset, now}
end

-- The oldest (count + cost - limit) live units must leave first; the last of them leaves
-- when the caller's own clock reaches its score plus the window (counted from its own
-- reading, a wait that takes it there whatever other callers do).
local k = count + cost - limit
local kth = redis.call('ZRANGEBYSCORE', KEYS[1], live, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
local retry = tonumber(kth[2]) + w - now
local remaining = limit - count
if remaining < 0 then remaining = 0 end
local reset = 0
if newest_at then reset = newest_at + w - now end
return {0, remaining, retry, reset, now}
