package textagent

import (
	"fmt"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// The races and isolation cases of issue 6: each is one interleaving of the session loop's
// events, played in a fixed order.

// Parallel exact waits on one id: one is registered, every other errors; once the registered
// one is interrupted, the next may register; the result is delivered once.
func TestAgentRaceParallelExactWaits(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.turnStart(RootConversation)
	h.call(RootConversation, "w0", "wait", `{"tool_call_id":"c1"}`)
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("w%d", i)
		h.call(RootConversation, id, "wait", `{"tool_call_id":"c1"}`)
		h.expect(agErr(id, specBeingWaited))
	}
	h.message("m", RootConversation, RootConversation, "x")
	h.expect("committed ref=m", agR("w0", "result", specInterruptedEx))
	h.turnEnd(RootConversation)
	h.skip()
	h.call(RootConversation, "w5", "wait", `{"tool_call_id":"c1"}`)
	h.call(RootConversation, "w6", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w6", specBeingWaited))
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w5", "r"))
	h.call(RootConversation, "w7", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w7", specConsumed))
}

// Two bare waits with one running call: one is registered, the other errors; the registered one
// gets the completion.
func TestAgentRaceTwoBareWaitsOneRunningCall(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w1", "wait", `{}`)
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", specBarePending))
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w1", "original_tool_call_id: c1\n\nr"))
	if got := h.promptsOf(RootConversation); len(got) != 0 {
		t.Errorf("prompts %q", got)
	}
}

// Two results and two bare waits: whatever the interleaving, they are consumed in completion
// order, each once.
func TestAgentRaceTwoResultsTwoBareWaits(t *testing.T) {
	t.Run("both completed first", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "a", "b")
		h.complete(RootConversation, "b", `"B"`)
		h.complete(RootConversation, "a", `"A"`)
		h.skip()
		h.call(RootConversation, "w1", "wait", `{}`)
		h.call(RootConversation, "w2", "wait", `{}`)
		h.expect(agOK("w1", "original_tool_call_id: b\n\nB"), agOK("w2", "original_tool_call_id: a\n\nA"))
	})
	t.Run("completions back to back while a bare wait blocks", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "a", "b")
		h.turnStart(RootConversation)
		h.call(RootConversation, "w1", "wait", `{}`)
		h.manual = true
		h.terminate(h.bid(RootConversation, "b"), Outcome{State: jobs.Completed, Output: []byte(`"B"`)}, "")
		h.terminate(h.bid(RootConversation, "a"), Outcome{State: jobs.Completed, Output: []byte(`"A"`)}, "")
		h.drain()
		h.expect(agOK("w1", "original_tool_call_id: b\n\nB"))
		h.call(RootConversation, "w2", "wait", `{}`)
		h.expect(agOK("w2", "original_tool_call_id: a\n\nA"))
		h.turnEnd(RootConversation)
		h.expectNone()
	})
}

// Duplicate cancels: one success, one `Tool call already canceled` — before and after the
// job's end reaches the agent; the job is asked to cancel once.
func TestAgentRaceDuplicateCancels(t *testing.T) {
	for _, delivered := range []bool{false, true} {
		t.Run(fmt.Sprintf("end delivered between: %v", delivered), func(t *testing.T) {
			h := newAg(t, Options{})
			h.bg(RootConversation, "c1")
			h.manual = true
			h.call(RootConversation, "x1", "cancel", `{"tool_call_id":"c1"}`)
			h.expect(agOK("x1", specCancelOK))
			if delivered {
				h.drain()
				h.expect(agPI(RootConversation, specCompletion("c1")))
			}
			h.call(RootConversation, "x2", "cancel", `{"tool_call_id":"c1"}`)
			h.expect(agErr("x2", specAlreadyCanc))
			h.drain()
			h.manual = false
			if len(h.cancels) != 1 {
				t.Errorf("CancelCall = %+v", h.cancels)
			}
			n := 0
			for _, nt := range h.notices {
				if nt.text == specCancelNotice {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d cancellation notices", n)
			}
			h.skip()
			h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
			h.expect(agErr("w", specCanceled))
		})
	}
}

// A wait interrupted by a message, then retried, gets the result once.
func TestAgentRaceInterruptedWaitRetried(t *testing.T) {
	for _, mode := range []struct{ args, ok, interrupted string }{
		{`{"tool_call_id":"c1"}`, "r", specInterruptedEx},
		{`{}`, "original_tool_call_id: c1\n\nr", specInterruptedAB},
	} {
		h := newAg(t, Options{})
		child := h.create(RootConversation, "")
		h.bg(RootConversation, "c1")
		h.turnStart(RootConversation)
		h.call(RootConversation, "w1", "wait", mode.args)
		h.message("m", child, RootConversation, "stop")
		h.expect("committed ref=m", agR("w1", "result", mode.interrupted))
		// Retried at once: the message is still pending, so it interrupts again, consuming nothing.
		h.call(RootConversation, "w2", "wait", mode.args)
		h.expect(agR("w2", "result", mode.interrupted))
		h.turnEnd(RootConversation)
		h.expect(agPU(RootConversation, "Message from "+child+":\nstop"))
		h.call(RootConversation, "w3", "wait", mode.args)
		h.complete(RootConversation, "c1", `"r"`)
		h.expect(agOK("w3", mode.ok))
		h.call(RootConversation, "w4", "wait", mode.args)
		if r := h.result("w4"); r.Kind != frames.ResultKindError {
			t.Errorf("%s: fourth wait %+v", mode.args, r)
		}
	}
}

// The waited call's end and an activating input arrive back to back, in either order: the
// result is delivered exactly once.
func TestAgentRaceCompletionAndInputBackToBack(t *testing.T) {
	for _, inputFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("input first: %v", inputFirst), func(t *testing.T) {
			h := newAg(t, Options{})
			h.bg(RootConversation, "c1")
			h.turnStart(RootConversation)
			h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
			if inputFirst {
				h.message("m", RootConversation, RootConversation, "x")
				h.complete(RootConversation, "c1", `"r"`)
				h.expect("committed ref=m", agR("w1", "result", specInterruptedEx))
				h.turnEnd(RootConversation)
				h.expect(agPU(RootConversation, "Message from root:\nx"), agPI(RootConversation, specCompletion("c1")))
				h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
				h.expect(agOK("w2", "r"))
			} else {
				h.complete(RootConversation, "c1", `"r"`)
				h.message("m", RootConversation, RootConversation, "x")
				h.expect(agOK("w1", "r"), "committed ref=m")
				h.turnEnd(RootConversation)
				h.expect(agPU(RootConversation, "Message from root:\nx"))
			}
			h.call(RootConversation, "w3", "wait", `{"tool_call_id":"c1"}`)
			h.expect(agErr("w3", specConsumed))
		})
	}
}

