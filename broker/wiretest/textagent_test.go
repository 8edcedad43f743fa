package wiretest

import (
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// builtin calls a built-in tool (wait, cancel, status) and returns its answer.
func (s *session) builtin(name string, args any) Frame {
	s.t.Helper()
	id := nextID(name + "-")
	s.agentCall(id, name, args)
	return s.agentResult(id)
}

// wantContent checks an agent.tool_result's kind and exact content.
func wantContent(t testing.TB, what string, f Frame, kind, content string) {
	t.Helper()
	if f.Str("kind") != kind || f.Str("content") != content {
		t.Errorf("%s: kind %q content %q, want kind %q content %q", what, f.Str("kind"), f.Str("content"), kind, content)
	}
}

// TestTextAgentBuiltins covers the built-ins of SPEC 13 over the wire: wait, cancel and status
// with their exact texts and errors, header escaping, and the status reminder.
func TestTextAgentBuiltins(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))

		// wait errors.
		wantContent(t, "wait unknown", s.builtin("wait", map[string]any{"tool_call_id": "ghost"}), "error", "error: Unknown tool call id\ntool_call_id: ghost")
		wantContent(t, "wait escaped", s.builtin("wait", map[string]any{"tool_call_id": "a\nb\tc\\d\u2028"}), "error",
			"error: Unknown tool call id\ntool_call_id: a\\nb\\tc\\\\d\\u2028")
		wantContent(t, "bare wait, nothing", s.builtin("wait", map[string]any{}), "error", "error: No background tool call to wait for")
		for _, n := range []any{0, -1, 1.5, "5"} {
			wantContent(t, "timed wait", s.builtin("wait", map[string]any{"timeout_minutes": n}), "error", "error: timeout_minutes must be a positive integer")
		}

		// status, and the reminder before it.
		tc := s.call(h, "first", "job")
		if p := s.agent.Expect(Type("agent.prompt")); p.Str("text") != "Reminder: when working on a task use `status` tool to acknowledge it." || p.Str("conversation_id") != "root" {
			t.Errorf("first substantive call without a status: prompt %s, want the reminder", p)
		}
		result(h, tc.Str("call_id"), "", `"ok"`)
		s.agentResult("first")
		wantContent(t, "status", s.builtin("status", map[string]any{"state": "working", "title": "  Crunching\u00a0numbers \t"}), "result", "Status set to `working`: Crunching\u00a0numbers")
		for _, c := range []struct {
			args map[string]any
			err  string
		}{
			{map[string]any{"state": "sleeping", "title": "x"}, "error: status state must be one of working, waiting, blocked, done"},
			{map[string]any{"state": 1, "title": "x"}, "error: status state must be one of working, waiting, blocked, done"},
			{map[string]any{"state": "blocked", "title": " \t "}, "error: status title must not be empty"},
			{map[string]any{"state": "blocked", "title": strings.Repeat("é", 81)}, "error: status title must be at most 160 UTF-8 bytes"},
			{map[string]any{"state": "blocked", "title": "two\nlines"}, "error: status title must be a single line without control characters"},
			{map[string]any{"state": "blocked", "title": "sep\u2028arated"}, "error: status title must be a single line without control characters"},
			{map[string]any{"state": "blocked", "title": "del\x7f"}, "error: status title must be a single line without control characters"},
		} {
			wantContent(t, "status", s.builtin("status", c.args), "error", c.err)
		}
		wantContent(t, "status 160 bytes", s.builtin("status", map[string]any{"state": "working", "title": strings.Repeat("é", 80)}), "result", "Status set to `working`: "+strings.Repeat("é", 80))
		// Working: no reminder for later calls.
		tc = s.call(h, "second", "job")
		result(h, tc.Str("call_id"), "", `"ok"`)
		s.agentResult("second")
		s.agent.Absent(200*time.Millisecond, Type("agent.prompt"))

		// cancel: its errors and its success.
		wantContent(t, "cancel empty", s.builtin("cancel", map[string]any{"tool_call_id": ""}), "error", "error: `tool_call_id` must not be empty")
		wantContent(t, "cancel unknown", s.builtin("cancel", map[string]any{"tool_call_id": "ghost"}), "error", "error: Unknown tool call id\ntool_call_id: ghost")
		wantContent(t, "cancel finished", s.builtin("cancel", map[string]any{"tool_call_id": "second"}), "error", "error: Tool call is already done")
		s.agentCall("w-builtin", "wait", map[string]any{"tool_call_id": "ghost"})
		s.agentResult("w-builtin")
		wantContent(t, "cancel a built-in", s.builtin("cancel", map[string]any{"tool_call_id": "w-builtin"}), "error", "error: Tool call cannot be canceled")
		id := s.call(h, "victim", "job").Str("call_id")
		wantContent(t, "cancel", s.builtin("cancel", map[string]any{"tool_call_id": "victim"}), "result", "Tool cancellation requested")
		if c := h.Expect(TypeWith("tool_cancel", "call_id", id)); c.Str("reason") != "agent_request" {
			t.Errorf("tool_cancel %s, want reason agent_request", c)
		}
		wantContent(t, "victim", s.agentResult("victim"), "error", "error: Tool call canceled")
		wantContent(t, "cancel again", s.builtin("cancel", map[string]any{"tool_call_id": "victim"}), "error", "error: Tool call already canceled")
		es := s.timeline()
		found := false
		for _, e := range find(es, "notice", "") {
			if e.Detail["text"] == "tool call cancellation request" {
				found = true
			}
		}
		if !found {
			t.Errorf("no notice `tool call cancellation request` on the timeline")
		}

		// job.cancel from the agent: reason agent_request.
		id = s.deferJob(h, "by-handle", "job", "agent-cancels", "")
		s.agent.Send(map[string]any{"type": "job.cancel", "id": "jc", "handle": "agent-cancels"})
		if r := s.agent.Expect(TypeWith("job.cancel_result", "ref", "jc")); r.Str("result") != "cancelled" || r.Str("call_id") != id {
			t.Errorf("agent's job.cancel: %s", r)
		}
		if c := h.Expect(TypeWith("tool_cancel", "call_id", id)); c.Str("reason") != "agent_request" || c.Str("handle") != "agent-cancels" {
			t.Errorf("tool_cancel %s, want reason agent_request", c)
		}
	})
}

