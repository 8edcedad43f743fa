package frames

import (
	"strings"
	"testing"
)

// PeekID reads the id of frames that cannot be decoded, as long as the frame is well formed up
// to the end of its id.
func TestPeekID(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	huge := strings.Repeat("A", 2<<20)
	cases := []struct {
		name, in, want string
	}{
		{"valid", `{"type":"tool_progress","id":"p-1","handle":"h","note":"x"}`, "p-1"},
		{"first member", `{"id":"p-1","type":"tool_progress"}`, "p-1"},
		{"white space", " \n{ \"type\" : \"x\" ,\t\"id\" :\r\"p-1\" }", "p-1"},
		{"escaped", `{"type":"x","id":"p\u002d1"}`, "p-1"},
		{"escaped key", `{"type":"x","\u0069d":"p-1"}`, "p-1"},
		{"truncated after the id", `{"type":"tool_progress","id":"p-1","note":"trunc`, "p-1"},
		{"ends with the id", `{"type":"tool_progress","id":"p-1"`, "p-1"},
		{"broken after the id", "{\"type\":\"session.end\",\"id\":\"p-1\",\"extra\":\x00}", "p-1"},
		{"nested too deeply after the id", `{"type":"tool_progress","id":"p-1","junk":` + deep + `}`, "p-1"},
		{"nested before the id", `{"type":"tool_progress","junk":` + deep + `,"id":"p-1"}`, "p-1"},
		{"huge member before the id", `{"type":"tool_progress","note":"` + huge + `","id":"p-1"}`, "p-1"},
		{"64 bytes", `{"id":"` + strings.Repeat("i", 64) + `"}`, strings.Repeat("i", 64)},
		{"65 bytes", `{"id":"` + strings.Repeat("i", 65) + `"}`, ""},
		{"not a string", `{"type":"x","id":12}`, ""},
		{"null", `{"type":"x","id":null}`, ""},
		{"cut inside the id", `{"type":"x","id":"p-`, ""},
		{"cut after an escaped quote", `{"type":"x","id":"p\"`, ""},
		{"broken before the id", `{"type":"x" "id":"p-1"}`, ""},
		{"cut before the id", `{"type":"x",`, ""},
		{"invalid UTF-8 in the id", "{\"id\":\"p\xff1\"}", ""},
		{"not an object", `["id","p-1"]`, ""},
		{"nested id only", `{"type":"x","args":{"id":"p-1"}}`, ""},
		{"empty", ``, ""},
		{"garbage", "\xff\xfe{\"id\":\"p-1\"}", ""},
	}
	for _, c := range cases {
		if got := PeekID([]byte(c.in)); got != c.want {
			t.Errorf("%s: PeekID = %q, want %q", c.name, got, c.want)
		}
	}
}

// An error answering a frame that is not valid JSON still carries the frame's id as ref when
// the id can be read (SPEC 2).
func TestDecodeRefOfBrokenFrames(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	runRejects(t, []rejectCase{
		{name: "truncated", in: `{"type":"tool_progress","id":"p-1","handle":"h","note":"tru`, ref: "p-1", want: []string{"not a valid JSON object"}},
		{name: "nested deeper than encoding/json allows", in: `{"type":"tool_progress","id":"p-2","handle":"h","note":"x","junk":` + deep + `}`, ref: "p-2", want: []string{"JSON nesting deeper than 64 levels (in field junk)"}},
		{name: "nested deeper than 64 levels, id after", in: `{"type":"tool_progress","junk":` + deep[:65] + deep[len(deep)-65:] + `,"id":"p-4","handle":"h","note":"x"}`, ref: "p-4", want: []string{"JSON nesting deeper than 64 levels"}},
		{name: "not UTF-8 after the id", in: "{\"type\":\"tool_progress\",\"id\":\"p-5\",\"handle\":\"h\",\"note\":\"\xff\"}", ref: "p-5", want: []string{"frame is not valid UTF-8"}},
		{name: "not UTF-8 and truncated after the id", in: "{\"type\":\"tool_progress\",\"id\":\"p-6\",\"note\":\"\xed\xa0\x80", ref: "p-6", want: []string{"frame is not valid UTF-8"}},
		{name: "not UTF-8 in the id", in: "{\"type\":\"tool_progress\",\"id\":\"p-\xc0\xaf\",\"handle\":\"h\",\"note\":\"x\"}", want: []string{"frame is not valid UTF-8"}},
		{name: "a control byte", in: "{\"type\":\"session.end\",\"id\":\"p-3\",\"extra\":\x00}", ref: "p-3", want: []string{"not a valid JSON object"}},
		{name: "truncated in the id", in: `{"type":"tool_progress","id":"p-`, want: []string{"not a valid JSON object"}},
	})
}

// DecodeClient answers a frame type only the broker sends with unknown_frame saying so, before
// looking at its fields: a host's tool_call is not a malformed tool_call.
func TestDecodeClientRefusesBrokerFrames(t *testing.T) {
	for _, typ := range Types() {
		dir, _ := DirectionOf(typ)
		_, err := DecodeClient([]byte(`{"type":"` + typ + `","id":"x-1"}`))
		if dir == ClientToBroker {
			if e, ok := err.(*Error); ok && e.Code == CodeUnknownFrame {
				t.Errorf("DecodeClient refused the client frame %s: %v", typ, e)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Code != CodeUnknownFrame || e.Ref != "x-1" {
			t.Errorf("DecodeClient(%s) = %v, want unknown_frame with ref x-1", typ, err)
			continue
		}
		if want := typ + " is a frame the broker sends, not one it receives"; e.Message != want {
			t.Errorf("DecodeClient(%s): message %q, want %q", typ, e.Message, want)
		}
	}
	// A complete, valid broker frame is refused too; Decode (for clients reading the broker's
	// frames) still takes it.
	call := `{"type":"tool_call","call_id":"` + cid + `","name":"w","arguments":{},"deferred":true,"timeout_ms":1,"session_id":"s"}`
	if _, err := DecodeClient([]byte(call)); err == nil {
		t.Error("DecodeClient took a tool_call")
	}
	if f, err := Decode([]byte(call)); err != nil || f.FrameType() != "tool_call" {
		t.Errorf("Decode(tool_call) = %v, %v", f, err)
	}
}
