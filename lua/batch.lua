-- name: batch
-- Many requests of one algorithm, decided in order in one call (limiter's batching mode). The
-- algorithm's own script is spliced in below as the function `decide` (the placeholder line
-- is replaced by its text), and runs once per request with that request's KEYS and ARGV,
-- exactly as that request's own EVALSHA would have: the same reads, the same writes, the same
-- reply, one request after the other. For a blockable limiter each runs behind its key's
-- block (guard.lua), as blockable.lua runs it alone: its keys are the algorithm's and then
-- its block. Batching changes no decision, only how
-- many calls carry them.
-- A request whose keys hold something the algorithm cannot read (WRONGTYPE) fails alone: its
-- slot in the reply is the error's text, and the requests around it are decided as usual.
-- KEYS: every request's keys, one request after the other (ARGV[2] keys each)
-- ARGV[1]: the number of requests   ARGV[2]: keys per request   ARGV[3]: arguments per request
-- ARGV[4]: 1 when the limiter is blockable, else 0
-- ARGV[5..]: every request's arguments, one request after the other
-- returns: one entry per request, in order: the algorithm script's reply, or its error's text
--@guard.lua@
local function decide(KEYS, ARGV, redis)
--@ALGORITHM@
end
local n = tonumber(ARGV[1])
local per_keys = tonumber(ARGV[2])
local per_args = tonumber(ARGV[3])
local blockable = ARGV[4] == '1'
local out = {}
-- One KEYS and one ARGV for every request, refilled: no algorithm keeps them past its return,
-- and a table made per request would cost Redis's Lua about as much as a command.
local keys, args = {}, {}
for i = 0, n - 1 do
  for j = 1, per_keys do keys[j] = KEYS[i * per_keys + j] end
  for j = 1, per_args do args[j] = ARGV[4 + i * per_args + j] end
  local ok, reply
  if blockable then
    ok, reply = pcall(guarded, decide, keys, args, redis)
  else
    ok, reply = pcall(decide, keys, args, redis)
  end
  if ok then
    out[i + 1] = reply
  elseif type(reply) == 'table' and reply.err then
    out[i + 1] = reply.err
  else
    out[i + 1] = tostring(reply)
  end
end
return out
