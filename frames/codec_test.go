package frames

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// loadExamples reads testdata/examples.json: frame type → one example frame.
func loadExamples(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/examples.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("testdata/examples.json: %v", err)
	}
	return m
}

// jsonValue decodes b into a generic value, numbers kept exact.
func jsonValue(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

func TestExamplesCoverExactlyTypes(t *testing.T) {
	ex := loadExamples(t)
	for _, typ := range Types() {
		if _, ok := ex[typ]; !ok {
			t.Errorf("testdata/examples.json has no example of %q", typ)
		}
	}
	for typ := range ex {
		if _, ok := DirectionOf(typ); !ok {
			t.Errorf("testdata/examples.json has an example of unknown type %q", typ)
		}
	}
}

func TestExamplesRoundTrip(t *testing.T) {
	for typ, raw := range loadExamples(t) {
		t.Run(typ, func(t *testing.T) {
			f, err := Decode(raw)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if f.FrameType() != typ {
				t.Fatalf("decoded %T with FrameType %q under key %q", f, f.FrameType(), typ)
			}
			if want, _ := New(typ); reflect.TypeOf(f) != reflect.TypeOf(want) {
				t.Fatalf("Decode returned %T, New returns %T", f, want)
			}
			out, err := Encode(f)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got, want := jsonValue(t, out), jsonValue(t, raw); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the frame\n got: %s\nwant: %s", out, compact(t, raw))
			}
			// The example's type field is its key.
			var head struct{ Type string }
			_ = json.Unmarshal(raw, &head)
			if head.Type != typ {
				t.Errorf("example under %q has type %q", typ, head.Type)
			}
		})
	}
}

func compact(t testing.TB, b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestExamplesUseEveryField checks that every field of every frame type (and of the nested
// types) appears in at least one example, except the few that cannot share an example with
// another field of the same frame.
func TestExamplesUseEveryField(t *testing.T) {
	unused := map[string]bool{
		"hello.api_key":                  true, // creating a session; the example resumes one
		"hello.join_token":               true, // attaching; the example resumes
		"hello.caller_token":             true, // attaching a caller; the example resumes
		"tool_result.error":              true, // exactly one of output and error
		"tool_result.handle":             true, // exactly one of call_id and handle
		"tool_progress.call_id":          true,
		"tool_partial_result.call_id":    true,
		"job.cancel.call_id":             true,
		"tool_interaction_update.handle": true,
		"agent.local_result.output":      true, // exactly one of output and error
		"tool_deferred_ack.reason":       true, // accepted acks carry no reason
		"welcome.seq":                    true, // welcome carries no seq
		"agent.turn_start.id":            true,
	}
	seen := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				seen[prefix+"."+k] = true
				walk(prefix+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(prefix, x)
			}
		}
	}
	for typ, raw := range loadExamples(t) {
		walk(typ, jsonValue(t, raw))
	}
	for _, typ := range Types() {
		f, _ := New(typ)
		var fields func(prefix string, info *structInfo)
		fields = func(prefix string, info *structInfo) {
			for _, fi := range info.fields {
				name := prefix + "." + fi.name
				if fi.kind == kindRaw {
					// any-JSON fields are opaque
				} else if fi.elem != nil {
					fields(name, fi.elem)
				}
				// ref is only on answers: tool_call, tool_cancel and the like never carry one.
				if !seen[name] && !unused[name] && fi.name != "ref" {
					t.Errorf("no example uses %s", name)
				}
			}
		}
		fields(typ, infoFor(reflect.TypeOf(f).Elem()))
	}
}

