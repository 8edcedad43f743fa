package textagent

import (
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

// SPEC 13 `wait {tool_call_id}`: blocks while the call runs, with no time limit, and returns its
// result once; later waits error `Tool call result already consumed`.
func TestAgentWaitExactBlocksThenConsumesOnce(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.advance(72 * time.Hour)
	h.expectNone()
	h.complete(RootConversation, "c1", `{"x": [1, 2]}`)
	h.expect(agOK("w1", "duration_seconds: 259202\n\n{\"x\":[1,2]}")) // 2 s + 72 h after the call
	for _, id := range []string{"w2", "w3"} {
		h.call(RootConversation, id, "wait", `{"tool_call_id":"c1"}`)
		h.expect(agErr(id, specConsumed))
	}
	// Consumed: the bare form finds nothing either.
	h.call(RootConversation, "w4", "wait", `{}`)
	h.expect(agErr("w4", specNoBackground))
}

// A completed background result is returned at once, also after its prompt was delivered.
func TestAgentWaitExactCompletedResult(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.end(RootConversation, "c1", Outcome{State: jobs.Failed, Error: "nope", Duration: 6 * time.Second})
	h.expect(agPI(RootConversation, specCompletion("c1")))
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w", "error: nope\nduration_seconds: 6"))
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w2", specConsumed))
}

// A wait for a call still in the foreground sends that call to the background (it is answered
// once, with the placeholder) and the wait gets the result: consumed exactly once.
func TestAgentWaitExactOnForegroundCall(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "job", `{}`)
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agPH("c1"))
	h.advance(time.Minute)
	h.expectNone()
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w", "duration_seconds: 60\n\nr"))
	if got := h.promptsOf(RootConversation); len(got) != 0 {
		t.Errorf("prompts %q", got)
	}
}

// Of parallel waits on one id exactly one gets the result; the others error `Tool call result
// is already being waited for`.
func TestAgentWaitExactParallel(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.expectNone()
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w2", specBeingWaited))
	h.call(RootConversation, "w3", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w3", specBeingWaited))
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w1", "r"))
	h.call(RootConversation, "w4", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w4", specConsumed))
}

// Unknown id: `error: Unknown tool call id` with header tool_call_id (escaped). Ids are scoped to
// the conversation: another conversation's call is unknown.
func TestAgentWaitExactUnknown(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	sib := h.create(RootConversation, "")
	h.bg(RootConversation, "rc")
	h.call(child, "kc", "job", `{}`)
	h.call(sib, "sc", "job", `{}`)
	h.advance(2 * time.Second)
	h.skip()
	tests := []struct {
		name, conv, args, want string
	}{
		{"never called", RootConversation, `{"tool_call_id":"nope"}`, specUnknownID("nope")},
		{"escaped", RootConversation, `{"tool_call_id":"a\nb\\c\u2028d\u0001"}`, specUnknownID(`a\nb\\c\u2028d\x01`)},
		{"child's call from the parent", RootConversation, `{"tool_call_id":"kc"}`, specUnknownID("kc")},
		{"parent's call from the child", child, `{"tool_call_id":"rc"}`, specUnknownID("rc")},
		{"sibling's call", child, `{"tool_call_id":"sc"}`, specUnknownID("sc")},
	}
	for i, tt := range tests {
		id := "w" + string(rune('a'+i))
		h.call(tt.conv, id, "wait", tt.args)
		fs := h.take()
		if got := agDescribe(fs); len(got) != 1 || got[0] != agErr(id, tt.want) {
			t.Errorf("%s: got %s, want %s", tt.name, agList(got), agErr(id, tt.want))
		}
	}
	// None of them consumed anything.
	h.complete(child, "kc", `"k"`)
	h.expect(agPI(child, specCompletion("kc")))
	h.call(child, "wk", "wait", `{"tool_call_id":"kc"}`)
	h.expect(agOK("wk", "k"))
}

// SPEC 13 `wait {}`: the oldest unconsumed completed result of the conversation, with header
// original_tool_call_id; in completion order; then `No background tool call to wait for`.
func TestAgentWaitBareCompletedInCompletionOrder(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "a", "b", "c")
	h.complete(RootConversation, "b", `"B"`)
	h.end(RootConversation, "c", Outcome{State: jobs.Cancelled, Duration: 8 * time.Second})
	h.complete(RootConversation, "a", `{"v":1}`)
	h.skip()
	h.call(RootConversation, "w1", "wait", `{}`)
	h.expect(agOK("w1", "original_tool_call_id: b\n\nB"))
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", "original_tool_call_id: c\nerror: Tool call canceled\nduration_seconds: 8"))
	h.call(RootConversation, "w3", "wait", `{}`)
	h.expect(agOK("w3", "original_tool_call_id: a\n\n{\"v\":1}"))
	h.call(RootConversation, "w4", "wait", `{}`)
	h.expect(agErr("w4", specNoBackground))
	// Consumed by the bare form: exact waits find them consumed.
	h.call(RootConversation, "w5", "wait", `{"tool_call_id":"a"}`)
	h.expect(agErr("w5", specConsumed))
}

// The original_tool_call_id header is escaped like every header value.
func TestAgentWaitBareHeaderEscaped(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "x\ty")
	h.complete(RootConversation, "x\ty", `"r"`)
	h.skip()
	h.call(RootConversation, "w", "wait", `{}`)
	h.expect(agOK("w", "original_tool_call_id: x\\ty\n\nr"))
}