// TestTextAgentPrompts covers SPEC 13's prompts and waits: a completion prompt waits for the end
// of a turn; an exact wait is interrupted by activating input (a message from another
// conversation) without consuming anything, and a retry gets the result once.
func TestTextAgentPrompts(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		if r := s.builtin("status", map[string]any{"state": "working", "title": "testing"}); r.Str("kind") != "result" {
			t.Fatalf("status: %s", r)
		}

		// A completion during a turn is announced at its end.
		id := s.deferJob(h, "t1", "job", "turn-job", "")
		s.agent.Expect(TypeWith("agent.tool_result", "call_id", "t1", "kind", "background_placeholder"))
		s.agent.Send(map[string]any{"type": "agent.turn_start", "conversation_id": "root"})
		// The agent's frames are handled in order: once this is answered, the turn has begun.
		s.builtin("status", map[string]any{"state": "working", "title": "in a turn"})
		result(h, "", "turn-job", `"after the turn"`)
		s.waitTimeline("result", has("result", id))
		s.agent.Absent(300*time.Millisecond, Type("agent.prompt"))
		s.agent.Send(map[string]any{"type": "agent.turn_end", "conversation_id": "root"})
		if p := s.agent.Expect(Type("agent.prompt")); !strings.Contains(p.Str("text"), "Tool call `t1` completed.") || !p.Bool("internal") {
			t.Errorf("prompt at the end of the turn: %s", p)
		}
		wantContent(t, "wait t1", s.waitResult("t1"), "result", "after the turn")

		// An exact wait blocks; a message from a child conversation interrupts it.
		s.deferJob(h, "t2", "job", "wait-job", "")
		s.agent.Send(map[string]any{"type": "conversation.create", "id": "cc", "parent_conversation_id": "root"})
		child := s.agent.Expect(TypeWith("conversation.created", "ref", "cc")).Str("conversation_id")
		s.agentCall("w2", "wait", map[string]any{"tool_call_id": "t2"})
		s.agent.Absent(300*time.Millisecond, TypeWith("agent.tool_result", "call_id", "w2"))
		s.agent.Send(map[string]any{"type": "agent.message", "id": "msg", "conversation_id": child, "to_conversation_id": "root", "text": "look at this"})
		if c := s.agent.Expect(TypeWith("agent.message_committed", "ref", "msg")); c.Str("message_id") == "" {
			t.Errorf("agent.message_committed without message_id: %s", c)
		}
		wantContent(t, "interrupted wait", s.agentResult("w2"), "result",
			"internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: exact")
		p := s.agent.Expect(func(f Frame) bool {
			return f.Type == "agent.prompt" && strings.HasPrefix(f.Str("text"), "Message from")
		})
		if p.Str("text") != "Message from "+child+":\nlook at this" || p.Str("conversation_id") != "root" {
			t.Errorf("message prompt %s", p)
		}
		// Nothing was consumed: the retry blocks until the result, which it gets once.
		s.agentCall("w3", "wait", map[string]any{"tool_call_id": "t2"})
		s.agent.Absent(200*time.Millisecond, TypeWith("agent.tool_result", "call_id", "w3"))
		result(h, "", "wait-job", `"waited"`)
		wantContent(t, "retried wait", s.agentResult("w3"), "result", "waited")
		// The waited call's own completion prompt is suppressed.
		s.agent.Absent(200*time.Millisecond, func(f Frame) bool { return f.Type == "agent.prompt" && strings.Contains(f.Str("text"), "`t2`") })
		wantContent(t, "wait again", s.waitResult("t2"), "error", "error: Tool call result already consumed")

		// Two exact waits on one call: the second is refused; the first gets the result.
		s.deferJob(h, "bA", "job", "bare-a", "")
		s.agentCall("wx1", "wait", map[string]any{"tool_call_id": "bA"})
		wantContent(t, "parallel exact wait", s.builtin("wait", map[string]any{"tool_call_id": "bA"}), "error", "error: Tool call result is already being waited for")
		result(h, "", "bare-a", `"a"`)
		wantContent(t, "exact wait bA", s.agentResult("wx1"), "result", "a")

		// Bare waits consume the conversation's completed results in completion order.
		idB := s.deferJob(h, "bB", "job", "bare-b", "")
		idC := s.deferJob(h, "bC", "job", "bare-c", "")
		result(h, "", "bare-c", `"c first"`)
		s.waitTimeline("result c", has("result", idC))
		result(h, "", "bare-b", `"b second"`)
		s.waitTimeline("result b", has("result", idB))
		wantContent(t, "bare wait 1", s.builtin("wait", map[string]any{}), "result", "original_tool_call_id: bC\n\nc first")
		wantContent(t, "bare wait 2", s.builtin("wait", map[string]any{}), "result", "original_tool_call_id: bB\n\nb second")
		wantContent(t, "bare wait 3", s.builtin("wait", map[string]any{}), "error", "error: No background tool call to wait for")
	})
}

