-- name: all_or_nothing
-- Several rules of one request decided in one call, at one clock reading, consuming from all
-- of them or from none. The five algorithm scripts are spliced in below (each placeholder line
-- `--@FILE@` is replaced by that file's text), each as a local function of (KEYS, ARGV, redis),
-- so the arithmetic exists once. The `redis` those bodies see is a shim:
--
-- - TIME is answered from one reading taken on first use: every server-time rule of the call
--   decides at the same instant.
-- - Reads go to Redis and their replies are kept: asking the same again costs no call.
-- - Writes are held back. Every algorithm script reads everything before it writes and never
--   uses a write's reply (the shim refuses a read after a write), so each rule is decided once,
--   with its cost, and its writes are sent only if every enforced rule fits. A rule that fitted
--   in a request that is refused reports its standing as a peek would (cost 0), from the kept
--   replies.
--
-- So a request of n rules costs Redis each rule's own reads and writes once, as n separate
-- scripts would, in one call. A blockable rule runs behind its key's block (guard.lua), the
-- last of its keys: a blocked rule does not fit, and writes nothing.
-- KEYS: every rule's keys, in rule order
-- ARGV[1]: the number of rules   ARGV[2]: 1 to consume, 0 for a dry run (decide, consume nothing)
-- then per rule: its algorithm's key suffix (fw, sw, sl, tb, gcra), 1 for a shadow rule or 0,
--   1 for a blockable rule or 0, its key count, its argument count, and its arguments exactly
--   as its own script takes them (the cost is the last)
-- returns: {allowed, rules, then per rule allowed, remaining, retry_after_ms, reset_after_ms,
--   now_ms, consumed}
local clock
local kept = {}
local READS = {GET = true, MGET = true, HMGET = true, ZCOUNT = true, ZRANGE = true, ZRANGEBYSCORE = true}
local held
local function read(call, how, command, ...)
  if #held > 0 then error('all_or_nothing: a rule read with ' .. command .. ' after it wrote') end
  local id = table.concat({how, command, ...}, '\0')
  local reply = kept[id]
  if reply == nil then
    reply = call(command, ...)
    kept[id] = reply
  end
  return reply
end
local shim = {}
function shim.call(command, ...)
  if command == 'TIME' then
    if not clock then clock = redis.call('TIME') end
    return clock
  end
  if READS[command] then return read(redis.call, 'c', command, ...) end
  held[#held + 1] = {command, ...}
end
function shim.pcall(command, ...)
  if READS[command] then return read(redis.pcall, 'p', command, ...) end
  error('all_or_nothing: a rule wrote with pcall (' .. command .. '), whose reply it would read')
end
local fw = function(KEYS, ARGV, redis)
--@fixed_window.lua@
end
local sw = function(KEYS, ARGV, redis)
--@sliding_window.lua@
end
local sl = function(KEYS, ARGV, redis)
--@sliding_log.lua@
end
local tb = function(KEYS, ARGV, redis)
--@token_bucket.lua@
end
local gcra = function(KEYS, ARGV, redis)
--@gcra.lua@
end
--@guard.lua@
local algorithms = {fw = fw, sw = sw, sl = sl, tb = tb, gcra = gcra}
local n = tonumber(ARGV[1])
local commit = ARGV[2] == '1'
local rules = {}
local a, k = 3, 1
for i = 1, n do
  local algorithm = algorithms[ARGV[a]]
  if not algorithm then return redis.error_reply('unknown algorithm ' .. tostring(ARGV[a])) end
  local r = {run = algorithm, shadow = ARGV[a + 1] == '1', keys = {}, args = {}}
  if ARGV[a + 2] == '1' then
    r.run = function(KEYS, ARGV, redis) return guarded(algorithm, KEYS, ARGV, redis) end
  end
  local nkeys, nargs = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  for j = 1, nkeys do r.keys[j] = KEYS[k + j - 1] end
  for j = 1, nargs do r.args[j] = ARGV[a + 4 + j] end
  k = k + nkeys
  a = a + 5 + nargs
  r.cost = tonumber(r.args[nargs])
  rules[i] = r
end

-- Decide every rule once, with its cost, holding its writes back.
local all_fit = true
for i = 1, n do
  local r = rules[i]
  held = {}
  r.out = r.run(r.keys, r.args, shim)
  r.writes = held
  r.fits = r.out[1] == 1
  if not r.fits and not r.shadow then all_fit = false end
end

-- Write for every fitting rule if every enforced rule fits (and this is not a dry run), else
-- for none. A fitting rule left unwritten reports its standing as a peek does; a rule that
-- does not fit was denied and wrote nothing.
local take = commit and all_fit
local out = {0, n}
for i = 1, n do
  local r = rules[i]
  local o, consumed = r.out, 0
  if r.fits and r.cost > 0 then
    if take then
      for _, w in ipairs(r.writes) do redis.call(unpack(w)) end
      consumed = 1
    else
      local peek_args = {}
      for j = 1, #r.args do peek_args[j] = r.args[j] end
      peek_args[#peek_args] = '0'
      held = {}
      o = r.run(r.keys, peek_args, shim)
    end
  end
  for j = 1, 5 do out[#out + 1] = o[j] end
  out[#out + 1] = consumed
end
if all_fit then out[1] = 1 end
return out
