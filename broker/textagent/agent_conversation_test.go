package textagent

import (
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// SPEC 13 conversation.create → conversation.created {conversation_id}, with and without
// parent_call_id; the jobs of a child hang from the call that stands for it (SPEC 11).
func TestAgentConversationCreate(t *testing.T) {
	h := newAg(t, Options{})
	h.local(RootConversation, "p", "subagent", `{}`)
	h.call(RootConversation, "b", "wait", `{"timeout_minutes":5}`)
	plain := h.create(RootConversation, "")
	tied := h.create(RootConversation, "p")
	grand := h.create(tied, "")
	if plain == tied || tied == grand || plain == grand {
		t.Fatalf("ids not unique: %s %s %s", plain, tied, grand)
	}
	h.local(tied, "q", "subagent", `{}`)
	great := h.create(tied, "q")
	h.reused = true
	for _, c := range []string{plain, tied, grand, great} {
		h.call(c, "x", "status", `{"state":"working","title":"t"}`)
	}
	h.call(RootConversation, "r1", "job", `{}`)
	h.call(plain, "k", "job", `{}`)
	h.call(tied, "k", "job", `{}`)
	h.call(grand, "k", "job", `{}`)
	h.call(great, "k", "job", `{}`)
	want := map[string]string{
		RootConversation: "",
		plain:            "",
		tied:             h.bid(RootConversation, "p"),
		grand:            h.bid(RootConversation, "p"),
		great:            h.bid(tied, "q"),
	}
	for c, parent := range want {
		id := "k"
		if c == RootConversation {
			id = "r1"
		}
		if got := h.job(c, id).req.ParentCallID; got != parent {
			t.Errorf("job of %s hangs from %q, want %q", c, got, parent)
		}
	}
	// Errors: a parent call that is not a call of the parent conversation.
	h.skip()
	for i, pc := range []string{"nope", "b", "q"} {
		ref := "bad" + string(rune('0'+i))
		h.handle(&frames.ConversationCreate{Request: frames.Request{ID: ref}, ParentConversationID: RootConversation, ParentCallID: pc})
		h.expect(agE(ref, frames.CodeUnknownCall))
	}
}

// agent.message → agent.message_committed {ref, message_id}, and the prompt
// `Message from CONVERSATION_ID:` + LF + text in the target conversation only.
func TestAgentMessage(t *testing.T) {
	h := newAg(t, Options{})
	a := h.create(RootConversation, "")
	b := h.create(RootConversation, "")
	ids := map[string]bool{}
	send := func(ref, from, to, text string) {
		t.Helper()
		h.message(ref, from, to, text)
		fs := h.take()
		if len(fs) != 2 {
			t.Fatalf("message %s: %s", ref, agDescribeAll(fs))
		}
		c, ok := fs[0].(*frames.AgentMessageCommitted)
		if !ok || c.Ref != ref || c.MessageID == "" || ids[c.MessageID] {
			t.Errorf("message %s: committed %s", ref, agDescribeOne(fs[0]))
		} else {
			ids[c.MessageID] = true
		}
		if got, want := agDescribeOne(fs[1]), agPU(to, "Message from "+from+":\n"+text); got != want {
			t.Errorf("message %s: prompt %s, want %s", ref, got, want)
		}
	}
	send("m1", RootConversation, a, "do this\nand that")
	send("m2", a, RootConversation, "done")
	send("m3", a, b, "psst `x`")
	send("m4", b, b, "self")
	for conv, want := range map[string]int{RootConversation: 1, a: 1, b: 2} {
		if got := h.promptsOf(conv); len(got) != want {
			t.Errorf("%s got prompts %q", conv, got)
		}
	}
}

// agent.final reaches the watching parent as `Watched agent … final response:` + LF + text; the
// root has no watcher.
func TestAgentFinal(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	grand := h.create(child, "")
	h.final(grand, "grand result")
	h.expect(agP(child, "Watched agent "+grand+" final response:\ngrand result"))
	h.final(child, "line 1\nline 2")
	h.expect(agP(RootConversation, "Watched agent "+child+" final response:\nline 1\nline 2"))
	h.final(RootConversation, "nobody listens")
	h.expectNone()
}

// subTree builds: the root's local call p standing for child A; A's calls a1 (background),
// a2 (foreground), a3 (background, completed); A's child B without a parent call and its call
// b1 (background); A's call q standing for C, and C's call c1 (background).
type subTree struct{ a, b, c string }

func buildSubTree(h *agHarness) subTree {
	h.t.Helper()
	h.local(RootConversation, "p", "subagent", `{}`)
	h.advance(2 * time.Second)
	h.expect(agPH("p"))
	var s subTree
	s.a = h.create(RootConversation, "p")
	s.b = h.create(s.a, "")
	h.call(s.a, "sa", "status", `{"state":"working","title":"a"}`)
	h.call(s.b, "sb", "status", `{"state":"working","title":"b"}`)
	h.call(s.a, "a1", "job", `{}`)
	h.call(s.a, "a3", "job", `{}`)
	h.local(s.a, "q", "subagent", `{}`)
	s.c = h.create(s.a, "q")
	h.call(s.c, "sc", "status", `{"state":"working","title":"c"}`)
	h.call(s.b, "b1", "job", `{}`)
	h.call(s.c, "c1", "job", `{}`)
	h.advance(2 * time.Second)
	h.complete(s.a, "a3", `"a3"`)
	h.call(s.a, "a2", "job", `{}`)
	h.skip()
	return s
}

// checkClosed checks that every listed call is closed exactly once, with parent_cancelled, and
// that no job was asked to cancel twice.
func (h *agHarness) checkClosed(calls [][2]string) {
	h.t.Helper()
	for _, c := range calls {
		j := h.job(c[0], c[1])
		if j.state != jobs.Cancelled || j.reason != frames.CancelParentCancelled || j.closes != 1 {
			h.t.Errorf("call %s of %s: state %q reason %q closes %d; want cancelled once with parent_cancelled",
				c[1], c[0], j.state, j.reason, j.closes)
		}
	}
	seen := map[string]int{}
	for _, c := range h.cancels {
		seen[c.id]++
		if seen[c.id] == 2 {
			h.t.Errorf("CancelCall(%s) more than once: %+v", c.id, h.cancels)
		}
	}
}

// promptCounts counts the prompts sent so far to each conversation of the tree and the root.
func (h *agHarness) promptCounts(s subTree) map[string]int {
	out := map[string]int{}
	for _, c := range []string{RootConversation, s.a, s.b, s.c} {
		out[c] = len(h.promptsOf(c))
	}
	return out
}

// checkSilentTowardsRoot checks that nothing of the cancelled tree reached the root since the
// counts were taken, or reaches it now: their status, final, messages and the completions of
// their calls; and that the completions of their closed calls were announced nowhere.
func (h *agHarness) checkSilentTowardsRoot(s subTree, before map[string]int) {
	h.t.Helper()
	h.call(s.a, "late-status", "status", `{"state":"done","title":"late"}`)
	h.call(s.c, "late-status", "status", `{"state":"done","title":"late"}`)
	h.final(s.a, "late final")
	h.final(s.b, "late final")
	h.message("late-msg", s.a, RootConversation, "late message")
	h.message("late-msg2", s.b, RootConversation, "late message")
	if got := h.promptsOf(RootConversation)[before[RootConversation]:]; len(got) != 0 {
		h.t.Errorf("the cancelled sub-agents still reach the root: %q", got)
	}
	for _, c := range []string{s.a, s.b, s.c} {
		for _, p := range h.promptsOf(c)[before[c]:] {
			if strings.HasPrefix(p, "[internal] ") {
				h.t.Errorf("a completion of a closed call was announced in %s: %q", c, p)
			}
		}
	}
	h.skip()
}

// SPEC 11/13: conversation.cancel closes every open call of the conversation and of its
// descendants once with parent_cancelled; nothing of them reaches the parent afterwards.
func TestAgentConversationCancel(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "r1")
	s := buildSubTree(h)
	h.reused = true // the late status calls use one id in two conversations
	before := h.promptCounts(s)
	h.cancelConv(s.a)
	h.checkClosed([][2]string{{s.a, "a1"}, {s.a, "a2"}, {s.a, "q"}, {s.b, "b1"}, {s.c, "c1"}})
	for _, c := range h.cancels {
		if c.id == h.bid(RootConversation, "p") || c.id == h.bid(RootConversation, "r1") || c.id == h.bid(s.a, "a3") {
			t.Errorf("conversation.cancel closed a call outside the tree or finished: %+v", c)
		}
	}
	if h.job(RootConversation, "p").state != "" || h.job(RootConversation, "r1").state != "" {
		t.Error("the parent's calls were closed")
	}
	found := false
	for _, n := range h.notices {
		found = found || n.text == "conversation cancellation request"
	}
	if !found {
		t.Errorf("notices %+v", h.notices)
	}
	h.checkSilentTowardsRoot(s, before)
	// The parent's own results are its own.
	h.call(RootConversation, "w", "wait", `{}`)
	h.expectNone() // r1 and p still run
	h.complete(RootConversation, "r1", `"r1"`)
	h.expect(agOK("w", "original_tool_call_id: r1\nduration_seconds: 6\n\nr1"))
}

