-- claim.lua: claim the due deadlines of one tenant (jobs.Store.ClaimDue).
--
-- KEYS[1] deadlines zset of the tenant
-- ARGV[1] now ms
-- ARGV[2] lease end ms: a claimed entry is due again then, unless a transition moves it
-- ARGV[3] limit
-- ARGV[4] job key prefix of the tenant (same hash tag as KEYS[1]), e.g. "bc:{t:acme}:job:"
--
-- Returns a flat list of pairs: {record, arguments} for a due job, {"^", call id} for a due
-- cascade marker. A job whose recorded deadline is later than now (the entry's lease ran out
-- but the job moved on) is put back at its deadline; one without a deadline or record is dropped.
local now = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(due) do
  if string.sub(id, 1, 1) == '^' then
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    table.insert(out, '^')
    table.insert(out, string.sub(id, 2))
  else
    local h = redis.call('HMGET', ARGV[4] .. id, 'dl', 'd', 'a')
    local dl = tonumber(h[1]) or 0
    if not h[2] or dl == 0 then
      redis.call('ZREM', KEYS[1], id)
    elseif dl > now then
      redis.call('ZADD', KEYS[1], dl, id)
    else
      redis.call('ZADD', KEYS[1], ARGV[2], id)
      table.insert(out, h[2])
      table.insert(out, h[3] or '')
    end
  end
end
return out
