package storetest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// runEngine drives the job lifecycle through a jobs.Engine over the store, with a fake clock.
func runEngine(t *testing.T, newStore Factory) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"CallIsPendingWithOrdinaryTimeout", testCallPending},
		{"OrdinaryTimeoutToTheMillisecond", testOrdinaryTimeout},
		{"ProgressAndPartialRearm", testRearm},
		{"RenewalsStopAtTenMinutes", testTenMinuteCap},
		{"OpenInteractionSuspendsTimeout", testInteractionSuspends},
		{"DeferredClockIsFixed", testDeferredClock},
		{"DeferAckTable", testDeferAckTable},
		{"DeferAckRowOrder", testDeferAckOrder},
		{"RejectedDeferStaysPending", testRejectedDeferPending},
		{"RepeatDeferIsIdempotent", testRepeatDefer},
		{"HandleAddressing", testHandleAddressing},
		{"OtherSessionsAndTenantsSeeNothing", testIsolation},
		{"Results", testResults},
		{"LateResultAfterTimeout", testLateResult},
		{"Cancel", testCancel},
		{"Interactions", testInteractions},
		{"InteractionEndsWithCall", testInteractionEndsWithCall},
		{"Permission", testPermission},
		{"PermissionTimeout", testPermissionTimeout},
		{"CascadeOnCancel", testCascadeCancel},
		{"CascadeOnTimeout", testCascadeTimeout},
		{"NoCascadeOnCompletion", testNoCascadeOnCompletion},
		{"ChildOfCancelledParent", testChildOfCancelledParent},
		{"CascadeThroughAnEndedChild", testCascadeThroughEndedChild},
		{"CascadeFinishedByAnotherEngine", testCascadeRecovery},
		{"CascadeFromAnEngineWithoutTheChildren", testCascadeElsewhere},
		{"LocalCallHasNoClock", testLocalCall},
		{"CallIDs", testCallIDs},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newFixture(t, newStore)) })
	}
}

func testCallPending(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, instantTool)
	wantState(t, j, jobs.Pending)
	if j.DeadlineMS != ms(10*time.Second) {
		t.Fatalf("deadline %d, want dispatch + 10 s = %d", j.DeadlineMS, ms(10*time.Second))
	}
	stored := f.load(j.CallID)
	if stored.DeadlineMS != j.DeadlineMS || string(stored.Arguments) != `{"x":1}` || stored.Slot != "slot-1" {
		t.Fatalf("stored %+v", stored)
	}
	wantKinds(t, kinds(f.timeline(sess), j.CallID), jobs.KindCall)
	if ev := f.eventKinds(j.CallID); !slices.Equal(ev, []jobs.Event{jobs.EventCreated}) {
		t.Fatalf("events %v", ev)
	}
	// A tool with no timeout gets the default of 10 s.
	k := f.call(sess, jobs.Tool{Name: "plain"})
	if k.DeadlineMS != ms(jobs.DefaultTimeout) {
		t.Fatalf("default deadline %d", k.DeadlineMS)
	}
}

func testOrdinaryTimeout(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, instantTool)
	f.at(10*time.Second - time.Millisecond)
	if n := f.tick(); n != 0 {
		t.Fatalf("fired %d at 9.999 s", n)
	}
	wantState(t, f.load(j.CallID), jobs.Pending)
	f.at(10 * time.Second)
	if n := f.tick(); n != 1 {
		t.Fatalf("fired %d at 10.000 s, want 1", n)
	}
	got := f.load(j.CallID)
	wantState(t, got, jobs.TimedOut)
	if got.CancelReason != string(frames.CancelTimeout) || got.FinishedMS != ms(10*time.Second) {
		t.Fatalf("timed out job %+v", got)
	}
	tl := f.timeline(sess)
	wantKinds(t, kinds(tl, j.CallID), jobs.KindCall, jobs.KindToolDeadlineTimeout)
	if tl[1].AtMS != ms(10*time.Second) || tl[1].Detail["clock"] != "ordinary" {
		t.Fatalf("timeout entry %+v", tl[1])
	}
	ev := f.events(j.CallID)
	if last := ev[len(ev)-1]; last.Event != jobs.EventTimedOut || last.From != jobs.Pending || last.Job.CancelReason != "timeout" {
		t.Fatalf("last change %+v", last)
	}
	// Fires once: later ticks do nothing.
	f.at(time.Hour)
	if n := f.tick(); n != 0 {
		t.Fatalf("fired again: %d", n)
	}
}

func testRearm(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, instantTool)
	f.at(9 * time.Second)
	if err := f.engine.Progress(f.ctx, addr(j), "halfway"); err != nil {
		t.Fatal(err)
	}
	if dl := f.load(j.CallID).DeadlineMS; dl != ms(19*time.Second) {
		t.Fatalf("after progress at 9 s: deadline %d, want 19 s", dl)
	}
	f.at(18 * time.Second)
	if _, err := f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`{"rows":3}`)}); err != nil {
		t.Fatal(err)
	}
	f.at(28*time.Second - time.Millisecond)
	if f.tick() != 0 {
		t.Fatalf("fired before the re-armed deadline")
	}
	f.at(28 * time.Second)
	if f.tick() != 1 {
		t.Fatalf("did not fire at the re-armed deadline of 28 s")
	}
	tl := f.timeline(sess)
	wantKinds(t, kinds(tl, j.CallID), jobs.KindCall, jobs.KindProgress, jobs.KindPartial, jobs.KindToolDeadlineTimeout)
	if tl[1].Detail["note"] != "halfway" {
		t.Fatalf("progress entry %+v", tl[1])
	}
	if err := f.engine.Progress(f.ctx, addr(j), "too late"); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("progress on a finished job: %v, want ErrCallFinished", err)
	}
	if _, err := f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`1`)}); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("partial on a finished job: %v, want ErrCallFinished", err)
	}
}

