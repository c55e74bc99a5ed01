-- Dramatiq's fetch (dispatch.lua, command "fetch"), answering the queued ids with their bodies.
-- KEYS[1]: the namespace. ARGV: timestamp (ms), queue name, broker id, how many to pop.
-- Returns id1, body1, id2, body2, ... (a body is nil when the id has none). Like Dramatiq's fetch it beats
-- in <ns>:__heartbeats__ and puts every popped id in <ns>:__acks__.<broker id>.<queue>, so Dramatiq's own
-- ack, nack, requeue and maintenance treat these deliveries as their own.
local namespace = KEYS[1]
local timestamp = ARGV[1]
local queue_name = ARGV[2]
local worker_id = ARGV[3]
local count = tonumber(ARGV[4])
redis.call("zadd", namespace .. ":__heartbeats__", timestamp, worker_id)
local queue_acks = namespace .. ":__acks__." .. worker_id .. "." .. queue_name
local queue_full_name = namespace .. ":" .. queue_name
local queue_messages = queue_full_name .. ".msgs"
local result = {}
for _ = 1, count do
    local message_id = redis.call("lpop", queue_full_name)
    if not message_id then
        break
    end
    redis.call("sadd", queue_acks, message_id)
    table.insert(result, message_id)
    table.insert(result, redis.call("hget", queue_messages, message_id))
end
return result
