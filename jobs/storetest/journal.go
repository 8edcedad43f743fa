package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// RunJournal checks cluster.Journal, which every store offers (the memory store's serves the
// nodes of one process and is not durable, but keeps the same rules): a saved session's lease
// keeps other nodes out while it runs; once it ran out the session is orphaned and exactly one of
// concurrent takers gets it, with its record and every slot's outbox in seq order (a replaced
// frame in place of the first); the node that lost it learns so at its next renewal; dropping
// the session leaves nothing to take.
func RunJournal(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.NewFakeClock(epoch))
	j, ok := s.(cluster.Journal)
	if !ok {
		t.Fatalf("%T does not implement cluster.Journal", s)
	}
	ctx := context.Background()
	const id = "sess_journal"
	if err := j.SaveSession(ctx, "node-1", tenantA, id, []byte(`{"v":1}`), []string{"sl1", "sl2"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	frame := func(slot string, seq int64) []byte { return fmt.Appendf(nil, `{"slot":%q,"seq":%d}`, slot, seq) }
	put := func(node, slot string, seq int64, data []byte, replace bool, max int) error {
		return j.AppendFrames(ctx, node, tenantA, id, cluster.JournalWrite{Max: max,
			Frames: []cluster.JournalFrameWrite{{Slot: slot, Seq: seq, Data: data, Replace: replace}}})
	}
	for seq := int64(1); seq <= 5; seq++ {
		if err := put("node-1", "sl1", seq, frame("sl1", seq), false, 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("node-1", "sl2", 1, frame("sl2", 1), false, 100); err != nil {
		t.Fatal(err)
	}
	if err := put("node-1", "sl1", 2, []byte(`{"replaced":2}`), true, 100); err != nil {
		t.Fatal(err)
	}
	if err := put("node-1", "sl1", 5, []byte(`{"again":5}`), false, 100); err == nil {
		t.Error("AppendFrames under a seq the outbox already has, other bytes (not a replacement): no error")
	}
	// A retry of a write that was applied (its answer lost): the frames it has are skipped, the
	// new ones written, nothing is doubled.
	if err := j.AppendFrames(ctx, "node-1", tenantA, id, cluster.JournalWrite{Max: 100, Frames: []cluster.JournalFrameWrite{
		{Slot: "sl1", Seq: 4, Data: frame("sl1", 4)}, {Slot: "sl1", Seq: 5, Data: frame("sl1", 5)}}}); err != nil {
		t.Errorf("AppendFrames again of frames the outbox has: %v, want no error", err)
	}
	if err := put("node-1", "sl1", 7, frame("sl1", 7), false, 100); err == nil {
		t.Error("AppendFrames past the outbox's next seq (a gap): no error")
	}
	// A node that does not hold the session writes nothing: neither frames nor agent state
	// nor settled calls.
	err := j.AppendFrames(ctx, "node-2", tenantA, id, cluster.JournalWrite{Max: 100, AgentState: []byte(`{"agent":"node-2"}`),
		AgentSettled: [][]byte{[]byte(`"node-2"`)}, Frames: []cluster.JournalFrameWrite{{Slot: "sl1", Seq: 6, Data: frame("sl1", 6)}}})
	if !errors.Is(err, cluster.ErrLeaseLost) {
		t.Errorf("AppendFrames by a node that does not hold the lease: %v, want ErrLeaseLost", err)
	}
	if err := j.SaveSession(ctx, "node-2", tenantA, id, []byte(`{"v":"node-2"}`), []string{"sl1"}, time.Hour); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Errorf("SaveSession by a node while the journal names another: %v, want ErrLeaseLost", err)
	}
	// Frames and agent state in one write.
	if err := j.AppendFrames(ctx, "node-1", tenantA, id, cluster.JournalWrite{Max: 100, AgentState: []byte(`{"agent":1}`),
		Frames: []cluster.JournalFrameWrite{{Slot: "sl2", Seq: 2, Data: frame("sl2", 2)}}}); err != nil {
		t.Fatal(err)
	}
	if err := j.AppendFrames(ctx, "node-1", tenantA, id, cluster.JournalWrite{Max: 100, AgentState: []byte(`{"agent":2}`)}); err != nil {
		t.Fatal(err)
	}
	// Settled calls are appended, each write's after the last's; a reset replaces them.
	settle := func(reset bool, calls ...string) {
		t.Helper()
		w := cluster.JournalWrite{Max: 100, AgentSettledReset: reset}
		for _, c := range calls {
			w.AgentSettled = append(w.AgentSettled, []byte(c))
		}
		if err := j.AppendFrames(ctx, "node-1", tenantA, id, w); err != nil {
			t.Fatal(err)
		}
	}
	settle(false, `"x1"`, `"x2"`)
	settle(false, `"x3"`)
	settle(true, `"y1"`, `"y2"`)
	settle(false, `"y3"`)
	settle(false)
	if err := j.AppendFrames(ctx, "node-1", tenantA, "sess_not_journaled", cluster.JournalWrite{Max: 100, AgentState: []byte(`{"agent":3}`)}); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Errorf("AppendFrames for a session not journaled: %v, want ErrLeaseLost", err)
	}
	// A second save (a new slot, a rotated token) replaces the record.
	if err := j.SaveSession(ctx, "node-1", tenantA, id, []byte(`{"v":2}`), []string{"sl1", "sl2"}, time.Hour); err != nil {
		t.Fatal(err)
	}

	if _, err := j.TakeOver(ctx, "node-2", tenantA, id, time.Hour); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Errorf("TakeOver while node-1's lease runs: %v, want ErrLeaseHeld", err)
	}
	if _, err := j.TakeOver(ctx, "node-2", tenantB, id, time.Hour); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("TakeOver naming another tenant: %v, want ErrNotFound", err)
	}
	if ids, err := j.Orphaned(ctx, tenantA, time.Now()); err != nil || len(ids) != 0 {
		t.Errorf("Orphaned while the lease runs: %v, %v; want none", ids, err)
	}
	if lost, err := j.RenewLeases(ctx, "node-1", tenantA, []string{id}, 50*time.Millisecond); err != nil || len(lost) != 0 {
		t.Errorf("RenewLeases by the holder: lost %v, %v; want none", lost, err)
	}
	if lost, err := j.RenewLeases(ctx, "node-2", tenantA, []string{id}, time.Hour); err != nil || !slices.Equal(lost, []string{id}) {
		t.Errorf("RenewLeases by a node that does not hold it: lost %v, %v; want [%s]", lost, err, id)
	}
	time.Sleep(150 * time.Millisecond) // the lease of 50 ms runs out
	ids, err := j.Orphaned(ctx, tenantA, time.Now())
	if err != nil || !slices.Equal(ids, []string{id}) {
		t.Errorf("Orphaned after the lease ran out: %v, %v; want [%s]", ids, err, id)
	}
	if ids, err := j.Orphaned(ctx, tenantB, time.Now()); err != nil || len(ids) != 0 {
		t.Errorf("Orphaned of another tenant: %v, %v; want none", ids, err)
	}

	// Concurrent takers, without the tenant: exactly one gets it, whole.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []*cluster.JournaledSession
	var winners []string
	held := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("taker-%d", i)
			js, err := j.TakeOver(ctx, node, "", id, time.Hour)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got = append(got, js)
				winners = append(winners, node)
			case errors.Is(err, cluster.ErrLeaseHeld):
				held++
			default:
				t.Errorf("TakeOver: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || held != 7 {
		t.Fatalf("8 concurrent TakeOvers of an orphaned session: %d got it, %d found it held; want 1 and 7", len(got), held)
	}
	js := got[0]
	if js.Tenant != tenantA || js.SessionID != id || string(js.Record) != `{"v":2}` || string(js.AgentState) != `{"agent":2}` {
		t.Errorf("the session taken over: tenant %q, id %q, record %s, agent state %s; want %s, %s, the last saved of each", js.Tenant, js.SessionID, js.Record, js.AgentState, tenantA, id)
	}
	var settled []string
	for _, b := range js.AgentSettled {
		settled = append(settled, string(b))
	}
	if want := []string{`"y1"`, `"y2"`, `"y3"`}; !slices.Equal(settled, want) {
		t.Errorf("the settled calls taken over: %q, want %q (the reset's, then the one appended)", settled, want)
	}
	if end := time.UnixMilli(js.LeaseEndMS); end.After(time.Now()) || time.Since(end) > time.Minute {
		t.Errorf("LeaseEndMS %v: want the end of node-1's lease, just past", end)
	}
	want := map[string][]string{
		"sl1": {`{"slot":"sl1","seq":1}`, `{"replaced":2}`, `{"slot":"sl1","seq":3}`, `{"slot":"sl1","seq":4}`, `{"slot":"sl1","seq":5}`},
		"sl2": {`{"slot":"sl2","seq":1}`, `{"slot":"sl2","seq":2}`},
	}
	for slot, frames := range want {
		out := js.Outboxes[slot]
		var data []string
		for i, f := range out {
			data = append(data, string(f.Data))
			if f.Seq != int64(i+1) {
				t.Errorf("outbox %s: frame %d has seq %d, want %d", slot, i, f.Seq, i+1)
			}
		}
		if !slices.Equal(data, frames) {
			t.Errorf("outbox %s: %q, want %q", slot, data, frames)
		}
	}
	if lost, err := j.RenewLeases(ctx, "node-1", tenantA, []string{id}, time.Hour); err != nil || !slices.Equal(lost, []string{id}) {
		t.Errorf("RenewLeases by the node it was taken from: lost %v, %v; want [%s]", lost, err, id)
	}
	if lost, err := j.RenewLeases(ctx, winners[0], tenantA, []string{id}, time.Hour); err != nil || len(lost) != 0 {
		t.Errorf("RenewLeases by the node that took it: lost %v, %v; want none", lost, err)
	}

	// An outbox keeps at least its newest max frames, consecutive.
	for seq := int64(1); seq <= 300; seq++ {
		if err := put(winners[0], "sl3", seq, frame("sl3", seq), false, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.SaveSession(ctx, winners[0], tenantA, id, []byte(`{"v":3}`), []string{"sl1", "sl2", "sl3"}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	js, err = j.TakeOver(ctx, "node-3", tenantA, id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	out := js.Outboxes["sl3"]
	if len(out) < 10 || len(out) >= 300 || out[len(out)-1].Seq != 300 {
		t.Errorf("an outbox capped at 10 after 300 frames: %d frames, last %v; want at least 10, fewer than 300, ending at 300", len(out), out[len(out)-1:])
	}
	for i := 1; i < len(out); i++ {
		if out[i].Seq != out[i-1].Seq+1 {
			t.Errorf("capped outbox not consecutive at %d: %d after %d", i, out[i].Seq, out[i-1].Seq)
			break
		}
	}

	// A node that no longer holds the session (it parked it, or lost it) deletes nothing.
	if err := j.DropSession(ctx, "node-1", tenantA, id); err != nil {
		t.Fatal(err)
	}
	if _, err := j.TakeOver(ctx, "node-4", tenantA, id, time.Hour); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Errorf("TakeOver after a drop by a node that does not hold it: %v, want ErrLeaseHeld (still there)", err)
	}
	if err := j.DropSession(ctx, "node-3", tenantA, id); err != nil {
		t.Fatal(err)
	}
	if _, err := j.TakeOver(ctx, "node-4", "", id, time.Hour); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("TakeOver of a dropped session: %v, want ErrNotFound", err)
	}
	if _, err := j.TakeOver(ctx, "node-4", tenantA, "sess_not_journaled", time.Hour); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("TakeOver of a session never saved: %v, want ErrNotFound", err)
	}
	if ids, err := j.Orphaned(ctx, tenantA, time.Now().Add(2*time.Hour)); err != nil || len(ids) != 0 {
		t.Errorf("Orphaned after the drop: %v, %v; want none", ids, err)
	}
}