func testTenMinuteCap(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, jobs.Tool{Name: "slow", Timeout: 120 * time.Second})
	// Progress every 100 s keeps it alive, but no renewal passes dispatch + 10 min.
	for at := 100 * time.Second; at < 10*time.Minute; at += 100 * time.Second {
		f.at(at)
		if f.tick() != 0 {
			t.Fatalf("fired at %v", at)
		}
		if err := f.engine.Progress(f.ctx, addr(j), "still going"); err != nil {
			t.Fatal(err)
		}
	}
	if dl := f.load(j.CallID).DeadlineMS; dl != ms(10*time.Minute) {
		t.Fatalf("deadline %d, want dispatch + 10 min = %d", dl, ms(10*time.Minute))
	}
	f.at(10*time.Minute - time.Millisecond)
	if f.tick() != 0 {
		t.Fatalf("fired before 10 min")
	}
	f.at(10 * time.Minute)
	if f.tick() != 1 {
		t.Fatalf("did not fire at 10 min")
	}
	wantState(t, f.load(j.CallID), jobs.TimedOut)
}

func testInteractionSuspends(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, instantTool)
	f.at(5 * time.Second)
	out, err := f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`"q"`),
		Interaction: &jobs.Interaction{Prompt: "Window or aisle?", Options: []string{"window", "aisle"}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Interaction == nil || !strings.HasPrefix(out.Interaction.ID, "ia_") {
		t.Fatalf("interaction id %+v, want a minted ia_ id", out.Interaction)
	}
	got := f.load(j.CallID)
	if !got.InputRequired() || got.DeadlineMS != ms(10*time.Minute) {
		t.Fatalf("with an open interaction: input_required %v, deadline %d, want dispatch + 10 min", got.InputRequired(), got.DeadlineMS)
	}
	f.at(5 * time.Minute)
	if f.tick() != 0 {
		t.Fatalf("timed out while an interaction was open")
	}
	res, err := f.engine.UpdateInteraction(f.ctx, addr(j), out.Interaction.ID, frames.InteractionResolved)
	if err != nil || res != frames.UpdateApplied {
		t.Fatalf("update: %v %v", res, err)
	}
	got = f.load(j.CallID)
	if got.InputRequired() || got.DeadlineMS != ms(5*time.Minute+10*time.Second) {
		t.Fatalf("after close: input_required %v, deadline %d, want close + 10 s", got.InputRequired(), got.DeadlineMS)
	}
	// An interaction opened near the cap still ends at dispatch + 10 min.
	k := f.call(sess, instantTool)
	f.at(5*time.Minute + 5*time.Second)
	if _, err := f.engine.PartialResult(f.ctx, addr(k), jobs.Partial{Segment: json.RawMessage(`1`),
		Interaction: &jobs.Interaction{ID: "mine", Prompt: "ok?"}}); err != nil {
		t.Fatal(err)
	}
	if dl := f.load(k.CallID).DeadlineMS; dl != ms(15*time.Minute) {
		t.Fatalf("deadline %d, want its dispatch + 10 min", dl)
	}
}

func testDeferredClock(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	f.at(3 * time.Second)
	ack, err := f.engine.Defer(f.ctx, addr(j), "render-"+j.CallID, "Rendering")
	if err != nil || !ack.Accepted || ack.DeadlineMS != ms(time.Hour+3*time.Second) {
		t.Fatalf("ack %+v %v, want accepted with deadline defer + 1 h", ack, err)
	}
	got := f.load(j.CallID)
	wantState(t, got, jobs.Deferred)
	if got.StatusLabel != "Rendering" || got.Handle != "render-"+j.CallID {
		t.Fatalf("deferred job %+v", got)
	}
	// Nothing extends the deferred clock: neither progress nor partial results nor interactions.
	f.at(30 * time.Minute)
	_ = f.engine.Progress(f.ctx, addr(j), "rendering frames")
	_, _ = f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`1`), Reply: true,
		Interaction: &jobs.Interaction{Prompt: "Keep going?"}})
	if dl := f.load(j.CallID).DeadlineMS; dl != ack.DeadlineMS {
		t.Fatalf("deadline moved to %d", dl)
	}
	// Its ordinary timeout no longer applies.
	f.at(time.Hour + 3*time.Second - time.Millisecond)
	if f.tick() != 0 {
		t.Fatalf("fired before deferred_timeout")
	}
	f.at(time.Hour + 3*time.Second)
	if f.tick() != 1 {
		t.Fatalf("did not fire at deferred_timeout")
	}
	got = f.load(j.CallID)
	wantState(t, got, jobs.TimedOut)
	tl := f.timeline(sess)
	last := tl[len(tl)-1]
	if last.Kind != jobs.KindToolDeadlineTimeout && last.Kind != jobs.KindInteraction {
		t.Fatalf("last entry %+v", last)
	}
	if count(tl, j.CallID, jobs.KindToolDeadlineTimeout) != 1 {
		t.Fatalf("timeline %v", kinds(tl, j.CallID))
	}
	for _, e := range tl {
		if e.Kind == jobs.KindToolDeadlineTimeout && (e.Detail["clock"] != "deferred" || e.Handle != got.Handle) {
			t.Fatalf("timeout entry %+v", e)
		}
	}
	if rec, err := f.store.Handle(f.ctx, tenantA, got.Handle); err != nil || !rec.Burned {
		t.Fatalf("handle after timeout: %+v %v, want burned", rec, err)
	}
}

// defer is a helper that defers j with h.
func (f *fixture) deferJob(j *jobs.Job, h string) frames.ToolDeferredAck {
	f.t.Helper()
	ack, err := f.engine.Defer(f.ctx, addr(j), h, "")
	if err != nil {
		f.t.Fatalf("Defer: %v", err)
	}
	return ack
}

func wantRejected(t testing.TB, ack frames.ToolDeferredAck, reason frames.DeferAckReason) {
	t.Helper()
	if ack.Accepted || ack.Reason != reason || ack.DeadlineMS != 0 {
		t.Fatalf("ack %+v, want accepted false, reason %q, no deadline", ack, reason)
	}
}

