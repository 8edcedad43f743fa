package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// runRaces runs the races of SPEC 5, 6 and 11 against the store, with several engines
// ("nodes") sharing it.
func runRaces(t *testing.T, newStore Factory) {
	t.Run("FiftyDefersOneHandle", func(t *testing.T) { testHandleRace(t, newFixture(t, newStore)) })
	t.Run("ResultVersusTimeout", func(t *testing.T) { testResultVsTimeout(t, newFixture(t, newStore)) })
	t.Run("CancelVersusResult", func(t *testing.T) { testCancelVsResult(t, newFixture(t, newStore)) })
	t.Run("ParallelCancels", func(t *testing.T) { testParallelCancels(t, newFixture(t, newStore)) })
	t.Run("ChildCallVersusParentCancel", func(t *testing.T) { testChildVsParentCancel(t, newFixture(t, newStore)) })
	t.Run("TwoNodesTenThousandDeadlines", func(t *testing.T) { testTwoNodesDeadlines(t, newFixture(t, newStore)) })
	t.Run("RepeatedDeferAfterAnotherNodesTimeout", func(t *testing.T) { testRepeatedDeferAfterTimeout(t, newFixture(t, newStore)) })
}

// testRepeatedDeferAfterTimeout: another node times a deferred job out; a repeat of the
// job's accepted defer then reaches this engine, whose cache still shows the job deferred
// under that handle (the other node's change has not arrived). A repeat is answered without
// a transition, so nothing would catch the stale view: the store decides — the job is no
// longer pending, and the handle is burned (SPEC 6).
func testRepeatedDeferAfterTimeout(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, jobs.Tool{Name: "book", Deferred: true, DeferredTimeout: time.Minute})
	if ack := f.deferJob(j, "h-repeat"); !ack.Accepted {
		t.Fatalf("the defer: %+v", ack)
	}
	if ack := f.deferJob(j, "h-repeat"); !ack.Accepted {
		t.Fatalf("a repeat of the defer while the job is deferred: %+v, want accepted again", ack)
	}
	f.at(2 * time.Minute)
	other := f.newEngine()
	if n, err := other.Tick(f.ctx, f.clock.Now()); err != nil || n != 1 {
		t.Fatalf("the other node fired %d deadlines (%v), want the job's", n, err)
	}
	wantRejected(t, f.deferJob(j, "h-repeat"), frames.AckCallNotPending)
}

func testHandleRace(t *testing.T, f *fixture) {
	sess := session()
	nodes := []*jobs.Engine{f.engine, f.newEngine(), f.newEngine()}
	const n = 50
	calls := make([]*jobs.Job, n)
	for i := range calls {
		calls[i] = f.call(sess, deferredTool)
	}
	handle := "contended-" + sess
	acks := make([]frames.ToolDeferredAck, n)
	errs := make([]error, n)
	var start sync.WaitGroup
	start.Add(1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			acks[i], errs[i] = nodes[i%len(nodes)].Defer(f.ctx, addr(calls[i]), handle, "")
		}()
	}
	start.Done()
	wg.Wait()
	accepted := 0
	for i, ack := range acks {
		if errs[i] != nil {
			t.Fatalf("defer %d: %v", i, errs[i])
		}
		switch {
		case ack.Accepted:
			accepted++
		case ack.Reason != frames.AckHandleInUse:
			t.Fatalf("defer %d: %+v, want handle_in_use", i, ack)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d defers accepted with one handle, want exactly 1", accepted)
	}
	deferred := 0
	for _, c := range calls {
		if f.load(c.CallID).State == jobs.Deferred {
			deferred++
		}
	}
	if deferred != 1 {
		t.Fatalf("%d jobs deferred, want 1", deferred)
	}
}

// terminalChanges counts the changes into a terminal state reported for callID.
func (f *fixture) terminalChanges(callID string) int {
	n := 0
	for _, c := range f.events(callID) {
		if c.Job.State.Terminal() && !c.From.Terminal() && c.From != "" {
			n++
		}
	}
	return n
}

