package faulttest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// callIDs finds broker call ids in a violation's message.
var callIDs = regexp.MustCompile(`call_[a-z2-7]{20}`)

// dumpStore describes, for a run's violations, what the nodes' Redis holds of the jobs they
// name — the job's record and deadline, its entry in the deadline set, the session's timeline
// entries about it — so a report tells a fault of the store's state from one of a node's view.
// The broker's keys are "bc:{t:dev}:…" (serve's default prefix, the loopback tenant).
func dumpStore(redisURL string, vs []Violation, histories []History) string {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return "store dump: " + err.Error()
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const base = "bc:{t:dev}:"
	sessionOf := map[string]string{}
	for _, h := range histories {
		sessionOf[h.Session] = h.SessionID
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, v := range vs {
		for _, id := range callIDs.FindAllString(v.Msg, -1) {
			if seen[id] {
				continue
			}
			seen[id] = true
			fmt.Fprintf(&b, "--- store: %s (%s, session %s)\n", id, v.Kind, v.Session)
			h, err := rdb.HMGet(ctx, base+"job:"+id, "v", "dl", "d").Result()
			fmt.Fprintf(&b, "job hash v=%v dl=%v err=%v\n  record %v\n", h[0], h[1], err, h[2])
			score, err := rdb.ZScore(ctx, base+"deadlines", id).Result()
			fmt.Fprintf(&b, "deadline set score %.0f err=%v (now %d)\n", score, err, time.Now().UnixMilli())
			if sid := sessionOf[v.Session]; sid != "" {
				es, _ := rdb.LRange(ctx, base+"timeline:"+sid, 0, -1).Result()
				es = slices.DeleteFunc(es, func(e string) bool { return !strings.Contains(e, id) })
				fmt.Fprintf(&b, "timeline entries naming it:\n  %s\n", strings.Join(es, "\n  "))
			}
		}
	}
	return b.String()
}
