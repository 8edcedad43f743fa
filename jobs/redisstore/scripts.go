package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The lifecycle scripts, one per operation; each file's header lists its KEYS, ARGV and replies.
var (
	//go:embed lua/apply.lua
	applySrc string
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/take_parked.lua
	takeParkedSrc string
	//go:embed lua/journal_save.lua
	journalSaveSrc string
	//go:embed lua/journal_frames.lua
	journalFramesSrc string
	//go:embed lua/journal_renew.lua
	journalRenewSrc string
	//go:embed lua/journal_take.lua
	journalTakeSrc string

	applyScript      = redis.NewScript(applySrc)
	claimScript      = redis.NewScript(claimSrc)
	takeParkedScript = redis.NewScript(takeParkedSrc)
	journalSave      = redis.NewScript(journalSaveSrc)
	journalFrames    = redis.NewScript(journalFramesSrc)
	journalRenew     = redis.NewScript(journalRenewSrc)
	journalTake      = redis.NewScript(journalTakeSrc)
)
