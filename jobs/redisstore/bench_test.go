package redisstore_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/storetest"
)

// requestCounter is a go-redis hook counting round trips (a single command or a whole
// pipeline) and the commands they carry. The handshake of a new pool connection (HELLO,
// CLIENT SETINFO) is not counted: it belongs to the connection, not to a transition.
type requestCounter struct {
	roundTrips atomic.Int64
	commands   atomic.Int64
}

func (c *requestCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *requestCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			c.roundTrips.Add(1)
			c.commands.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *requestCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := int64(0)
		for _, cmd := range cmds {
			if !handshake(cmd) {
				n++
			}
		}
		if n > 0 {
			c.roundTrips.Add(1)
			c.commands.Add(n)
		}
		return next(ctx, cmds)
	}
}

// handshake reports whether cmd is part of a new connection's handshake.
func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

// countedClient returns a client of the test server with a requestCounter hook.
func countedClient(tb testing.TB) (*redis.Client, *requestCounter) {
	base := redistest.New(tb)
	c := redis.NewClient(&redis.Options{Addr: base.Options().Addr, DB: base.Options().DB})
	tb.Cleanup(func() { _ = c.Close() })
	rc := &requestCounter{}
	c.AddHook(rc)
	return c, rc
}

// TestOneCommandPerTransition checks the Redis cost of a lifecycle run alone (no other
// sessions to share pipelines with): every transition is exactly one request.
func TestOneCommandPerTransition(t *testing.T) {
	client, rc := countedClient(t)
	store := newStore(t, client)
	engine := jobs.NewEngine(store, jobs.Options{})
	ctx := context.Background()
	tool := jobs.Tool{Name: "t", Deferred: true, DeferredTimeout: time.Hour}
	// Warm up the script cache of the server (the first EVALSHA of a script loads it).
	if err := storetest.Lifecycle(ctx, engine, "acme", "warm", tool, nil, json.RawMessage(`1`), "warm-h"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		before, beforeRT := rc.commands.Load(), rc.roundTrips.Load()
		if err := storetest.Lifecycle(ctx, engine, "acme", "s", tool, json.RawMessage(`{"a":1}`), json.RawMessage(`"done"`), "h-"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
		cmds, rts := rc.commands.Load()-before, rc.roundTrips.Load()-beforeRT
		if cmds != storetest.LifecycleTransitions || rts != storetest.LifecycleTransitions {
			t.Fatalf("lifecycle of %d transitions sent %d commands in %d round trips, want one each", storetest.LifecycleTransitions, cmds, rts)
		}
	}
}

// BenchmarkTransitions measures transitions/s on Redis.
func BenchmarkTransitions(b *testing.B) {
	client, rc := countedClient(b)
	storetest.BenchmarkTransitions(b, func(tb testing.TB, _ jobs.Clock) jobs.Store { return newStore(tb, client) })
	reportRequests(b, rc, 1)
}

// BenchmarkLifecycle measures lifecycles/s (call → defer → 3 progress → result) on Redis.
func BenchmarkLifecycle(b *testing.B) {
	client, rc := countedClient(b)
	storetest.BenchmarkLifecycle(b, func(tb testing.TB, _ jobs.Clock) jobs.Store { return newStore(tb, client) })
	reportRequests(b, rc, storetest.LifecycleTransitions)
}

// reportRequests reports Redis commands and round trips per transition.
func reportRequests(b *testing.B, rc *requestCounter, perOp int) {
	transitions := float64(b.N * perOp)
	b.ReportMetric(float64(rc.commands.Load())/transitions, "cmds/transition")
	b.ReportMetric(float64(rc.roundTrips.Load())/transitions, "roundtrips/transition")
}

// BenchmarkDeadlines measures how late deadlines fire with 100,000 open deferred jobs on Redis.
func BenchmarkDeadlines(b *testing.B) {
	client, _ := countedClient(b)
	storetest.BenchmarkDeadlines(b, func(tb testing.TB, _ jobs.Clock) jobs.Store { return newStore(tb, client) })
}
