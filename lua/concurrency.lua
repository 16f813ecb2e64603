-- name: concurrency
-- Concurrency: at most `limit` permits held at once, each by one holder until it releases the
-- permit or its lease ends.
-- KEYS[1]: the holders, a sorted set: member = a holder's token, score = the end of its lease (ms)
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: limit (permits)   ARGV[3]: lease in ms   ARGV[4]: holder's token
-- ARGV[5]: what to do: "acquire", "renew", "release" or "peek"
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
--   acquire: allowed = the holder holds a permit (a new one, or the one it held, its lease
--     renewed: a retried acquire takes no second permit); remaining = permits still free.
--   renew: allowed = the holder still held its permit, whose lease now ends at now + lease;
--     0 = its lease had ended (the permit may be someone else's: the work should stop).
--   release: allowed = the holder held a permit, now freed; 0 = it held none (a second release,
--     or a lease that had ended): nothing else changes, so no count ever goes below zero.
--   peek: allowed = an acquire would take a permit now; writes nothing.
--   retry_after_ms: for a refused acquire, when the earliest lease ends: the longest the
--     wait can be, since a release frees a permit sooner; 0 otherwise.
--   reset_after_ms: when the last lease ends (the key's TTL); 0 when no permit is held.
-- A lease is over once the clock reaches its end: every read counts only the holders whose
-- leases end after now, and every write first removes the others. A holder that died (a
-- crashed worker, a killed connection) so holds its permit for at most one lease. With callers'
-- clocks, a caller whose clock runs ahead ends the others' leases early: Redis's TIME is the
-- clock a concurrency limit should run on.
-- Tokens are the library's, one per acquire, never a client's: a token a client could choose
-- could release, or renew, someone else's permit.
local now = tonumber(ARGV[1])
-- now as Redis reads a score: the caller's own digits, or Redis's TIME written out once.
local now_arg = ARGV[1]
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  now_arg = string.format('%d', now)
end
local limit = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local holder = ARGV[4]
local op = ARGV[5]
if op ~= 'acquire' and op ~= 'renew' and op ~= 'release' and op ~= 'peek' then
  return redis.error_reply('ERR concurrency: unknown operation ' .. tostring(op))
end
-- Every number sent to Redis is written as an integer first: redis.call would write a Lua
-- number in `%.17g`, exact below 2^53 but several times dearer than `%d`.

-- Every write first drops the leases that have ended: every member left is a live holder. An
-- empty sorted set is no key at all, so a key without holders (most keys, most of the time)
-- has nothing to trim, and ZREMRANGEBYSCORE's count of what it dropped saves a second count.
local count
if op ~= 'peek' then
  count = redis.call('ZCARD', KEYS[1])
  if count > 0 then
    count = count - redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_arg)
  end
end

-- The two commonest writes are done before the helpers below are built (Lua makes each afresh
-- on every call): a key's first holder, whose lease is the key's TTL without a read, and the
-- release of its last, which drops the key.
if op == 'acquire' and count == 0 and limit > 0 then
  redis.call('ZADD', KEYS[1], string.format('%d', now + lease), holder)
  redis.call('PEXPIRE', KEYS[1], string.format('%d', lease))
  return {1, limit - 1, 0, lease, now}
end
-- ZREM answers whether the holder was there, and so held a live permit.
local released = op == 'release' and count > 0 and redis.call('ZREM', KEYS[1], holder) == 1
if released then
  count = count - 1
  if count == 0 then return {1, limit, 0, 0, now} end
end

-- When the last live lease ends, as a wait from now: the key's TTL (0 when none is live).
local function reset_after()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local at = tonumber(last[2])
  if at and at > now then return at - now end
  return 0
end

-- When the earliest live lease ends, as a wait from now (0 when none is live).
local function first_end()
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_arg, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local at = tonumber(first[2])
  if at then return at - now end
  return 0
end

-- After a write: the key lives as long as its last lease.
local function settle()
  local reset = reset_after()
  if reset > 0 then redis.call('PEXPIRE', KEYS[1], string.format('%d', reset)) end
  return reset
end

-- A reply that wrote nothing but the trim, which cannot end the last live lease: the TTL stands.
local function unchanged()
  local reset = 0
  if count > 0 then reset = reset_after() end
  return {0, limit - math.min(count, limit), 0, reset, now}
end

if op == 'peek' then
  count = redis.call('ZCOUNT', KEYS[1], '(' .. now_arg, '+inf')
  if count < limit then return {1, limit - count, 0, reset_after(), now} end
  return {0, 0, first_end(), reset_after(), now}
end

if op == 'release' then
  if not released then return unchanged() end
  -- Holders are left: the key's TTL follows the last of their leases.
  return {1, limit - math.min(count, limit), 0, settle(), now}
end

local until_ms = string.format('%d', now + lease)
local held
if op == 'acquire' and count < limit then
  -- A new holder takes a permit; NX leaves one already there (a holder whose first reply was
  -- lost, retrying) as it was, for the renewal below.
  if redis.call('ZADD', KEYS[1], 'NX', until_ms, holder) == 1 then
    return {1, limit - count - 1, 0, settle(), now}
  end
  held = true
else
  held = count > 0 and redis.call('ZSCORE', KEYS[1], holder)
end
-- A renewal, or an acquire retried by a holder: its own permit, its lease renewed (a retried
-- acquire takes no second permit).
if held then
  redis.call('ZADD', KEYS[1], 'XX', until_ms, holder)
  return {1, limit - math.min(count, limit), 0, settle(), now}
end
if op == 'renew' then return unchanged() end
return {0, 0, first_end(), reset_after(), now}
