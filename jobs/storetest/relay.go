package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

// runRelay checks cluster.ChangeRelay: every subscriber gets a published change, whole (the job
// without its arguments), and a subscription ends with its context.
func runRelay(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.NewFakeClock(epoch))
	r, ok := s.(cluster.ChangeRelay)
	if !ok {
		t.Fatalf("%T does not implement cluster.ChangeRelay", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := [2]chan jobs.Change{make(chan jobs.Change, 4), make(chan jobs.Change, 4)}
	for i := range got {
		if err := r.SubscribeChanges(ctx, func(c jobs.Change) { got[i] <- c }, func() { t.Error("SubscribeChanges lost changes on a healthy store") }); err != nil {
			t.Fatal(err)
		}
	}
	j := rawJob("sess_relay", "call_relay", 3, jobs.Cancelled, 0)
	j.CancelReason = "discard"
	c := jobs.Change{Event: jobs.EventCancelled, From: jobs.Deferred, Job: j,
		Entries: []jobs.Entry{{AtMS: 7, Kind: jobs.KindCancel, CallID: "call_relay", Detail: map[string]any{"reason": "discard"}}}}
	if err := r.PublishChange(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i, ch := range got {
		select {
		case x := <-ch:
			if x.Event != c.Event || x.From != c.From || x.Job == nil || x.Job.CallID != j.CallID || x.Job.Tenant != j.Tenant ||
				x.Job.State != jobs.Cancelled || x.Job.CancelReason != "discard" || x.Job.Version != 3 ||
				len(x.Entries) != 1 || x.Entries[0].Kind != jobs.KindCancel {
				t.Errorf("subscriber %d got %+v (job %+v), want %+v", i, x, x.Job, c)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("subscriber %d got nothing", i)
		}
	}
}
