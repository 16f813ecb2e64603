-- A sliding-window counter kept in one hash that rolls its two counters forward, in the
-- style of the "{window, current, previous}" limiters: when a new aligned window begins
-- the current count becomes the previous one (or both clear when a whole window passed
-- in between); the estimate is previous * (w - elapsed) / w + current, in integers.
-- FLAW: the test for "the previous window is the one just before" is off by one at the
-- window edge: it carries the count over when one or two windows have passed (index - win
-- <= 2) instead of exactly one. After an empty window, the count of the window before it
-- is weighted as if it were the previous window's, so requests the estimate allows are
-- denied while that stale share lasts.
-- KEYS[1]: hash {win (index of the current window), cur, prev}
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / w)
local elapsed = now - index * w

local state = redis.call('HMGET', KEYS[1], 'win', 'cur', 'prev')
local win = tonumber(state[1]) or index
local cur = tonumber(state[2]) or 0
local prev = tonumber(state[3]) or 0
if index > win then
  if index - win <= 2 then
    prev = cur
  else
    prev = 0
  end
  cur = 0
  win = index
end

local used = prev * (w - elapsed) + cur * w
local allowed = 0
if used + cost * w <= limit * w then
  allowed = 1
  cur = cur + cost
  used = used + cost * w
end
redis.call('HSET', KEYS[1], 'win', string.format('%d', win), 'cur', cur, 'prev', prev)
-- Housekeeping: kept a while after the last request (its counts matter for at most two
-- windows).
redis.call('PEXPIRE', KEYS[1], 3 * w)
return {allowed, math.max(0, math.floor((limit * w - used) / w))}
