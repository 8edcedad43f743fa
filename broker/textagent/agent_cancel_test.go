package textagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// SPEC 13 `cancel`: success is exactly the body `Tool cancellation requested` (kind result), the
// timeline gets the notice `tool call cancellation request`, the job is cancelled with
// agent_request, and the cancelled call completes through wait.
func TestAgentCancelBackgroundCall(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2")
	h.advance(4 * time.Second) // c1 runs 6 s in all
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agOK("x", "Tool cancellation requested"), agPI(RootConversation, specCompletion("c1")))
	bid := h.bid(RootConversation, "c1")
	if want := []agCancel{{bid, frames.CancelAgentRequest}}; !reflect.DeepEqual(h.cancels, want) {
		t.Errorf("CancelCall = %+v, want %+v", h.cancels, want)
	}
	if len(h.notices) != 1 || h.notices[0].text != "tool call cancellation request" {
		t.Errorf("notices = %+v", h.notices)
	}
	if j := h.job(RootConversation, "c2"); j.state != "" {
		t.Errorf("cancel touched another call: %+v", j)
	}
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w", "error: Tool call canceled\nduration_seconds: 6"))
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expectNone() // c2 still runs
}

// A cancelled call a wait is blocked on completes through that wait.
func TestAgentCancelCompletesBlockedWait(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agOK("x", specCancelOK), agErr("w", specCanceled))
	if got := h.promptsOf(RootConversation); len(got) != 0 {
		t.Errorf("prompts %q", got)
	}
	// Bare waits too.
	h.bg(RootConversation, "c2")
	h.call(RootConversation, "w2", "wait", `{}`)
	h.call(RootConversation, "x2", "cancel", `{"tool_call_id":"c2"}`)
	h.expect(agOK("x2", specCancelOK), agErr("w2", "original_tool_call_id: c2\n"+specCanceled))
}

// A call cancelled while still in the foreground gets its cancelled result directly.
func TestAgentCancelForegroundCall(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "job", `{}`)
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agOK("x", specCancelOK), agErr("c1", specCanceled))
	h.advance(time.Minute)
	h.expectNone()
}

// Every error of `cancel` (SPEC 13), with its exact text.
func TestAgentCancelErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *agHarness)
		args  string
		want  string
	}{
		{"empty id", nil, `{"tool_call_id":""}`, specEmptyID},
		{"missing id", nil, `{}`, specEmptyID},
		{"unknown", nil, `{"tool_call_id":"nope"}`, specUnknownID("nope")},
		{"unknown, escaped", nil, `{"tool_call_id":"a\r\nb\\"}`, specUnknownID(`a\r\nb\\`)},
		{"another conversation's call", func(h *agHarness) {
			c := h.create(RootConversation, "")
			h.call(c, "k1", "job", `{}`)
		}, `{"tool_call_id":"k1"}`, specUnknownID("k1")},
		{"finished in the foreground", func(h *agHarness) {
			h.call(RootConversation, "c1", "job", `{}`)
			h.complete(RootConversation, "c1", `1`)
		}, `{"tool_call_id":"c1"}`, specAlreadyDone},
		{"finished in the background, not consumed", func(h *agHarness) {
			h.bg(RootConversation, "c1")
			h.end(RootConversation, "c1", Outcome{State: jobs.Failed, Error: "x"})
		}, `{"tool_call_id":"c1"}`, specAlreadyDone},
		{"finished in the background, consumed", func(h *agHarness) {
			h.bg(RootConversation, "c1")
			h.complete(RootConversation, "c1", `1`)
			h.call(RootConversation, "w", "wait", `{}`)
		}, `{"tool_call_id":"c1"}`, specAlreadyDone},
		{"refused at start", func(h *agHarness) {
			h.startErr["gone"] = "Tool gone is not available"
			h.call(RootConversation, "c1", "gone", `{}`)
		}, `{"tool_call_id":"c1"}`, specAlreadyDone},
		{"second cancel", func(h *agHarness) {
			h.bg(RootConversation, "c1")
			h.call(RootConversation, "x0", "cancel", `{"tool_call_id":"c1"}`)
		}, `{"tool_call_id":"c1"}`, specAlreadyCanc},
		{"second cancel, result consumed", func(h *agHarness) {
			h.bg(RootConversation, "c1")
			h.call(RootConversation, "x0", "cancel", `{"tool_call_id":"c1"}`)
			h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
		}, `{"tool_call_id":"c1"}`, specAlreadyCanc},
		{"running wait", func(h *agHarness) {
			h.bg(RootConversation, "c1")
			h.call(RootConversation, "b", "wait", `{"tool_call_id":"c1"}`)
		}, `{"tool_call_id":"b"}`, specCannotCancel},
		{"running bare wait", func(h *agHarness) {
			h.bg(RootConversation, "c1")
			h.call(RootConversation, "b", "wait", `{}`)
		}, `{"tool_call_id":"b"}`, specCannotCancel},
		{"running timed wait", func(h *agHarness) {
			h.call(RootConversation, "b", "wait", `{"timeout_minutes":9}`)
		}, `{"tool_call_id":"b"}`, specCannotCancel},
		{"finished wait", func(h *agHarness) { h.call(RootConversation, "b", "wait", `{}`) }, `{"tool_call_id":"b"}`, specCannotCancel},
		{"finished status", func(h *agHarness) {
			h.call(RootConversation, "b", "status", `{"state":"working","title":"t"}`)
		}, `{"tool_call_id":"b"}`, specCannotCancel},
		{"rejected status", func(h *agHarness) { h.call(RootConversation, "b", "status", `{}`) }, `{"tool_call_id":"b"}`, specCannotCancel},
		{"finished cancel", func(h *agHarness) {
			h.call(RootConversation, "b", "cancel", `{"tool_call_id":"nope"}`)
		}, `{"tool_call_id":"b"}`, specCannotCancel},
		{"s0, the harness's status", nil, `{"tool_call_id":"s0"}`, specCannotCancel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			if tt.setup != nil {
				tt.setup(h)
			}
			h.skip()
			n, notices := len(h.cancels), len(h.notices)
			h.call(RootConversation, "x", "cancel", tt.args)
			h.expect(agErr("x", tt.want))
			if len(h.cancels) != n {
				t.Errorf("a failed cancel called CancelCall: %+v", h.cancels[n:])
			}
			if len(h.notices) != notices {
				t.Errorf("a failed cancel recorded a notice: %+v", h.notices[notices:])
			}
		})
	}
}

