package voice

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/jobs"
)

// The spoken permission turn (SPEC 12) on the fake clock.

// askForPermission makes a call that awaits permission and has its ask requested.
func (r *rig) askForPermission() string {
	r.t.Helper()
	r.env.awaitPerm = true
	r.v.ToolCall("m1", "transfer", json.RawMessage(`{"amount":50}`))
	id := r.env.started[len(r.env.started)-1]
	if len(r.env.dispatched) != 0 {
		r.t.Fatal("a call awaiting permission was dispatched")
	}
	r.advance(coalesce)
	if len(r.m.requests) != 1 || r.m.requests[0].Kind != model.PermissionAsk || r.m.requests[0].Name != "transfer" {
		r.t.Fatalf("requests = %+v, want the permission ask", r.m.requests)
	}
	return id
}

func TestPermissionApprovedAfterTheAsk(t *testing.T) {
	r := attached(t)
	id := r.askForPermission()
	if len(r.m.autoRespond) == 0 || r.m.autoRespond[len(r.m.autoRespond)-1] {
		t.Fatal("the model responds on its own while a permission ask is open")
	}
	r.speak(r.m.last(), loud(1000), "May I transfer 50 dollars?")
	if len(r.env.askedAt) != 1 || !r.env.askedAt[0].Equal(r.env.Now()) {
		t.Fatalf("permission window started at %v, want once, when the ask ended (%v)", r.env.askedAt, r.env.Now())
	}
	r.advance(2 * time.Second)
	r.v.CallerText("yes, go ahead", r.env.Now())
	if len(r.env.decisions) != 1 || r.env.decisions[0].Verdict != jobs.Approve || r.env.decisions[0].Ask != "May I transfer 50 dollars?" {
		t.Fatalf("decisions = %+v, want approve of the spoken ask", r.env.decisions)
	}
	if len(r.m.turns) != 0 {
		t.Fatalf("the reply reached the model as a turn: %q", r.m.turns)
	}
	r.approve(id)
	if len(r.env.dispatched) != 1 || r.env.dispatched[0] != id {
		t.Fatalf("dispatched = %v, want the approved job", r.env.dispatched)
	}
}

func TestPermissionDeclineIsSpoken(t *testing.T) {
	r := attached(t)
	r.askForPermission()
	r.speak(r.m.last(), loud(1000), "May I transfer 50 dollars?")
	r.v.CallerText("no", r.env.Now())
	if len(r.env.decisions) != 1 || r.env.decisions[0].Verdict != jobs.Decline {
		t.Fatalf("decisions = %+v, want decline", r.env.decisions)
	}
	r.advance(400*time.Millisecond + coalesce)
	if got := r.lastKind(); got != model.Decline {
		t.Fatalf("after a decline the model was asked for %s, want the decline sentence", got)
	}
}

func TestPermissionReplyBeforeTheAskWasHeard(t *testing.T) {
	r := attached(t)
	r.askForPermission()
	id := r.m.last()
	r.v.ResponseStarted(id) // requested; none of it played yet
	r.v.CallerText("yes", r.env.Now())
	if len(r.env.decisions) != 0 {
		t.Fatalf("a turn before the ask was heard was judged: %+v", r.env.decisions)
	}
	if len(r.m.cancels) != 1 || r.m.cancels[0] != id {
		t.Fatalf("cancels = %v, want the ask cut by the caller's turn", r.m.cancels)
	}
	r.v.ResponseDone(id, true, nil) // the model confirms the cancel
	// The ask was cut before the caller heard any of it: it is asked again.
	r.advance(400*time.Millisecond + coalesce)
	if n := len(r.m.requests); n != 2 || r.m.requests[1].Kind != model.PermissionAsk {
		t.Fatalf("requests = %+v, want the ask again", r.m.requests)
	}
}

func TestPermissionInterruptedAskHolds(t *testing.T) {
	r := attached(t)
	r.askForPermission()
	id := r.m.last()
	r.v.ResponseStarted(id)
	r.v.Audio(id, loud(2000))
	r.advance(500 * time.Millisecond)
	r.v.CallerText("yes", r.env.Now()) // over the ask
	if len(r.env.decisions) != 1 || r.env.decisions[0].Verdict != jobs.Hold || r.env.decisions[0].Reason != "interrupted_ask" {
		t.Fatalf("decisions = %+v, want hold interrupted_ask (an interrupted ask never approves)", r.env.decisions)
	}
	r.advance(400*time.Millisecond + coalesce)
	if got := r.lastKind(); got != model.Clarification {
		t.Fatalf("after a hold the model was asked for %s, want the clarification", got)
	}
}

func TestPermissionAsksOneAtATime(t *testing.T) {
	r := attached(t)
	first := r.askForPermission()
	r.v.ToolCall("m2", "transfer", json.RawMessage(`{"amount":7}`))
	r.speak(r.m.last(), loud(1000), "May I transfer 50 dollars?")
	if len(r.m.requests) != 1 {
		t.Fatal("a second permission ask was spoken before the first was answered")
	}
	r.v.CallerText("yes", r.env.Now())
	r.approve(first)
	r.advance(400*time.Millisecond + coalesce)
	if len(r.m.requests) != 2 || r.m.requests[1].Kind != model.PermissionAsk || string(r.m.requests[1].Args) != `{"amount":7}` {
		t.Fatalf("requests = %+v, want the second ask after the first was answered", r.m.requests)
	}
}

func TestPermissionAskRefusedByTheModelStartsTheClock(t *testing.T) {
	r := attached(t)
	r.env.awaitPerm = true
	r.m.respondErr = errTest
	r.v.ToolCall("m1", "transfer", json.RawMessage(`{}`))
	r.advance(coalesce)
	if len(r.env.askedAt) != 1 {
		t.Fatal("an ask the model refused left the call waiting with no permission clock (silence never approves)")
	}
}

func TestPermissionClearReplyWithdrawsAQueuedClarification(t *testing.T) {
	r := attached(t)
	r.askForPermission()
	r.speak(r.m.last(), loud(1000), "May I transfer 50 dollars?")
	r.v.CallerText("hmm, maybe later", r.env.Now())
	if len(r.env.decisions) != 1 || r.env.decisions[0].Verdict != jobs.Hold {
		t.Fatalf("decisions = %+v, want hold", r.env.decisions)
	}
	r.advance(100 * time.Millisecond) // the clarification waits for the grace to end…
	r.v.CallerText("yes, go ahead", r.env.Now())
	if len(r.env.decisions) != 2 || r.env.decisions[1].Verdict != jobs.Approve {
		t.Fatalf("decisions = %+v, want the second reply approved (it answers the ask)", r.env.decisions)
	}
	r.quietFor(time.Minute, "a clear answer withdraws the clarification still queued")
}
