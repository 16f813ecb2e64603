-- name: block
-- Blocks one key for a while: until the instant the block ends, every decision of a blockable
-- limiter on the key is a refusal (guard.lua), whatever the key's state; the state is left as
-- it is. A block replaces the key's earlier one, and a duration of 0 lifts it.
-- KEYS[1]: the block (the limiter's key for it: its state's key, or a window algorithm's key
--          stem, and ':blk')
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: how long, in ms (0 lifts the block)
-- returns: the instant the block ends, in ms on the clock of ARGV[1] (0 when lifted)
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local duration = tonumber(ARGV[2])
if duration == 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
local ends = now + duration
redis.call('SET', KEYS[1], string.format('%d', ends), 'PX', duration)
return ends
