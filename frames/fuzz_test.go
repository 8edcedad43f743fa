package frames

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode checks that Decode never panics, that it fails only with bad_frame or
// unknown_frame errors carrying a message, that it accepts only valid UTF-8 and, in client
// frames, at most MaxNesting levels (and refuses for those reasons only frames that have the
// flaw), and that every frame it returns encodes — to valid UTF-8 — and decodes again to the
// same frame.
func FuzzDecode(f *testing.F) {
	for _, raw := range loadExamples(f) {
		f.Add([]byte(raw))
	}
	for _, s := range []string{
		``, `{`, `null`, `[]`, `"x"`, `{}`, `{"type":null}`, `{"type":5}`, `{"type":"nope","id":"n"}`,
		`{"type":"tool_result","call_id":"c","output":null,"error":""}`,
		`{"type":"tool_result","handle":"","call_id":"c","output":[]}`,
		`{"type":"tools.declare","tools":[null]}`,
		`{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{},"timeout":"1.5ms"}]}`,
		`{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{},"timeout":9223372036854}]}`,
		`{"type":"hello","protocol":"backchannel.v1","role":"host","tools":[]}`,
		`{"type":"tool_partial_result","handle":"h","segment":" ","interaction":{"prompt":"p","options":[]}}`,
		`{"type":"caller.text","text":"\ud800","id":"\u00e9"}`,
		"{\"type\":\"caller.text\",\"text\":\"\xff\xfe\"}",
		`{"type":"tool_result","call_id":"c","output":1,"Output":null,"CALL_ID":7}`,
		`{"type":"error","code":"x","message":"","retryable":true,"seq":-1}`,
		"{\"type\":\"agent.tool_call\",\"id\":\"t\",\"call_id\":\"a\",\"conversation_id\":\"root\",\"name\":\"n\",\"arguments\":{\"q\":\"\xed\xa0\x80\"}}",
		`{"type":"agent.tool_call","id":"t","call_id":"a","conversation_id":"root","name":"n","arguments":{"q":"\ud800"}}`,
		`{"type":"tool_result","call_id":"c","output":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
		`{"type":"tool_result","call_id":"c","output":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
		`{"type":"tool_call","call_id":"c","name":"n","arguments":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `,"timeout_ms":1,"session_id":"s","deferred":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			if fr != nil {
				t.Fatalf("Decode returned both a frame and an error")
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %T is not a *Error", err)
			}
			if e.Code != CodeBadFrame && e.Code != CodeUnknownFrame {
				t.Fatalf("error code %q", e.Code)
			}
			if e.Message == "" {
				t.Fatalf("empty error message")
			}
			if strings.HasPrefix(e.Message, "frame is not valid UTF-8") && utf8.Valid(b) {
				t.Fatalf("%q refused as not UTF-8", b)
			}
			if strings.HasPrefix(e.Message, "JSON nesting deeper than") && json.Valid(b) && refDepth(t, b) <= MaxNesting {
				t.Fatalf("%q refused as too deep", b)
			}
			return
		}
		if fr == nil {
			t.Fatalf("Decode returned neither a frame nor an error")
		}
		if !utf8.Valid(b) {
			t.Fatalf("Decode accepted %q, which is not valid UTF-8", b)
		}
		if d, _ := DirectionOf(fr.FrameType()); d == ClientToBroker && refDepth(t, b) > MaxNesting {
			t.Fatalf("Decode accepted the client frame %q of %d levels", b, refDepth(t, b))
		}
		out, err := Encode(fr)
		if err != nil {
			t.Fatalf("decoded frame %#v does not encode: %v", fr, err)
		}
		if !utf8.Valid(out) {
			t.Fatalf("Encode gave %q, which is not valid UTF-8", out)
		}
		fr2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded frame %s does not decode: %v", out, err)
		}
		out2, err := Encode(fr2)
		if err != nil {
			t.Fatalf("second encode: %v", err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("encodings differ:\n%s\n%s", out, out2)
		}
		// After one trip the frame is canonical: decoding its encoding gives an equal struct.
		fr3, err := Decode(out2)
		if err != nil || !reflect.DeepEqual(fr2, fr3) {
			t.Fatalf("not a fixed point: %#v vs %#v (%v)", fr2, fr3, err)
		}
	})
}

// FuzzScan checks the scanner Decode uses against encoding/json: for every valid JSON object,
// its members (names decoded, the last of repeated names kept) and their values are those
// encoding/json finds; inside arrays, elements too.
func FuzzScan(f *testing.F) {
	for _, raw := range loadExamples(f) {
		f.Add([]byte(raw))
	}
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1,"a":2}`, `{"\u0061":"x\"y\\","b":[1,{"c":"]"}],"d":-1.5e3,"e":null}`,
		`{"k":"\\\\","l":"\\\"","m":[[],[{}],"}"] , "n" : true }`, "{\"\xff\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]json.RawMessage
		if !json.Valid(b) || json.Unmarshal(b, &want) != nil || want == nil {
			return
		}
		got := map[string]json.RawMessage{}
		for s := members(b); ; {
			key, val, ok := s.next()
			if !ok {
				break
			}
			got[string(nameOf(key))] = val
		}
		if len(got) != len(want) {
			t.Fatalf("members %v, encoding/json %v", got, want)
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || !bytes.Equal(g, w) {
				t.Fatalf("member %q: %q, encoding/json %q", k, g, w)
			}
			var elems []json.RawMessage
			if len(w) > 0 && w[0] == '[' && json.Unmarshal(w, &elems) == nil {
				g := elements(w, nil)
				if len(g) != len(elems) {
					t.Fatalf("member %q: %d elements, encoding/json %d", k, len(g), len(elems))
				}
				for i := range g {
					if !bytes.Equal(g[i], elems[i]) {
						t.Fatalf("member %q element %d: %q, encoding/json %q", k, i, g[i], elems[i])
					}
				}
			}
		}
	})
}
