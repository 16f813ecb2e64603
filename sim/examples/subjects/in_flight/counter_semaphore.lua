-- The counter many libraries use for concurrency: INCR to acquire, DECR back when over the
-- limit. No lease and no token: ARGV[2] says whether to acquire or release.
-- KEYS[1]: the count   ARGV[1]: the limit   ARGV[2]: "acquire" or "release"
if ARGV[2] == 'release' then
  return redis.call('DECR', KEYS[1])
end
local n = redis.call('INCR', KEYS[1])
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
