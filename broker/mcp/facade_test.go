package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

var builtinTools = []string{"cancel", "status", "wait"}

// TestInitializeCreatesSession: initialize without Backchannel-Session creates a session, whose
// id comes back in that header and whose timeline the API key reads; the client sees wait,
// cancel and status, then the tools of a host that attaches later, and its calls reach that
// host (SPEC 14).
func TestInitializeCreatesSession(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		a, info := mustConnect(t, e, k, brokertest.KeyA, "")
		if info.Status != http.StatusOK {
			t.Errorf("initialize: HTTP %d, want 200", info.Status)
		}
		id := info.Session
		if id == "" {
			t.Fatal("initialize without Backchannel-Session: no Backchannel-Session header in the response")
		}
		if status, sid, _ := e.timeline(id, brokertest.KeyA); status != http.StatusOK || sid != id {
			t.Errorf("GET /v1/sessions/%s/timeline with the API key: %d, session_id %q", id, status, sid)
		}
		if status, _, _ := e.timeline(id, brokertest.KeyB); status != http.StatusNotFound {
			t.Errorf("GET /v1/sessions/%s/timeline with another tenant's key: %d, want 404", id, status)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		names, err := a.Tools(ctx)
		if err != nil || !slices.Equal(names, builtinTools) {
			t.Errorf("tools/list of a session without hosts: %v (%v), want %v", names, err, builtinTools)
		}

		// A host attaches to the new session with the API key; its tool appears.
		h := e.dialHost(map[string]any{"session_id": id, "api_key": brokertest.KeyA, "tools": []any{lookupTool}})
		awaitTools(t, a, "the host's tool lookup must appear", func(n []string) bool {
			return slices.Equal(n, []string{"cancel", "lookup", "status", "wait"})
		})
		ch := callAsync(ctx, a, "lookup", map[string]any{"q": "x"}, nil)
		tc := h.toolCall("lookup")
		if tc.str("session_id") != id || !brokerCallID.MatchString(tc.str("call_id")) {
			t.Errorf("tool_call: %s", tc)
		}
		if args, _ := json.Marshal(tc["arguments"]); string(args) != `{"q":"x"}` {
			t.Errorf("tool_call arguments %s, want {\"q\":\"x\"}", args)
		}
		h.result(tc.str("call_id"), `"found x"`)
		o := await(t, ch, "lookup")
		if o.err != nil {
			t.Fatal(o.err)
		}
		// The first substantive call with no status set queues the status reminder, which this
		// result delivers.
		expectText(t, "lookup, the first substantive call", o.r, pendingPrompts(textReminder)+"\n\nfound x", false)
	})
}

// TestInitializeNamesSession: initialize with Backchannel-Session binds the client to that
// session; a wrong key is 401, another tenant's (or no) session 404, and a second agent of the
// session is refused (SPEC 14, 3, 10).
func TestInitializeNamesSession(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(lookupTool, slowTool, guardedTool)
		a, info := mustConnect(t, e, k, brokertest.KeyA, sid)
		if info.Status != http.StatusOK {
			t.Errorf("initialize: HTTP %d, want 200", info.Status)
		}
		if info.Session != "" && info.Session != sid {
			t.Errorf("initialize naming %s answered Backchannel-Session %q", sid, info.Session)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		want := []string{"cancel", "guarded", "lookup", "slow", "status", "wait"}
		if names, err := a.Tools(ctx); err != nil || !slices.Equal(names, want) {
			t.Errorf("tools/list: %v (%v), want %v", names, err, want)
		}
		setWorking(t, a)
		ch := callAsync(ctx, a, "lookup", map[string]any{"q": "y"}, nil)
		tc := h.toolCall("lookup")
		if tc.str("session_id") != sid {
			t.Errorf("tool_call of session %q, want %q", tc.str("session_id"), sid)
		}
		h.result(tc.str("call_id"), `{ "hits": [1, 2], "q": "y" }`)
		o := await(t, ch, "lookup")
		if o.err != nil {
			t.Fatal(o.err)
		}
		expectText(t, "lookup (a JSON output is compact JSON)", o.r, `{"hits":[1,2],"q":"y"}`, false)

		for _, c := range []struct {
			what, key, session string
			status             int
		}{
			{"a wrong API key", "not-a-key", "", http.StatusUnauthorized},
			{"a wrong API key naming the session", "not-a-key", sid, http.StatusUnauthorized},
			{"another tenant's session", brokertest.KeyB, sid, http.StatusNotFound},
			{"a session that does not exist", brokertest.KeyA, "no-such-session", http.StatusNotFound},
		} {
			_, info, err := k.connect(t, e, c.key, c.session)
			if err == nil || info.Status != c.status {
				t.Errorf("initialize with %s: HTTP %d (error %v), want %d and a failed initialize", c.what, info.Status, err, c.status)
			}
		}
		// The refused initializes changed nothing: the client still works.
		expectCall(t, a, "status", map[string]any{"state": "working", "title": testTitle}, textStatusWorking, false)
		// A second MCP client of the session takes the conversation over (SPEC 14): the first
		// MCP session is closed and its id answers 404 from then on.
		b, info := mustConnect(t, e, k, brokertest.KeyA, sid)
		if info.Status != http.StatusOK {
			t.Errorf("a second MCP client's initialize: HTTP %d, want 200 (a takeover)", info.Status)
		}
		if code := mcpSessionStatus(t, e, a.MCPSession()); code != http.StatusNotFound {
			t.Errorf("the MCP session taken over answers HTTP %d, want 404", code)
		}
		expectCall(t, b, "status", map[string]any{"state": "working", "title": testTitle}, textStatusWorking, false)
	})
}