// With nothing completed and a running background call, `wait {}` waits for the next completion.
func TestAgentWaitBareWaitsForNextCompletion(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "a", "b")
	h.call(RootConversation, "w", "wait", `{}`)
	h.advance(48 * time.Hour)
	h.expectNone()
	h.complete(RootConversation, "b", `"B"`)
	h.expect(agOK("w", "original_tool_call_id: b\nduration_seconds: 172802\n\nB"))
	h.complete(RootConversation, "a", `"A"`)
	h.expect(agPI(RootConversation, specCompletion("a")))
}

// `No background tool call to wait for` when the conversation owns no running background call.
func TestAgentWaitBareNothingToWaitFor(t *testing.T) {
	t.Run("nothing at all", func(t *testing.T) {
		h := newAg(t, Options{})
		h.call(RootConversation, "w", "wait", `{}`)
		h.expect(agErr("w", specNoBackground))
	})
	t.Run("only foreground results", func(t *testing.T) {
		h := newAg(t, Options{})
		h.call(RootConversation, "c1", "job", `{}`)
		h.complete(RootConversation, "c1", `1`)
		h.expect(agOK("c1", "1"))
		h.call(RootConversation, "w", "wait", `{}`)
		h.expect(agErr("w", specNoBackground))
	})
	t.Run("only built-ins", func(t *testing.T) {
		h := newAg(t, Options{})
		h.call(RootConversation, "t", "wait", `{"timeout_minutes":5}`)
		h.call(RootConversation, "w", "wait", `{}`)
		h.expect(agErr("w", specNoBackground))
	})
}

// At most one bare waiter: a sibling bare wait errors; the installed one gets the completion.
func TestAgentWaitBareOnlyOneWaiter(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.call(RootConversation, "w1", "wait", `{}`)
	h.expectNone()
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", specBarePending))
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w1", "original_tool_call_id: c1\n\nr"))
	// Released: a new bare wait is answered by the rules again.
	h.call(RootConversation, "w3", "wait", `{}`)
	h.expect(agErr("w3", specNoBackground))
}

// Two completed results and two bare waits consume the two results in completion order.
func TestAgentWaitBareTwoResultsTwoWaits(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "a", "b")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "b", `"B"`)
	h.complete(RootConversation, "a", `"A"`)
	h.call(RootConversation, "w1", "wait", `{}`)
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agOK("w1", "original_tool_call_id: b\n\nB"), agOK("w2", "original_tool_call_id: a\n\nA"))
	h.turnEnd(RootConversation)
	h.expectNone() // both prompts were removed
}

