-- apply.lua: one job transition, atomically (jobs.Store.Apply).
--
-- KEYS[1] job hash        {v = version, d = record, a = arguments, dl = deadline ms, t = last transition id}
-- KEYS[2] deadlines zset  member = call id (or "^" .. call id for a cascade marker), score = due ms
-- KEYS[3] handle string   "L:" .. call id while its job is open, "B:" .. call id once burned
-- KEYS[4] open set        call ids of the session's open jobs
-- KEYS[5] children set    call ids whose parent call is this job's parent (the job's own key when it has no parent)
-- KEYS[6] own children    call ids whose parent call is this job (expires with the job)
-- KEYS[7] timeline list   the session's entries (JSON)
-- KEYS[8] parent job hash the job's parent call (the job's own key when it has no parent)
-- KEYS[9] outbox stream   the slot's outbox the transition appends a frame to (the job's own key when none)
-- KEYS[10] timeline size  string: the sum of the sizes of the entries offered to the timeline (expires with it)
--
-- ARGV[1]  transition id
-- ARGV[2]  expected version, or "-1" to check nothing
-- ARGV[3]  "1" to write the job
-- ARGV[4]  record (JSON)
-- ARGV[5]  arguments (JSON) when the job is created, else ""
-- ARGV[6]  new version
-- ARGV[7]  deadline ms ("0": none)
-- ARGV[8]  index change: "add" (created), "rem" (terminated) or ""
-- ARGV[9]  call id
-- ARGV[10] handle mode: "claim", "burn" or ""
-- ARGV[11] handle value
-- ARGV[12] handle TTL ms
-- ARGV[13] retention ms (job once terminal, timeline)
-- ARGV[14] cascade marker due ms ("0": none)
-- ARGV[15] call id of an ended parent whose cascade marker to remove ("": none)
-- ARGV[16] the frame's seq ("": no frame)
-- ARGV[17] the frame
-- ARGV[18] how many frames the outbox keeps
-- ARGV[19] the timeline's cap in bytes ("0": none)
-- ARGV[20] the notice that the timeline passed its cap: its JSON after {"at_ms":N (the time of
--          the entry that passed it is N)
-- ARGV[21…] the N timeline entries whole (JSON, each starting {"at_ms":N), then the same N cut
--          (JSON, "" when nothing is cut): ARGV[21 + N + i] is the cut of ARGV[21 + i]
--
-- Returns {"ok", children, parent state} or {"dup", children, parent state} (this transition
-- was applied before): children are the call ids of a job that ended with a cascade marker
-- requested and has children (the marker was recorded), else empty; parent state is the state
-- of the parent of a job this transition creates, else "". Or {"conflict", version}, or
-- {"handle", value}.

-- The children of the ending job, when it asked for a cascade.
local function children()
  if ARGV[14] == '0' then return {} end
  local ids = redis.call('SMEMBERS', KEYS[6])
  table.sort(ids)
  return ids
end

-- The state of the created job's parent ("" when it has none or it is gone).
local function parentState()
  if ARGV[8] ~= 'add' or KEYS[8] == KEYS[1] then return '' end
  local d = redis.call('HGET', KEYS[8], 'd')
  if not d then return '' end
  local ok, rec = pcall(cjson.decode, d)
  if ok and type(rec) == 'table' and type(rec.state) == 'string' then return rec.state end
  return ''
end

local expect = tonumber(ARGV[2])
if expect >= 0 then
  local cur = redis.call('HMGET', KEYS[1], 'v', 't')
  local v = tonumber(cur[1]) or 0
  if v ~= expect then
    if cur[2] == ARGV[1] then
      return {'dup', children(), parentState()}
    end
    return {'conflict', tostring(v)}
  end
end

local mode = ARGV[10]
if mode == 'claim' then
  if not redis.call('SET', KEYS[3], ARGV[11], 'NX', 'PX', ARGV[12]) then
    return {'handle', redis.call('GET', KEYS[3])}
  end
elseif mode == 'burn' then
  redis.call('SET', KEYS[3], ARGV[11], 'PX', ARGV[12])
end

local idx = ARGV[8]
local kids = {}

if ARGV[3] == '1' then
  local keep = ARGV[1]
  local id = ARGV[9]
  local dl = ARGV[7]
  if ARGV[5] ~= '' then
    redis.call('HSET', KEYS[1], 'v', ARGV[6], 'd', ARGV[4], 'dl', dl, 't', keep, 'a', ARGV[5])
  else
    redis.call('HSET', KEYS[1], 'v', ARGV[6], 'd', ARGV[4], 'dl', dl, 't', keep)
  end
  if dl ~= '0' then
    redis.call('ZADD', KEYS[2], dl, id)
  else
    redis.call('ZREM', KEYS[2], id)
  end
  if idx == 'add' then
    redis.call('SADD', KEYS[4], id)
    if KEYS[5] ~= KEYS[1] then
      redis.call('SADD', KEYS[5], id)
      -- A parent that has ended (or is gone) takes its children set with it.
      local ttl = redis.call('PTTL', KEYS[8])
      if ttl > 0 then
        redis.call('PEXPIRE', KEYS[5], ttl)
      elseif ttl == -2 then
        redis.call('PEXPIRE', KEYS[5], ARGV[13])
      end
    end
  elseif idx == 'rem' then
    redis.call('SREM', KEYS[4], id)
    redis.call('PEXPIRE', KEYS[1], ARGV[13])
    if redis.call('PEXPIRE', KEYS[6], ARGV[13]) == 1 and ARGV[14] ~= '0' then
      redis.call('ZADD', KEYS[2], ARGV[14], '^' .. id)
      kids = children()
    end
  end
end

if ARGV[15] ~= '' then
  redis.call('ZREM', KEYS[2], '^' .. ARGV[15])
end

if #ARGV >= 21 then
  -- The cap (jobs.Transition.TimelineMax): entries stay whole while the sum of the sizes
  -- offered to the timeline, theirs included, is at most the cap; the entry that takes it past,
  -- and every later one, is stored cut, the first of them after the notice. The size key
  -- expires with the timeline: a size that is not there (0) is a new timeline.
  local n = (#ARGV - 20) / 2
  local total = 0
  for i = 21, 20 + n do total = total + #ARGV[i] end
  local used = redis.call('INCRBY', KEYS[10], total) - total
  local fresh = used == 0
  local cap = tonumber(ARGV[19])
  local len
  if cap <= 0 or used + total <= cap then
    len = redis.call('RPUSH', KEYS[7], unpack(ARGV, 21, 20 + n))
  else
    local list = {}
    for i = 21, 20 + n do
      local was = used
      used = used + #ARGV[i]
      if used <= cap then
        list[#list + 1] = ARGV[i]
      else
        if was <= cap then
          local at = string.match(ARGV[i], '^{"at_ms":(%-?%d+)') or '0'
          list[#list + 1] = '{"at_ms":' .. at .. ARGV[20]
        end
        if ARGV[i + n] ~= '' then
          list[#list + 1] = ARGV[i + n]
        else
          list[#list + 1] = ARGV[i]
        end
      end
    end
    n = #list
    len = redis.call('RPUSH', KEYS[7], unpack(list))
  end
  -- The retention of a timeline runs from its creation and is renewed whenever a job ends.
  if fresh or len <= n or idx == 'rem' then
    redis.call('PEXPIRE', KEYS[7], ARGV[13])
    redis.call('PEXPIRE', KEYS[10], ARGV[13])
  end
end

if ARGV[16] ~= '' then
  -- The frame the transition produces, in the slot's outbox (SPEC 15). A seq the stream has
  -- passed (a broker's mistake) loses the frame, never the transition: pcall.
  redis.pcall('XADD', KEYS[9], 'MAXLEN', '~', ARGV[18], ARGV[16] .. '-0', 'd', ARGV[17])
end
return {'ok', kids, parentState()}