func testDeferAckTable(t *testing.T, f *fixture) {
	sess := session()
	uniq := func(s string) string { return s + "-" + sess }
	// invalid_handle
	j := f.call(sess, deferredTool)
	for _, h := range []string{"", strings.Repeat("h", 129), "a\nb", "tab\there", "del\x7f", "c1\u0085", "nul\x00"} {
		wantRejected(t, f.deferJob(j, h), frames.AckInvalidHandle)
	}
	if ack := f.deferJob(j, strings.Repeat("h", 128)+sess[:0]); !ack.Accepted {
		t.Fatalf("128-byte handle: %+v, want accepted", ack)
	}
	// unknown_call
	ack, _ := f.engine.Defer(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: sess, CallID: "call_aaaaaaaaaaaaaaaaaaaa"}, uniq("x"), "")
	wantRejected(t, ack, frames.AckUnknownCall)
	// call_not_pending: deferred under another handle, finished, awaiting permission.
	d := f.call(sess, deferredTool)
	if !f.deferJob(d, uniq("first")).Accepted {
		t.Fatal("first defer rejected")
	}
	wantRejected(t, f.deferJob(d, uniq("second")), frames.AckCallNotPending)
	done := f.call(sess, deferredTool)
	if _, err := f.engine.Result(f.ctx, addr(done), json.RawMessage(`"ok"`), "", false); err != nil {
		t.Fatal(err)
	}
	wantRejected(t, f.deferJob(done, uniq("done")), frames.AckCallNotPending)
	perm := f.call(sess, jobs.Tool{Name: "p", Deferred: true, RequiresPermission: true})
	wantRejected(t, f.deferJob(perm, uniq("perm")), frames.AckCallNotPending)
	// not_deferrable
	wantRejected(t, f.deferJob(f.call(sess, instantTool), uniq("nd")), frames.AckNotDeferrable)
	// handle_reserved: the exact form of a broker call id; near misses are fine.
	r := f.call(sess, deferredTool)
	wantRejected(t, f.deferJob(r, "call_abcdefghijklmnopqrst"), frames.AckHandleReserved)
	wantRejected(t, f.deferJob(r, jobs.NewCallID()), frames.AckHandleReserved)
	for _, near := range []string{"call_abcdefghijklmnopqrs", "call_abcdefghijklmnopqrstu", "call_ABCDEFGHIJKLMNOPQRST", "call_abcdefghijklmnopqrs1"} {
		k := f.call(sess, deferredTool)
		if ack := f.deferJob(k, near+sess); !ack.Accepted {
			t.Fatalf("handle %q rejected: %+v", near+sess, ack)
		}
	}
	// handle_in_use: held by a live job (of any session of the tenant).
	other := session()
	holder, _ := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: other, Tool: deferredTool})
	if !f.deferJob(holder, uniq("shared")).Accepted {
		t.Fatal("holder rejected")
	}
	wantRejected(t, f.deferJob(f.call(sess, deferredTool), uniq("shared")), frames.AckHandleInUse)
	// handle_burned: accepted before and its job ended.
	if _, err := f.engine.Result(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: other, Handle: uniq("shared")}, json.RawMessage(`1`), "", false); err != nil {
		t.Fatal(err)
	}
	wantRejected(t, f.deferJob(f.call(sess, deferredTool), uniq("shared")), frames.AckHandleBurned)
	// Every rejection is on the timeline as defer_rejected with its reason, in the words of
	// SPEC 6, and the handle it named.
	var reasons []string
	for _, e := range f.timeline(sess) {
		if e.Kind == jobs.KindDeferRejected {
			reason, _ := e.Detail["reason"].(string)
			reasons = append(reasons, reason)
			if _, ok := e.Detail["handle"].(string); !ok {
				t.Fatalf("defer_rejected without the handle: %+v", e)
			}
		}
	}
	want := []string{"invalid_handle", "invalid_handle", "invalid_handle", "invalid_handle", "invalid_handle",
		"invalid_handle", "invalid_handle", "unknown_call", "call_not_pending", "call_not_pending", "call_not_pending",
		"not_deferrable", "handle_reserved", "handle_reserved", "handle_in_use", "handle_burned"}
	if !slices.Equal(reasons, want) {
		t.Fatalf("defer_rejected reasons %v, want %v (one per rejection)", reasons, want)
	}
}

func testDeferAckOrder(t *testing.T, f *fixture) {
	sess := session()
	// invalid_handle comes before unknown_call.
	ack, _ := f.engine.Defer(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: sess, CallID: "call_nope"}, "", "")
	wantRejected(t, ack, frames.AckInvalidHandle)
	// call_not_pending comes before not_deferrable and handle_reserved.
	done := f.call(sess, instantTool)
	_, _ = f.engine.Result(f.ctx, addr(done), json.RawMessage(`1`), "", false)
	wantRejected(t, f.deferJob(done, "call_abcdefghijklmnopqrst"), frames.AckCallNotPending)
	// not_deferrable comes before handle_reserved.
	wantRejected(t, f.deferJob(f.call(sess, instantTool), "call_abcdefghijklmnopqrst"), frames.AckNotDeferrable)
	// A repeat of an accepted defer comes before call_not_pending.
	d := f.call(sess, deferredTool)
	h := "order-" + sess
	first := f.deferJob(d, h)
	if again := f.deferJob(d, h); !again.Accepted || again.DeadlineMS != first.DeadlineMS {
		t.Fatalf("repeat %+v, want %+v", again, first)
	}
}

func testRejectedDeferPending(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, instantTool)
	f.at(4 * time.Second)
	wantRejected(t, f.deferJob(j, "nd-"+sess), frames.AckNotDeferrable)
	got := f.load(j.CallID)
	wantState(t, got, jobs.Pending)
	if got.DeadlineMS != ms(10*time.Second) || got.Handle != "" {
		t.Fatalf("a rejected defer changed the job: %+v", got)
	}
	if _, err := f.store.Handle(f.ctx, tenantA, "nd-"+sess); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("a rejected defer burned its handle: %v", err)
	}
	f.at(10 * time.Second)
	if f.tick() != 1 {
		t.Fatalf("a job whose defer was rejected did not time out on its ordinary timeout")
	}
}

func testRepeatDefer(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	h := "rep-" + sess
	first := f.deferJob(j, h)
	v := f.load(j.CallID).Version
	f.at(time.Minute)
	second := f.deferJob(j, h)
	if !second.Accepted || second.DeadlineMS != first.DeadlineMS {
		t.Fatalf("repeat %+v, want %+v", second, first)
	}
	if got := f.load(j.CallID).Version; got != v {
		t.Fatalf("a repeat made a second transition (version %d → %d)", v, got)
	}
	if n := count(f.timeline(sess), j.CallID, jobs.KindDeferred); n != 1 {
		t.Fatalf("%d deferred entries", n)
	}
	// Once the job ended, a repeat is no longer a repeat.
	_, _ = f.engine.Result(f.ctx, addr(j), json.RawMessage(`1`), "", false)
	wantRejected(t, f.deferJob(j, h), frames.AckCallNotPending)
}

