-- Pulls one delayed message forward (core/producer/retry_now.py).
-- KEYS: the queue's delayed list (<q>.DQ), its delayed bodies (<q>.DQ.msgs), the ready list (<q>), the ready
-- bodies (<q>.msgs), and the marker that this delayed message was pulled forward already.
-- ARGV: the delayed message's id, the ready copy's id, the ready copy's body, the marker's TTL in s.
-- Returns -1 when the delayed message is gone, -2 when it was pulled forward already, else the number of
-- ids removed from the delayed list: 0 means a worker holds it (the original stays; the marker is set).
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[5]) == 1 then return -2 end
local removed = redis.call('LREM', KEYS[1], 0, ARGV[1])
if removed > 0 then redis.call('HDEL', KEYS[2], ARGV[1]) else redis.call('SET', KEYS[5], '1', 'EX', ARGV[4]) end
redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[2])
return removed