func testResultVsTimeout(t *testing.T, f *fixture) {
	sess := session()
	other := f.newEngine()
	wins := map[jobs.State]int{}
	for i := range 40 {
		f.at(time.Duration(i) * time.Hour)
		j := f.call(sess, instantTool)
		f.clock.Set(time.UnixMilli(j.DeadlineMS))
		var resErr, tickErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, resErr = f.engine.Result(f.ctx, addr(j), json.RawMessage(`"r"`), "", false)
		}()
		go func() {
			defer wg.Done()
			_, tickErr = other.Tick(f.ctx, f.clock.Now())
		}()
		wg.Wait()
		if tickErr != nil {
			t.Fatal(tickErr)
		}
		got := f.load(j.CallID)
		wins[got.State]++
		tl := f.timeline(sess)
		switch got.State {
		case jobs.TimedOut:
			if !errors.Is(resErr, jobs.ErrCallFinished) || count(tl, j.CallID, jobs.KindLateResultDropped) != 1 || count(tl, j.CallID, jobs.KindResult) != 0 {
				t.Fatalf("timeout won, but result answered %v and the timeline has %v", resErr, kinds(tl, j.CallID))
			}
		case jobs.Completed:
			if resErr != nil || count(tl, j.CallID, jobs.KindToolDeadlineTimeout) != 0 {
				t.Fatalf("result won, but it answered %v and the timeline has %v", resErr, kinds(tl, j.CallID))
			}
		default:
			t.Fatalf("state %s", got.State)
		}
		if n := f.terminalChanges(j.CallID); n != 1 {
			t.Fatalf("%d terminal transitions reported, want exactly 1", n)
		}
	}
	t.Logf("result vs timeout winners: %v", wins)
}

func testCancelVsResult(t *testing.T, f *fixture) {
	sess := session()
	other := f.newEngine()
	wins := map[jobs.State]int{}
	for range 40 {
		j := f.call(sess, deferredTool)
		f.deferJob(j, "cvr-"+j.CallID)
		var res frames.CancelResult
		var resErr, cErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, resErr = f.engine.Result(f.ctx, byHandle(sess, "cvr-"+j.CallID), json.RawMessage(`1`), "", false)
		}()
		go func() {
			defer wg.Done()
			res, _, cErr = other.Cancel(f.ctx, addr(j), frames.CancelHostRequest)
		}()
		wg.Wait()
		if cErr != nil {
			t.Fatal(cErr)
		}
		got := f.load(j.CallID)
		wins[got.State]++
		tl := f.timeline(sess)
		switch got.State {
		case jobs.Cancelled:
			if res != frames.CancelResultCancelled || !errors.Is(resErr, jobs.ErrCallFinished) || count(tl, j.CallID, jobs.KindLateResultDropped) != 1 {
				t.Fatalf("cancel won, but cancel answered %v, result %v, timeline %v", res, resErr, kinds(tl, j.CallID))
			}
		case jobs.Completed:
			if res != frames.CancelResultAlreadyDone || resErr != nil || count(tl, j.CallID, jobs.KindDuplicateCancel) != 1 {
				t.Fatalf("result won, but cancel answered %v, result %v, timeline %v", res, resErr, kinds(tl, j.CallID))
			}
		default:
			t.Fatalf("state %s", got.State)
		}
		if n := f.terminalChanges(j.CallID); n != 1 {
			t.Fatalf("%d terminal transitions reported, want 1", n)
		}
	}
	t.Logf("cancel vs result winners: %v", wins)
}

func testParallelCancels(t *testing.T, f *fixture) {
	sess := session()
	nodes := []*jobs.Engine{f.engine, f.newEngine()}
	j := f.call(sess, instantTool)
	const n = 10
	results := make([]frames.CancelResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], _, err = nodes[i%2].Cancel(f.ctx, addr(j), frames.CancelAgentRequest)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := map[frames.CancelResult]int{}
	for _, r := range results {
		got[r]++
	}
	if got[frames.CancelResultCancelled] != 1 || got[frames.CancelResultAlreadyCanceled] != n-1 {
		t.Fatalf("parallel cancels answered %v, want one cancelled and %d already_canceled", got, n-1)
	}
	tl := f.timeline(sess)
	if count(tl, j.CallID, jobs.KindCancel) != 1 || count(tl, j.CallID, jobs.KindDuplicateCancel) != n-1 {
		t.Fatalf("timeline %v", kinds(tl, j.CallID))
	}
}