// TestAgentResume covers SPEC 10 for a text agent: results that arrive while it is away wait in
// its outbox and are replayed on resume.
func TestAgentResume(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "timeout", "30s"))
		tc := s.call(h, "a1", "job")
		s.agent.Absent(100*time.Millisecond, Type("agent.tool_result"))
		token, last := s.agent.Welcome.Str("resume_token"), s.agent.LastSeq()
		s.agent.Cut()
		s.waitDisconnect(s.agent)
		result(h, tc.Str("call_id"), "", `"while you were away"`)
		s.waitTimeline("result", has("result", tc.Str("call_id")))

		a := Dial(t, b.WSURL, "agent-resumed")
		if w := a.Hello(map[string]any{"role": "agent", "session_id": s.sid, "resume_token": token, "last_seq": last}); w.Type != "welcome" {
			t.Fatalf("agent resume: %s", w)
		}
		r := a.Next()
		if r.Type != "agent.tool_result" || r.Str("call_id") != "a1" || r.Str("content") != "while you were away" || r.Int("seq") != last+1 {
			t.Errorf("replayed to the agent: %s, want the result of a1 with seq %d", r, last+1)
		}
		a.Absent(200*time.Millisecond, Type("tool_deferred_resume")) // it declared no tools
		s.agent = a
		tc = s.call(h, "a2", "job")
		result(h, tc.Str("call_id"), "", `"back"`)
		wantContent(t, "a2", s.agentResult("a2"), "result", "back")
	})
}
