-- name: guard
-- A block on a key (block.lua writes it): until the instant it ends, every request on the key
-- is refused, whatever its quota says, and writes nothing; then the key decides by its state
-- again, which the block left as it was. Spliced into blockable.lua, batch.lua and
-- all_or_nothing.lua: `guarded(decide, KEYS, ARGV, redis)` runs `decide` (an algorithm file's
-- body as a function of its KEYS, ARGV and the redis it calls) behind the key's block.
--
-- The block is the last of KEYS, after the algorithm's own (which never read it), in the same
-- hash tag: the instant it ends, in ms on the clock the limiter decides by (ARGV[1], the
-- caller's, or Redis's TIME when ARGV[1] is ""). Its TTL only lets Redis forget it. Anything
-- else there (text, NaN, fractions) reads as no block.
--
-- - No block, or one that has ended: `decide` as it is, at the clock reading the block was
--   judged by.
-- - Blocked: `decide` with the request's cost through a redis that drops every write, then
--   {0, 0, retry, reset, now}: retry is when the block has ended and the request alone fits
--   (the later of the two instants), reset when the key is unblocked and at rest (the later of
--   the block's end and the reset a peek reports), now the clock reading `decide` reports.
-- The commands an algorithm reads with (a function, not a table: a table would be made on every
-- call of every script this is spliced into, blocked or not).
local function guard_reads(command)
  return command == 'GET' or command == 'MGET' or command == 'HMGET' or command == 'ZCOUNT'
    or command == 'ZRANGE' or command == 'ZRANGEBYSCORE'
end
local function guarded(decide, KEYS, ARGV, redis)
  local ends = tonumber(redis.call('GET', KEYS[#KEYS]))
  if not ends or ends < 0 or ends >= 4503599627370496 or ends ~= math.floor(ends) then
    return decide(KEYS, ARGV, redis)
  end
  local clock
  local now = tonumber(ARGV[1])
  if not now then
    clock = redis.call('TIME')
    now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  end
  -- What `decide` calls: Redis, but TIME is the reading taken above, and, while blocked,
  -- writes go nowhere (no algorithm uses a write's reply).
  local function through(call, blocked)
    return function(command, ...)
      if command == 'TIME' and clock then return clock end
      if blocked and not guard_reads(command) then return nil end
      return call(command, ...)
    end
  end
  local blocked = now < ends
  local via = {call = through(redis.call, blocked), pcall = through(redis.pcall, blocked)}
  if not blocked then return decide(KEYS, ARGV, via) end
  local out = decide(KEYS, ARGV, via)
  local retry, reset = 0, out[4]
  if out[1] == 0 then retry = out[3] end
  if out[1] == 1 and tonumber(ARGV[#ARGV]) > 0 then
    local peek = {}
    for i = 1, #ARGV do peek[i] = ARGV[i] end
    peek[#peek] = '0'
    reset = decide(KEYS, peek, via)[4]
  end
  return {0, 0, math.max(retry, ends - now), math.max(reset, ends - now), out[5]}
end
