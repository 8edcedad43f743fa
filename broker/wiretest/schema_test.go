package wiretest

import (
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// deepSchema is a parameters schema nested levels deep (the parameters object is level 1).
func deepSchema(levels int) string {
	return strings.Repeat(`{"items":`, levels-1) + `{}` + strings.Repeat(`}`, levels-1)
}

// schemaOfSize is a compact parameters schema of exactly n bytes.
func schemaOfSize(n int) string {
	head := `{"type":"object","description":"`
	return head + strings.Repeat("d", n-len(head)-2) + `"}`
}

// TestSchemaBounds covers SPEC 2's bounds of a tool's parameters: deeper than 32 levels or
// larger than 64 KiB is bad_frame naming the tool and the field, and nothing of the declaration
// is applied; 32 levels and 64 KiB exactly are accepted — in tools.declare and in hello.
func TestSchemaBounds(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("keep"))
		if n := len(schemaOfSize(64 << 10)); n != 64<<10 {
			t.Fatalf("schemaOfSize: %d bytes", n)
		}
		for _, c := range []struct {
			what, schema string
			words        []string
		}{
			{"33 levels", deepSchema(33), []string{`tools[1] (tool "x"): field parameters`, "32 levels"}},
			{"64 KiB + 1", schemaOfSize(64<<10 + 1), []string{`tools[1] (tool "x"): field parameters`, "65537 bytes", "65536"}},
		} {
			e := declare(t, h, decl("fine"), decl("x", "parameters", rawJSON(c.schema)))
			if e.Type != "error" || e.Str("code") != "bad_frame" {
				t.Errorf("%s: %s, want bad_frame", c.what, e)
				continue
			}
			for _, w := range c.words {
				if !strings.Contains(e.Str("message"), w) {
					t.Errorf("%s: %q does not say %q", c.what, e.Str("message"), w)
				}
			}
		}
		// Nothing applied: "fine" was never declared, "keep" still serves.
		s.notAvailable("na-fine", "fine")
		tc := s.call(h, "still-keep", "keep")
		result(h, tc.Str("call_id"), "", `"kept"`)
		s.agentResult("still-keep")

		// At the bounds: accepted, and the tools serve.
		d := declare(t, h, decl("deep", "parameters", rawJSON(deepSchema(32))), decl("wide", "parameters", rawJSON(schemaOfSize(64<<10))))
		if d.Type != "tools.declared" || d.Compact("names") != `["deep","wide"]` {
			t.Fatalf("32 levels and 64 KiB: %s, want tools.declared", d)
		}
		for _, tool := range []string{"deep", "wide"} {
			tc := s.call(h, "call-"+tool, tool)
			result(h, tc.Str("call_id"), "", `"ok"`)
			if r := s.agentResult("call-" + tool); r.Str("content") != "ok" {
				t.Errorf("a call of %s: %s", tool, r)
			}
		}

		// The same in a hello: welcome, then bad_frame with the hello's ref; nothing declared.
		c := Dial(t, b.WSURL, "deep-hello")
		id := nextID("hello-")
		w := c.Hello(map[string]any{"id": id, "role": "host", "session_id": s.sid, "join_token": s.jt,
			"tools": []any{decl("ok"), decl("y", "parameters", rawJSON(deepSchema(33)))}})
		if w.Type != "welcome" {
			t.Fatalf("hello: %s", w)
		}
		if e := c.Next(); e.Type != "error" || e.Str("code") != "bad_frame" || e.Str("ref") != id ||
			!strings.Contains(e.Str("message"), `tools[1] (tool "y"): field parameters`) {
			t.Errorf("a hello with a 33-level schema: %s, want bad_frame with ref %s naming the tool and field", e, id)
		}
		s.notAvailable("na-ok", "ok")
	})
}
