package frames

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// This file covers the validating pass of check.go (SPEC 2): invalid UTF-8 and nesting deeper
// than MaxNesting levels are bad_frame, wherever they are in a frame, with the frame's ref.

// agentCall is an agent.tool_call with id t1 whose arguments are the raw JSON args.
func agentCall(args string) string {
	return `{"type":"agent.tool_call","id":"t1","call_id":"a1","conversation_id":"root","name":"lookup","arguments":` + args + `}`
}

// nested returns JSON nested levels deep (levels >= 1): objects and arrays in turn, the
// innermost holding inner.
func nested(levels int, inner string) string {
	var open, closing strings.Builder
	for i := range levels {
		if i%2 == 0 {
			open.WriteString(`{"k":`)
		} else {
			open.WriteString("[")
		}
	}
	for i := levels - 1; i >= 0; i-- {
		if i%2 == 0 {
			closing.WriteString("}")
		} else {
			closing.WriteString("]")
		}
	}
	return open.String() + inner + closing.String()
}

func TestNested(t *testing.T) {
	for levels := 1; levels < 6; levels++ {
		s := nested(levels, "1")
		if d := refDepth(t, []byte(s)); d != levels {
			t.Errorf("nested(%d) = %s: depth %d", levels, s, d)
		}
	}
}

