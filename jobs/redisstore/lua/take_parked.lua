-- take_parked.lua: takes a parked session (SessionParking.TakeParked), exactly once.
-- KEYS[1] PREFIX{t:T}:parked:SESSION_ID   the parked session (JSON)
-- KEYS[2] PREFIX{t:T}:parked              sorted set: session id by the end of its resume window
-- ARGV[1] the session id
-- Reply: the parked session's JSON, or false when it is not parked.
local v = redis.call('GET', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not v then
  return false
end
redis.call('DEL', KEYS[1])
return v