// SPEC 13: a running built-in cannot be canceled — that includes a `cancel` naming itself, the
// only way a `cancel` is running when a cancel targets it.
func TestAgentCancelItself(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"x"}`)
	h.expect(agErr("x", specCannotCancel))
}

// A cancelled wait is not cancelled: it keeps blocking and still gets its result.
func TestAgentCancelOfWaitLeavesIt(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"w"}`)
	h.expect(agErr("x", specCannotCancel))
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w", "r"))
}

// The Env's answer to the cancel request decides the result when the job already ended.
func TestAgentCancelEnvAnswers(t *testing.T) {
	t.Run("already_done: the job finished first", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.manual = true
		h.terminate(h.bid(RootConversation, "c1"), Outcome{State: jobs.Completed, Output: []byte(`"r"`)}, "")
		h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
		h.expect(agErr("x", specAlreadyDone))
		h.drain()
		h.expect(agPI(RootConversation, specCompletion("c1")))
		h.call(RootConversation, "x2", "cancel", `{"tool_call_id":"c1"}`)
		h.expect(agErr("x2", specAlreadyDone))
		h.call(RootConversation, "w", "wait", `{}`)
		h.expect(agOK("w", "original_tool_call_id: c1\n\nr"))
		if len(h.notices) != 0 {
			t.Errorf("notices %+v", h.notices)
		}
	})
	t.Run("already_canceled", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.cancelOverride[h.bid(RootConversation, "c1")] = frames.CancelResultAlreadyCanceled
		h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
		h.expect(agErr("x", specAlreadyCanc))
	})
	t.Run("failure", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.cancelErr = errors.New("store down")
		h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
		if r := h.result("x"); r.Kind != frames.ResultKindError {
			t.Errorf("failed cancel: %+v", r)
		}
		// Not counted as cancelled: a retry goes through.
		h.cancelErr = nil
		h.call(RootConversation, "x2", "cancel", `{"tool_call_id":"c1"}`)
		h.expect(agOK("x2", specCancelOK), agPI(RootConversation, specCompletion("c1")))
	})
}

// A cancel targets only that call: other calls, and the calls of other conversations, go on.
func TestAgentCancelTargetsOnlyThatCall(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.bg(RootConversation, "c1", "c2")
	h.call(child, "c1", "job", `{}`) // same agent id, another conversation
	h.reused = true
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
	if len(h.cancels) != 1 || h.cancels[0].id != h.bid(RootConversation, "c1") {
		t.Errorf("CancelCall = %+v", h.cancels)
	}
	if h.job(child, "c1").state != "" || h.job(RootConversation, "c2").state != "" {
		t.Error("cancel closed another call")
	}
}

// SPEC 15: a call whose job was cancelled at this conversation's request, though the agent's
// state never took the request — a node applied the cancel and died before its answer was
// journaled — answers the cancel sent again as the first would have been answered; a second
// one after it is a second cancel. A call cancelled for another reason is already done.
func TestAgentCancelSentAgainAfterATakeover(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2")
	h.end(RootConversation, "c1", Outcome{State: jobs.Cancelled, CancelReason: frames.CancelAgentRequest})
	h.end(RootConversation, "c2", Outcome{State: jobs.Cancelled, CancelReason: frames.CancelHostRequest})
	h.skip()
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agOK("x", specCancelOK))
	h.call(RootConversation, "x2", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agErr("x2", "error: Tool call already canceled"))
	h.call(RootConversation, "x3", "cancel", `{"tool_call_id":"c2"}`)
	h.expect(agErr("x3", "error: Tool call is already done"))
	if len(h.cancels) != 0 {
		t.Errorf("CancelCall = %+v, want none (the jobs had ended)", h.cancels)
	}
	// The state carries the reason to another node.
	for _, k := range h.a.Export().Conversations[0].Calls {
		if k.ID == "c1" && (k.CancelReason != string(frames.CancelAgentRequest) || !k.CancelRequested) {
			t.Errorf("exported call: %+v", k)
		}
	}
}

// Export gives the same bytes for the same state: calls and interactions in id order, whatever
// the order of the maps holding them (an unchanged state is not journaled again).
func TestExportIsCanonical(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8")
	first, _ := json.Marshal(h.a.Export())
	for range 50 {
		if again, _ := json.Marshal(h.a.Export()); !bytes.Equal(first, again) {
			t.Fatalf("two exports of one state differ:\n%s\n%s", first, again)
		}
	}
}
