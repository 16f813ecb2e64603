-- name: blockable
-- One algorithm's script behind a block (guard.lua): what a blockable limiter sends for one
-- request. ARGV and the reply are exactly the algorithm script's, spliced in below as
-- `decide`; KEYS are its KEYS and then the key's block. A request on a blocked key is
-- refused, and writes nothing.
--@guard.lua@
local function decide(KEYS, ARGV, redis)
--@ALGORITHM@
end
return guarded(decide, KEYS, ARGV, redis)