// TestBackgroundWaitProgress: a call its host defers returns the placeholder naming its broker
// call id; `wait` returns its result once, and while the wait is open the job's progress notes
// and milestones arrive as notifications/progress (SPEC 13, 14).
func TestBackgroundWaitProgress(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(lookupTool, slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
		defer cancel()

		// A foreground call with a progress token gets its own progress notes.
		fgNotes := make(chan note, 64)
		fg := callAsync(ctx, a, "lookup", map[string]any{"q": "p"}, func(n note) { fgNotes <- n })
		lc := h.toolCall("lookup")
		h.progress(lc.str("call_id"), "looking")
		select {
		case n := <-fgNotes:
			if n.Message != "looking" || n.Progress <= 0 {
				t.Errorf("notifications/progress of the lookup: %+v, want message \"looking\" and progress > 0", n)
			}
		case <-time.After(waitLimit):
			t.Fatal("the progress note of an open call with a progress token did not arrive as notifications/progress")
		}
		h.result(lc.str("call_id"), `"p found"`)
		if o := await(t, fg, "lookup"); o.err != nil {
			t.Fatal(o.err)
		} else {
			expectText(t, "lookup", o.r, "p found", false)
		}

		id := startBackground(t, a, h, 1)
		waitCh, notes, first := openWait(t, ctx, a, h, id)
		// A milestone (a partial result with reply) is forwarded as well.
		h.send(map[string]any{"type": "tool_partial_result", "call_id": id, "segment": "half way", "reply": true})
		last := first.Progress
		for milestone := false; !milestone; {
			select {
			case n := <-notes:
				if n.Progress <= last {
					t.Errorf("notifications/progress: progress %v after %v, want increasing", n.Progress, last)
				}
				last = n.Progress
				milestone = strings.Contains(n.Message, "half way")
			case <-time.After(waitLimit):
				t.Fatal("the milestone did not arrive as notifications/progress")
			}
		}
		h.result(id, `{ "ok": true, "n": 1 }`)
		o := await(t, waitCh, "wait")
		if o.err != nil {
			t.Fatalf("wait: %v", o.err)
		}
		expectText(t, "wait for the background call", o.r, `{"ok":true,"n":1}`, false)
		expectCall(t, a, "wait", map[string]any{"tool_call_id": id}, textConsumed, true)
		expectCall(t, a, "wait", map[string]any{}, "error: No background tool call to wait for", true)
		expectCall(t, a, "wait", map[string]any{"tool_call_id": "call_unknown"}, "error: Unknown tool call id\ntool_call_id: call_unknown", true)

		// The bare wait gets the next completion, with its id.
		id2 := startBackground(t, a, h, 2)
		bare := callAsync(ctx, a, "wait", map[string]any{}, nil)
		h.result(id2, `"second done"`)
		o = await(t, bare, "wait {}")
		if o.err != nil {
			t.Fatalf("wait {}: %v", o.err)
		}
		expectText(t, "wait {}", o.r, "original_tool_call_id: "+id2+"\n\nsecond done", false)
	})
}

