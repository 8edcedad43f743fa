package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

// runDirectory checks cluster.Directory: holders are recorded and renewed, released only by
// their node and forgotten after their ttl; liveness likewise; a node's inbox gets what is
// sent to it, in order, and nothing sent to another node.
func runDirectory(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.NewFakeClock(epoch))
	d, ok := s.(cluster.Directory)
	if !ok {
		t.Fatalf("%T does not implement cluster.Directory", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tenantOf := map[string]string{"sess_1": tenantA, "sess_2": tenantB, "sess_3": tenantA}
	holder := func(id, want string) {
		t.Helper()
		got, tenant, err := d.SessionHolder(ctx, id)
		if err != nil || got != want || (want != "" && tenant != tenantOf[id]) || (want == "" && tenant != "") {
			t.Errorf("SessionHolder(%s) = %q, %q, %v; want %q, %q", id, got, tenant, err, want, tenantOf[id])
		}
	}
	if err := d.HoldSessions(ctx, "node-a", []cluster.HeldSession{{ID: "sess_1", Tenant: tenantA}, {ID: "sess_2", Tenant: tenantB}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.HoldSessions(ctx, "node-b", []cluster.HeldSession{{ID: "sess_3", Tenant: tenantA}}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	holder("sess_1", "node-a")
	holder("sess_3", "node-b")
	holder("sess_none", "")
	if err := d.ReleaseSession(ctx, "node-b", "sess_1"); err != nil {
		t.Fatal(err)
	}
	holder("sess_1", "node-a") // another node's release does nothing
	if err := d.ReleaseSession(ctx, "node-a", "sess_1"); err != nil {
		t.Fatal(err)
	}
	holder("sess_1", "")
	holder("sess_2", "node-a")

	if err := d.NodeAlive(ctx, "node-a", "http://10.0.0.1:8080", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.NodeAlive(ctx, "node-b", "", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if u, err := d.NodeURL(ctx, "node-a"); err != nil || u != "http://10.0.0.1:8080" {
		t.Errorf("NodeURL(node-a) = %q, %v", u, err)
	}
	alive, err := d.NodesAlive(ctx, []string{"node-a", "node-b", "node-c"})
	if err != nil || !alive["node-a"] || !alive["node-b"] || alive["node-c"] {
		t.Errorf("NodesAlive = %v, %v; want node-a and node-b", alive, err)
	}
	time.Sleep(600 * time.Millisecond)
	holder("sess_3", "") // its ttl ran out
	if alive, _ := d.NodesAlive(ctx, []string{"node-a", "node-b"}); !alive["node-a"] || alive["node-b"] {
		t.Errorf("NodesAlive after node-b's ttl = %v; want node-a only", alive)
	}
	if u, err := d.NodeURL(ctx, "node-b"); err != nil || u != "" {
		t.Errorf("NodeURL of a node whose ttl ran out = %q, %v; want \"\"", u, err)
	}

	if _, err := d.Ended(ctx, "sess_9"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Ended of a session never recorded: %v, want ErrNotFound", err)
	}
	if err := d.RecordEnded(ctx, "sess_9", []byte(`{"x":1}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordEnded(ctx, "sess_10", []byte(`{"x":2}`), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if b, err := d.Ended(ctx, "sess_9"); err != nil || string(b) != `{"x":1}` {
		t.Errorf("Ended = %s, %v", b, err)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := d.Ended(ctx, "sess_10"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Ended after its ttl: %v, want ErrNotFound", err)
	}

	got := make(chan string, 256)
	if err := d.NodeInbox(ctx, "node-a", func(m []byte) { got <- string(m) }, func() { t.Error("NodeInbox lost messages on a healthy store") }); err != nil {
		t.Fatal(err)
	}
	if err := d.SendToNode(ctx, "node-b", []byte("not for a")); !errors.Is(err, cluster.ErrNotListening) {
		t.Errorf("SendToNode to a node whose inbox nobody opened: %v, want ErrNotListening", err)
	}
	const n = 100
	for i := range n {
		if err := d.SendToNode(ctx, "node-a", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		select {
		case m := <-got:
			if want := fmt.Sprintf("m%d", i); m != want {
				t.Fatalf("inbox message %d is %q, want %q (in order, nothing sent to another node)", i, m, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("inbox got %d of %d messages", i, n)
		}
	}
}
