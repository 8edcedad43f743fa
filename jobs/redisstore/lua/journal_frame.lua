-- journal_frame.lua: keeps one frame of a slot's outbox (SessionJournal.AppendFrame).
-- KEYS[1] PREFIX{t:T}:out:SESSION_ID:SLOT  stream: the outbox, entry id SEQ-0, field d (the frame)
-- KEYS[2] PREFIX{t:T}:rep:SESSION_ID:SLOT  hash: seq -> a frame that took the place of the stream's
-- ARGV[1] seq   ARGV[2] the frame   ARGV[3] "1" to replace the frame under seq
-- ARGV[4] how many frames the outbox keeps   ARGV[5] the keys' ttl (ms)
-- Reply: 1, or an error when seq is not above the outbox's last (XADD).
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return 1
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], ARGV[1] .. '-0', 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