// RunFramesWithTransitions checks that a store that journals outboxes appends the frame a
// transition carries (jobs.FrameOut) in the transition's own step (SPEC 15): a call's
// tool_call and an accepted defer's ack are in the outbox under their seqs; a rejected defer,
// which applies no such transition, appends nothing.
func RunFramesWithTransitions(t *testing.T, newStore Factory) {
	f := newFixture(t, newStore)
	j, ok := f.store.(cluster.Journal)
	if !ok {
		t.Fatalf("%T does not implement cluster.Journal", f.store)
	}
	const sid, slot = "sess_frames", "slframes"
	render := func(what string) func(any) []byte {
		return func(o any) []byte {
			switch o := o.(type) {
			case *jobs.Job:
				return fmt.Appendf(nil, `{"%s":%q}`, what, o.CallID)
			case frames.ToolDeferredAck:
				return fmt.Appendf(nil, `{"%s":%q,"accepted":%t}`, what, o.CallID, o.Accepted)
			}
			return nil
		}
	}
	call := &jobs.FrameOut{Slot: slot, Seq: 1, Max: 100, Render: render("call")}
	job, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sid, Slot: slot,
		Tool: jobs.Tool{Name: "export", Deferred: true}, Frame: call})
	if err != nil {
		t.Fatal(err)
	}
	if !call.Applied {
		t.Error("FrameOut of a call: not Applied")
	}
	rejected := &jobs.FrameOut{Slot: slot, Seq: 2, Max: 100, Render: render("rejected")}
	if ack, err := f.engine.DeferWithFrame(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: sid, CallID: job.CallID}, "", "", rejected); err != nil || ack.Accepted {
		t.Fatalf("a defer with no handle: %+v, %v", ack, err)
	}
	if rejected.Applied {
		t.Error("FrameOut of a rejected defer: Applied")
	}
	accepted := &jobs.FrameOut{Slot: slot, Seq: 2, Max: 100, Render: render("ack")}
	if ack, err := f.engine.DeferWithFrame(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: sid, CallID: job.CallID}, "h-frames", "", accepted); err != nil || !ack.Accepted {
		t.Fatalf("a defer: %+v, %v", ack, err)
	}
	if !accepted.Applied {
		t.Error("FrameOut of an accepted defer: not Applied")
	}
	if err := j.SaveSession(f.ctx, "node-1", tenantA, sid, []byte(`{}`), []string{slot}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	js, err := j.TakeOver(f.ctx, "node-2", tenantA, sid, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fr := range js.Outboxes[slot] {
		got = append(got, fmt.Sprintf("%d %s", fr.Seq, fr.Data))
	}
	want := []string{fmt.Sprintf(`1 {"call":%q}`, job.CallID), fmt.Sprintf(`2 {"ack":%q,"accepted":true}`, job.CallID)}
	if !slices.Equal(got, want) {
		t.Errorf("the outbox after a call and a defer that carried their frames: %q, want %q", got, want)
	}
}

// RunRenewMany checks RenewLeases over many sessions at once (a node's whole tenant, which a
// store may renew in parts): every session node-1 holds is renewed, and exactly those held by
// another node come back as lost, in any order.
func RunRenewMany(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.NewFakeClock(epoch))
	j := s.(cluster.Journal)
	ctx := context.Background()
	var ids, others []string
	for i := range 300 {
		id := fmt.Sprintf("sess_many_%03d", i)
		node := "node-1"
		if i%7 == 3 {
			node = "node-2"
			others = append(others, id)
		}
		if err := j.SaveSession(ctx, node, tenantA, id, []byte(`{}`), nil, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	lost, err := j.RenewLeases(ctx, "node-1", tenantA, ids, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lost)
	if !slices.Equal(lost, others) {
		t.Errorf("RenewLeases of 300 sessions: lost %d %v, want the %d held by node-2 %v", len(lost), lost, len(others), others)
	}
	// A second from now the leases of 50 ms that were not renewed have run out; the renewed
	// ones (an hour) have not.
	orphaned, err := j.Orphaned(ctx, tenantA, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(orphaned)
	if !slices.Equal(orphaned, others) {
		t.Errorf("Orphaned after the renewal: %v, want only node-2's %v (node-1's were all renewed)", orphaned, others)
	}
}