// `wait {}` never consumes results of parent, child or sibling conversations, and never waits
// for their calls.
func TestAgentWaitBareScopedToConversation(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	sib := h.create(RootConversation, "")
	grand := h.create(child, "")
	for _, c := range []string{child, sib, grand} {
		h.call(c, "s-"+c, "status", `{"state":"working","title":"x"}`)
	}
	h.skip()
	h.call(RootConversation, "r1", "job", `{}`)
	h.call(child, "k1", "job", `{}`)
	h.call(child, "k2", "job", `{}`)
	h.call(sib, "s1", "job", `{}`)
	h.call(grand, "g1", "job", `{}`)
	h.advance(2 * time.Second)
	h.skip()
	h.complete(child, "k1", `"k1"`)
	h.complete(sib, "s1", `"s1"`)
	h.complete(grand, "g1", `"g1"`)
	h.skip()
	// The root has a running call of its own: its bare wait blocks, untouched by the others.
	h.call(RootConversation, "w", "wait", `{}`)
	h.expectNone()
	h.complete(child, "k2", `"k2"`)
	h.expect(agPI(child, specCompletion("k2")))
	h.complete(RootConversation, "r1", `"r1"`)
	h.expect(agOK("w", "original_tool_call_id: r1\n\nr1"))
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", specNoBackground))
	// The grandchild's result is not the child's; the sibling's is its own.
	h.call(child, "wc1", "wait", `{}`)
	h.expect(agOK("wc1", "original_tool_call_id: k1\n\nk1"))
	h.call(child, "wc2", "wait", `{}`)
	h.expect(agOK("wc2", "original_tool_call_id: k2\n\nk2"))
	h.call(child, "wc3", "wait", `{}`)
	h.expect(agErr("wc3", specNoBackground))
	h.call(grand, "wg", "wait", `{}`)
	h.expect(agOK("wg", "original_tool_call_id: g1\n\ng1"))
	h.call(sib, "ws", "wait", `{}`)
	h.expect(agOK("ws", "original_tool_call_id: s1\n\ns1"))
	for _, p := range h.promptsOf(RootConversation) {
		if p != "Watched agent "+child+" status: working on x" && p != "Watched agent "+sib+" status: working on x" {
			t.Errorf("the root got a prompt of another conversation: %q", p)
		}
	}
}

// activation is a source of activating input for the root conversation (SPEC 13 Interruption).
type activation struct {
	name string
	// exactOnly: for a bare wait a completion is what it consumes, not an interruption.
	exactOnly bool
	fire      func(h *agHarness, child string)
	// prompt is the prompt the input becomes in the root.
	prompt func(h *agHarness, child string) string
}

var activations = []activation{
	{name: "direct message",
		fire: func(h *agHarness, child string) { h.message("m", child, RootConversation, "ping") },
		prompt: func(h *agHarness, child string) string {
			return agPU(RootConversation, "Message from "+child+":\nping")
		}},
	{name: "message from the root itself",
		fire:   func(h *agHarness, child string) { h.message("m", RootConversation, RootConversation, "note") },
		prompt: func(h *agHarness, child string) string { return agPU(RootConversation, "Message from root:\nnote") }},
	{name: "watched child's status",
		fire: func(h *agHarness, child string) {
			h.call(child, "st", "status", `{"state":"blocked","title":"need input"}`)
		},
		prompt: func(h *agHarness, child string) string {
			return agP(RootConversation, "Watched agent "+child+" status: blocked on need input")
		}},
	{name: "watched child's final response",
		fire: func(h *agHarness, child string) { h.final(child, "all done\nbye") },
		prompt: func(h *agHarness, child string) string {
			return agP(RootConversation, "Watched agent "+child+" final response:\nall done\nbye")
		}},
	{name: "interaction prompt",
		fire: func(h *agHarness, child string) {
			h.a.InteractionOpened(h.bid(RootConversation, "other"), &jobs.Interaction{ID: "ia_1", Prompt: "Which?", Options: []string{"A", "B"}})
		},
		prompt: func(h *agHarness, child string) string {
			return agP(RootConversation, "Tool call `other` asks (ia_1): Which?\nOptions: A, B")
		}},
	{name: "different completion", exactOnly: true,
		fire:   func(h *agHarness, child string) { h.complete(RootConversation, "other", `"o"`) },
		prompt: func(h *agHarness, child string) string { return agPI(RootConversation, specCompletion("other")) }},
}

