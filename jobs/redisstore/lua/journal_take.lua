-- journal_take.lua: takes over a session whose lease ran out (cluster.Journal.TakeOver), exactly once.
-- KEYS[1] PREFIX{t:T}:live:SESSION_ID  hash: r (record), s (slot ids), n (lease holder), a (agent state)
-- KEYS[2] PREFIX{t:T}:live             sorted set: session id by the end of its lease
-- ARGV[1] the session id   ARGV[2] the node   ARGV[3] lease ttl (ms)
-- Reply: {record, slot ids, end of the lease that ran out (ms), agent state or ""}; "held" while a lease runs;
-- false when the journal holds no such session.
local rec = redis.call('HMGET', KEYS[1], 'r', 's', 'a')
if not rec[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
if ends > now then
  return 'held'
end
redis.call('HSET', KEYS[1], 'n', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return {rec[1], rec[2] or '', tostring(ends), rec[3] or ''}
