package wiretest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// depthOf is the nesting of a JSON text that is valid JSON (objects and arrays; strings are
// skipped).
func depthOf(raw []byte) int {
	depth, max := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			max = maxOf(max, depth)
		case '}', ']':
			depth--
		}
	}
	return max
}

func maxOf(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// TestAgentCallNesting covers the nesting limit of SPEC 2 over a real WebSocket: the frame is
// level 1 and its arguments level 2, so an agent.tool_call whose arguments nest 63 levels (64 in
// all) is dispatched, and one of 64 (65 in all) is bad_frame with its ref and reaches no host;
// the agent goes on. The host's frames carry the deepest arguments allowed one or two levels
// deeper than the agent put them (tool_deferred_resume lists them at level 4) and still decode
// (frames.Decode, as the Go SDK reads them): the limit is a rule of the frames clients send. A
// host's tool_result nested deeper than 64 levels is bad_frame too.
func TestAgentCallNesting(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		// args nests 1 + arrays levels: the object, and arrays inside its member k.
		args := func(agentID string, arrays int) string {
			return fmt.Sprintf(`{"n":%q,"k":%s}`, agentID, nest(arrays, `"x"`))
		}
		callFrame := func(id, agentID, arguments string) string {
			return fmt.Sprintf(`{"type":"agent.tool_call","id":%q,"call_id":%q,"conversation_id":"root","name":"job","arguments":%s}`, id, agentID, arguments)
		}

		// 64 levels in all: dispatched, the host's tool_call as deep.
		ok := callFrame(nextID("deep-"), "d1", args("d1", 62))
		if d := depthOf([]byte(ok)); d != frames.MaxNesting {
			t.Fatalf("the frame nests %d levels, want %d", d, frames.MaxNesting)
		}
		s.agent.Send(ok)
		d1 := h.Expect(callFor("d1"))
		if d := depthOf(d1.Raw); d != frames.MaxNesting {
			t.Errorf("the tool_call of d1 nests %d levels, want %d: %.200s", d, frames.MaxNesting, d1.Raw)
		}
		deferCall(t, h, d1.Str("call_id"), "depth-d1", "")

		// 65 levels, and far more: bad_frame, nothing dispatched.
		for _, c := range []struct {
			what, arguments string
		}{
			{"65 levels", args("d2", 63)},
			{"65 levels of empty arrays", `{"n":"d3","k":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`},
			{"2000 levels", args("d4", 2000)},
		} {
			id := nextID("deep-")
			s.agent.Send(callFrame(id, "dx", c.arguments))
			e := s.agent.Expect(TypeWith("error", "ref", id))
			if e.Str("code") != "bad_frame" || e.Str("message") != "JSON nesting deeper than 64 levels (in field arguments)" {
				t.Errorf("%s: answered %s, want bad_frame naming arguments", c.what, e)
			}
		}
		h.Absent(200*time.Millisecond, Type("tool_call"))

		// The agent goes on.
		tc := s.call(h, "d5", "job")
		result(h, tc.Str("call_id"), "", `"d5 done"`)
		if r := s.agentResult("d5"); r.Str("content") != "d5 done" {
			t.Errorf("the result of d5: %s", r)
		}

		// The host resumes: tool_deferred_resume carries d1's arguments at level 4 — 66 levels
		// — and decodes.
		last, token := h.LastSeq(), h.Welcome.Str("resume_token")
		h.Cut()
		s.waitDisconnect(h)
		h2, w := s.resume("host-resumed", token, last, nil)
		if w.Type != "welcome" {
			t.Fatalf("resume answered %s", w)
		}
		res := h2.Expect(Type("tool_deferred_resume"))
		if d := depthOf(res.Raw); d != frames.MaxNesting+2 {
			t.Errorf("tool_deferred_resume nests %d levels, want %d: %.300s", d, frames.MaxNesting+2, res.Raw)
		}
		for _, c := range []*Conn{h, h2, s.agent} {
			for _, f := range c.History() {
				if _, err := frames.Decode(f.Raw); err != nil {
					t.Errorf("%s: a frame the broker sent does not decode (%v): %.200s", c.Name, err, f.Raw)
				}
			}
		}

		// A result of 65 levels is bad_frame (naming output); the job goes on to its valid one.
		deep := fmt.Sprintf(`{"type":"tool_result","id":"deep-result","handle":"depth-d1","output":%s}`, nest(64, "1"))
		h2.Send(deep)
		if e := h2.Expect(TypeWith("error", "ref", "deep-result")); e.Str("code") != "bad_frame" ||
			e.Str("message") != "JSON nesting deeper than 64 levels (in field output)" {
			t.Errorf("a tool_result of 65 levels answered %s, want bad_frame naming output", e)
		}
		result(h2, "", "depth-d1", nest(63, "1"))
		if r := s.waitResult("d1"); !strings.HasSuffix(r.Str("content"), nest(63, "1")) {
			t.Errorf("the result of d1: %.300s", r)
		}
	})
}