// SPEC 13 Interruption: activating input pending when an exact or bare wait starts, or arriving
// while it blocks, returns exactly the four headers at once and consumes nothing; the input is
// still delivered; retrying the wait delivers the result, once.
func TestAgentWaitInterruptedByActivatingInput(t *testing.T) {
	modes := []struct {
		name, args, interrupted, result, again string
	}{
		{"exact", `{"tool_call_id":"c1"}`, specInterruptedEx, "r", specConsumed},
		{"bare", `{}`, specInterruptedAB, "original_tool_call_id: c1\n\nr", specNoBackground},
	}
	for _, m := range modes {
		for _, act := range activations {
			if act.exactOnly && m.name != "exact" {
				continue
			}
			for _, pendingAtStart := range []bool{true, false} {
				name := m.name + "/" + act.name + "/arriving while blocked"
				if pendingAtStart {
					name = m.name + "/" + act.name + "/pending at start"
				}
				t.Run(name, func(t *testing.T) {
					h := newAg(t, Options{})
					child := h.create(RootConversation, "")
					h.bg(RootConversation, "c1", "other")
					h.turnStart(RootConversation)
					if pendingAtStart {
						act.fire(h, child)
						h.skip()
						h.call(RootConversation, "w1", "wait", m.args)
						h.expect(agR("w1", "result", m.interrupted))
					} else {
						h.call(RootConversation, "w1", "wait", m.args)
						h.expectNone()
						act.fire(h, child)
						fs := agDescribe(h.take())
						want := agR("w1", "result", m.interrupted)
						n := 0
						for _, f := range fs {
							if f == want {
								n++
							} else if strings.HasPrefix(f, "result w") {
								t.Errorf("unexpected result %s", f)
							}
						}
						if n != 1 {
							t.Fatalf("interrupted result %d times in %s", n, agList(fs))
						}
					}
					// Nothing consumed: the input is delivered at the turn boundary, untouched.
					h.turnEnd(RootConversation)
					h.expect(act.prompt(h, child))
					// Delivered input no longer interrupts: the retry blocks, then gets the result once.
					h.turnStart(RootConversation)
					h.call(RootConversation, "w2", "wait", m.args)
					h.expectNone()
					h.complete(RootConversation, "c1", `"r"`)
					h.expect(agOK("w2", m.result))
					h.call(RootConversation, "w3", "wait", m.args)
					if m.name == "exact" {
						h.expect(agErr("w3", m.again))
						return
					}
					// The bare form waits for the next completion: that of the other call, not c1 again.
					h.expectNone()
					h.complete(RootConversation, "other", `"o"`)
					h.expect(agOK("w3", "original_tool_call_id: other\n\no"))
					h.call(RootConversation, "w4", "wait", m.args)
					h.expect(agErr("w4", m.again))
				})
			}
		}
	}
}

// A different completion pending when a bare wait starts is not an interruption: it is what the
// bare wait consumes.
func TestAgentWaitBareConsumesPendingCompletion(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c2", `"two"`)
	h.call(RootConversation, "w", "wait", `{}`)
	h.expect(agOK("w", "original_tool_call_id: c2\n\ntwo"))
}

// An exact wait blocked on one call while another completes is interrupted, and the other's
// result stays queued for its own wait.
func TestAgentWaitExactInterruptedByOtherCompletionKeepsBoth(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2")
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.complete(RootConversation, "c2", `"two"`)
	h.expect(agR("w1", "result", specInterruptedEx), agPI(RootConversation, specCompletion("c2")))
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c2"}`)
	h.expect(agOK("w2", "two"))
	h.call(RootConversation, "w3", "wait", `{"tool_call_id":"c1"}`)
	h.expectNone()
	h.complete(RootConversation, "c1", `"one"`)
	h.expect(agOK("w3", "one"))
}

// The waited call's own completion never interrupts its wait, pending or arriving.
func TestAgentWaitOwnCompletionNeverInterrupts(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1", "c2")
	h.turnStart(RootConversation)
	h.complete(RootConversation, "c1", `"one"`)
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agOK("w1", "one"))
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c2"}`)
	h.complete(RootConversation, "c2", `"two"`)
	h.expect(agOK("w2", "two"))
	h.turnEnd(RootConversation)
	h.expectNone()
}

