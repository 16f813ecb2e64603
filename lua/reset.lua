-- name: reset
-- Forgets one key's state: deletes the keys a limiter keeps for it, which share its hash tag
-- and so one slot. Deleting is the whole of it: a key with no state decides as a new one.
-- KEYS: the state's keys (an algorithm's one key, or a window algorithm's windows around now)
-- returns: how many of them existed
return redis.call('DEL', unpack(KEYS))
