package textagent

import (
	"reflect"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// checkNoPromptFrames fails if any agent.prompt was sent (MCP mode has no prompt frames).
func (h *agHarness) checkNoPromptFrames() {
	h.t.Helper()
	for _, f := range h.sent {
		if p, ok := f.(*frames.AgentPrompt); ok {
			h.t.Errorf("MCP mode sent an agent.prompt: %q", p.Text)
		}
	}
}

// mcpResult returns the one result for id, its pending prompts and its content without them.
func (h *agHarness) mcpResult(id string) (r *frames.AgentToolResult, pending []string, rest string) {
	h.t.Helper()
	r = h.result(id)
	return r, agPending(h.t, r.Content), agWithoutPending(r.Content)
}

// SPEC 14: in MCP mode there are no turns and no prompt frames; every result is a delivery point
// carrying all queued prompts in pending_prompts, placeholders and interrupted waits included;
// a prompt is delivered once, and one removed before delivery is never delivered.
func TestAgentMCPPendingPrompts(t *testing.T) {
	h := newAgRaw(t, Options{PromptsInResults: true})

	// The first substantive call queues the reminder: its own placeholder delivers it.
	h.call(RootConversation, "c1", "job", `{}`)
	h.expectNone()
	h.advance(2 * time.Second)
	r, pending, rest := h.mcpResult("c1")
	if r.Kind != frames.ResultKindBackgroundPlaceholder || rest != specPlaceholderText("c1") ||
		!reflect.DeepEqual(pending, []string{specReminder}) {
		t.Errorf("placeholder: %+v (pending %q)", r, pending)
	}

	// A completion is queued, not sent; the next result carries it.
	h.complete(RootConversation, "c1", `"one"`)
	h.expectNone()
	h.call(RootConversation, "s", "status", `{"state":"working","title":"t"}`)
	_, pending, rest = h.mcpResult("s")
	if rest != "Status set to `working`: t" || !reflect.DeepEqual(pending, []string{specCompletion("c1")}) {
		t.Errorf("status: %q (pending %q)", rest, pending)
	}
	// Delivered once: the wait's result carries nothing, and the result is still there.
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agOK("w1", "one"))

	// Consumed before delivery: the completion prompt is removed.
	h.bg(RootConversation, "c2")
	h.complete(RootConversation, "c2", `"two"`)
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agOK("w2", "original_tool_call_id: c2\n\ntwo"))

	// Several prompts, in order, header-escaped: an interaction (two lines) and a completion.
	h.bg(RootConversation, "c3", "c4")
	h.a.InteractionOpened(h.bid(RootConversation, "c3"), &jobs.Interaction{ID: "ia_1", Prompt: `Pick "one"`, Options: []string{"A", "B"}})
	h.complete(RootConversation, "c4", `"four"`)
	h.expectNone()
	h.call(RootConversation, "w3", "wait", `{"tool_call_id":"c3"}`)
	want := specInterruptedEx + "\npending_prompts: " +
		`["Tool call ` + "`c3`" + ` asks (ia_1): Pick \\"one\\"\\nOptions: A, B","` + specCompletion("c4") + `"]`
	h.expect(agR("w3", frames.ResultKindResult, want))

	// A wait interrupted while it blocks carries the input that interrupted it.
	h.call(RootConversation, "w4", "wait", `{"tool_call_id":"c3"}`)
	h.expectNone()
	h.message("m", RootConversation, RootConversation, "hi\tthere")
	_, pending, rest = h.mcpResult("w4")
	if rest != specInterruptedEx || !reflect.DeepEqual(pending, []string{"Message from root:\nhi\tthere"}) {
		t.Errorf("interrupted wait: %q (pending %q)", rest, pending)
	}

	// Timed waits and errors are delivery points too.
	h.call(RootConversation, "w5", "wait", `{"timeout_minutes":5}`)
	h.final(RootConversation, "x") // the root has no watcher: nothing queued
	h.expectNone()
	h.a.InteractionOpened(h.bid(RootConversation, "c3"), &jobs.Interaction{ID: "ia_2", Prompt: "Name?"})
	_, pending, rest = h.mcpResult("w5")
	if rest != specInputAvail || !reflect.DeepEqual(pending, []string{"Tool call `c3` asks (ia_2): Name?"}) {
		t.Errorf("timed wait: %q (pending %q)", rest, pending)
	}
	h.complete(RootConversation, "c3", `"three"`)
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":""}`)
	_, pending, rest = h.mcpResult("x")
	if rest != specEmptyID || !reflect.DeepEqual(pending, []string{specCompletion("c3")}) {
		t.Errorf("cancel error: %q (pending %q)", rest, pending)
	}
	// Foreground results too.
	h.call(RootConversation, "c5", "job", `{}`)
	h.message("m2", RootConversation, RootConversation, "later")
	h.skip()
	h.complete(RootConversation, "c5", `"five"`)
	_, pending, rest = h.mcpResult("c5")
	if rest != "five" || !reflect.DeepEqual(pending, []string{"Message from root:\nlater"}) {
		t.Errorf("foreground result: %q (pending %q)", rest, pending)
	}
	h.checkNoPromptFrames()
}

// SPEC 14: a cancelled MCP wait only removes the waiter; the result is consumed by a later wait.
func TestAgentMCPCancelWait(t *testing.T) {
	h := newAg(t, Options{PromptsInResults: true})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.a.CancelWait(RootConversation, "w1")
	h.complete(RootConversation, "c1", `"r"`)
	h.expectNone()
	if id, ok := h.a.Running(RootConversation, "w1"); ok {
		t.Errorf("a wait counts as running: %q", id)
	}
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
	// Its own completion prompt was queued, and is removed by the consumption.
	h.expect(agOK("w2", "r"))
	h.checkNoPromptFrames()
}
