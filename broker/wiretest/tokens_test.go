package wiretest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestCallerToken covers the end user's token (SPEC 3.1, 3.2, 18): POST /v1/sessions answers a
// caller_token, distinct from the join token, which caller_url carries instead of the join token;
// it attaches a caller and no other role; it reads no timeline; a wrong one answers
// unauthorized whether or not the session exists; after the end it answers session_ended.
func TestCallerToken(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		status, _, body := HTTPDo(t, "POST", b.URL+"/v1/sessions", brokertest.KeyA, "", "")
		if status != http.StatusCreated {
			t.Fatalf("POST /v1/sessions: %d %s", status, body)
		}
		m := decodeObject(t, "POST /v1/sessions", body)
		sid, _ := m["session_id"].(string)
		jt, _ := m["join_token"].(string)
		ct, _ := m["caller_token"].(string)
		if len(ct) < 22 || ct == jt {
			t.Fatalf("caller_token %q: want one of at least 22 characters, not the join token", ct)
		}
		cu, _ := m["caller_url"].(string)
		u, err := url.Parse(cu)
		if err != nil || strings.Contains(cu, jt) || u.Query().Get("caller_token") != ct || u.Query().Get("session") != sid {
			t.Errorf("caller_url %q: want session and caller_token, never the join token", cu)
		}
		s := &session{t: t, b: b, key: brokertest.KeyA, sid: sid, jt: jt}
		host := s.host("backend-host", decl("transfer", "deferred", true))

		refused := func(name string, members map[string]any, code string) Frame {
			t.Helper()
			c := Dial(t, b.WSURL, name)
			members["id"] = "h"
			e := c.Hello(members)
			if e.Type != "error" || e.Str("code") != code || e.Str("ref") != "h" {
				t.Errorf("%s: hello answered %s, want error %s", name, e, code)
			}
			c.ExpectClosed(websocket.StatusPolicyViolation)
			e.M["ref"] = ""
			return e
		}
		refused("host-with-caller-token", map[string]any{"role": "host", "session_id": sid, "caller_token": ct}, "forbidden")
		refused("agent-with-caller-token", map[string]any{"role": "agent", "session_id": sid, "caller_token": ct}, "forbidden")
		wrong := refused("wrong-caller-token", map[string]any{"role": "caller", "session_id": sid, "caller_token": ct + "x"}, "unauthorized")
		missing := "sess_" + strings.Repeat("q", 20)
		none := refused("caller-token-of-no-session", map[string]any{"role": "caller", "session_id": missing, "caller_token": ct}, "unauthorized")
		if d := sameAnswer(wrong, none, []string{sid}, []string{missing}); d != "" {
			t.Errorf("a caller token for a missing session is answered differently from a wrong one:\n  %s", d)
		}
		refused("join-token-as-caller-token", map[string]any{"role": "caller", "session_id": sid, "caller_token": jt}, "unauthorized")

		st, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+sid+"/timeline", ct, "", "")
		checkHTTPError(t, "the timeline with the caller token", st, body, http.StatusUnauthorized, "unauthorized")

		caller := Dial(t, b.WSURL, "caller")
		// The caller may host tools, but not a name another connection declares (SPEC 11).
		if w := caller.Hello(map[string]any{"id": "c", "role": "caller", "session_id": sid, "caller_token": ct,
			"tools": []map[string]any{decl("transfer")}}); w.Type != "welcome" || w.Has("join_token") {
			t.Fatalf("hello with the caller token: %s, want a welcome without join_token", w)
		}
		if e := caller.Expect(TypeWith("error", "ref", "c")); e.Str("code") != "forbidden" || !strings.Contains(e.Str("message"), "transfer") {
			t.Errorf("the caller's hello declaring the backend's tool: %s, want forbidden naming it", e)
		}
		caller.Send(map[string]any{"type": "tools.declare", "id": "own", "tools": []map[string]any{decl("page_tool")}})
		if d := caller.Expect(TypeWith("tools.declared", "ref", "own")); len(d.Arr("names")) != 1 {
			t.Errorf("the caller's own tool: %s", d)
		}
		caller.Send(map[string]any{"type": "tools.declare", "id": "take", "tools": []map[string]any{decl("page_tool"), decl("transfer")}})
		if e := caller.Expect(TypeWith("error", "ref", "take")); e.Str("code") != "forbidden" {
			t.Errorf("the caller's declaration of the backend's tool: %s, want forbidden", e)
		}
		// The caller asks for the backend's tool; it may not act for the backend's job.
		caller.Send(map[string]any{"type": "caller.text", "text": `call transfer {"amount":100}`})
		callID := host.Expect(Type("tool_call")).Str("call_id")
		caller.Send(map[string]any{"type": "tool_result", "id": "forge", "call_id": callID, "output": "forged: transfer confirmed"})
		if e := caller.Expect(TypeWith("error", "ref", "forge")); e.Str("code") != "forbidden" || e.Str("call_id") != callID {
			t.Errorf("the caller's tool_result for the backend's job: %s, want forbidden", e)
		}
		host.Send(map[string]any{"type": "tool_result", "id": "real", "call_id": callID, "output": "done"})
		host.Absent(200*time.Millisecond, TypeWith("error", "ref", "real"))
		// The caller's job.cancel reaches the jobs the caller may cancel by voice — the voice
		// model's calls, the backend's too — as the caller (SPEC 11).
		caller.Send(map[string]any{"type": "caller.text", "text": `call transfer {"amount":5}`})
		second := host.Expect(func(f Frame) bool { return f.Type == "tool_call" && f.Str("call_id") != callID }).Str("call_id")
		caller.Send(map[string]any{"type": "job.cancel", "id": "stop", "call_id": second})
		if r := caller.Expect(TypeWith("job.cancel_result", "ref", "stop")); r.Str("result") != "cancelled" {
			t.Errorf("the caller's job.cancel of a voice call: %s, want cancelled", r)
		}
		if c := host.Expect(TypeWith("tool_cancel", "call_id", second)); c.Str("reason") != "caller_request" {
			t.Errorf("the host's tool_cancel: %s, want reason caller_request", c)
		}
		caller.Send(map[string]any{"type": "session.end"})
		caller.ExpectClosed(websocket.StatusNormalClosure)
		host.ExpectClosed(websocket.StatusNormalClosure)
		refused("caller-token-after-the-end", map[string]any{"role": "caller", "session_id": sid, "caller_token": ct}, "session_ended")
		refused("wrong-caller-token-after-the-end", map[string]any{"role": "caller", "session_id": sid, "caller_token": "ct_nope"}, "unauthorized")
	})
}