// A flat child: CancelCall is recorded exactly once per open call.
func TestAgentConversationCancelOncePerCall(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.call(child, "s", "status", `{"state":"working","title":"t"}`)
	h.call(child, "k1", "job", `{}`)
	h.call(child, "k2", "job", `{}`)
	h.advance(2 * time.Second)
	h.call(child, "k3", "job", `{}`)
	h.call(child, "k4", "job", `{}`)
	h.complete(child, "k4", `1`)
	h.cancelConv(child)
	want := map[string]bool{h.bid(child, "k1"): true, h.bid(child, "k2"): true, h.bid(child, "k3"): true}
	if len(h.cancels) != 3 {
		t.Errorf("CancelCall = %+v", h.cancels)
	}
	for _, c := range h.cancels {
		if !want[c.id] || c.reason != frames.CancelParentCancelled {
			t.Errorf("CancelCall %+v", c)
		}
		delete(want, c.id)
	}
	// A second conversation.cancel finds nothing open.
	h.cancelConv(child)
	if len(h.cancels) != 3 {
		t.Errorf("second conversation.cancel: CancelCall = %+v", h.cancels[3:])
	}
}

// SPEC 11: when the call that stands for a sub-agent is cancelled (by the agent's cancel, by a
// host or caller) or times out, every open call of the child and of its descendants is closed
// exactly once with parent_cancelled, after the parent call's own end, and nothing of them
// reaches the parent's conversation.
func TestAgentParentCallCancelled(t *testing.T) {
	tests := []struct {
		name string
		end  func(h *agHarness)
	}{
		{"agent's cancel", func(h *agHarness) { h.call(RootConversation, "x", "cancel", `{"tool_call_id":"p"}`) }},
		{"host cancel", func(h *agHarness) { h.end(RootConversation, "p", Outcome{State: jobs.Cancelled}) }},
		{"timed out", func(h *agHarness) { h.end(RootConversation, "p", Outcome{State: jobs.TimedOut}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			s := buildSubTree(h)
			h.reused = true
			// The root waits for anything while its sub-agent is closed.
			h.call(RootConversation, "w", "wait", `{}`)
			h.expectNone()
			before := h.promptCounts(s)
			tt.end(h)
			h.checkClosed([][2]string{{s.a, "a1"}, {s.a, "a2"}, {s.a, "q"}, {s.b, "b1"}, {s.c, "c1"}})
			for _, c := range h.cancels {
				if c.id != h.bid(RootConversation, "p") {
					t.Errorf("CancelCall beyond the engine's cascade: %+v", c)
				}
			}
			// The root's wait gets p's own result, and nothing else.
			r := h.result("w")
			if r.Kind != frames.ResultKindError || !strings.HasPrefix(r.Content, "original_tool_call_id: p\n") {
				t.Errorf("root's wait got %+v", r)
			}
			h.checkSilentTowardsRoot(s, before)
			h.call(RootConversation, "w2", "wait", `{}`)
			h.expect(agErr("w2", specNoBackground))
		})
	}
}

// A sub-agent whose call completes normally keeps its own background calls, and keeps
// reporting to its parent.
func TestAgentParentCallCompletedKeepsChild(t *testing.T) {
	h := newAg(t, Options{})
	s := buildSubTree(h)
	h.handle(&frames.AgentLocalResult{CallID: "p", ConversationID: RootConversation, Output: []byte(`"sub-agent done"`)})
	h.expect(agPI(RootConversation, specCompletion("p")))
	if len(h.cancels) != 0 {
		t.Errorf("CancelCall = %+v", h.cancels)
	}
	for _, c := range [][2]string{{s.a, "a1"}, {s.a, "a2"}, {s.b, "b1"}, {s.c, "c1"}} {
		if j := h.job(c[0], c[1]); j.state != "" {
			t.Errorf("%s of %s closed: %+v", c[1], c[0], j)
		}
	}
	h.complete(s.a, "a1", `"a1"`)
	h.expect(agPI(s.a, specCompletion("a1")))
	h.call(s.a, "st", "status", `{"state":"done","title":"still here"}`)
	h.expect(agOK("st", "Status set to `done`: still here"), agP(RootConversation, "Watched agent "+s.a+" status: done on still here"))
}

// SPEC 11: a descendant tied to a call of the child that is no longer open (it completed
// normally, failed, or was refused at start) is still a descendant: when the sub-agent's own call
// is cancelled, its open calls are closed too — as conversation.cancel of the child does.
func TestAgentParentCallCancelledClosesDescendantOfEndedCall(t *testing.T) {
	ends := []struct {
		name string
		end  func(h *agHarness, a string)
	}{
		{"completed normally", func(h *agHarness, a string) {
			h.handle(&frames.AgentLocalResult{CallID: "q", ConversationID: a, Output: []byte(`"ok"`)})
		}},
		{"failed", func(h *agHarness, a string) {
			h.handle(&frames.AgentLocalResult{CallID: "q", ConversationID: a, Error: "crashed"})
		}},
		{"refused at start", nil},
	}
	for _, how := range []string{"parent call cancelled", "conversation.cancel"} {
		for _, e := range ends {
			t.Run(how+"/"+e.name, func(t *testing.T) {
				h := newAg(t, Options{})
				h.local(RootConversation, "p", "subagent", `{}`)
				a := h.create(RootConversation, "p")
				h.call(a, "sa", "status", `{"state":"working","title":"a"}`)
				if e.end == nil {
					h.startErr["subagent"] = "Tool call could not be started"
				}
				h.local(a, "q", "subagent", `{}`)
				delete(h.startErr, "subagent")
				b := h.create(a, "q")
				h.call(b, "sb", "status", `{"state":"working","title":"b"}`)
				h.call(b, "b1", "job", `{}`)
				h.advance(2 * time.Second)
				if e.end != nil {
					e.end(h, a)
				}
				if h.job(b, "b1").state != "" {
					t.Fatal("b1 closed by the end of its own sub-agent call")
				}
				h.skip()
				if how == "conversation.cancel" {
					h.cancelConv(a)
				} else {
					h.call(RootConversation, "x", "cancel", `{"tool_call_id":"p"}`)
				}
				h.checkClosed([][2]string{{b, "b1"}})
			})
		}
	}
}
