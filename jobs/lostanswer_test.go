package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/memstore"
)

// lostAnswers is a store that applies every transition and then answers with an error, as a
// Redis that ran the script and went down before its reply did.
type lostAnswers struct{ *memstore.Store }

func (l lostAnswers) Apply(ctx context.Context, t *jobs.Transition) error {
	if err := l.Store.Apply(ctx, t); err != nil {
		return err
	}
	return errors.New("connection reset before the reply")
}

// TestAFrameCarryingTransitionWhoseAnswerWasLost: a call whose transition journals its
// tool_call (FrameOut) and whose answer the store lost is taken as applied once the store
// shows the job it wrote — the frame is in the outbox, so the session must take its seq. A
// transition without a frame keeps returning the store's error.
func TestAFrameCarryingTransitionWhoseAnswerWasLost(t *testing.T) {
	e := jobs.NewEngine(lostAnswers{memstore.New(nil)}, jobs.Options{StoreRetry: 50 * time.Millisecond})
	ctx := context.Background()
	fo := &jobs.FrameOut{Slot: "sl1", Seq: 1, Max: 10, Render: func(any) []byte { return []byte(`{"type":"tool_call","seq":1}`) }}
	j, err := e.Call(ctx, jobs.NewCall{Tenant: "acme", SessionID: "s", Slot: "sl1", Tool: jobs.Tool{Name: "t"}, Frame: fo})
	if err != nil {
		t.Fatalf("the call whose answer was lost: %v, want it taken as applied", err)
	}
	if !fo.Applied || j.State != jobs.Pending {
		t.Errorf("frame applied %v, job %s, want applied and pending", fo.Applied, j.State)
	}
	if _, err := e.Call(ctx, jobs.NewCall{Tenant: "acme", SessionID: "s", Slot: "sl1", Tool: jobs.Tool{Name: "t"}}); err == nil {
		t.Error("a call without a frame whose answer was lost: no error, want the store's")
	}
}
