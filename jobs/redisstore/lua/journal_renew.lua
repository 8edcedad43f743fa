-- journal_renew.lua: renews a node's leases on sessions of one tenant (cluster.Journal.RenewLeases).
-- KEYS[1] PREFIX{t:T}:live              sorted set: session id by the end of its lease
-- KEYS[2..] per session, two keys: PREFIX{t:T}:live:SESSION_ID (hash: n, the lease holder) and
--   PREFIX{t:T}:settled:SESSION_ID (list: the agent's settled calls), whose ttl is renewed with it
-- ARGV[1] the node   ARGV[2] lease ttl (ms)   ARGV[3] the records' ttl (ms)   ARGV[4..] the session ids
-- Reply: the ids whose lease is not the node's (another node's, or nobody's: dropped).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lost = {}
for i = 2, #KEYS, 2 do
  local id = ARGV[3 + i / 2]
  if redis.call('HGET', KEYS[i], 'n') == ARGV[1] then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), id)
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
    redis.call('PEXPIRE', KEYS[i + 1], ARGV[3])
  else
    lost[#lost + 1] = id
  end
end
return lost
