-- journal_frames.lua: keeps the frames of one event of a session, and its text agent's state,
-- in one atomic write (cluster.Journal.AppendFrames), if the node still holds the session.
-- A retry of a write that was applied (its reply lost with the connection) changes nothing: a
-- frame whose seq the outbox has already, with the same bytes, is skipped.
-- KEYS[1] PREFIX{t:T}:live:SESSION_ID  hash: n (lease holder), a (agent state)
-- KEYS[2] PREFIX{t:T}:settled:SESSION_ID  list: the agent's settled calls, each written once
-- KEYS[3..] one per frame: the slot's outbox stream PREFIX{t:T}:out:SESSION_ID:SLOT, or, for a
--   replacement, the slot's hash of replacements PREFIX{t:T}:rep:SESSION_ID:SLOT
-- ARGV[1] the node   ARGV[2] frames kept per outbox   ARGV[3] the keys' ttl (ms)
-- ARGV[4] the agent state, "" when unchanged
-- ARGV[5] "r" when the settled calls replace those kept, else ""   ARGV[6] N: how many follow
-- ARGV[7..6+N] the settled calls to append
-- ARGV[7+N..] per frame, in the order of KEYS[3..]: seq, data, "r" for a replacement or ""
-- Reply: 1; "lost" (nothing written) when the record's holder is not the node; "taken" (nothing
-- written) when a frame's seq holds other bytes already, or is missing below the outbox's
-- newest, or is past its next: an outbox never gets a gap.
if redis.call('HGET', KEYS[1], 'n') ~= ARGV[1] then
  return 'lost'
end
local ns = tonumber(ARGV[6])
local fa = 7 + ns -- the first frame's arguments
local nxt = {} -- each outbox's next seq (0: empty, any seq may start it)
local skip = {}
for i = 3, #KEYS do
  local b = fa + (i - 3) * 3
  if ARGV[b + 2] ~= 'r' then
    local k = KEYS[i]
    if nxt[k] == nil then
      local last = redis.call('XREVRANGE', k, '+', '-', 'COUNT', 1)[1]
      nxt[k] = last and tonumber(string.match(last[1], '^(%d+)')) + 1 or 0
    end
    local seq = tonumber(ARGV[b])
    if nxt[k] ~= 0 and seq < nxt[k] then
      local e = redis.call('XRANGE', k, ARGV[b] .. '-0', ARGV[b] .. '-0')[1]
      if not e or e[2][2] ~= ARGV[b + 1] then
        return 'taken' -- another frame there, or a later seq written first
      end
      skip[i] = true -- written already
    elseif nxt[k] ~= 0 and seq > nxt[k] then
      return 'taken' -- it would leave a gap
    else
      nxt[k] = seq + 1
    end
  end
end
for i = 3, #KEYS do
  local b = fa + (i - 3) * 3
  if ARGV[b + 2] == 'r' then
    redis.call('HSET', KEYS[i], ARGV[b], ARGV[b + 1])
  elseif not skip[i] then
    redis.call('XADD', KEYS[i], 'MAXLEN', '~', ARGV[2], ARGV[b] .. '-0', 'd', ARGV[b + 1])
  end
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'a', ARGV[4])
end
if ARGV[5] == 'r' then
  redis.call('DEL', KEYS[2])
end
if ns > 0 then
  redis.call('RPUSH', KEYS[2], unpack(ARGV, 7, 6 + ns))
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