// A child call created on one node while its parent is cancelled on another is closed exactly
// once with parent_cancelled, after its parent (SPEC 11): either the parent's cascade finds it
// among the children, or its creation finds the parent cancelled — never neither, and never
// both (which would record a duplicate_cancel).
func testChildVsParentCancel(t *testing.T, f *fixture) {
	sess := session()
	other := f.newEngine()
	for range 40 {
		p := f.call(sess, deferredTool)
		var child *jobs.Job
		var callErr, cancelErr error
		var res frames.CancelResult
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			child, callErr = f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: instantTool, ParentCallID: p.CallID})
		}()
		go func() {
			defer wg.Done()
			res, _, cancelErr = other.Cancel(f.ctx, addr(p), frames.CancelAgentRequest)
		}()
		wg.Wait()
		if callErr != nil || cancelErr != nil || res != frames.CancelResultCancelled {
			t.Fatalf("call %v, cancel %v %v", callErr, res, cancelErr)
		}
		got := f.load(child.CallID)
		if got.State != jobs.Cancelled || got.CancelReason != "parent_cancelled" {
			t.Fatalf("child of a parent cancelled meanwhile: %s/%s, want cancelled/parent_cancelled", got.State, got.CancelReason)
		}
		tl := f.timeline(sess)
		if n, d := count(tl, child.CallID, jobs.KindCancel), count(tl, child.CallID, jobs.KindDuplicateCancel); n != 1 || d != 0 {
			t.Fatalf("child closed %d times with %d duplicate cancels, want once and none: %v", n, d, kinds(tl, child.CallID))
		}
		pos := func(id string) int {
			return slices.IndexFunc(tl, func(e jobs.Entry) bool { return e.CallID == id && e.Kind == jobs.KindCancel })
		}
		if pos(p.CallID) > pos(child.CallID) {
			t.Fatalf("the child was closed before its parent: %v", tl)
		}
		if n := f.terminalChanges(child.CallID); n != 1 {
			t.Fatalf("%d terminal transitions reported for the child, want 1", n)
		}
	}
}

func testTwoNodesDeadlines(t *testing.T, f *fixture) {
	const n = 10000
	sess := session()
	nodes := []*jobs.Engine{f.engine, f.newEngine()}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				// Timeouts spread over 10.000–10.999 s.
				tool := jobs.Tool{Name: "t", Timeout: 10*time.Second + time.Duration(i%1000)*time.Millisecond}
				j, err := nodes[i%2].Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: tool})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = j.CallID
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Both nodes tick concurrently, twice each, every 50 ms of fake time.
	fired := make([]int, len(nodes))
	for at := 10 * time.Second; at <= 11*time.Second+100*time.Millisecond; at += 50 * time.Millisecond {
		f.at(at)
		now := f.clock.Now()
		var tw sync.WaitGroup
		for i, node := range nodes {
			for range 2 {
				tw.Add(1)
				go func() {
					defer tw.Done()
					k, err := node.Tick(f.ctx, now)
					if err != nil {
						t.Error(err)
					}
					f.mu.Lock()
					fired[i] += k
					f.mu.Unlock()
				}()
			}
		}
		tw.Wait()
	}
	if fired[0]+fired[1] != n {
		t.Fatalf("nodes fired %d + %d deadlines, want %d in all", fired[0], fired[1], n)
	}
	perCall := map[string]int{}
	f.mu.Lock()
	for _, c := range f.changes {
		if c.Event == jobs.EventTimedOut {
			perCall[c.Job.CallID]++
		}
	}
	f.mu.Unlock()
	for _, id := range ids {
		if perCall[id] != 1 {
			t.Fatalf("deadline of %s fired %d times, want exactly once", id, perCall[id])
		}
	}
	timeouts := map[string]int{}
	for _, e := range f.timeline(sess) {
		if e.Kind == jobs.KindToolDeadlineTimeout {
			timeouts[e.CallID]++
			if want := f.deadlineOf(e); e.AtMS < want || e.AtMS > want+50 {
				t.Fatalf("%s fired at %d, its deadline is %d", e.CallID, e.AtMS, want)
			}
		}
	}
	if len(timeouts) != n {
		t.Fatalf("%d jobs have a tool_deadline_timeout entry, want %d", len(timeouts), n)
	}
	for id, k := range timeouts {
		if k != 1 {
			t.Fatalf("%s has %d timeout entries", id, k)
		}
	}
	t.Logf("node 1 fired %d, node 2 fired %d", fired[0], fired[1])
}

func (f *fixture) deadlineOf(e jobs.Entry) int64 {
	dl, ok := e.Detail["deadline_ms"].(float64)
	if !ok {
		panic(fmt.Sprintf("entry without deadline_ms: %+v", e))
	}
	return int64(dl)
}