// TestJobFramesOnlyFromTheirSlot: the frames that act for the host (tool_deferred,
// tool_progress, tool_partial_result, tool_result, tool_interaction_update) are accepted only
// from the slot the call was dispatched to; from another slot of the session — another host, or
// the caller (who may host tools too) — they get forbidden with the call's id and change
// nothing (SPEC 11). The probe that found this had the caller forge a backend job's result.
func TestJobFramesOnlyFromTheirSlot(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		owner := s.host("owner", decl("transfer", "deferred", true, "timeout", "30s"))
		other := s.host("other", decl("unrelated"))
		tc := s.call(owner, "a1", "transfer")
		callID := tc.Str("call_id")

		forbidden := func(what string, f map[string]any) {
			t.Helper()
			id := nextID("forge-")
			f["id"] = id
			other.Send(f)
			e := other.Expect(func(f Frame) bool { return f.Type == "error" && f.Str("ref") == id })
			if e.Str("code") != "forbidden" || e.Str("call_id") != callID {
				t.Errorf("%s from another slot: %s, want forbidden with call_id %s", what, e, callID)
			}
		}
		forbidden("tool_deferred", map[string]any{"type": "tool_deferred", "call_id": callID, "handle": "stolen"})
		handle := nextID("transfer-")
		wantAck(t, deferCall(t, owner, callID, handle, ""), true, "")
		forbidden("tool_progress", map[string]any{"type": "tool_progress", "handle": handle, "note": "forged"})
		forbidden("tool_partial_result", map[string]any{"type": "tool_partial_result", "call_id": callID, "segment": "forged", "reply": true})
		forbidden("tool_interaction_update", map[string]any{"type": "tool_interaction_update", "handle": handle, "interaction_id": "ia_x", "state": "resolved"})
		forbidden("tool_result by handle", map[string]any{"type": "tool_result", "handle": handle, "output": "forged: transfer confirmed"})
		forbidden("tool_result by call_id", map[string]any{"type": "tool_result", "call_id": callID, "error": "forged"})

		// The job is untouched: the owner's result is the one the agent gets.
		result(owner, "", handle, `"transfer done"`)
		if r := s.waitResult("a1"); r.Str("content") != "transfer done" {
			t.Errorf("the agent's result: %s, want the owner's", r)
		}
		owner.Absent(100*time.Millisecond, Type("error"))
		for _, e := range s.timeline() {
			if e.CallID == callID && (e.Kind == "progress" || e.Kind == "partial" || e.Kind == "late_result_dropped") {
				t.Errorf("a forged frame reached the timeline: %v", e)
			}
		}
	})
}
