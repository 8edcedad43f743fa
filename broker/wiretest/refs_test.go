package wiretest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestErrorsCarryRef: an error answering a client frame that had an id carries it as ref on
// every path (SPEC 2, 2.1) — a frame only the broker sends (answered unknown_frame, saying so,
// before its fields are looked at), a frame that is not valid JSON after its id, one over the
// frame limit, and the first frame of a connection — and the connection and the session survive.
func TestErrorsCarryRef(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{Limits: broker.Limits{MaxFrameBytes: 64 << 10}}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true))
		callID := s.deferJob(h, "a1", "job", nextID("refs-"), "")

		expectError := func(what, id, code, message string) Frame {
			t.Helper()
			e := h.Expect(func(f Frame) bool { return f.Type == "error" && f.Str("ref") == id })
			if e.Str("code") != code {
				t.Errorf("%s: answered %s, want error %s with ref %q", what, e, code, id)
			}
			if message != "" && e.Str("message") != message {
				t.Errorf("%s: message %q, want %q", what, e.Str("message"), message)
			}
			return e
		}
		// Frames only the broker sends, whole and malformed alike.
		for i, f := range []string{
			`{"type":"tool_call","id":%q,"call_id":"call_abcdefghijklmnopqrst","name":"job","arguments":{}}`,
			`{"type":"tool_call","id":%q,"call_id":"call_abcdefghijklmnopqrst","name":"job","arguments":{},"deferred":true,"timeout_ms":1000,"session_id":"s"}`,
			`{"type":"tool_cancel","id":%q}`,
			`{"type":"welcome","id":%q}`,
		} {
			id := fmt.Sprintf("broker-frame-%d", i)
			typ := strings.SplitN(f, `"`, 5)[3]
			h.Send(fmt.Sprintf(f, id))
			expectError("a host's "+typ, id, "unknown_frame", typ+" is a frame the broker sends, not one it receives")
		}
		// Not valid JSON after the id: truncated, a control byte, nested past any decoder.
		h.Send(`{"type":"tool_progress","id":"trunc","call_id":"` + callID + `","note":"cut o`)
		expectError("truncated JSON", "trunc", "bad_frame", "")
		h.Send("{\"type\":\"tool_progress\",\"id\":\"ctl\",\"note\":\x01}")
		expectError("a control byte", "ctl", "bad_frame", "")
		h.Send(`{"type":"tool_progress","id":"deep","call_id":"` + callID + `","note":"x","junk":` + nest(12000, "") + `}`)
		expectError("nesting past 10,000 levels", "deep", "bad_frame", "")
		// Over the frame limit: the id comes from the part that was read.
		h.Send(`{"type":"tool_progress","id":"huge","call_id":"` + callID + `","note":"` + strings.Repeat("n", 80<<10) + `"}`)
		expectError("a frame over the limit", "huge", "limit_exceeded", "")

		// The connection and the job survive: progress is still accepted, the result lands.
		h.Send(map[string]any{"type": "tool_progress", "id": "still", "call_id": callID, "note": "still here"})
		result(h, callID, "", `"done"`)
		if r := s.waitResult("a1"); r.Str("content") != "done" {
			t.Errorf("the job's result after the bad frames: %s, want done", r)
		}
		if h.IsClosed() {
			t.Error("the host connection was closed")
		}

		// A first frame that is a broker frame: refused with its ref, then close 1008.
		c := Dial(t, b.WSURL, "first-is-a-broker-frame")
		c.Send(`{"type":"tool_call","id":"first","call_id":"call_abcdefghijklmnopqrst","name":"job"}`)
		if e := c.Expect("error"); e.Str("code") != "unknown_frame" || e.Str("ref") != "first" || e.Has("seq") {
			t.Errorf("a first frame tool_call answered %s, want unknown_frame with ref first and no seq", e)
		}
		c.ExpectClosed(websocket.StatusPolicyViolation)
	})
}

// TestErrorsNameTheCall: call_finished (and call_not_pending) answering a frame that named the
// job by handle carry its call_id too, and one naming it by call_id carries its handle (SPEC 2.1,
// 8: every frame about a job carries call_id, plus handle once it is deferred).
func TestErrorsNameTheCall(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true))
		handle := nextID("named-")
		callID := s.deferJob(h, "a1", "job", handle, "")
		result(h, "", handle, `"done"`)
		s.waitResult("a1")

		for _, f := range []map[string]any{
			{"type": "tool_progress", "handle": handle, "note": "late"},
			{"type": "tool_partial_result", "handle": handle, "segment": "late"},
			{"type": "tool_result", "handle": handle, "output": "again"},
			{"type": "tool_progress", "call_id": callID, "note": "late"},
			{"type": "tool_result", "call_id": callID, "error": "again"},
		} {
			id := nextID("late-")
			f["id"] = id
			h.Send(f)
			e := h.Expect(func(f Frame) bool { return f.Type == "error" && f.Str("ref") == id })
			if e.Str("code") != "call_finished" || e.Str("call_id") != callID || e.Str("handle") != handle {
				t.Errorf("%v answered %s, want call_finished with call_id %q and handle %q", f, e, callID, handle)
			}
		}
		// A handle no job of the session has: unknown_call, naming nothing it does not know.
		h.Send(map[string]any{"type": "tool_progress", "id": "nobody", "handle": "no-such-handle", "note": "x"})
		e := h.Expect(func(f Frame) bool { return f.Type == "error" && f.Str("ref") == "nobody" })
		if e.Str("code") != "unknown_call" || e.Has("call_id") || e.Str("handle") != "no-such-handle" {
			t.Errorf("an unknown handle answered %s, want unknown_call with the handle and no call_id", e)
		}
	})
}
