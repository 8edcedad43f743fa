package wiretest

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// checkFramesUTF8 fails the test for every frame c received that is not valid UTF-8, or that
// does not decode (the Go SDK decodes every frame with frames.Decode).
func checkFramesUTF8(t *testing.T, c *Conn) {
	t.Helper()
	for _, f := range c.History() {
		if !utf8.Valid(f.Raw) {
			t.Errorf("%s received a frame that is not valid UTF-8: %q", c.Name, f.Raw)
			continue
		}
		if _, err := frames.Decode(f.Raw); err != nil {
			t.Errorf("%s received a frame that does not decode (%v): %.300s", c.Name, err, f.Raw)
		}
	}
}

// TestAgentCallInvalidUTF8 covers SPEC 2 for a text agent over WebSocket: an agent.tool_call
// that is not valid UTF-8 (raw bytes, in its arguments or anywhere else) is answered bad_frame
// with its ref and applied in no part — no job, no tool_call to the host — and the agent's
// connection and the session go on: the next valid call is dispatched. A host that drops while
// such calls are refused and resumes gets replayed only valid frames (a strict client — a
// browser, Python websockets — closes with 1007 on one that is not, and every resume would
// replay it). JSON escapes, a lone surrogate \ud800 among them, are valid UTF-8 and are passed
// on as they are.
func TestAgentCallInvalidUTF8(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))

		// bad sends an agent.tool_call for agentID with the raw members given (each a JSON
		// member text, possibly with invalid bytes) and expects its bad_frame.
		bad := func(what, agentID, members string) {
			t.Helper()
			id := nextID("bad-")
			raw := fmt.Sprintf(`{"type":"agent.tool_call","id":%q,"conversation_id":"root",%s}`, id, members)
			if utf8.ValidString(raw) {
				t.Fatalf("%s: the case is valid UTF-8: %q", what, raw)
			}
			if err := s.agent.SendRaw([]byte(raw)); err != nil {
				t.Fatalf("%s: send: %v", what, err)
			}
			e := s.agent.Expect(TypeWith("error", "ref", id))
			if e.Str("code") != "bad_frame" || !strings.Contains(e.Str("message"), "not valid UTF-8") {
				t.Errorf("%s: answered %s, want bad_frame saying the frame is not valid UTF-8", what, e)
			}
		}
		call := func(agentID, args string) string {
			return fmt.Sprintf(`"call_id":%q,"name":"job","arguments":%s`, agentID, args)
		}
		cases := []struct{ what, agentID, members string }{
			{"a byte FF in an argument", "u1", call("u1", "{\"n\":\"u1\",\"q\":\"a\xffb\"}")},
			{"the surrogate bytes ED A0 80", "u2", call("u2", "{\"n\":\"u2\",\"q\":\"\xed\xa0\x80\"}")},
			{"an overlong slash C0 AF", "u3", call("u3", "{\"n\":\"u3\",\"q\":\"\xc0\xaf\"}")},
			{"a truncated sequence", "u4", call("u4", "{\"n\":\"u4\",\"q\":\"\xe2\x82\"}")},
			{"an invalid key of the arguments", "u5", call("u5", "{\"n\":\"u5\",\"\xfe\":1}")},
			{"deep in the arguments", "u6", call("u6", "{\"n\":\"u6\",\"q\":[{\"r\":[\"\xf4\x90\x80\x80\"]}]}")},
			{"the call_id", "u7", "\"call_id\":\"u7\xff\",\"name\":\"job\",\"arguments\":{\"n\":\"u7\"}"},
			{"the name", "u8", "\"call_id\":\"u8\",\"name\":\"job\xff\",\"arguments\":{\"n\":\"u8\"}"},
		}
		for _, c := range cases[:4] {
			bad(c.what, c.agentID, c.members)
		}
		// The agent's connection and the session go on: a valid call is dispatched, with its
		// arguments as sent (escapes included).
		s.agentCall("v1", "job", map[string]any{"n": "v1", "q": "café 😀"})
		v1 := h.Expect(callFor("v1"))
		if q := v1.Obj("arguments")["q"]; q != "café 😀" {
			t.Errorf("tool_call of v1: arguments %s", v1.Compact("arguments"))
		}
		deferCall(t, h, v1.Str("call_id"), "utf8-v1", "")

		// The host drops; the other calls are refused while it is away, and one valid call
		// with a lone surrogate escape is made.
		last := h.LastSeq()
		token := h.Welcome.Str("resume_token")
		h.Cut()
		s.waitDisconnect(h)
		for _, c := range cases[4:] {
			bad(c.what, c.agentID, c.members)
		}
		escaped := `{"type":"agent.tool_call","id":"esc-1","conversation_id":"root","call_id":"v2","name":"job","arguments":{"n":"v2","q":"\ud800"}}`
		if err := s.agent.SendRaw([]byte(escaped)); err != nil {
			t.Fatal(err)
		}
		s.waitTimeline("the call of v2", func(es []Entry) bool { return len(find(es, "call", "")) == 2 })

		h2, w := s.resume("host-resumed", token, last, nil)
		if w.Type != "welcome" {
			t.Fatalf("resume answered %s", w)
		}
		v2 := h2.Expect(callFor("v2"))
		if !strings.Contains(string(v2.Raw), `"q":"\ud800"`) {
			t.Errorf("the tool_call of v2 does not carry the escape as sent: %s", v2.Raw)
		}
		resumed := h2.Expect(Type("tool_deferred_resume"))
		if jobs := resumed.Arr("jobs"); len(jobs) != 1 {
			t.Errorf("tool_deferred_resume %s, want the job of v1", resumed)
		}
		h2.Absent(200*time.Millisecond, Any)
		// The only calls of the session are v1 and v2: none of the refused ones.
		for _, f := range append(h.History(), h2.History()...) {
			if f.Type == "tool_call" && f.Obj("arguments")["n"] != "v1" && f.Obj("arguments")["n"] != "v2" {
				t.Errorf("a refused call reached the host: %s", f)
			}
		}
		if n := len(find(s.timeline(), "call", "")); n != 2 {
			t.Errorf("%d call entries in the timeline, want 2 (v1 and v2)", n)
		}
		checkFramesUTF8(t, h)
		checkFramesUTF8(t, h2)
		checkFramesUTF8(t, s.agent)

		// The host finishes both jobs; the agent gets both results.
		result(h2, v2.Str("call_id"), "", `"done v2"`)
		if r := s.agentResult("v2"); r.Str("kind") != "result" || r.Str("content") != "done v2" {
			t.Errorf("the result of v2: %s", r)
		}
		result(h2, "", "utf8-v1", `"done v1"`)
		if r := s.waitResult("v1"); !strings.HasSuffix(r.Str("content"), "done v1") {
			t.Errorf("the result of v1: %s", r)
		}
	})
}