func TestExampleCallIDsLookLikeBrokerIDs(t *testing.T) {
	re := regexp.MustCompile(`^call_[a-z2-7]{20}$`)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "call_id" || k == "parent_call_id") && !re.MatchString(s) {
					t.Errorf("%s %q does not look like a broker call id", k, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, raw := range loadExamples(t) {
		walk(jsonValue(t, raw))
	}
}

func TestExamplesCarrySeqAndID(t *testing.T) {
	for typ, raw := range loadExamples(t) {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		d, _ := DirectionOf(typ)
		if d == BrokerToClient && typ != "welcome" {
			if _, ok := m["seq"]; !ok {
				t.Errorf("broker example %s has no seq", typ)
			}
		}
	}
}

func TestRegistry(t *testing.T) {
	types := Types()
	if len(types) != 39 {
		t.Errorf("Types() has %d types, want 39", len(types))
	}
	if !slices.Equal(types, Types()) {
		t.Error("Types() is not stable")
	}
	types[0] = "mutated"
	if Types()[0] == "mutated" {
		t.Error("Types() returns the registry itself")
	}
	clients := 0
	for _, typ := range Types() {
		d, ok := DirectionOf(typ)
		if !ok {
			t.Fatalf("DirectionOf(%q) unknown", typ)
		}
		if d == ClientToBroker {
			clients++
		}
		f, ok := New(typ)
		if !ok || f == nil {
			t.Fatalf("New(%q) = %v, %v", typ, f, ok)
		}
		if reflect.TypeOf(f).Kind() != reflect.Pointer {
			t.Errorf("New(%q) returned %T, want a pointer", typ, f)
		}
		if f.FrameType() != typ {
			t.Errorf("New(%q).FrameType() = %q", typ, f.FrameType())
		}
		// Client frames embed Request, broker frames Reply.
		st := reflect.TypeOf(f).Elem()
		_, hasReq := st.FieldByName("Request")
		_, hasReply := st.FieldByName("Reply")
		if hasReq != (d == ClientToBroker) {
			t.Errorf("%s (%s) embeds Request: %v", typ, d, hasReq)
		}
		if d == BrokerToClient && (!hasReply || reflect.TypeOf(f).Elem().Field(0).Type != reflect.TypeFor[Reply]()) {
			t.Errorf("%s: broker frames embed Reply first", typ)
		}
	}
	if clients != 20 {
		t.Errorf("%d client frame types, want 20", clients)
	}
	if _, ok := New("nope"); ok {
		t.Error("New of an unknown type succeeded")
	}
	if _, ok := DirectionOf("nope"); ok {
		t.Error("DirectionOf of an unknown type succeeded")
	}
	if d, _ := DirectionOf("tool_call"); d != BrokerToClient {
		t.Errorf("tool_call direction %q", d)
	}
	if d, _ := DirectionOf("tool_result"); d != ClientToBroker {
		t.Errorf("tool_result direction %q", d)
	}
}

func TestEncodeTypeFirstValueAndPointer(t *testing.T) {
	f := ToolCancel{Reply: Reply{Seq: 3}, CallID: "call_aaaaaaaaaaaaaaaaaaaa", Reason: CancelTimeout}
	a, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(&f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool_cancel","seq":3,"call_id":"call_aaaaaaaaaaaaaaaaaaaa","reason":"timeout"}`
	if string(a) != want || string(b) != want {
		t.Errorf("Encode:\n value: %s\n ptr:   %s\n want:  %s", a, b, want)
	}
	empty, err := Encode(SessionEnd{})
	if err != nil || string(empty) != `{"type":"session.end"}` {
		t.Errorf("Encode(SessionEnd{}) = %s, %v", empty, err)
	}
	for _, typ := range Types() {
		f, _ := New(typ)
		out, err := Encode(f)
		if err != nil {
			continue // zero frames with required any-JSON fields or rules do not encode
		}
		if !bytes.HasPrefix(out, []byte(`{"type":"`+typ+`"`)) {
			t.Errorf("Encode(zero %s) = %s: type is not the first member", typ, out)
		}
	}
}

func TestEncodeAlwaysPresentFields(t *testing.T) {
	cases := []struct {
		f    Frame
		want []string
	}{
		{ToolsDeclared{}, []string{`"names":[]`}},
		{ToolDeferredResume{}, []string{`"jobs":[]`}},
		{ToolsDeclare{}, []string{`"tools":[]`}},
		{ToolDeferredAck{}, []string{`"accepted":false`, `"call_id":""`, `"handle":""`}},
		{Transcript{Role: RoleCaller}, []string{`"final":false`}},
		{AgentPrompt{}, []string{`"internal":false`}},
		{ToolJobNarration{}, []string{`"attempt":0`}},
		{ToolJobDeliveryFailed{}, []string{`"attempts":0`}},
		{Error{Code: CodeInternal}, []string{`"retryable":false`, `"message":""`}},
		{ToolCall{Arguments: json.RawMessage(`{}`)}, []string{`"deferred":false`, `"timeout_ms":0`}},
	}
	for _, c := range cases {
		out, err := Encode(c.f)
		if err != nil {
			t.Errorf("Encode(%T): %v", c.f, err)
			continue
		}
		for _, w := range c.want {
			if !bytes.Contains(out, []byte(w)) {
				t.Errorf("Encode(%T) = %s, want it to contain %s", c.f, out, w)
			}
		}
		if _, err := Decode(out); err != nil {
			t.Errorf("Encode(%T) = %s does not decode: %v", c.f, out, err)
		}
	}
	// Optional fields are omitted; nil *bool is absent, false *bool present.
	no := false
	out, _ := Encode(Inject{Text: "x", Speak: &no})
	if string(out) != `{"type":"inject","text":"x","speak":false}` {
		t.Errorf("Inject with speak false: %s", out)
	}
	out, _ = Encode(Inject{Text: "x"})
	if string(out) != `{"type":"inject","text":"x"}` {
		t.Errorf("Inject without speak: %s", out)
	}
	// Encoding does not mutate the caller's frame.
	f := ToolsDeclared{}
	_, _ = Encode(&f)
	if f.Names != nil {
		t.Error("Encode changed the frame's nil slice")
	}
}

func TestEncodeNoHTMLEscaping(t *testing.T) {
	out, err := Encode(CallerText{Text: "a < b && c > d"})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"type":"caller.text","text":"a < b && c > d"}` {
		t.Errorf("got %s", out)
	}
}

func TestEncodeRefusesWhatDecodeRejects(t *testing.T) {
	var nilCall *ToolCall
	cases := []struct {
		name string
		f    Frame
		want string
	}{
		{"nil frame", nil, "nil"},
		{"nil pointer", nilCall, "nil"},
		{"missing arguments", ToolCall{CallID: "c"}, "arguments"},
		{"null arguments", ToolCall{CallID: "c", Arguments: json.RawMessage("null")}, "arguments"},
		{"missing segment", ToolPartialResult{Handle: "h"}, "segment"},
		{"nested arguments", ToolDeferredResume{Jobs: []ResumedJob{{CallID: "c"}}}, "jobs[0].arguments"},
		{"parameters not an object", ToolsDeclare{Tools: []ToolDecl{{Name: "a", Parameters: json.RawMessage(`"x"`)}}}, "tools[0].parameters"},
		{"long id", SessionEnd{Request: Request{ID: strings.Repeat("i", 65)}}, "id"},
		{"negative duration", ToolsDeclare{Tools: []ToolDecl{{Name: "a", Parameters: json.RawMessage(`{}`), Timeout: -1}}}, "tools[0].timeout"},
		{"result without target", ToolResult{Output: json.RawMessage(`1`)}, "call_id"},
		{"result without payload", ToolResult{CallID: "c"}, "output"},
		{"hello without protocol", Hello{Role: RoleHost}, "protocol"},
		{"bad enum", ToolInteractionUpdate{CallID: "c", InteractionID: "i", State: "open"}, "state"},
		{"bad expected_duration", ToolsDeclare{Tools: []ToolDecl{{Name: "a", Parameters: json.RawMessage(`{}`), ExpectedDuration: "days"}}}, "tools[0].expected_duration"},
		{"invalid raw JSON", ToolResult{CallID: "c", Output: json.RawMessage(`{`)}, "json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Encode(c.f)
			if err == nil {
				t.Fatalf("Encode succeeded: %s", out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestErrorAlwaysCarriesRetryable(t *testing.T) {
	for _, e := range []*Error{
		Errorf(CodeBadFrame, "missing required field %s", "call_id"),
		{Code: CodeInjectRejected, Message: "busy", Retryable: true},
		{},
	} {
		out, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		if r, ok := m["retryable"].(bool); !ok || r != e.Retryable {
			t.Errorf("%s: retryable = %v", out, m["retryable"])
		}
		if _, ok := m["code"].(string); !ok {
			t.Errorf("%s: no code", out)
		}
		if _, ok := m["message"].(string); !ok {
			t.Errorf("%s: no message", out)
		}
	}
	// A decoded error frame without retryable is not an error frame.
	if _, err := Decode([]byte(`{"type":"error","code":"internal","message":"x"}`)); err == nil {
		t.Error("error frame without retryable decoded")
	}
}

func TestErrorInterface(t *testing.T) {
	e := Errorf(CodeNotFound, "session %s does not exist", "ses_1")
	if e.Error() != "not_found: session ses_1 does not exist" {
		t.Errorf("Error() = %q", e.Error())
	}
	if e.Retryable {
		t.Error("Errorf is retryable by default")
	}
	var err error = e
	if err.Error() != e.Error() {
		t.Error("not an error")
	}
	if e.FrameType() != "error" {
		t.Error("FrameType")
	}
	var nilErr *Error
	if nilErr.Error() != "<nil>" {
		t.Error("nil *Error")
	}
	for _, c := range Code("").Enum() {
		if !Code(c.(string)).Valid() {
			t.Errorf("code %v not valid", c)
		}
	}
	if len(Code("").Enum()) != 14 || Code("nope").Valid() {
		t.Error("codes of SPEC 2.1")
	}
}
