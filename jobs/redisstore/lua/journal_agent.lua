-- journal_agent.lua: keeps a journaled session's text-agent state (SessionJournal.SaveAgentState).
-- KEYS[1] PREFIX{t:T}:live:SESSION_ID  hash: a (the text agent's state)
-- ARGV[1] the state
-- Reply: 1, or 0 when the session is not journaled (it ended, or was parked).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'a', ARGV[1])
return 1
