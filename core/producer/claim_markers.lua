-- Claims every enqueue's markers in one call (core/producer/dedup.py).
-- KEYS: per claim its dedup marker, then (when ARGV[2], the coalesce window in ms, is above 0) its target's
-- coalesce marker, whose value is when the window opened (Redis time, ms).
-- ARGV[1]: the dedup TTL in s; ARGV[3]: the longest hold in ms; then the claims' job ids.
-- Returns per claim the earlier job id (false: newly marked) and 1 when its target is coalescing. The
-- coalesce marker is set when absent or older than the longest hold, else its PX is refreshed.
local window = tonumber(ARGV[2])
local longest = tonumber(ARGV[3])
local stride = 1
local now = 0
if window > 0 then
    stride = 2
    local clock = redis.call("time")
    now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
local result = {}
for n = 1, #ARGV - 3 do
    local dedup = KEYS[stride * (n - 1) + 1]
    local earlier = false
    if not redis.call("set", dedup, ARGV[n + 3], "NX", "EX", ARGV[1]) then
        earlier = redis.call("get", dedup)
    end
    local coalescing = 0
    if window > 0 then
        local coalesce = KEYS[stride * n]
        if not redis.call("set", coalesce, now, "NX", "PX", window) then
            local opened = tonumber(redis.call("get", coalesce))
            if opened and now - opened < longest then
                redis.call("pexpire", coalesce, window)
                coalescing = 1
            else
                redis.call("set", coalesce, now, "PX", window)
            end
        end
    end
    result[2 * n - 1] = earlier
    result[2 * n] = coalescing
end
return result