func testHandleAddressing(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	h := "addr-" + sess
	f.deferJob(j, h)
	if err := f.engine.Progress(f.ctx, byHandle(sess, h), "by handle"); err != nil {
		t.Fatalf("progress by handle: %v", err)
	}
	// A fresh engine (another node) resolves the handle through the store.
	other := f.newEngine()
	done, err := other.Result(f.ctx, byHandle(sess, h), json.RawMessage(`{"url":"x"}`), "", false)
	if err != nil || done.State != jobs.Completed || string(done.Output) != `{"url":"x"}` {
		t.Fatalf("result by handle on another engine: %+v %v", done, err)
	}
	if _, err := f.engine.Result(f.ctx, byHandle(sess, h), json.RawMessage(`2`), "", false); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("late result by handle: %v, want ErrCallFinished", err)
	}
	if err := f.engine.Progress(f.ctx, byHandle(sess, "never-"+sess), "x"); !errors.Is(err, jobs.ErrUnknownCall) {
		t.Fatalf("unknown handle: %v", err)
	}
}

func testIsolation(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	h := "iso-" + sess
	f.deferJob(j, h)
	for _, a := range []jobs.Addr{
		{Tenant: tenantA, SessionID: session(), CallID: j.CallID},
		{Tenant: tenantA, SessionID: session(), Handle: h},
		{Tenant: tenantB, SessionID: sess, CallID: j.CallID},
		{Tenant: tenantB, SessionID: sess, Handle: h},
	} {
		if err := f.engine.Progress(f.ctx, a, "x"); !errors.Is(err, jobs.ErrUnknownCall) {
			t.Fatalf("progress from %+v: %v, want ErrUnknownCall", a, err)
		}
		if _, err := f.engine.Result(f.ctx, a, json.RawMessage(`1`), "", false); !errors.Is(err, jobs.ErrUnknownCall) {
			t.Fatalf("result from %+v: %v, want ErrUnknownCall", a, err)
		}
		if res, _, err := f.engine.Cancel(f.ctx, a, frames.CancelHostRequest); err != nil || res != frames.CancelResultUnknownCall {
			t.Fatalf("cancel from %+v: %v %v, want unknown_call", a, res, err)
		}
		if a.CallID != "" {
			ack, _ := f.engine.Defer(f.ctx, a, "iso2-"+sess, "")
			wantRejected(t, ack, frames.AckUnknownCall)
		}
	}
	wantState(t, f.load(j.CallID), jobs.Deferred)
	// Tenant B may use the same handle for its own job.
	bj, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantB, SessionID: sess, Tool: deferredTool})
	if err != nil {
		t.Fatal(err)
	}
	if ack, _ := f.engine.Defer(f.ctx, addr(bj), h, ""); !ack.Accepted {
		t.Fatalf("tenant B's defer with tenant A's handle: %+v, want accepted (handles are per tenant)", ack)
	}
}

func testResults(t *testing.T, f *fixture) {
	sess := session()
	ok := f.call(sess, instantTool)
	f.at(2 * time.Second)
	done, err := f.engine.Result(f.ctx, addr(ok), json.RawMessage(`{"temp":21}`), "", false)
	if err != nil || done.State != jobs.Completed || done.FinishedMS != ms(2*time.Second) || done.DeadlineMS != 0 {
		t.Fatalf("completed %+v %v", done, err)
	}
	bad := f.call(sess, instantTool)
	failed, err := f.engine.Result(f.ctx, addr(bad), nil, "upstream 503", true)
	if err != nil || failed.State != jobs.Failed || failed.Error != "upstream 503" {
		t.Fatalf("failed %+v %v", failed, err)
	}
	tl := f.timeline(sess)
	wantKinds(t, kinds(tl, bad.CallID), jobs.KindCall, jobs.KindResult)
	for _, e := range tl {
		if e.Kind == jobs.KindResult && e.CallID == bad.CallID && (e.Detail["error"] != "upstream 503" || e.Detail["state"] != "failed") {
			t.Fatalf("failed result entry %+v", e)
		}
	}
	// A second result is late: recorded, not applied.
	if _, err := f.engine.Result(f.ctx, addr(ok), json.RawMessage(`2`), "", false); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("second result: %v", err)
	}
	if got := f.load(ok.CallID); string(got.Output) != `{"temp":21}` {
		t.Fatalf("a late result changed the output: %s", got.Output)
	}
	if count(f.timeline(sess), ok.CallID, jobs.KindLateResultDropped) != 1 {
		t.Fatalf("late result not recorded")
	}
	// A job awaiting permission takes no result.
	p := f.call(sess, permitTool)
	if _, err := f.engine.Result(f.ctx, addr(p), json.RawMessage(`1`), "", false); !errors.Is(err, jobs.ErrCallNotPending) {
		t.Fatalf("result for a job awaiting permission: %v", err)
	}
}

func testLateResult(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, instantTool)
	f.at(10 * time.Second)
	f.tick()
	f.at(11 * time.Second)
	if _, err := f.engine.Result(f.ctx, addr(j), json.RawMessage(`"late"`), "", false); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("result after timeout: %v, want ErrCallFinished", err)
	}
	wantState(t, f.load(j.CallID), jobs.TimedOut)
	tl := f.timeline(sess)
	wantKinds(t, kinds(tl, j.CallID), jobs.KindCall, jobs.KindToolDeadlineTimeout, jobs.KindLateResultDropped)
	if e := tl[2]; e.Detail["state"] != "timed_out" || e.Detail["output"] != "late" || e.AtMS != ms(11*time.Second) {
		t.Fatalf("late_result_dropped %+v", e)
	}
	ev := f.eventKinds(j.CallID)
	if ev[len(ev)-1] != jobs.EventLateResultDropped {
		t.Fatalf("events %v", ev)
	}
}

