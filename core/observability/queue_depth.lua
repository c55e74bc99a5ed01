-- One queue's depth on Dramatiq's Redis broker, read atomically (core/observability/pipeline_state.py).
-- KEYS: the ready list, its .msgs hash (ready + fetched-but-unacked bodies), the delay queue's .msgs hash.
-- Returns {ready, unacked, delayed, the body of the head of the ready list ('' when empty)}.
-- Read only: sent twice (core/redis/scripts.py, after a dropped connection), it reads twice.
local ready = redis.call('LLEN', KEYS[1])
local unacked = redis.call('HLEN', KEYS[2])
local delayed = redis.call('HLEN', KEYS[3])
local head = redis.call('LINDEX', KEYS[1], 0)
local body = ''
if head then body = redis.call('HGET', KEYS[2], head) or '' end
return {ready, unacked, delayed, body}