// refDepth is the nesting of the valid JSON text b, by encoding/json's tokens.
func refDepth(t testing.TB, b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers of any size
	depth, max := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return max
		}
		if err != nil {
			t.Fatalf("refDepth(%q): %v", b, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			max = maxInt(max, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func TestDecodeInvalidUTF8(t *testing.T) {
	const msg = "frame is not valid UTF-8"
	progress := func(note string) string {
		return `{"type":"tool_progress","id":"p1","handle":"h","note":"` + note + `"}`
	}
	runRejects(t, []rejectCase{
		{name: "byte FF in a string", in: progress("a\xffb"), ref: "p1", want: []string{msg + " (in field note)"}},
		{name: "byte FE", in: progress("\xfe"), ref: "p1", want: []string{msg}},
		{name: "lone continuation byte", in: progress("a\x80"), ref: "p1", want: []string{msg}},
		{name: "sequence cut by the quote", in: progress("\xe2\x82"), ref: "p1", want: []string{msg}},
		{name: "sequence cut by ASCII", in: progress("\xe2\x82z"), ref: "p1", want: []string{msg}},
		{name: "overlong slash C0 AF", in: progress("\xc0\xaf"), ref: "p1", want: []string{msg}},
		{name: "overlong C1 BF", in: progress("\xc1\xbf"), ref: "p1", want: []string{msg}},
		{name: "overlong E0 80 AF", in: progress("\xe0\x80\xaf"), ref: "p1", want: []string{msg}},
		{name: "overlong F0 80 80 AF", in: progress("\xf0\x80\x80\xaf"), ref: "p1", want: []string{msg}},
		{name: "surrogate ED A0 80", in: progress("\xed\xa0\x80"), ref: "p1", want: []string{msg}},
		{name: "surrogate ED BF BF", in: progress("\xed\xbf\xbf"), ref: "p1", want: []string{msg}},
		{name: "surrogate pair as CESU-8", in: progress("\xed\xa0\xbd\xed\xb8\x80"), ref: "p1", want: []string{msg}},
		{name: "above U+10FFFF", in: progress("\xf4\x90\x80\x80"), ref: "p1", want: []string{msg}},
		{name: "F5", in: progress("\xf5\x80\x80\x80"), ref: "p1", want: []string{msg}},
		{name: "in a key", in: "{\"type\":\"tool_progress\",\"id\":\"p1\",\"handle\":\"h\",\"note\":\"n\",\"x\xff\":1}", ref: "p1", want: []string{msg}},
		{name: "in the type", in: "{\"type\":\"tool_progress\xff\",\"id\":\"p1\",\"handle\":\"h\",\"note\":\"n\"}", ref: "p1", want: []string{msg + " (in field type)"}},
		{name: "before the id", in: "{\"type\":\"tool_progress\",\"handle\":\"h\xff\",\"id\":\"p1\",\"note\":\"n\"}", ref: "p1", want: []string{msg + " (in field handle)"}},
		{name: "in the id", in: "{\"type\":\"tool_progress\",\"id\":\"p\xff1\",\"handle\":\"h\",\"note\":\"n\"}", want: []string{msg + " (in field id)"}},
		{name: "in an unknown member", in: "{\"type\":\"tool_progress\",\"id\":\"p1\",\"handle\":\"h\",\"note\":\"n\",\"x_vendor\":[\"\xff\"]}", ref: "p1", want: []string{msg + " (in field x_vendor)"}},
		{name: "in arguments", in: agentCall("{\"q\":\"a\xffb\"}"), ref: "t1", want: []string{msg + " (in field arguments)"}},
		{name: "in a key of arguments", in: agentCall("{\"q\xff\":1}"), ref: "t1", want: []string{msg + " (in field arguments)"}},
		{name: "deep in arguments", in: agentCall("{\"a\":[{\"b\":[1,\"\xed\xa0\x80\"]}]}"), ref: "t1", want: []string{msg + " (in field arguments)"}},
		{name: "in output", in: "{\"type\":\"tool_result\",\"id\":\"r1\",\"call_id\":\"c\",\"output\":\"\xc0\xaf\"}", ref: "r1", want: []string{msg + " (in field output)"}},
		{name: "in segment", in: "{\"type\":\"tool_partial_result\",\"id\":\"s1\",\"handle\":\"h\",\"segment\":{\"text\":\"\xff\"}}", ref: "s1", want: []string{msg + " (in field segment)"}},
		{name: "in parameters", in: "{\"type\":\"tools.declare\",\"id\":\"d1\",\"tools\":[{\"name\":\"t\",\"description\":\"d\",\"parameters\":{\"description\":\"\xff\"}}]}", ref: "d1", want: []string{msg + " (in field tools)"}},
		{name: "in a broker frame", in: "{\"type\":\"tool_call\",\"call_id\":\"c\",\"name\":\"n\",\"arguments\":{\"q\":\"\xff\"},\"deferred\":false,\"timeout_ms\":1,\"session_id\":\"s\",\"seq\":1}", want: []string{msg}},
		{name: "outside a string", in: "{\"type\":\"session.end\",\"id\":\"e1\"}\xff", ref: "e1", want: []string{"not a valid JSON object"}},
	})
}

func TestDecodeValidUTF8(t *testing.T) {
	for _, c := range []struct {
		name, args string
	}{
		{"two bytes", `{"q":"é"}`},
		{"three bytes", `{"q":"€ ✓"}`},
		{"four bytes", `{"q":"😀"}`},
		{"U+10FFFF", "{\"q\":\"\xf4\x8f\xbf\xbf\"}"},
		{"U+FFFD itself", "{\"q\":\"\xef\xbf\xbd\"}"},
		{"U+D7FF and U+E000", "{\"q\":\"\xed\x9f\xbf\xee\x80\x80\"}"},
		{"DEL", "{\"q\":\"\x7f\"}"},
		{"in a key", `{"clé":1}`},
		// Escapes are JSON, whatever they stand for: passed on as they are (ASCII).
		{"lone high surrogate escape", `{"q":"\ud800"}`},
		{"lone low surrogate escape", `{"q":"\udc00x"}`},
		{"reversed pair escape", `{"q":"\udc00\ud800"}`},
		{"pair escape", `{"q":"\ud83d\ude00"}`},
		{"escaped NUL", `{"q":"\u0000"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := DecodeClient([]byte(agentCall(c.args)))
			if err != nil {
				t.Fatalf("DecodeClient: %v", err)
			}
			if got := string(f.(*AgentToolCall).Arguments); got != c.args {
				t.Errorf("arguments %q, want %q as sent", got, c.args)
			}
		})
	}
	// A lone surrogate escape in a string field decodes to U+FFFD (encoding/json).
	f, err := Decode([]byte(`{"type":"tool_progress","handle":"h","note":"a\ud800b"}`))
	if err != nil || f.(*ToolProgress).Note != "a\uFFFDb" {
		t.Errorf("lone surrogate escape in note: %#v %v", f, err)
	}
}

func TestDecodeNesting(t *testing.T) {
	const msg = "JSON nesting deeper than 64 levels"
	// The frame is level 1, arguments level 2: arguments may nest 63 levels.
	for _, levels := range []int{1, 2, 62, 63} {
		in := agentCall(nested(levels, `"x"`))
		if d := refDepth(t, []byte(in)); d != levels+1 {
			t.Fatalf("the frame nests %d levels, want %d", d, levels+1)
		}
		if _, err := DecodeClient([]byte(in)); err != nil {
			t.Errorf("arguments of %d levels (the frame %d): %v", levels, levels+1, err)
		}
	}
	progress := func(junk string) string {
		return `{"type":"tool_progress","id":"p1","handle":"h","note":"n","junk":` + junk + `}`
	}
	for _, in := range []string{progress(strings.Repeat("[", 63) + strings.Repeat("]", 63)), progress(nested(63, "null"))} {
		if _, err := DecodeClient([]byte(in)); err != nil {
			t.Errorf("a frame of 64 levels: %v", err)
		}
	}
	deepID := `{"type":"tool_progress","junk":` + nested(64, "1") + `,"id":"p2","handle":"h","note":"n"}`
	runRejects(t, []rejectCase{
		{name: "arguments of 64 levels", in: agentCall(nested(64, `"x"`)), ref: "t1", want: []string{msg + " (in field arguments)"}},
		{name: "arguments of 65 levels", in: agentCall(nested(65, "{}")), ref: "t1", want: []string{msg + " (in field arguments)"}},
		{name: "arguments of 10001 levels", in: agentCall(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)), ref: "t1", want: []string{msg}},
		{name: "arguments cut off deep down", in: agentCall(strings.Repeat("[", 100)), ref: "t1", want: []string{msg}},
		{name: "empty containers count", in: progress(strings.Repeat("[", 64) + strings.Repeat("]", 64)), ref: "p1", want: []string{msg + " (in field junk)"}},
		{name: "empty objects count", in: progress(strings.Repeat(`{"a":`, 63) + "{}" + strings.Repeat("}", 63)), ref: "p1", want: []string{msg + " (in field junk)"}},
		{name: "id after the deep member", in: deepID, ref: "p2", want: []string{msg + " (in field junk)"}},
		{name: "output", in: `{"type":"tool_result","id":"r1","call_id":"c","output":` + nested(64, "1") + `}`, ref: "r1", want: []string{msg + " (in field output)"}},
		{name: "segment", in: `{"type":"tool_partial_result","id":"s1","handle":"h","segment":` + nested(70, "1") + `}`, ref: "s1", want: []string{msg + " (in field segment)"}},
		{name: "parameters", in: `{"type":"tools.declare","id":"d1","tools":[{"name":"t","description":"d","parameters":` + nested(62, "1") + `}]}`, ref: "d1", want: []string{msg + " (in field tools)"}},
		{name: "unknown type", in: `{"type":"no.such","id":"u1","x":` + nested(64, "1") + `}`, ref: "u1", want: []string{msg + " (in field x)"}},
		{name: "deep and not UTF-8", in: progress(nested(64, "\"\xff\"")), ref: "p1", want: []string{msg}},
		{name: "not UTF-8, then deep", in: progress("[\"\xff\"," + nested(64, "1") + "]"), ref: "p1", want: []string{"frame is not valid UTF-8"}},
	})
	// parameters at level 4 (frame, tools, the declaration): 61 levels of their own fit.
	in := `{"type":"tools.declare","tools":[{"name":"t","description":"d","parameters":` + nested(61, "1") + `}]}`
	if _, err := DecodeClient([]byte(in)); err != nil {
		t.Errorf("parameters of 61 levels (the frame 64): %v", err)
	}
}

// TestDecodeNestingBrokerFrames: the frames the broker sends carry a client's JSON up to two
// levels below where the client put it; they decode whatever their nesting (encoding/json's
// limit of 10,000 levels aside), and DecodeClient answers them unknown_frame as before.
func TestDecodeNestingBrokerFrames(t *testing.T) {
	args := json.RawMessage(nested(MaxNesting-1, `"x"`)) // the most an agent.tool_call may carry
	for _, f := range []Frame{
		&ToolCall{CallID: cid, Name: "lookup", Arguments: args, TimeoutMS: 1, SessionID: "s"},
		&ToolDeferredResume{Jobs: []ResumedJob{{CallID: cid, Handle: hdl, Name: "lookup", Arguments: args,
			State: StateDeferred, DeadlineMS: 1}}},
		&ToolCall{CallID: cid, Name: "lookup", Arguments: json.RawMessage(nested(500, "1")), TimeoutMS: 1, SessionID: "s"},
	} {
		b, err := Encode(f)
		if err != nil {
			t.Fatalf("Encode %s: %v", f.FrameType(), err)
		}
		if d := refDepth(t, b); d <= MaxNesting && f.FrameType() == "tool_deferred_resume" {
			t.Fatalf("tool_deferred_resume nests %d levels: the case is not deep", d)
		}
		if _, err := Decode(b); err != nil {
			t.Errorf("Decode %s of %d levels: %v", f.FrameType(), refDepth(t, b), err)
		}
		_, err = DecodeClient(b)
		if e, ok := err.(*Error); !ok || e.Code != CodeUnknownFrame {
			t.Errorf("DecodeClient %s of %d levels: %v, want unknown_frame", f.FrameType(), refDepth(t, b), err)
		}
	}
	// Not JSON, or not UTF-8, is refused in broker frames too, however deep.
	for _, in := range []string{
		`{"type":"tool_call","call_id":"c","name":"n","arguments":` + strings.Repeat("[", 100) + `,"deferred":false,"timeout_ms":1,"session_id":"s"}`,
		`{"type":"tool_call","call_id":"c","name":"n","arguments":` + nested(100, "\"\xff\"") + `,"deferred":false,"timeout_ms":1,"session_id":"s"}`,
	} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%.80q…) accepted a broken broker frame", in)
		}
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	for _, f := range []Frame{
		ToolResult{CallID: cid, Output: json.RawMessage("{\"a\":\"x\xffy\xed\xa0\x80\",\"\xc0\xaf\":1}")},
		ToolCall{CallID: cid, Name: "n", Arguments: json.RawMessage("[\"\xf4\x90\x80\x80\"]"), TimeoutMS: 1, SessionID: "s"},
	} {
		b, err := Encode(f)
		if err != nil {
			t.Fatalf("Encode %s: %v", f.FrameType(), err)
		}
		if !utf8.Valid(b) {
			t.Errorf("Encode %s gave invalid UTF-8: %q", f.FrameType(), b)
		}
		if _, err := Decode(b); err != nil {
			t.Errorf("Encode %s gave %s, which does not decode: %v", f.FrameType(), b, err)
		}
	}
	b, _ := Encode(ToolResult{CallID: cid, Output: json.RawMessage("\"a\xffb\xe2\x82\"")})
	if want := `"output":"a\ufffdb\ufffd\ufffd"`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("Encode: %s, want %s (encoding/json's replacement of each invalid byte)", b, want)
	}
	// Valid UTF-8 and escapes are kept as they are.
	raw := `{"q":"é😀\ud800\u0000"}`
	b, _ = Encode(ToolResult{CallID: cid, Output: json.RawMessage(raw)})
	if !bytes.Contains(b, []byte(raw)) {
		t.Errorf("Encode: %s, want %s kept", b, raw)
	}
}

func TestEncodeNesting(t *testing.T) {
	ok := ToolResult{CallID: cid, Output: json.RawMessage(nested(MaxNesting-1, "1"))}
	if b, err := Encode(ok); err != nil {
		t.Errorf("Encode of a tool_result of 64 levels: %v", err)
	} else if _, err := Decode(b); err != nil {
		t.Errorf("its encoding does not decode: %v", err)
	}
	_, err := Encode(ToolResult{CallID: cid, Output: json.RawMessage(nested(MaxNesting, "1"))})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeBadFrame || !strings.Contains(e.Message, "JSON nesting deeper than 64 levels (in field output)") {
		t.Errorf("Encode of a tool_result of 65 levels: %v, want a bad_frame error naming output", err)
	}
	// A broker frame is not held to the limit.
	if _, err := Encode(ToolCall{CallID: cid, Name: "n", Arguments: json.RawMessage(nested(200, "1")), TimeoutMS: 1, SessionID: "s"}); err != nil {
		t.Errorf("Encode of a deep tool_call: %v", err)
	}
}

func TestCheckMember(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string // "" when accepted
	}{
		{`{}`, ""},
		{` {"q":"é","n":[1,2.5e-3,true,false,null]} `, ""},
		{`"\ud800"`, ""},
		{nested(MaxNesting-1, "1"), ""},
		{nested(MaxNesting, "1"), "field arguments nests JSON deeper than 63 levels"},
		{"{\"q\":\"\xff\"}", "field arguments is not valid UTF-8"},
		{"{\"q\":\"\xed\xa0\x80\"}", "field arguments is not valid UTF-8"},
		{`{"q":`, "field arguments is not valid JSON"},
		{``, "field arguments is not valid JSON"},
		{`{} {}`, "field arguments is not valid JSON"},
	} {
		err := CheckMember("arguments", []byte(c.raw))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckMember(%.60q): %v", c.raw, err)
		case c.want != "" && (err == nil || err.Code != CodeBadFrame || err.Message != c.want):
			t.Errorf("CheckMember(%.60q) = %v, want bad_frame %q", c.raw, err, c.want)
		}
	}
	// What CheckMember accepts, Decode accepts as the arguments of an agent.tool_call.
	if _, err := DecodeClient([]byte(agentCall(nested(MaxNesting-1, "1")))); err != nil {
		t.Errorf("DecodeClient: %v", err)
	}
}

// TestCheckJSONGrammar holds checkJSON to json.Valid on texts that are valid UTF-8 and shallow
// (FuzzCheck does the same on any input).
func TestCheckJSONGrammar(t *testing.T) {
	for _, s := range []string{
		``, ` `, `{`, `}`, `{}`, `[]`, `[`, `]`, `{]`, `[}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,"a":1}`,
		`{"a" 1}`, `{"a"::1}`, `{1:1}`, `{"a":1 "b":2}`, `[1 2]`, `nul`, `nulll`, `true`, `tru`, `truee`, `falsey`,
		`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e5.`, `-01`, `+1`, `0x1`, `1_000`, `Infinity`, `NaN`,
		`""`, `"`, `"\"`, `"\\"`, `"\/"`, `"\q"`, `"\u12"`, `"\u12G4"`, `"\uABcd"`, "\"\t\"", "\"\x1f\"", "\"\x7f\"",
		` {"a" : [ 1 , { } , [ ] , "x" ] } `, "\t\n\r{}\r\n\t", "\v{}", "\u00a0{}", `{"a":1}}`, `{"a":1}]`, `[[[]]`,
		`{"a":{"b":{"c":[]}}}`, `[{"a":[{"b":null}]}]`, `{"":""}`, `{"a":"b","a":"c"}`, `[] []`, `1 2`,
	} {
		want := json.Valid([]byte(s))
		fl, _ := checkJSON([]byte(s), MaxNesting)
		if (fl == flawNone) != want || (fl != flawNone && fl != flawSyntax) {
			t.Errorf("checkJSON(%q) = %d, json.Valid %v", s, fl, want)
		}
	}
}

// FuzzCheck holds checkJSON to its definition: a text passes exactly when json.Valid and
// utf8.Valid accept it and it nests at most the limit (by encoding/json's tokens), and the flaw
// it reports for a text that does not pass is one the text has.
func FuzzCheck(f *testing.F) {
	for _, raw := range loadExamples(f) {
		f.Add([]byte(raw), uint8(64))
	}
	for _, s := range []string{
		`{}`, `{"a":[1,{"b":"\ud800"}]}`, "{\"a\":\"\xff\"}", "[\"\xed\xa0\x80\"]", `[[[[]]]]`, `{"a":{"b":{}}}`,
		`-0.5e+3`, `"\u00e9"`, "\"\xe2\x82\xac\"", "[1,\"\xc0\xaf\"]", `{"a" :1 , "b":[ ]}`, `[1,]`,
	} {
		f.Add([]byte(s), uint8(3))
		f.Add([]byte(s), uint8(64))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) {
		max := 1 + int(limit)%MaxNesting
		fl, key := checkJSON(b, max)
		valid, text := json.Valid(b), utf8.Valid(b)
		depth := -1
		if valid {
			depth = refDepth(t, b)
		}
		want := valid && text && depth <= max
		if (fl == flawNone) != want {
			t.Fatalf("checkJSON(%q, %d) = %d; json.Valid %v, utf8.Valid %v, depth %d", b, max, fl, valid, text, depth)
		}
		switch fl {
		case flawSyntax:
			if valid {
				t.Fatalf("checkJSON(%q, %d): a syntax flaw in valid JSON", b, max)
			}
		case flawUTF8:
			if text {
				t.Fatalf("checkJSON(%q, %d): a UTF-8 flaw in valid UTF-8", b, max)
			}
		case flawDepth:
			if valid && depth <= max {
				t.Fatalf("checkJSON(%q, %d): a nesting flaw at depth %d", b, max, depth)
			}
		}
		if key != nil && (len(key) < 2 || key[0] != '"' || key[len(key)-1] != '"' || !utf8.Valid(key)) {
			t.Fatalf("checkJSON(%q, %d): key %q", b, max, key)
		}
	})
}