// TestCancel: `cancel` of a background call answers exactly "Tool cancellation requested", its
// host gets tool_cancel agent_request, and a wait then gets the canceled error; the errors of
// cancel are isError results with their `error:` texts (SPEC 13, 11).
func TestCancel(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(lookupTool, slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		id := startBackground(t, a, h, 1)
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": id}, textCancelRequested, false)
		tc := h.expectMatch("tool_cancel", func(f frame) bool { return f.str("call_id") == id })
		if tc.str("reason") != "agent_request" || tc.str("handle") == "" {
			t.Errorf("tool_cancel: %s, want reason agent_request and the handle", tc)
		}
		e.awaitEntry(sid, "the notice of the cancellation request", func(en entry) bool {
			return en.Kind == "notice" && en.Detail["text"] == "tool call cancellation request"
		})
		expectCall(t, a, "wait", map[string]any{"tool_call_id": id}, textCanceled, true)
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": id}, "error: Tool call already canceled", true)
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": ""}, "error: `tool_call_id` must not be empty", true)
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": "call_nope"}, "error: Unknown tool call id\ntool_call_id: call_nope", true)

		// A finished call cannot be cancelled.
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		ch := callAsync(ctx, a, "lookup", map[string]any{"q": "z"}, nil)
		lc := h.toolCall("lookup")
		h.result(lc.str("call_id"), `"z"`)
		if o := await(t, ch, "lookup"); o.err != nil {
			t.Fatal(o.err)
		} else {
			expectText(t, "lookup", o.r, "z", false)
		}
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": lc.str("call_id")}, "error: Tool call is already done", true)
	})
}

// TestStatus: `status` accepts and rejects with the exact texts of SPEC 13, and a status other
// than working makes the next substantive call queue the reminder, delivered in pending_prompts.
func TestStatus(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		a, _ := mustConnect(t, e, k, brokertest.KeyA, "")
		for _, c := range []struct {
			state, title string
			want         string
			isError      bool
		}{
			{"working", " \t Writing the tests\u00a0 ", "Status set to `working`: Writing the tests", false},
			{"sleeping", "x", "error: status state must be one of working, waiting, blocked, done", true},
			{"done", " \t ", "error: status title must not be empty", true},
			{"done", strings.Repeat("é", 81), "error: status title must be at most 160 UTF-8 bytes", true},
			{"done", "two\nlines", "error: status title must be a single line without control characters", true},
			{"done", "line\u2028separator", "error: status title must be a single line without control characters", true},
			{"waiting", strings.Repeat("a", 160), "Status set to `waiting`: " + strings.Repeat("a", 160), false},
			{"blocked", "Waiting for review", "Status set to `blocked`: Waiting for review", false},
		} {
			expectCall(t, a, "status", map[string]any{"state": c.state, "title": c.title}, c.want, c.isError)
		}
		// The status is blocked: the next substantive call (a cancel) queues the reminder, which
		// its own result delivers; a second one queues none.
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": "call_none"},
			"error: Unknown tool call id\ntool_call_id: call_none\n"+pendingPrompts(textReminder), true)
		expectCall(t, a, "cancel", map[string]any{"tool_call_id": "call_none"},
			"error: Unknown tool call id\ntool_call_id: call_none", true)
	})
}

