package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// TestCloseWhileBusy closes the store while many transitions without a deadline of their own
// are in flight or queued for a pipeline: every Apply returns (applied, or failed because the
// store closed), none is left waiting for a worker that has stopped, and a second Close is
// harmless. TestMain's goleak check then finds no pipeline worker left.
func TestCloseWhileBusy(t *testing.T) {
	client := redistest.New(t)
	for round := range 5 {
		s, err := redisstore.New(redisstore.Options{Client: client, Prefix: redistest.Prefix(t), Pipelines: 2, MaxBatch: 4})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		started := make(chan struct{}, 64)
		for w := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					tr := &jobs.Transition{ID: fmt.Sprintf("t-%d-%d", w, i), Tenant: "acme", SessionID: "close", CallID: "c",
						Retention: time.Hour, Entries: []jobs.Entry{{Kind: jobs.KindNotice, Detail: map[string]any{}}}}
					err := s.Apply(context.Background(), tr)
					if i == 0 {
						started <- struct{}{}
					}
					if err != nil {
						return
					}
				}
			}()
		}
		for range 64 {
			<-started
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: Apply calls still blocked 15 s after Close", round)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}
