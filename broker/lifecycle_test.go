package broker

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs/memstore"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// TestNodeStopsWhatItStarts: a node that served a session and shut down leaves no goroutine
// behind — Run returns only once every background loop it started has returned — on the
// memory store and on Redis (where it relays, holds and renews sessions, and sweeps).
func TestNodeStopsWhatItStarts(t *testing.T) {
	rdb := redistest.New(t)
	prefix := redistest.Prefix(t)
	for _, c := range []struct {
		name  string
		store func(t *testing.T) cluster.Store
	}{
		{"memory", func(*testing.T) cluster.Store { return memstore.New(nil) }},
		{"redis", func(t *testing.T) cluster.Store {
			s, err := redisstore.New(redisstore.Options{Client: rdb, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			store := c.store(t)
			defer func() {
				if cl, ok := store.(interface{ Close() error }); ok {
					_ = cl.Close() // the store's own workers: the store's owner stops them
				}
			}()
			n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}, HoldTTL: 600 * time.Millisecond}, store)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- n.Run(ctx) }()
			s, err := n.CreateSession("tenant-t", ModelConfig{})
			if err != nil {
				t.Fatal(err)
			}
			host, _ := connect(t, n, map[string]any{"session_id": s.ID(), "join_token": s.JoinToken()})
			host.declare([]map[string]any{{"name": "export", "description": "d", "parameters": map[string]any{"type": "object"}}})
			for deadline := time.Now().Add(10 * time.Second); !n.Relaying(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) { // its inbox and subscriptions are up: what must end
					t.Fatal("the node never listened for other nodes")
				}
			}
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := n.Shutdown(sctx, true); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