// TestPendingPrompts: prompts reach the MCP client in the header pending_prompts (a JSON array,
// header-escaped) of the next result — interrupted waits included — and activating input
// interrupts waits (SPEC 13, 14).
func TestPendingPrompts(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		idA := startBackground(t, a, h, 1)
		idB := startBackground(t, a, h, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
		defer cancel()
		const interrupted = "internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: exact\n"

		// An interaction of A is activating input: a wait for A is interrupted, and its result
		// delivers the interaction's prompt (two lines: the JSON escape \n, header-escaped).
		h.send(map[string]any{"type": "tool_partial_result", "call_id": idA, "segment": "need a size",
			"interaction": map[string]any{"id": "ia_size", "prompt": `Which "size"?`, "options": []string{"small", "large"}}})
		o := await(t, callAsync(ctx, a, "wait", map[string]any{"tool_call_id": idA}, nil), "wait for A")
		if o.err != nil {
			t.Fatal(o.err)
		}
		expectText(t, "wait for A with an interaction of A pending", o.r,
			interrupted+pendingPrompts("Tool call `"+idA+"` asks (ia_size): Which \"size\"?\nOptions: small, large"), false)

		// B completes: its completion prompt interrupts a wait for A.
		h.result(idB, `"B done"`)
		o = await(t, callAsync(ctx, a, "wait", map[string]any{"tool_call_id": idA}, nil), "wait for A")
		if o.err != nil {
			t.Fatal(o.err)
		}
		expectText(t, "wait for A with B's completion pending", o.r, interrupted+pendingPrompts(completionPrompt(idB)), false)

		// Nothing is pending any more: the wait for A gets A's result.
		ch := callAsync(ctx, a, "wait", map[string]any{"tool_call_id": idA}, nil)
		h.result(idA, `"A done"`)
		o = await(t, ch, "wait for A")
		if o.err != nil {
			t.Fatal(o.err)
		}
		expectText(t, "wait for A", o.r, "A done", false)
		// B's prompt was delivered, its result was not consumed.
		expectCall(t, a, "wait", map[string]any{"tool_call_id": idB}, "B done", false)

		// A completion while no wait is open: its prompt comes with the next result of any call.
		idC := startBackground(t, a, h, 3)
		h.result(idC, `"C done"`)
		deadline := time.Now().Add(waitLimit)
		for {
			r := call(t, a, "status", map[string]any{"state": "working", "title": testTitle})
			if got := r.text(t); got != textStatusWorking {
				expectText(t, "status after C completed", r, pendingPrompts(completionPrompt(idC))+"\n\n"+textStatusWorking, false)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no result carried C's completion prompt within %v", waitLimit)
			}
			time.Sleep(20 * time.Millisecond)
		}
		expectCall(t, a, "wait", map[string]any{"tool_call_id": idC}, "C done", false)
	})
}

// TestRequestCancelled: an MCP request the client cancels (Go: the context of CallTool; TS:
// AbortController) cancels its call with agent_request — except a wait, whose cancellation only
// removes the waiter: a later wait still gets the result, once (SPEC 14).
func TestRequestCancelled(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(lookupTool, slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)

		ctx, cancel := context.WithCancel(context.Background())
		ch := callAsync(ctx, a, "lookup", map[string]any{"q": "never"}, nil)
		lc := h.toolCall("lookup")
		cancel()
		if o := await(t, ch, "the cancelled lookup"); o.err == nil {
			t.Errorf("a cancelled request answered %+v", o.r)
		}
		tc := h.expectMatch("tool_cancel", func(f frame) bool { return f.str("call_id") == lc.str("call_id") })
		if tc.str("reason") != "agent_request" {
			t.Errorf("tool_cancel of the cancelled request: %s, want reason agent_request", tc)
		}
		e.awaitEntry(sid, "the cancel of the lookup", func(en entry) bool {
			return en.Kind == "cancel" && en.CallID == lc.str("call_id") && en.Detail["reason"] == "agent_request"
		})

		// The wait: cancelling it leaves the call running.
		id := startBackground(t, a, h, 1)
		wctx, wcancel := context.WithCancel(context.Background())
		waitCh, _, _ := openWait(t, wctx, a, h, id)
		wcancel()
		if o := await(t, waitCh, "the cancelled wait"); o.err == nil {
			t.Errorf("a cancelled wait answered %+v", o.r)
		}
		h.expectNone("tool_cancel", 500*time.Millisecond)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*waitLimit)
		defer cancel2()
		waitCh, _, _ = openWait(t, ctx2, a, h, id)
		h.result(id, `"done after all"`)
		o := await(t, waitCh, "the second wait")
		if o.err != nil {
			t.Fatal(o.err)
		}
		expectText(t, "the wait after a cancelled wait", o.r, "done after all", false)
		expectCall(t, a, "wait", map[string]any{"tool_call_id": id}, textConsumed, true)
	})
}

// TestPermissionTool: in a session without a caller, a permission-guarded tool gets the error
// result at once and its host hears nothing (SPEC 12).
func TestPermissionTool(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(guardedTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		expectCall(t, a, "guarded", map[string]any{"x": 1}, "error: Tool guarded requires spoken permission", true)
		h.expectNone("tool_call", 300*time.Millisecond)
	})
}
