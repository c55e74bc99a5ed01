-- Free a lock only if the token still holds it, and say in its handover what the holder left.
-- KEYS: the lock (and its handover); ARGV: the token, what the holder leaves ('' if unknown) and the TTL in s
-- (both read only with a handover).
-- Returns 1 when freed, 0 when the lock was no longer this token's.
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if KEYS[2] and ARGV[2] ~= '' then redis.call('set', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
return redis.call('del', KEYS[1])