func testCancel(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	h := "cx-" + sess
	f.deferJob(j, h)
	res, _, err := f.engine.Cancel(f.ctx, byHandle(sess, h), frames.CancelHostRequest)
	if err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("cancel: %v %v", res, err)
	}
	got := f.load(j.CallID)
	if got.State != jobs.Cancelled || got.CancelReason != "host_request" {
		t.Fatalf("cancelled job %+v", got)
	}
	if rec, _ := f.store.Handle(f.ctx, tenantA, h); !rec.Burned {
		t.Fatalf("handle not burned by cancel")
	}
	res, _, _ = f.engine.Cancel(f.ctx, addr(j), frames.CancelAgentRequest)
	if res != frames.CancelResultAlreadyCanceled {
		t.Fatalf("second cancel: %v, want already_canceled", res)
	}
	done := f.call(sess, instantTool)
	_, _ = f.engine.Result(f.ctx, addr(done), json.RawMessage(`1`), "", false)
	if res, _, _ := f.engine.Cancel(f.ctx, addr(done), frames.CancelCallerRequest); res != frames.CancelResultAlreadyDone {
		t.Fatalf("cancel after completion: %v, want already_done", res)
	}
	tl := f.timeline(sess)
	wantKinds(t, kinds(tl, j.CallID), jobs.KindCall, jobs.KindDeferred, jobs.KindCancel, jobs.KindDuplicateCancel)
	if count(tl, done.CallID, jobs.KindDuplicateCancel) != 1 {
		t.Fatalf("a cancel after completion was not recorded")
	}
	// A result after a cancel is late.
	if _, err := f.engine.Result(f.ctx, addr(j), json.RawMessage(`1`), "", false); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("result after cancel: %v", err)
	}
	if res, _, _ := f.engine.Cancel(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: sess, CallID: "call_zzzzzzzzzzzzzzzzzzzz"}, frames.CancelHostRequest); res != frames.CancelResultUnknownCall {
		t.Fatalf("cancel of an unknown call: %v", res)
	}
	// Exactly one cancelled change for the job.
	n := 0
	for _, c := range f.events(j.CallID) {
		if c.Event == jobs.EventCancelled {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d cancelled changes", n)
	}
}

func testInteractions(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	f.deferJob(j, "ia-"+sess)
	first, err := f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`1`),
		Interaction: &jobs.Interaction{ID: "colour", Prompt: "Red or blue?", Options: []string{"red", "blue"}}})
	if err != nil || first.Interaction.ID != "colour" || first.Superseded != "" {
		t.Fatalf("first interaction %+v %v", first, err)
	}
	second, err := f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`2`),
		Interaction: &jobs.Interaction{Prompt: "Size?"}})
	if err != nil || second.Superseded != "colour" || second.Interaction.ID == "" {
		t.Fatalf("second interaction %+v %v", second, err)
	}
	got := f.load(j.CallID)
	if got.Interaction == nil || got.Interaction.ID != second.Interaction.ID || got.Closed["colour"] != jobs.InteractionSuperseded {
		t.Fatalf("job interactions %+v %v", got.Interaction, got.Closed)
	}
	// Deterministic acks.
	for i, want := range []frames.InteractionUpdateResult{frames.UpdateAlreadyClosed, frames.UpdateAlreadyClosed} {
		if res, _ := f.engine.UpdateInteraction(f.ctx, addr(j), "colour", frames.InteractionCancelled); res != want {
			t.Fatalf("update of a superseded interaction #%d: %v, want %v", i, res, want)
		}
	}
	if res, _ := f.engine.UpdateInteraction(f.ctx, addr(j), "nope", frames.InteractionResolved); res != frames.UpdateUnknownInteraction {
		t.Fatalf("unknown interaction: %v", res)
	}
	res, err := f.engine.AnswerInteraction(f.ctx, addr(j), second.Interaction.ID, jobs.Answer{Text: "large"})
	if err != nil || res != frames.UpdateApplied {
		t.Fatalf("answer: %v %v", res, err)
	}
	if res, _ := f.engine.UpdateInteraction(f.ctx, addr(j), second.Interaction.ID, frames.InteractionResolved); res != frames.UpdateAlreadyClosed {
		t.Fatalf("update after the answer: %v", res)
	}
	// Update applied then already_closed.
	third, _ := f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`3`),
		Interaction: &jobs.Interaction{ID: "third", Prompt: "Ship?"}})
	r1, _ := f.engine.UpdateInteraction(f.ctx, addr(j), third.Interaction.ID, frames.InteractionResolved)
	r2, _ := f.engine.UpdateInteraction(f.ctx, addr(j), third.Interaction.ID, frames.InteractionResolved)
	if r1 != frames.UpdateApplied || r2 != frames.UpdateAlreadyClosed {
		t.Fatalf("same update twice: %v then %v, want applied then already_closed", r1, r2)
	}
	got = f.load(j.CallID)
	if got.InputRequired() || got.State != jobs.Deferred {
		t.Fatalf("after updates: %+v", got)
	}
	var states []string
	for _, e := range f.timeline(sess) {
		if e.Kind == jobs.KindInteraction {
			states = append(states, e.Detail["interaction_id"].(string)+":"+e.Detail["state"].(string))
		}
	}
	want := []string{"colour:opened", "colour:superseded", second.Interaction.ID + ":opened", second.Interaction.ID + ":answered", "third:opened", "third:resolved"}
	if !slices.Equal(states, want) {
		t.Fatalf("interaction entries %v, want %v", states, want)
	}
	if _, err := f.engine.UpdateInteraction(f.ctx, jobs.Addr{Tenant: tenantA, SessionID: session(), CallID: j.CallID}, "third", frames.InteractionResolved); !errors.Is(err, jobs.ErrUnknownCall) {
		t.Fatalf("update from another session: %v", err)
	}
}

func testInteractionEndsWithCall(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, deferredTool)
	f.deferJob(j, "iend-"+sess)
	_, _ = f.engine.PartialResult(f.ctx, addr(j), jobs.Partial{Segment: json.RawMessage(`1`),
		Interaction: &jobs.Interaction{ID: "q", Prompt: "?"}})
	if _, err := f.engine.Result(f.ctx, addr(j), json.RawMessage(`1`), "", false); err != nil {
		t.Fatal(err)
	}
	got := f.load(j.CallID)
	if got.InputRequired() || got.Closed["q"] != jobs.InteractionEnded {
		t.Fatalf("interaction after the call ended: %+v %v", got.Interaction, got.Closed)
	}
	if res, _ := f.engine.UpdateInteraction(f.ctx, addr(j), "q", frames.InteractionResolved); res != frames.UpdateAlreadyClosed {
		t.Fatalf("update after the call ended: %v", res)
	}
	var states []string
	for _, e := range f.timeline(sess) {
		if e.Kind == jobs.KindInteraction && e.CallID == j.CallID {
			states = append(states, e.Detail["interaction_id"].(string)+":"+e.Detail["state"].(string))
		}
	}
	if !slices.Equal(states, []string{"q:opened", "q:ended"}) {
		t.Fatalf("interaction entries %v, want q:opened then q:ended", states)
	}
}