// Input delivered as a prompt no longer interrupts a wait, whether delivered at once (idle) or at
// a turn boundary.
func TestAgentWaitDeliveredInputDoesNotInterrupt(t *testing.T) {
	for _, act := range activations {
		t.Run(act.name, func(t *testing.T) {
			h := newAg(t, Options{})
			child := h.create(RootConversation, "")
			h.bg(RootConversation, "c1", "other")
			act.fire(h, child) // idle: delivered at once
			fs := agDescribe(h.take())
			if len(fs) == 0 || fs[len(fs)-1] != act.prompt(h, child) && !agMatch(fs[len(fs)-1:], []string{act.prompt(h, child)}) {
				t.Fatalf("input not delivered: %s", agList(fs))
			}
			h.turnStart(RootConversation)
			h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
			h.expectNone()
			h.complete(RootConversation, "c1", `"r"`)
			h.expect(agOK("w", "r"))
		})
	}
}

// The status reminder is not activating input: pending or arriving, it never interrupts.
func TestAgentWaitNotInterruptedByReminder(t *testing.T) {
	h := newAgRaw(t, Options{})
	h.turnStart(RootConversation)
	h.call(RootConversation, "c1", "job", `{}`) // queues the reminder, pending until turn_end
	h.advance(2 * time.Second)
	h.expect(agPH("c1"))
	h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
	h.expectNone()
	h.call(RootConversation, "s", "status", `{"state":"done","title":"t"}`) // accepted: re-arms the reminder
	h.expect(agOK("s", "Status set to `done`: t"))
	h.call(RootConversation, "c2", "job", `{}`) // queues a second reminder while w1 blocks
	h.expectNone()
	h.call(RootConversation, "w2", "wait", `{}`) // bare: also not interrupted
	h.expectNone()
	h.complete(RootConversation, "c1", `"r"`)
	h.expect(agOK("w1", "r"))
	h.advance(2 * time.Second)
	h.expect(agPH("c2"))
	h.complete(RootConversation, "c2", `"r2"`)
	h.expect(agOK("w2", "original_tool_call_id: c2\n\nr2"))
	h.turnEnd(RootConversation)
	h.expect(agP(RootConversation, specReminder), agP(RootConversation, specReminder))
}

// CancelWait withdraws a blocked wait without answering it; nothing is consumed.
func TestAgentCancelWait(t *testing.T) {
	t.Run("exact", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
		h.a.CancelWait(RootConversation, "w1")
		h.expectNone()
		// Not waited for any more: another wait may take it.
		h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
		h.expectNone()
		h.a.CancelWait(RootConversation, "w2")
		h.complete(RootConversation, "c1", `"r"`)
		h.expect(agPI(RootConversation, specCompletion("c1")))
		h.call(RootConversation, "w3", "wait", `{"tool_call_id":"c1"}`)
		h.expect(agOK("w3", "r"))
	})
	t.Run("bare", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.call(RootConversation, "w1", "wait", `{}`)
		h.a.CancelWait(RootConversation, "w1")
		h.call(RootConversation, "w2", "wait", `{}`) // no longer "already pending"
		h.expectNone()
		h.a.CancelWait(RootConversation, "w2")
		h.complete(RootConversation, "c1", `"r"`)
		h.expect(agPI(RootConversation, specCompletion("c1")))
		h.call(RootConversation, "w3", "wait", `{}`)
		h.expect(agOK("w3", "original_tool_call_id: c1\n\nr"))
	})
	t.Run("timed", func(t *testing.T) {
		h := newAg(t, Options{})
		h.call(RootConversation, "w1", "wait", `{"timeout_minutes":5}`)
		h.a.CancelWait(RootConversation, "w1")
		h.advance(time.Hour)
		h.message("m", RootConversation, RootConversation, "x")
		h.expect("committed ref=m", agPU(RootConversation, "Message from root:\nx"))
	})
	t.Run("withdrawn wait is not interrupted later", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.turnStart(RootConversation)
		h.call(RootConversation, "w1", "wait", `{"tool_call_id":"c1"}`)
		h.a.CancelWait(RootConversation, "w1")
		h.message("m", RootConversation, RootConversation, "x")
		h.expect("committed ref=m")
	})
	t.Run("no-ops", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.a.CancelWait(RootConversation, "nope")
		h.a.CancelWait("conv_nope", "w")
		h.a.CancelWait(RootConversation, "c1") // not a wait
		h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
		h.complete(RootConversation, "c1", `"r"`)
		h.expect(agOK("w", "r"))
		h.a.CancelWait(RootConversation, "w") // already answered
		h.expectNone()
	})
}
