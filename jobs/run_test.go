package jobs_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunFiresOnTheRealClock runs the scheduler goroutine: a job's ordinary timeout fires
// without anyone calling Tick, and Run returns when its context ends.
func TestRunFiresOnTheRealClock(t *testing.T) {
	fired := make(chan jobs.Change, 1)
	e := jobs.NewEngine(memstore.New(nil), jobs.Options{OnChange: func(c jobs.Change) {
		if c.Event == jobs.EventTimedOut {
			fired <- c
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	j, err := e.Call(ctx, jobs.NewCall{Tenant: "acme", SessionID: "s", Tool: jobs.Tool{Name: "t", Timeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-fired:
		if c.Job.CallID != j.CallID {
			t.Fatalf("fired %s, want %s", c.Job.CallID, j.CallID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the ordinary timeout did not fire within 5 s")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