func testPermission(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, permitTool)
	wantState(t, j, jobs.AwaitingPermission)
	if j.DeadlineMS != 0 {
		t.Fatalf("a job awaiting permission has a deadline before the ask: %d", j.DeadlineMS)
	}
	if err := f.engine.Progress(f.ctx, addr(j), "x"); !errors.Is(err, jobs.ErrCallNotPending) {
		t.Fatalf("progress while awaiting permission: %v", err)
	}
	f.at(time.Second)
	if err := f.engine.PermissionAsked(f.ctx, addr(j), f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	hold := jobs.Decision{Verdict: jobs.Hold, Reason: "ambiguous", Transcript: "maybe", Ask: "Shall I run buy?"}
	if err := f.engine.Permission(f.ctx, addr(j), hold); err != nil {
		t.Fatal(err)
	}
	wantState(t, f.load(j.CallID), jobs.AwaitingPermission)
	f.at(5 * time.Second)
	if err := f.engine.Permission(f.ctx, addr(j), jobs.Decision{Verdict: jobs.Approve, Reason: "clear", Transcript: "yes"}); err != nil {
		t.Fatal(err)
	}
	got := f.load(j.CallID)
	if got.State != jobs.Pending || got.DispatchedMS != ms(5*time.Second) || got.DeadlineMS != ms(15*time.Second) {
		t.Fatalf("approved job %+v, want pending, dispatched at approval with its ordinary timeout", got)
	}
	if err := f.engine.Permission(f.ctx, addr(j), jobs.Decision{Verdict: jobs.Decline}); !errors.Is(err, jobs.ErrCallNotPending) {
		t.Fatalf("decision for an approved job: %v", err)
	}
	// An approved background job detaches as one (SPEC 4: approval first, then the defer).
	bg := f.call(sess, jobs.Tool{Name: "book", RequiresPermission: true, Deferred: true, DeferredTimeout: time.Hour})
	wantRejected(t, f.deferJob(bg, "book-early-"+sess), frames.AckCallNotPending)
	if err := f.engine.Permission(f.ctx, addr(bg), jobs.Decision{Verdict: jobs.Approve, Reason: "clear", Transcript: "yes"}); err != nil {
		t.Fatal(err)
	}
	if ack := f.deferJob(bg, "book-"+sess); !ack.Accepted || ack.DeadlineMS != ms(5*time.Second+time.Hour) {
		t.Fatalf("defer of an approved job: %+v, want accepted with deadline defer + 1 h", ack)
	}
	d := f.call(sess, permitTool)
	if err := f.engine.Permission(f.ctx, addr(d), jobs.Decision{Verdict: jobs.Decline, Reason: "refused", Transcript: "no"}); err != nil {
		t.Fatal(err)
	}
	wantState(t, f.load(d.CallID), jobs.Declined)
	var verdicts []string
	for _, e := range f.timeline(sess) {
		if e.Kind == jobs.KindPermission {
			verdicts = append(verdicts, e.Detail["verdict"].(string))
			for _, k := range []string{"verdict", "reason", "transcript", "ask"} {
				if _, ok := e.Detail[k]; !ok {
					t.Fatalf("permission entry without %s: %+v", k, e)
				}
			}
		}
	}
	if !slices.Equal(verdicts, []string{"hold", "approve", "approve", "decline"}) {
		t.Fatalf("permission entries %v", verdicts)
	}
}

func testPermissionTimeout(t *testing.T, f *fixture) {
	sess := session()
	j := f.call(sess, permitTool)
	f.at(10 * time.Minute)
	if f.tick() != 0 {
		t.Fatalf("declined before the ask was spoken")
	}
	if err := f.engine.PermissionAsked(f.ctx, addr(j), epoch.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.at(12*time.Minute - time.Millisecond)
	if f.tick() != 0 {
		t.Fatalf("declined before permission_timeout")
	}
	f.at(12 * time.Minute)
	if f.tick() != 1 {
		t.Fatalf("not declined at ask end + 120 s")
	}
	got := f.load(j.CallID)
	if got.State != jobs.Declined || got.CancelReason != "" {
		t.Fatalf("job %+v, want declined (silence is never approval)", got)
	}
	ev := f.events(j.CallID)
	if ev[len(ev)-1].Event != jobs.EventDeclined {
		t.Fatalf("events %v", f.eventKinds(j.CallID))
	}
	// The decision is on the timeline as permission, with the four fields of SPEC 12.
	tl := f.timeline(sess)
	wantKinds(t, kinds(tl, j.CallID), jobs.KindCall, jobs.KindPermission)
	e := tl[len(tl)-1]
	want := map[string]any{"verdict": "decline", "reason": "permission_timeout", "transcript": "", "ask": ""}
	if e.AtMS != ms(12*time.Minute) || !maps.Equal(e.Detail, want) {
		t.Fatalf("permission entry %+v, want at %d with detail %v", e, ms(12*time.Minute), want)
	}
	// A clarification is a new ask: the clock counts from its end (SPEC 12).
	k := f.call(sess, permitTool)
	if err := f.engine.PermissionAsked(f.ctx, addr(k), epoch.Add(13*time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.at(14 * time.Minute)
	if err := f.engine.Permission(f.ctx, addr(k), jobs.Decision{Verdict: jobs.Hold, Reason: "ambiguous", Transcript: "hmm"}); err != nil {
		t.Fatal(err)
	}
	if err := f.engine.PermissionAsked(f.ctx, addr(k), epoch.Add(14*time.Minute+5*time.Second)); err != nil {
		t.Fatal(err)
	}
	f.at(15 * time.Minute)
	if f.tick() != 0 {
		t.Fatalf("declined at the first ask's end + 120 s, though a clarification was asked since")
	}
	f.at(16*time.Minute + 5*time.Second - time.Millisecond)
	if f.tick() != 0 {
		t.Fatalf("declined before the clarification's end + 120 s")
	}
	f.at(16*time.Minute + 5*time.Second)
	if f.tick() != 1 {
		t.Fatalf("not declined at the clarification's end + 120 s")
	}
	wantState(t, f.load(k.CallID), jobs.Declined)
}

// tree builds parent P (deferred), children C1 and C2 of P, and grandchild G of C1.
func (f *fixture) tree(sess string) (p, c1, c2, g *jobs.Job) {
	f.t.Helper()
	return f.treeUnder(sess, deferredTool)
}

// treeUnder builds the tree with a parent of the given (deferred) tool.
func (f *fixture) treeUnder(sess string, parentTool jobs.Tool) (p, c1, c2, g *jobs.Job) {
	f.t.Helper()
	mk := func(parent string, tool jobs.Tool) *jobs.Job {
		j, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: tool, ParentCallID: parent})
		if err != nil {
			f.t.Fatal(err)
		}
		return j
	}
	p = mk("", parentTool)
	f.deferJob(p, "tree-"+p.CallID)
	c1 = mk(p.CallID, deferredTool)
	f.deferJob(c1, "tree-"+c1.CallID)
	c2 = mk(p.CallID, instantTool)
	g = mk(c1.CallID, instantTool)
	return
}

// closedOrder returns the call ids of cancelled/timed_out changes in the order they were reported.
func (f *fixture) closedOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.changes {
		if c.Event == jobs.EventCancelled || c.Event == jobs.EventTimedOut {
			out = append(out, c.Job.CallID)
		}
	}
	return out
}

