-- take_parked.lua: takes a parked session (cluster.Parking.TakeParked), exactly once.
-- KEYS[1] PREFIX{t:T}:parked:SESSION_ID   the parked session (JSON)
-- KEYS[2] PREFIX{t:T}:parked              sorted set: session id by the end of its resume window
-- KEYS[3] PREFIX{t:T}:live:SESSION_ID     the journal's record of the node that parked it, if still
--   there: its holder is cleared, so the taker may journal it (journal_save.lua) and the parking
--   node's drop of it (DropSession) no longer needs to come first
-- ARGV[1] the session id
-- Reply: the parked session's JSON, or false when it is not parked.
local v = redis.call('GET', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not v then
  return false
end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HSET', KEYS[3], 'n', '')
end
return v
