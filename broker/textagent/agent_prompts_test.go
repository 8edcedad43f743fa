package textagent

import (
	"testing"
	"time"
)

// bg starts calls of conv and lets them go to the background; the placeholders are checked.
func (h *agHarness) bg(conv string, ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.call(conv, id, "job", `{}`)
	}
	h.advance(2 * time.Second)
	want := make([]string, len(ids))
	for i, id := range ids {
		want[i] = agPH(id)
	}
	h.expect(want...)
}

// SPEC 13 Completion prompt: the exact internal text, delivered at once while the conversation
// is idle before its first agent.turn_start.
func TestAgentCompletionPromptBeforeFirstTurn(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agPI(RootConversation, "[internal] Tool call `c1` completed. Its result is queued; use `wait` to consume it."))
	// A notification, not delivery: the result is still queued.
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agOK("w", "r"))
}

// A prompt queued during a turn waits for its end; prompts are delivered in order; after
// agent.turn_end the conversation is idle and prompts go at once, until the next turn_start.
func TestAgentPromptsOnlyWhileIdle(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.bg(RootConversation, "c1", "c2", "c3")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c2", `2`)
	h.message("m1", child, RootConversation, "hello")
	h.expect("committed ref=m1")
	h.complete(RootConversation, "c3", `3`)
	h.advance(time.Hour)
	h.expectNone()
	h.turnEnd(RootConversation)
	h.expect(
		agPI(RootConversation, specCompletion("c2")),
		agPU(RootConversation, "Message from "+child+":\nhello"),
		agPI(RootConversation, specCompletion("c3")),
	)
	// Idle: delivered at once.
	h.complete(RootConversation, "c1", `1`)
	h.expect(agPI(RootConversation, specCompletion("c1")))
	// A second turn queues again.
	h.bg(RootConversation, "c4")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c4", `4`)
	h.expectNone()
	h.turnEnd(RootConversation)
	h.expect(agPI(RootConversation, specCompletion("c4")))
	// A turn_end with nothing queued sends nothing.
	h.turnStart(RootConversation)
	h.turnEnd(RootConversation)
	h.expectNone()
}

// Prompts follow the completion order, not the call order.
func TestAgentCompletionPromptsInCompletionOrder(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "a", "b", "c")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c", `"c"`)
	h.complete(RootConversation, "a", `"a"`)
	h.complete(RootConversation, "b", `"b"`)
	h.turnEnd(RootConversation)
	h.expect(agPI(RootConversation, specCompletion("c")), agPI(RootConversation, specCompletion("a")),
		agPI(RootConversation, specCompletion("b")))
}

// Turns are per conversation: a turn of the root does not hold a child's prompts back.
func TestAgentTurnsArePerConversation(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.call(child, "s", "status", `{"state":"working","title":"sub"}`)
	h.skip()
	h.call(child, "k1", "job", `{}`)
	h.advance(2 * time.Second)
	h.expect(agPH("k1"))
	h.turnStart(RootConversation)
	h.complete(child, "k1", `1`)
	h.expect(agPI(child, specCompletion("k1")))
	h.turnStart(child)
	h.turnEnd(RootConversation)
	h.message("m", RootConversation, child, "hi")
	h.expect("committed ref=m")
	h.turnEnd(child)
	h.expect(agPU(child, "Message from root:\nhi"))
}

// If a wait is active for a call when it completes, its prompt is suppressed: never delivered.
func TestAgentCompletionPromptSuppressedByActiveWait(t *testing.T) {
	for _, tt := range []struct{ name, args, want string }{
		{"exact", `{"tool_call_id":"c1"}`, agOK("w", "r")},
		{"bare", `{}`, agOK("w", "original_tool_call_id: c1\n\nr")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, inTurn := range []bool{false, true} {
				h := newAg(t, Options{})
				h.bg(RootConversation, "c1")
				if inTurn {
					h.turnStart(RootConversation)
				}
				h.call(RootConversation, "w", "wait", tt.args)
				h.expectNone()
				h.complete(RootConversation, "c1", `"r"`)
				h.expect(tt.want)
				h.turnEnd(RootConversation)
				h.expectNone()
				if got := h.promptsOf(RootConversation); len(got) != 0 {
					t.Errorf("in turn %v: prompts %q", inTurn, got)
				}
			}
		})
	}
}

// A wait that consumes the result before its prompt was delivered removes the prompt.
func TestAgentCompletionPromptRemovedWhenConsumed(t *testing.T) {
	for _, tt := range []struct{ name, args, want string }{
		{"exact", `{"tool_call_id":"c1"}`, agOK("w", "r")},
		{"bare", `{}`, agOK("w", "original_tool_call_id: c1\n\nr")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			h.bg(RootConversation, "c1", "c2")
			h.turnStart(RootConversation)
			h.complete(RootConversation, "c1", `"r"`)
			h.expectNone()
			h.call(RootConversation, "w", "wait", tt.args)
			h.expect(tt.want)
			h.complete(RootConversation, "c2", `"r2"`)
			h.turnEnd(RootConversation)
			// c1's prompt is gone; c2's, not consumed, stays.
			h.expect(agPI(RootConversation, specCompletion("c2")))
		})
	}
}

// A prompt already delivered cannot be suppressed: nothing retracts it, and the result is
// still delivered once by wait.
func TestAgentDeliveredPromptNotRetracted(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c1", `"r"`)
	h.turnEnd(RootConversation)
	h.expect(agPI(RootConversation, specCompletion("c1")))
	h.turnStart(RootConversation)
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agOK("w", "r"))
	h.turnEnd(RootConversation)
	h.expectNone()
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w2", specConsumed))
	if got := h.promptsOf(RootConversation); len(got) != 1 {
		t.Errorf("prompts %q", got)
	}
}

// A timed-out background call is announced like any other completion.
func TestAgentCompletionPromptForTimedOutCall(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.end(RootConversation, "c1", Outcome{State: "timed_out"})
	h.expect(agPI(RootConversation, specCompletion("c1")))
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	r := h.result("w")
	if r.Kind != "error" {
		t.Errorf("timed-out result: %+v", r)
	}
}