func checkCascade(t *testing.T, f *fixture, sess string, p, c1, c2, g *jobs.Job) {
	t.Helper()
	for _, k := range []*jobs.Job{c1, c2, g} {
		got := f.load(k.CallID)
		if got.State != jobs.Cancelled || got.CancelReason != string(frames.CancelParentCancelled) {
			t.Fatalf("descendant %s: %s/%s, want cancelled/parent_cancelled", k.CallID, got.State, got.CancelReason)
		}
		if n := count(f.timeline(sess), k.CallID, jobs.KindCancel); n != 1 {
			t.Fatalf("descendant %s closed %d times", k.CallID, n)
		}
	}
	order := f.closedOrder()
	pos := func(id string) int { return slices.Index(order, id) }
	if pos(p.CallID) != 0 || pos(c1.CallID) < 0 || pos(g.CallID) < pos(c1.CallID) || pos(c2.CallID) < 0 || len(order) != 4 {
		t.Fatalf("close order %v: the parent first, each descendant after its parent, each once", order)
	}
	// Their late results are dropped and recorded.
	if _, err := f.engine.Result(f.ctx, addr(c1), json.RawMessage(`1`), "", false); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("late result of a descendant: %v", err)
	}
	if count(f.timeline(sess), c1.CallID, jobs.KindLateResultDropped) != 1 {
		t.Fatalf("late result of a descendant not recorded")
	}
	kids, _ := f.store.Children(f.ctx, tenantA, p.CallID)
	for _, id := range kids {
		if s := f.load(id).State; !s.Terminal() {
			t.Fatalf("child %s left %s", id, s)
		}
	}
}

// noneDue checks that nothing is left in the deadline index: no job deadline and no cascade
// marker, even long after every lease would have run out.
func (f *fixture) noneDue() {
	f.t.Helper()
	if due, err := f.store.ClaimDue(f.ctx, tenantA, f.clock.Now().Add(24*time.Hour), time.Second, 100); err != nil || len(due) != 0 {
		f.t.Fatalf("still due after the cascade: %+v %v", due, err)
	}
}

func testCascadeCancel(t *testing.T, f *fixture) {
	sess := session()
	p, c1, c2, g := f.tree(sess)
	if res, _, err := f.engine.Cancel(f.ctx, addr(p), frames.CancelAgentRequest); err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("cancel parent: %v %v", res, err)
	}
	checkCascade(t, f, sess, p, c1, c2, g)
	f.noneDue() // the cascade markers of p and c1 were cleared
	// Nothing is left for the scheduler.
	f.at(time.Minute)
	if n := f.tick(); n != 0 {
		t.Fatalf("tick fired %d", n)
	}
}

func testCascadeTimeout(t *testing.T, f *fixture) {
	sess := session()
	p, c1, c2, g := f.treeUnder(sess, jobs.Tool{Name: "agent", Deferred: true, DeferredTimeout: 5 * time.Second})
	f.at(5 * time.Second)
	if n := f.tick(); n != 1 {
		t.Fatalf("tick at 5 s fired %d, want the parent only (the children are closed by the cascade)", n)
	}
	got := f.load(p.CallID)
	wantState(t, got, jobs.TimedOut)
	checkCascade(t, f, sess, p, c1, c2, g)
	f.noneDue()
}

// The cascade of a parent cancelled on an engine that never held its children (another node)
// reads them from the store and closes each once.
func testCascadeElsewhere(t *testing.T, f *fixture) {
	sess := session()
	p, c1, c2, g := f.tree(sess)
	other := f.newEngine()
	if res, _, err := other.Cancel(f.ctx, addr(p), frames.CancelCallerRequest); err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("cancel parent on another engine: %v %v", res, err)
	}
	checkCascade(t, f, sess, p, c1, c2, g)
	f.noneDue()
	// The first engine still holds the children as open: its requests find them finished.
	if err := f.engine.Progress(f.ctx, addr(c2), "x"); !errors.Is(err, jobs.ErrCallFinished) {
		t.Fatalf("progress of a child cancelled elsewhere: %v, want ErrCallFinished", err)
	}
}

// A local call (SPEC 13) is run by the agent itself: no ordinary timeout closes it; it ends
// by its result or a cancel.
func testLocalCall(t *testing.T, f *fixture) {
	sess := session()
	local := func() *jobs.Job {
		j, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: jobs.Tool{Name: "subagent"}, Local: true})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, b := local(), local()
	if a.State != jobs.Pending || a.DeadlineMS != 0 {
		t.Fatalf("local call %s with deadline %d, want pending without a clock", a.State, a.DeadlineMS)
	}
	f.at(time.Minute)
	if err := f.engine.Progress(f.ctx, addr(a), "thinking"); err != nil {
		t.Fatal(err)
	}
	f.at(24 * time.Hour)
	if n := f.tick(); n != 0 {
		t.Fatalf("a tick closed %d local calls", n)
	}
	if done, err := f.engine.Result(f.ctx, addr(a), json.RawMessage(`"answer"`), "", false); err != nil || done.State != jobs.Completed {
		t.Fatalf("result of a local call: %+v %v", done, err)
	}
	if res, _, err := f.engine.Cancel(f.ctx, addr(b), frames.CancelAgentRequest); err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("cancel of a local call: %v %v", res, err)
	}
	if got := f.load(b.CallID); got.State != jobs.Cancelled || got.CancelReason != "agent_request" {
		t.Fatalf("cancelled local call %s/%s", got.State, got.CancelReason)
	}
}

