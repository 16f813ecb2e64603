-- name: all_or_nothing
-- Several rules of one request decided in one call, at one clock reading, consuming from all
-- of them or from none. The five algorithm scripts are spliced in below (each placeholder line
-- `--@FILE@` is replaced by that file's text), each as a local function of (KEYS, ARGV, redis),
-- so the arithmetic exists once. The `redis` those bodies see is a shim:
--
-- - TIME is answered from one reading taken on first use: every server-time rule of the call
--   decides at the same instant.
-- - Reads go to Redis.
-- - Writes are held back. Every algorithm script reads everything before it writes and never
--   uses a write's reply (the shim refuses a read after a write), so each rule is decided once,
--   with its cost, and its writes are sent only if every enforced rule fits. A rule that fitted
--   in a request that is refused reports its standing as a peek would (cost 0), read again:
--   nothing was written in between, so it reads what it read the first time.
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
-- What this costs Redis, and why it is written as it is: in Redis's Lua a table costs about a
-- fifth of what a `GET` run from the script costs, and so does a call of a C function
-- (`tonumber` is a `strtod`); the bytecode between them is cheap. So the script makes, per
-- rule, only the KEYS and ARGV its algorithm is called with and the record of the rule, and
-- none per read; reads its counts as single digits; and compares the cost with "0" as text.
--@guard.lua@
local clock
local held -- the writes of the rule being decided, in order; nil while it has written none
local shim = {
  call = function(command, ...)
    if command == 'TIME' then
      if not clock then clock = redis.call('TIME') end
      return clock
    end
    if guard_reads(command) then
      if held then error('all_or_nothing: a rule read with ' .. command .. ' after it wrote') end
      return redis.call(command, ...)
    end
    if held then held[#held + 1] = {command, ...} else held = {{command, ...}} end
  end,
  pcall = function(command, ...)
    if not guard_reads(command) then
      error('all_or_nothing: a rule wrote with pcall (' .. command .. '), whose reply it would read')
    end
    if held then error('all_or_nothing: a rule read with ' .. command .. ' after it wrote') end
    return redis.pcall(command, ...)
  end,
}
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
local algorithms = {fw = fw, sw = sw, sl = sl, tb = tb, gcra = gcra}
-- A rule's key and argument counts, one digit each (an algorithm takes at most 2 keys and 5
-- arguments).
local function digit(s)
  local d = s and #s == 1 and string.byte(s) - 48
  if not d or d < 0 or d > 9 then error('all_or_nothing: a count is not one digit: ' .. tostring(s)) end
  return d
end
local n = tonumber(ARGV[1])
local commit = ARGV[2] == '1'

-- Decide every rule once, with its cost, holding its writes back. A rule is
-- {decide, keys, args, reply, writes}.
local rules = {}
local all_fit = true
local a, k = 3, 1
for i = 1, n do
  local decide = algorithms[ARGV[a]]
  if not decide then return redis.error_reply('unknown algorithm ' .. tostring(ARGV[a])) end
  local shadow = ARGV[a + 1] == '1'
  if ARGV[a + 2] == '1' then
    local algorithm = decide
    decide = function(KEYS, ARGV, redis) return guarded(algorithm, KEYS, ARGV, redis) end
  end
  local nkeys, nargs = digit(ARGV[a + 3]), digit(ARGV[a + 4])
  local keys, args = {}, {}
  for j = 1, nkeys do keys[j] = KEYS[k + j - 1] end
  for j = 1, nargs do args[j] = ARGV[a + 4 + j] end
  k = k + nkeys
  a = a + 5 + nargs
  held = nil
  local reply = decide(keys, args, shim)
  if reply[1] ~= 1 and not shadow then all_fit = false end
  rules[i] = {decide, keys, args, reply, held}
end

-- Write for every fitting rule if every enforced rule fits (and this is not a dry run), else
-- for none. A fitting rule left unwritten reports its standing as a peek does; a rule that
-- does not fit was denied and wrote nothing. The cost is its script's last argument, "0" for
-- a peek (the library writes it as digits, so "0" is the only way to write none).
local take = commit and all_fit
local out = {0, n}
for i = 1, n do
  local r = rules[i]
  local reply, consumed = r[4], 0
  local args = r[3]
  if reply[1] == 1 and args[#args] ~= '0' then
    if take then
      local writes = r[5]
      if writes then
        for w = 1, #writes do redis.call(unpack(writes[w])) end
      end
      consumed = 1
    else
      local peek = {}
      for j = 1, #args do peek[j] = args[j] end
      peek[#peek] = '0'
      held = nil
      reply = r[1](r[2], peek, shim)
    end
  end
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] =
    reply[1], reply[2], reply[3], reply[4], reply[5], consumed
end
if all_fit then out[1] = 1 end
return out