// The background-after timer firing after a wait already sent the call to the background, or
// after the call ended, sends nothing more.
func TestAgentRaceBackgroundTimerAfterWait(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "job", `{}`)
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agPH("c1"))
	h.advance(2 * time.Second)
	h.expectNone()
	h.a.Deferred(h.bid(RootConversation, "c1"))
	h.expectNone()
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w", "r"))
}

// A child conversation's completions never reach the parent's wait({}) or prompt queue, however
// they interleave with the parent's turns and waits.
func TestAgentRaceChildCompletionsIsolated(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.call(child, "s", "status", `{"state":"working","title":"t"}`)
	h.skip()
	h.call(child, "k1", "job", `{}`)
	h.call(child, "k2", "job", `{}`)
	h.call(RootConversation, "r1", "job", `{}`)
	h.advance(2 * time.Second)
	h.skip()
	rootBefore := len(h.promptsOf(RootConversation))
	h.turnStart(RootConversation)
	h.call(RootConversation, "w", "wait", `{}`)
	h.turnStart(child)
	h.complete(child, "k1", `"k1"`)
	h.complete(child, "k2", `"k2"`)
	h.expectNone()
	h.turnEnd(RootConversation)
	h.expectNone()
	h.turnEnd(child)
	h.expect(agPI(child, specCompletion("k1")), agPI(child, specCompletion("k2")))
	h.complete(RootConversation, "r1", `"r1"`)
	h.expect(agOK("w", "original_tool_call_id: r1\n\nr1"))
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", specNoBackground))
	if got := h.promptsOf(RootConversation)[rootBefore:]; len(got) != 0 {
		t.Errorf("root prompts %q", got)
	}
}