// TestHostFramesInvalidUTF8: the same rule for what a host sends (SPEC 2): a tool_result,
// tool_progress or tool_partial_result that is not valid UTF-8 is bad_frame with its ref and
// applies nothing — the job goes on, and the agent gets no byte of it; the valid result after
// it is the one delivered.
func TestHostFramesInvalidUTF8(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job"))
		tc := s.call(h, "a1", "job")
		id := tc.Str("call_id")
		for _, f := range []string{
			"{\"type\":\"tool_result\",\"id\":\"r-1\",\"call_id\":%q,\"output\":{\"text\":\"a\xffb\"}}",
			"{\"type\":\"tool_result\",\"id\":\"r-2\",\"call_id\":%q,\"output\":\"\xed\xa0\x80\"}",
			"{\"type\":\"tool_result\",\"id\":\"r-3\",\"call_id\":%q,\"error\":\"failed \xc0\xaf\"}",
			"{\"type\":\"tool_progress\",\"id\":\"r-4\",\"call_id\":%q,\"note\":\"50 \xff\"}",
		} {
			raw := fmt.Sprintf(f, id)
			ref := raw[strings.Index(raw, `"id":"`)+6 : strings.Index(raw, `","call_id"`)]
			if err := h.SendRaw([]byte(raw)); err != nil {
				t.Fatal(err)
			}
			e := h.Expect(TypeWith("error", "ref", ref))
			if e.Str("code") != "bad_frame" || !strings.Contains(e.Str("message"), "not valid UTF-8") {
				t.Errorf("%q answered %s, want bad_frame", raw, e)
			}
		}
		s.agent.Absent(100*time.Millisecond, Type("agent.tool_result"))
		result(h, id, "", `{"text":"ok é"}`)
		if r := s.agentResult("a1"); r.Str("kind") != "result" || r.Str("content") != `{"text":"ok é"}` {
			t.Errorf("the result of a1: %s", r)
		}
		checkFramesUTF8(t, s.agent)
		checkFramesUTF8(t, h)
	})
}