func testNoCascadeOnCompletion(t *testing.T, f *fixture) {
	sess := session()
	p, c1, c2, g := f.tree(sess)
	if _, err := f.engine.Result(f.ctx, addr(p), json.RawMessage(`"sub-agent done"`), "", false); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*jobs.Job{c1, c2, g} {
		if s := f.load(k.CallID).State; s.Terminal() {
			t.Fatalf("a sub-agent that completed normally lost its background call %s (%s)", k.CallID, s)
		}
	}
	// A failed parent keeps them too.
	q := f.call(sess, instantTool)
	k, _ := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: instantTool, ParentCallID: q.CallID})
	_, _ = f.engine.Result(f.ctx, addr(q), nil, "boom", true)
	wantState(t, f.load(k.CallID), jobs.Pending)
}

// A sub-agent call that completed keeps its own calls, but they are still descendants of its
// parent: cancelling the parent closes them (SPEC 11).
func testCascadeThroughEndedChild(t *testing.T, f *fixture) {
	sess := session()
	p := f.call(sess, deferredTool)
	mk := func(parent string) *jobs.Job {
		j, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: deferredTool, ParentCallID: parent})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	q := mk(p.CallID)
	g := mk(q.CallID)
	f.deferJob(g, "grand-"+g.CallID)
	if _, err := f.engine.Result(f.ctx, addr(q), json.RawMessage(`"sub-agent done"`), "", false); err != nil {
		t.Fatal(err)
	}
	wantState(t, f.load(g.CallID), jobs.Deferred) // completing normally keeps its calls
	if _, _, err := f.engine.Cancel(f.ctx, addr(p), frames.CancelAgentRequest); err != nil {
		t.Fatal(err)
	}
	got := f.load(g.CallID)
	if got.State != jobs.Cancelled || got.CancelReason != "parent_cancelled" {
		t.Fatalf("grandchild under an ended child: %s/%s, want cancelled/parent_cancelled", got.State, got.CancelReason)
	}
	wantState(t, f.load(q.CallID), jobs.Completed)
	if n := count(f.timeline(sess), g.CallID, jobs.KindCancel); n != 1 {
		t.Fatalf("grandchild closed %d times", n)
	}
	if n := count(f.timeline(sess), q.CallID, jobs.KindDuplicateCancel); n != 0 {
		t.Fatalf("the ended child was cancelled again")
	}
}

func testChildOfCancelledParent(t *testing.T, f *fixture) {
	sess := session()
	p := f.call(sess, deferredTool)
	_, _, _ = f.engine.Cancel(f.ctx, addr(p), frames.CancelAgentRequest)
	k, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: instantTool, ParentCallID: p.CallID})
	if err != nil {
		t.Fatal(err)
	}
	got := f.load(k.CallID)
	if got.State != jobs.Cancelled || got.CancelReason != "parent_cancelled" {
		t.Fatalf("child of a cancelled parent: %s/%s", got.State, got.CancelReason)
	}
}

func testCascadeRecovery(t *testing.T, f *fixture) {
	sess := session()
	p, c1, c2, g := f.tree(sess)
	// Open interactions keep the instant children's own clocks out of the way (10 min cap).
	for _, k := range []*jobs.Job{c2, g} {
		if _, err := f.engine.PartialResult(f.ctx, addr(k), jobs.Partial{Segment: json.RawMessage(`1`), Interaction: &jobs.Interaction{Prompt: "?"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The parent's engine dies right after the parent's own transition: apply it to the store
	// directly, as that engine would have, and never run its cascade.
	cur := f.load(p.CallID)
	next := cur.Clone()
	next.State, next.CancelReason, next.Version, next.DeadlineMS = jobs.Cancelled, "agent_request", cur.Version+1, 0
	now := f.clock.Now().UnixMilli()
	err := f.store.Apply(f.ctx, &jobs.Transition{ID: "dead-node", Tenant: tenantA, SessionID: sess, CallID: p.CallID,
		Check: true, Expect: cur.Version, Job: next, From: cur.State, Retention: time.Hour, NowMS: now,
		Cascade: true, LeaseMS: (10 * time.Second).Milliseconds(),
		Handle: &jobs.HandleOp{Handle: cur.Handle, CallID: cur.CallID, TTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	other := f.newEngine()
	f.at(10*time.Second - time.Millisecond)
	if _, err := other.Tick(f.ctx, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	wantState(t, f.load(c1.CallID), jobs.Deferred)
	f.at(10 * time.Second)
	if _, err := other.Tick(f.ctx, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*jobs.Job{c1, c2, g} {
		got := f.load(k.CallID)
		if got.State != jobs.Cancelled || got.CancelReason != "parent_cancelled" {
			t.Fatalf("descendant %s after recovery: %s/%s", k.CallID, got.State, got.CancelReason)
		}
	}
	// The marker is gone.
	f.at(time.Minute)
	if due, _ := f.store.ClaimDue(f.ctx, tenantA, f.clock.Now(), time.Second, 10); len(due) != 0 {
		t.Fatalf("still due: %+v", due)
	}
}

func testCallIDs(t *testing.T, f *fixture) {
	seen := map[string]bool{}
	for range 1000 {
		id := jobs.NewCallID()
		if !jobs.IsBrokerCallID(id) || seen[id] {
			t.Fatalf("call id %q: malformed or repeated", id)
		}
		seen[id] = true
	}
	sess := session()
	j := f.call(sess, instantTool)
	if !jobs.IsBrokerCallID(j.CallID) {
		t.Fatalf("minted %q", j.CallID)
	}
	if _, err := f.engine.Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, CallID: j.CallID, Tool: instantTool}); !errors.Is(err, jobs.ErrCallExists) {
		t.Fatalf("reusing a call id: %v, want ErrCallExists", err)
	}
}
