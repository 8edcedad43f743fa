-- journal_save.lua: writes a live session's record and gives the node its lease
-- (cluster.Journal.SaveSession).
-- KEYS[1] PREFIX{t:T}:live:SESSION_ID  hash: r (record), s (slot ids, comma-separated), n (lease holder)
-- KEYS[2] PREFIX{t:T}:live             sorted set: session id by the end of its lease (ms, Redis clock)
-- ARGV[1] the session id   ARGV[2] the node   ARGV[3] the record   ARGV[4] slot ids
-- ARGV[5] lease ttl (ms)   ARGV[6] the record's ttl (ms)
-- Reply: 1; "lost" (nothing written) when the record names another node as its holder (none: ""
-- after a take-back of the parked session, take_parked.lua).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = redis.call('HGET', KEYS[1], 'n')
if holder and holder ~= '' and holder ~= ARGV[2] then
  return 'lost'
end
redis.call('HSET', KEYS[1], 'r', ARGV[3], 's', ARGV[4], 'n', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])
return 1
