-- A window from each key's first request, in the style of express-rate-limit's Redis store:
-- INCRBY the hit counter, PEXPIRE it on its first hit, and let the caller compare the hits
-- with the limit. Denied hits are counted too (INCRBY comes first).
-- KEYS[1]: the hit counter
-- ARGV[1]: window (ms)   ARGV[2]: cost
-- returns: {hits in this window, ms until the window is over}
local cost = tonumber(ARGV[2])
local hits = redis.call('INCRBY', KEYS[1], cost)
if hits == cost then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
-- Redis still holds a key at its expiry millisecond, so the window is over one ms after
-- what PTTL says.
return {hits, redis.call('PTTL', KEYS[1]) + 1}
