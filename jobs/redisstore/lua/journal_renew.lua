-- journal_renew.lua: renews a node's leases on sessions of one tenant (cluster.Journal.RenewLeases).
-- KEYS[1] PREFIX{t:T}:live              sorted set: session id by the end of its lease
-- KEYS[2..] PREFIX{t:T}:live:SESSION_ID  hash: n (lease holder), one key per session
-- ARGV[1] the node   ARGV[2] lease ttl (ms)   ARGV[3] the records' ttl (ms)   ARGV[4..] the session ids
-- Reply: the ids whose lease is not the node's (another node's, or nobody's: dropped).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lost = {}
for i = 2, #KEYS do
  local id = ARGV[i + 2]
  if redis.call('HGET', KEYS[i], 'n') == ARGV[1] then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), id)
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
  else
    lost[#lost + 1] = id
  end
end
return lost
