package wiretest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// declare sends tools.declare on h and returns the answer (tools.declared or error) after
// checking its ref.
func declare(t testing.TB, h *Conn, tools ...map[string]any) Frame {
	t.Helper()
	if tools == nil {
		tools = []map[string]any{}
	}
	id := nextID("decl-")
	h.Send(map[string]any{"type": "tools.declare", "id": id, "tools": tools})
	f := h.Expect(func(f Frame) bool { return f.Type == "tools.declared" || f.Type == "error" })
	if f.Str("ref") != id {
		t.Fatalf("tools.declare answered %s, want ref %s", f, id)
	}
	return f
}

// notAvailable checks that a call of name is answered at once with `Tool NAME is not available`.
func (s *session) notAvailable(agentID, name string) {
	s.t.Helper()
	s.agentCall(agentID, name, map[string]any{"n": agentID})
	want := "error: Tool " + name + " is not available"
	if r := s.agentResult(agentID); r.Str("kind") != "error" || r.Str("content") != want {
		s.t.Errorf("call of %s: %s, want %q", name, r, want)
	}
}

// TestToolDeclarations covers SPEC 4 and the routing of SPEC 1: tools.declared with the names in
// order, duration flags as strings or milliseconds, every invalid declaration rejected with
// bad_frame naming the tool and the field and nothing of it applied, arguments checked against
// parameters before dispatch, a declaration replacing the set, and new calls going to the latest
// connection that still declares the tool while open jobs stay with their slot.
func TestToolDeclarations(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host")
		// A schema file on the broker's disk: parameters may not reference it (nor any URL).
		outside := filepath.Join(t.TempDir(), "schema.json")
		if err := os.WriteFile(outside, []byte(`{"type":"object"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		typed := map[string]any{"type": "object", "properties": map[string]any{"count": map[string]any{"type": "integer", "minimum": 1}},
			"required": []string{"count"}}
		d := declare(t, h, decl("zeta"), decl("alpha", "timeout", "90s"), decl("mid", "timeout", 1500, "deferred", true, "deferred_timeout", "2h"),
			decl("typed", "parameters", typed, "expected_duration", "seconds", "notify_on_complete", false))
		if d.Type != "tools.declared" || d.Compact("names") != `["zeta","alpha","mid","typed"]` {
			t.Fatalf("tools.declare answered %s, want tools.declared with the names in order", d)
		}
		for _, c := range []struct {
			name    string
			timeout int64
			def     bool
		}{{"zeta", 10000, false}, {"alpha", 90000, false}, {"mid", 1500, true}} {
			tc := s.call(h, "t-"+c.name, c.name)
			if tc.Int("timeout_ms") != c.timeout || tc.Bool("deferred") != c.def {
				t.Errorf("tool_call of %s: %s, want timeout_ms %d, deferred %v", c.name, tc, c.timeout, c.def)
			}
			result(h, tc.Str("call_id"), "", `"ok"`)
			s.agentResult("t-" + c.name)
		}

		// Arguments that do not satisfy parameters never reach the host.
		for i, args := range []string{`{"count":"three"}`, `{}`, `{"count":0}`} {
			id := fmt.Sprintf("bad-args-%d", i)
			s.agentCall(id, "typed", rawJSON(args))
			r := s.agentResult(id)
			if r.Str("kind") != "error" || !strings.HasPrefix(r.Str("content"), "error: ") || !strings.Contains(r.Str("content"), "count") {
				t.Errorf("arguments %s: %s, want an error naming the field count", args, r)
			}
		}
		h.Absent(200*time.Millisecond, Type("tool_call"))
		s.agentCall("good-args", "typed", rawJSON(`{"count":3,"n":"good-args"}`))
		tc := h.Expect(callFor("good-args"))
		result(h, tc.Str("call_id"), "", `"counted"`)
		s.agentResult("good-args")

		// Invalid declarations: bad_frame naming the tool (or its index) and the field.
		invalid := []struct {
			tools []map[string]any
			words []string
		}{
			{[]map[string]any{decl("fine"), decl("wait")}, []string{"wait", "name"}},
			{[]map[string]any{decl("fine"), decl("cancel")}, []string{"cancel", "name"}},
			{[]map[string]any{decl("fine"), decl("status")}, []string{"status", "name"}},
			{[]map[string]any{decl("fine"), decl("cancel_job")}, []string{"cancel_job", "name"}},
			{[]map[string]any{decl("fine"), decl("fine2"), decl("bad name!")}, []string{"2", "name"}},
			{[]map[string]any{decl(strings.Repeat("n", 65))}, []string{"0", "name"}},
			{[]map[string]any{decl("slowpoke", "timeout", "121s")}, []string{"slowpoke", "timeout"}},
			{[]map[string]any{decl("forever", "deferred", true, "deferred_timeout", "25h")}, []string{"forever", "deferred_timeout"}},
			{[]map[string]any{decl("sneaky", "deferred_timeout", "1h")}, []string{"sneaky", "deferred_timeout"}},
			{[]map[string]any{decl("schemaless", "parameters", map[string]any{"type": 17})}, []string{"schemaless", "parameters"}},
			{[]map[string]any{decl("fileref", "parameters", map[string]any{"$ref": "file://" + outside})}, []string{"fileref", "parameters"}},
			{[]map[string]any{decl("pathref", "parameters", map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": outside}}})}, []string{"pathref", "parameters"}},
			{[]map[string]any{decl("urlref", "parameters", map[string]any{"$ref": b.URL + "/healthz"})}, []string{"urlref", "parameters"}},
			{[]map[string]any{decl("twice"), decl("twice")}, []string{"twice"}},
			{[]map[string]any{decl("vague", "expected_duration", "forever")}, []string{"vague", "expected_duration"}},
			{[]map[string]any{decl("badtime", "timeout", "soon")}, []string{"badtime", "timeout"}},
			{[]map[string]any{{"name": "noparams", "description": "d"}}, []string{"noparams", "parameters"}},
		}
		for _, c := range invalid {
			e := declare(t, h, c.tools...)
			if e.Type != "error" || e.Str("code") != "bad_frame" {
				t.Errorf("declaration %v answered %s, want bad_frame", c.tools, e)
				continue
			}
			for _, w := range c.words {
				if !strings.Contains(e.Str("message"), w) {
					t.Errorf("bad_frame %q does not name %q", e.Str("message"), w)
				}
			}
			// An error names nothing of the broker's machine (SPEC 18: no internal text).
			if wd, _ := os.Getwd(); strings.Contains(e.Str("message"), filepath.Dir(filepath.Dir(wd))) {
				t.Errorf("bad_frame %q names a path of the broker's machine", e.Str("message"))
			}
		}
		// Nothing of them applied: the old set still serves, "fine" was never declared.
		s.notAvailable("na-fine", "fine")
		tc = s.call(h, "still-zeta", "zeta")
		result(h, tc.Str("call_id"), "", `"z"`)
		s.agentResult("still-zeta")

		// A declaration replaces the set.
		if d := declare(t, h, decl("zeta")); d.Type != "tools.declared" {
			t.Fatalf("redeclare: %s", d)
		}
		s.notAvailable("na-alpha", "alpha")

		// Routing: the latest connection that declares a tool gets new calls; open jobs stay.
		h2 := s.host("host-2", decl("zeta"))
		onH2 := s.call(h2, "r1", "zeta")
		h.Absent(100*time.Millisecond, callFor("r1"))
		declare(t, h2) // h2 withdraws everything
		onH1 := s.call(h, "r2", "zeta")
		s.agentCall("cx-r1", "cancel", map[string]any{"tool_call_id": "r1"})
		s.agentResult("cx-r1")
		if c := h2.Expect(TypeWith("tool_cancel", "call_id", onH2.Str("call_id"))); c.Str("reason") != "agent_request" {
			t.Errorf("tool_cancel %s, want agent_request on the connection that got the call", c)
		}
		h.Absent(100*time.Millisecond, Type("tool_cancel"))
		result(h, onH1.Str("call_id"), "", `"routed"`)
		if r := s.agentResult("r2"); r.Str("content") != "routed" {
			t.Errorf("r2: %s", r)
		}
	})
}

// rawJSON is JSON text to send as it is inside a frame.
type rawJSON string

// MarshalJSON returns the text.
func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// TestFrameRules covers SPEC 2: bad_frame messages name the field and nothing of the frame is
// applied; unknown fields are ignored; ids up to 64 bytes are echoed as ref; an unknown type
// leaves the connection open.
func TestFrameRules(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		tc := s.call(h, "a1", "job")
		id := tc.Str("call_id")
		for _, c := range []struct {
			frame string
			field string
		}{
			{`{"type":"tool_progress","id":"f1","call_id":5,"note":"x"}`, "call_id"},
			{`{"type":"tool_progress","id":"f2","call_id":"%s"}`, "note"},
			{`{"type":"tool_deferred","id":"f3","call_id":"%s"}`, "handle"},
			{`{"type":"tool_deferred","id":"f4","call_id":"%s","handle":"h","status_label":7}`, "status_label"},
			{`{"type":"tool_result","id":"f5","call_id":"%s","output":1,"error":"both"}`, "output"},
			{`{"type":"job.cancel","id":"f6","call_id":"%s","handle":"h"}`, "handle"},
			{`{"type":"tools.declare","id":"f7","tools":[{"name":"x","description":"d","parameters":{"type":"object"}},{"name":"y","description":5,"parameters":{}}]}`, "description"},
			{`{"type":"agent.tool_call","id":"f8","call_id":"x","conversation_id":"root","name":"job","arguments":{}}`, ""},
		} {
			frame := c.frame
			if strings.Contains(frame, "%s") {
				frame = fmt.Sprintf(frame, id)
			}
			h.Send(frame)
			e := h.Expect("error")
			ref := frame[strings.Index(frame, `"id":"`)+6 : strings.Index(frame, `"id":"`)+8]
			if c.field == "" { // a frame of another role: forbidden
				if e.Str("code") != "forbidden" || e.Str("ref") != ref {
					t.Errorf("%s answered %s, want forbidden with ref", frame, e)
				}
				continue
			}
			if e.Str("code") != "bad_frame" || e.Str("ref") != ref || !strings.Contains(e.Str("message"), c.field) {
				t.Errorf("%s answered %s, want bad_frame with ref %s naming %s", frame, e, ref, c.field)
			}
		}
		// Nothing of those frames was applied: the job is pending, undeferred, with no progress.
		es := s.timeline()
		for _, e := range es {
			if e.CallID == id && e.Kind != "call" {
				t.Errorf("a rejected frame left %v", e)
			}
		}

		// Unknown fields are ignored; a 64-byte id is echoed, a 65-byte one is bad_frame.
		long := strings.Repeat("i", 64)
		h.Send(fmt.Sprintf(`{"type":"tool_deferred","id":%q,"call_id":%q,"handle":"rules","future_field":{"x":[1,2]},"priority":"high"}`, long, id))
		ack := h.Expect("tool_deferred_ack")
		if ack.Str("ref") != long || !ack.Bool("accepted") {
			t.Errorf("defer with unknown fields and a 64-byte id: %s", ack)
		}
		h.Send(fmt.Sprintf(`{"type":"tool_progress","id":%q,"handle":"rules","note":"x"}`, long+"i"))
		if e := h.Expect("error"); e.Str("code") != "bad_frame" || e.Has("ref") {
			t.Errorf("a 65-byte id: %s, want bad_frame without ref", e)
		}
		h.Send(`{"type":"tool.explode","id":"boom"}`)
		if e := h.Expect("error"); e.Str("code") != "unknown_frame" || e.Str("ref") != "boom" {
			t.Errorf("unknown type: %s", e)
		}
		h.Send(`{"type":"tool_result","handle":"rules","output":{"ok":true},"unknown":null}`)
		if r := s.waitResult("a1"); r.Str("content") != `{"ok":true}` {
			t.Errorf("the connection after an unknown type: %s", r)
		}
	})
}

// TestLimits covers the limits of SPEC 2 (configurable; the open-jobs limit is lowered here):
// output and arguments over 512 KiB, 64 tools per session, open jobs per session.
func TestLimits(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second, Limits: broker.Limits{MaxOpenJobs: 3}}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "timeout", "30s"))

		// Output: over 512 KiB is limit_exceeded and changes nothing; at the limit it passes.
		tc := s.call(h, "big", "job")
		over := `"` + strings.Repeat("o", 512<<10) + `"`
		id := result(h, tc.Str("call_id"), "", over)
		if e := h.Expect("error"); e.Str("code") != "limit_exceeded" || e.Str("ref") != id {
			t.Errorf("output over 512 KiB: %s, want limit_exceeded", e)
		}
		under := `"` + strings.Repeat("u", 500<<10) + `"`
		result(h, tc.Str("call_id"), "", under)
		if r := s.agentResult("big"); len(r.Str("content")) != 500<<10 {
			t.Errorf("a 500 KiB output reached the agent as %d bytes", len(r.Str("content")))
		}
		// Arguments over 512 KiB never reach a host.
		s.agentCall("huge-args", "job", map[string]any{"n": "huge-args", "blob": strings.Repeat("a", 513<<10)})
		if r := s.agentResult("huge-args"); r.Str("kind") != "error" {
			t.Errorf("arguments over 512 KiB: %s, want an error", r)
		}
		h.Absent(200*time.Millisecond, callFor("huge-args"))

		// Open jobs: 3 here; the 4th call fails at once, and a finished one frees a place.
		var open []string
		for i := 0; i < 3; i++ {
			open = append(open, s.call(h, fmt.Sprintf("o%d", i), "job").Str("call_id"))
		}
		s.agentCall("o3", "job", map[string]any{"n": "o3"})
		if r := s.agentResult("o3"); r.Str("kind") != "error" {
			t.Errorf("a call over the open-jobs limit: %s, want an error", r)
		}
		h.Absent(200*time.Millisecond, callFor("o3"))
		result(h, open[0], "", `"freed"`)
		s.agentResult("o0")
		tc = s.call(h, "o4", "job")
		result(h, tc.Str("call_id"), "", `"fits"`)
		if r := s.agentResult("o4"); r.Str("content") != "fits" {
			t.Errorf("o4: %s", r)
		}

		// 64 tools per session, counted over all the session's connections.
		many := func(prefix string, n int) []map[string]any {
			var out []map[string]any
			for i := 0; i < n; i++ {
				out = append(out, decl(fmt.Sprintf("%s%d", prefix, i)))
			}
			return out
		}
		h2 := s.host("host-2")
		if d := declare(t, h2, many("t", 63)...); d.Type != "tools.declared" {
			t.Errorf("63 tools beside the host's one: %s", d)
		}
		if d := declare(t, h2, many("t", 64)...); d.Str("code") != "limit_exceeded" {
			t.Errorf("64 tools beside the host's one: %s, want limit_exceeded", d)
		}
		// The rejected declaration applied nothing: t62 is served, t63 does not exist.
		tc = s.call(h2, "t62", "t62")
		result(h2, tc.Str("call_id"), "", `"t62"`)
		s.agentResult("t62")
		s.notAvailable("na-t63", "t63")
		h3 := s.host("host-3")
		if d := declare(t, h3, decl("one-too-many")); d.Str("code") != "limit_exceeded" {
			t.Errorf("a 65th tool on another connection: %s, want limit_exceeded", d)
		}
		if d := declare(t, h3, decl("t5")); d.Type != "tools.declared" {
			t.Errorf("a tool the session already has: %s", d)
		}
		s.notAvailable("na-65", "one-too-many")
	})
}