// Cancelling a sub-agent's call closes its inner calls exactly once, and no inner completion
// leaks to the parent — also when the inner ends reach the agent after the parent's, or the
// inner host's results race the cascade.
func TestAgentRaceSubAgentCancelNoLeak(t *testing.T) {
	h := newAg(t, Options{})
	h.local(RootConversation, "p", "subagent", `{}`)
	h.call(RootConversation, "r1", "job", `{}`)
	sub := h.create(RootConversation, "p")
	h.call(sub, "s", "status", `{"state":"working","title":"t"}`)
	h.call(sub, "i1", "job", `{}`)
	h.call(sub, "i2", "job", `{}`)
	h.call(sub, "i3", "job", `{}`)
	h.advance(2 * time.Second)
	h.call(sub, "i4", "job", `{}`) // foreground
	h.call(sub, "wi", "wait", `{"tool_call_id":"i1"}`)
	h.skip()
	rootBefore := len(h.promptsOf(RootConversation))
	h.turnStart(RootConversation)
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"r1"}`)
	h.expectNone()

	h.manual = true
	// i3's host answered just before the cancel: its end is already on its way.
	h.terminate(h.bid(sub, "i3"), Outcome{State: jobs.Completed, Output: []byte(`"i3"`)}, "")
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"p"}`)
	h.expect(agOK("x", specCancelOK))
	h.drain()
	h.manual = false
	// p's own completion — a different completion in the root — is the one thing that reaches
	// the root: it interrupts the root's wait, once.
	var rootFrames []string
	for _, f := range h.take() {
		switch f := f.(type) {
		case *frames.AgentPrompt:
			if f.ConversationID == RootConversation {
				rootFrames = append(rootFrames, agDescribeOne(f))
			}
		case *frames.AgentToolResult:
			if f.CallID == "w" || f.CallID == "r1" || f.CallID == "p" {
				rootFrames = append(rootFrames, agDescribeOne(f))
			}
		case *frames.AgentLocalCancel:
			rootFrames = append(rootFrames, agDescribeOne(f))
		}
	}
	if want := []string{"local_cancel root p", agR("w", "result", specInterruptedEx)}; !agMatch(rootFrames, want) {
		t.Errorf("root frames %s, want %s", agList(rootFrames), agList(want))
	}
	h.checkClosed([][2]string{{sub, "i1"}, {sub, "i2"}, {sub, "i4"}})
	if len(h.cancels) != 1 || h.cancels[0].id != h.bid(RootConversation, "p") {
		t.Errorf("CancelCall = %+v", h.cancels)
	}
	h.turnEnd(RootConversation)
	h.expect(agPI(RootConversation, specCompletion("p")))
	h.turnStart(RootConversation)
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"r1"}`)
	// Late inner events: a second end of a closed call, a status, a final, a message.
	h.a.Finished(h.bid(sub, "i1"), Outcome{State: jobs.Completed, Output: []byte(`"late"`)})
	h.call(sub, "s2", "status", `{"state":"done","title":"late"}`)
	h.final(sub, "late")
	h.message("m", sub, RootConversation, "late")
	h.turnEnd(RootConversation)
	var got []string
	for _, f := range h.take() {
		if p, ok := f.(*frames.AgentPrompt); ok && p.ConversationID == RootConversation {
			got = append(got, p.Text)
		}
		if r, ok := f.(*frames.AgentToolResult); ok && r.CallID == "w1" {
			t.Errorf("the root's exact wait was answered: %q", r.Content)
		}
	}
	if len(got) != 0 || len(h.promptsOf(RootConversation)) != rootBefore+1 {
		t.Errorf("root prompts after the cancel: %q", got)
	}
	h.complete(RootConversation, "r1", `"r1"`)
	h.expect(agOK("w1", "r1"))
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", "original_tool_call_id: p\n"+specCanceled))
	h.call(RootConversation, "w3", "wait", `{}`)
	h.expect(agErr("w3", specNoBackground))
}

// A completion prompt queued during a turn is removed when wait consumes the result before the
// turn ends; one delivered before is not.
func TestAgentRaceCompletionPromptRemovedInTurn(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2")
	h.complete(RootConversation, "c1", `"one"`)
	h.expect(agPI(RootConversation, specCompletion("c1")))
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c2", `"two"`)
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c2"}`)
	h.expect(agOK("w2", "two"))
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agOK("w1", "one"))
	h.turnEnd(RootConversation)
	h.expectNone()
}

// Waits blocked side by side: a completion handed to its own waiting wait is suppressed, so it
// interrupts no other wait.
func TestAgentRaceSideBySideWaits(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2", "c3")
	h.turnStart(RootConversation)
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c2"}`)
	h.call(RootConversation, "wb", "wait", `{}`)
	h.expectNone()
	h.complete(RootConversation, "c2", `"two"`)
	h.expect(agOK("w2", "two"))
	h.complete(RootConversation, "c3", `"three"`)
	h.expect(agOK("wb", "original_tool_call_id: c3\n\nthree"))
	h.complete(RootConversation, "c1", `"one"`)
	h.expect(agOK("w1", "one"))
	h.turnEnd(RootConversation)
	h.expectNone()
}

// Input for another conversation never interrupts a conversation's waits.
func TestAgentRaceInputForAnotherConversation(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.call(child, "s", "status", `{"state":"working","title":"t"}`)
	h.call(child, "k1", "job", `{}`)
	h.call(RootConversation, "c1", "job", `{}`)
	h.advance(2 * time.Second)
	h.call(child, "kw", "wait", `{"tool_call_id":"k1"}`)
	h.skip()
	h.turnStart(RootConversation)
	h.turnStart(child)
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.call(RootConversation, "wt", "wait", `{"timeout_minutes":5}`)
	h.message("m", RootConversation, child, "for the child")
	h.expect("committed ref=m", agR("kw", "result", specInterruptedEx))
	h.a.InteractionOpened(h.bid(child, "k1"), &jobs.Interaction{ID: "ia", Prompt: "?"})
	h.expectNone()
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w", "r"))
	h.advance(5 * time.Minute)
	h.expect(agOK("wt", specTimedOut))
}
