package frames

import (
	"encoding/json"
	"strings"
	"testing"
)

// A broker call id and a handle for the cases below.
const (
	cid = "call_k3v7qmx2d5rwpa4ntf6h"
	hdl = "booking-8841"
)

type rejectCase struct {
	name string
	in   string
	code Code     // default bad_frame
	ref  string   // expected Ref
	want []string // substrings of the message
}

func runRejects(t *testing.T, cases []rejectCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Decode([]byte(c.in))
			if err == nil {
				t.Fatalf("Decode(%s) = %#v, want an error", c.in, f)
			}
			if f != nil {
				t.Errorf("Decode returned a frame with the error: %#v", f)
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %T is not a *Error", err)
			}
			code := c.code
			if code == "" {
				code = CodeBadFrame
			}
			if e.Code != code {
				t.Errorf("code %q, want %q (%s)", e.Code, code, e.Message)
			}
			if e.Ref != c.ref {
				t.Errorf("ref %q, want %q", e.Ref, c.ref)
			}
			if e.Retryable {
				t.Error("a decoding error is not retryable")
			}
			for _, w := range c.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q does not contain %q", e.Message, w)
				}
			}
		})
	}
}

func TestDecodeNotAnObject(t *testing.T) {
	const msg = "not a valid JSON object"
	runRejects(t, []rejectCase{
		{name: "truncated", in: `{"type": "tools.declare", "tools": [`, want: []string{msg}},
		{name: "garbage", in: `hello`, want: []string{msg}},
		{name: "empty", in: ``, want: []string{msg}},
		{name: "trailing data", in: `{"type":"session.end"} {}`, want: []string{msg}},
		{name: "array", in: `[{"type":"session.end"}]`, want: []string{msg}},
		{name: "string", in: `"session.end"`, want: []string{msg}},
		{name: "number", in: `42`, want: []string{msg}},
		{name: "null", in: `null`, want: []string{msg}},
		{name: "invalid escape", in: `{"type":"caller.text","text":"\q"}`, want: []string{msg}},
	})
}

func TestDecodeType(t *testing.T) {
	long := strings.Repeat("x", 200)
	runRejects(t, []rejectCase{
		{name: "missing", in: `{"id":"a1"}`, ref: "a1", want: []string{"missing required field type"}},
		{name: "null", in: `{"type":null,"id":"a1"}`, ref: "a1", want: []string{"type"}},
		{name: "number", in: `{"type":5,"id":"a1"}`, ref: "a1", want: []string{"field type must be a string"}},
		{name: "object", in: `{"type":{},"id":"a1"}`, ref: "a1", want: []string{"type"}},
		{name: "unknown", in: `{"type":"no.such.frame","id":"u-1"}`, code: CodeUnknownFrame, ref: "u-1", want: []string{`"no.such.frame"`}},
		{name: "unknown without id", in: `{"type":"tool_call_v2"}`, code: CodeUnknownFrame, want: []string{"tool_call_v2"}},
		{name: "unknown with bad id", in: `{"type":"nope","id":7}`, code: CodeUnknownFrame, want: []string{"nope"}},
		{name: "unknown long", in: `{"type":"` + long + `"}`, code: CodeUnknownFrame, want: []string{strings.Repeat("x", 64) + `"`}},
		{name: "case matters", in: `{"type":"Tool_Result"}`, code: CodeUnknownFrame, want: []string{"Tool_Result"}},
	})
	// The type is truncated to 64 bytes in the message.
	_, err := Decode([]byte(`{"type":"` + long + `"}`))
	if m := err.(*Error).Message; strings.Contains(m, strings.Repeat("x", 65)) {
		t.Errorf("unknown type not truncated: %q", m)
	}
	// Escapes in the type are decoded.
	if f, err := Decode([]byte(`{"type":"session\u002eend"}`)); err != nil || f.FrameType() != "session.end" {
		t.Errorf("escaped type: %v, %v", f, err)
	}
}

func TestDecodeID(t *testing.T) {
	runRejects(t, []rejectCase{
		{name: "number", in: `{"type":"session.end","id":5}`, want: []string{"field id must be a string"}},
		{name: "object", in: `{"type":"session.end","id":{"a":1}}`, want: []string{"field id"}},
		{name: "too long", in: `{"type":"session.end","id":"` + strings.Repeat("i", 65) + `"}`, want: []string{"field id must be at most 64 bytes"}},
		{name: "too long in bytes", in: `{"type":"session.end","id":"` + strings.Repeat("é", 33) + `"}`, want: []string{"id"}},
		{name: "id checked before fields", in: `{"type":"tool_deferred","id":true}`, want: []string{"id"}},
	})
	for _, in := range []string{
		`{"type":"session.end","id":"` + strings.Repeat("i", 64) + `"}`,
		`{"type":"session.end","id":null}`,
		`{"type":"session.end","id":""}`,
		// Broker frames have no id field: an id there is an unknown member.
		`{"type":"session.ended","reason":"ended","id":5}`,
	} {
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
	f, _ := Decode([]byte(`{"type":"session.end","id":"end-1"}`))
	if f.(*SessionEnd).ID != "end-1" {
		t.Errorf("id not decoded: %#v", f)
	}
}

func TestDecodeWrongType(t *testing.T) {
	decl := func(kv string) string {
		return `{"name":"t","description":"d","parameters":{"type":"object"}` + kv + `}`
	}
	tools := func(third string) string {
		return `{"type":"tools.declare","id":"w1","tools":[` + decl("") + `,` + decl("") + `,` + third + `]}`
	}
	runRejects(t, []rejectCase{
		{name: "tools not a list", in: `{"type":"tools.declare","id":"w1","tools":"not-a-list"}`, ref: "w1", want: []string{"field tools must be an array"}},
		{name: "tools element not an object", in: tools(`"x"`), ref: "w1", want: []string{"field tools[2] must be an object"}},
		{name: "tools element null", in: tools(`null`), ref: "w1", want: []string{"field tools[2] must be an object"}},
		{name: "tool name", in: tools(`{"name":5,"description":"d","parameters":{}}`), ref: "w1", want: []string{"field tools[2].name must be a string"}},
		{name: "tool parameters", in: `{"type":"tools.declare","tools":[{"name":"bad_schema_kind","description":"d","parameters":"object"}]}`,
			want: []string{"field tools[0].parameters must be an object", `(tool "bad_schema_kind")`}},
		{name: "tool parameters array", in: tools(decl(`,"parameters":[]`)), ref: "w1", want: []string{"tools[2].parameters"}},
		{name: "tool deferred", in: tools(decl(`,"deferred":"yes"`)), ref: "w1", want: []string{"field tools[2].deferred must be a boolean", `(tool "t")`}},
		{name: "tool notify_on_complete", in: tools(decl(`,"notify_on_complete":1`)), ref: "w1", want: []string{"tools[2].notify_on_complete"}},
		{name: "tool expected_duration", in: tools(decl(`,"expected_duration":3`)), ref: "w1", want: []string{"tools[2].expected_duration must be a string"}},
		{name: "tool timeout", in: tools(decl(`,"timeout":"abc"`)), ref: "w1", want: []string{"field tools[2].timeout must be"}},
		{name: "hello tools", in: `{"type":"hello","protocol":"backchannel.v1","role":"host","tools":[` + decl("") + `,{"name":"x","description":7,"parameters":{}}]}`,
			want: []string{"field tools[1].description must be a string", `(tool "x")`}},
		{name: "hello last_seq string", in: `{"type":"hello","protocol":"backchannel.v1","role":"host","last_seq":"4"}`, want: []string{"field last_seq must be an integer"}},
		{name: "hello last_seq fraction", in: `{"type":"hello","protocol":"backchannel.v1","role":"host","last_seq":4.5}`, want: []string{"last_seq"}},
		{name: "hello last_seq exponent", in: `{"type":"hello","protocol":"backchannel.v1","role":"host","last_seq":1e3}`, want: []string{"last_seq"}},
		{name: "hello last_seq overflow", in: `{"type":"hello","protocol":"backchannel.v1","role":"host","last_seq":99999999999999999999}`, want: []string{"last_seq"}},
		{name: "hello role number", in: `{"type":"hello","protocol":"backchannel.v1","role":1}`, want: []string{"field role must be a string"}},
		{name: "interaction not object", in: `{"type":"tool_partial_result","handle":"h","segment":1,"interaction":"ask"}`, want: []string{"field interaction must be an object"}},
		{name: "interaction prompt", in: `{"type":"tool_partial_result","id":"p1","handle":"h","segment":1,"interaction":{"prompt":5}}`, ref: "p1", want: []string{"field interaction.prompt must be a string"}},
		{name: "interaction options", in: `{"type":"tool_partial_result","handle":"h","segment":1,"interaction":{"prompt":"?","options":"a,b"}}`, want: []string{"field interaction.options must be an array"}},
		{name: "interaction option", in: `{"type":"tool_partial_result","handle":"h","segment":1,"interaction":{"prompt":"?","options":["a",2]}}`, want: []string{"field interaction.options[1] must be a string"}},
		{name: "reply", in: `{"type":"tool_partial_result","handle":"h","segment":1,"reply":"yes"}`, want: []string{"field reply must be a boolean"}},
		{name: "speak", in: `{"type":"inject","text":"x","speak":0}`, want: []string{"field speak must be a boolean"}},
		{name: "call_id", in: `{"type":"tool_result","call_id":7,"output":1}`, want: []string{"field call_id must be a string"}},
		{name: "error text", in: `{"type":"tool_result","call_id":"c","error":{"msg":"x"}}`, want: []string{"field error must be a string"}},
		{name: "local", in: `{"type":"agent.tool_call","call_id":"c","conversation_id":"root","name":"n","arguments":{},"local":"true"}`, want: []string{"field local must be a boolean"}},
		// Broker frames are checked the same way (clients decode them).
		{name: "seq", in: `{"type":"tool_cancel","seq":"3","call_id":"c","reason":"timeout"}`, want: []string{"field seq must be an integer"}},
		{name: "names element", in: `{"type":"tools.declared","names":["a",null]}`, want: []string{"field names[1] must be a string"}},
		{name: "retryable", in: `{"type":"error","code":"internal","message":"m","retryable":"no"}`, want: []string{"field retryable must be a boolean"}},
		{name: "jobs nested", in: `{"type":"tool_deferred_resume","jobs":[{"call_id":"c","handle":"h","name":"n","arguments":{},"status_label":"","state":"deferred","deadline_ms":1,"open_interaction":{"prompt":[]}}]}`,
			want: []string{"field jobs[0].open_interaction.prompt must be a string"}},
		{name: "attempt", in: `{"type":"tool_job_narration","call_id":"c","kind":"milestone","state":"queued","attempt":1.5}`, want: []string{"field attempt must be an integer"}},
	})
}

func TestDecodeMissingRequired(t *testing.T) {
	runRejects(t, []rejectCase{
		{name: "call_id", in: `{"type":"tool_deferred","id":"ref-bad-2","handle":"h"}`, ref: "ref-bad-2", want: []string{"missing required field call_id"}},
		{name: "null counts as absent", in: `{"type":"tool_deferred","id":"m2","call_id":null,"handle":"h"}`, ref: "m2", want: []string{"missing required field call_id"}},
		{name: "handle", in: `{"type":"tool_deferred","call_id":"c"}`, want: []string{"missing required field handle"}},
		{name: "tools", in: `{"type":"tools.declare"}`, want: []string{"missing required field tools"}},
		{name: "protocol", in: `{"type":"hello","role":"host"}`, want: []string{"missing required field protocol"}},
		{name: "role", in: `{"type":"hello","protocol":"backchannel.v1"}`, want: []string{"missing required field role"}},
		{name: "nested tool field", in: `{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{}},{"name":"b","parameters":{}}]}`,
			want: []string{"missing required field tools[1].description", `(tool "b")`}},
		{name: "nested tool parameters null", in: `{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":null}]}`,
			want: []string{"missing required field tools[0].parameters"}},
		{name: "interaction.prompt", in: `{"type":"tool_partial_result","id":"p2","call_id":"c","segment":{},"interaction":{"options":["a"]}}`, ref: "p2",
			want: []string{"missing required field interaction.prompt"}},
		{name: "segment", in: `{"type":"tool_partial_result","call_id":"c"}`, want: []string{"missing required field segment"}},
		{name: "segment null", in: `{"type":"tool_partial_result","call_id":"c","segment":null}`, want: []string{"missing required field segment"}},
		{name: "note", in: `{"type":"tool_progress","handle":"h"}`, want: []string{"missing required field note"}},
		{name: "arguments", in: `{"type":"agent.tool_call","call_id":"c","conversation_id":"root","name":"n"}`, want: []string{"missing required field arguments"}},
		{name: "text", in: `{"type":"caller.text"}`, want: []string{"missing required field text"}},
		{name: "retryable", in: `{"type":"error","code":"internal","message":"m"}`, want: []string{"missing required field retryable"}},
		{name: "jobs", in: `{"type":"tool_deferred_resume","seq":3}`, want: []string{"missing required field jobs"}},
		{name: "nested job", in: `{"type":"tool_deferred_resume","jobs":[{"call_id":"c","handle":"h","name":"n","status_label":"","state":"deferred","deadline_ms":1}]}`,
			want: []string{"missing required field jobs[0].arguments"}},
		{name: "welcome", in: `{"type":"welcome","session_id":"s","connection_id":"c","resume_token":"r","resume_window_ms":1,"heartbeat_ms":1}`,
			want: []string{"missing required field server_time_ms"}},
		{name: "wrong case is absent", in: `{"type":"caller.text","Text":"hi"}`, want: []string{"missing required field text"}},
	})
	// Present but empty strings satisfy required (the broker judges their content).
	for _, in := range []string{
		`{"type":"tool_deferred","call_id":"c","handle":""}`,
		`{"type":"caller.text","text":""}`,
		`{"type":"tools.declare","tools":[]}`,
	} {
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
}

func TestDecodeExactlyOne(t *testing.T) {
	const both, neither = "got both", "got neither"
	var cases []rejectCase
	for _, typ := range []string{"tool_progress", "tool_partial_result", "tool_result", "job.cancel", "tool_interaction_update"} {
		rest := map[string]string{
			"tool_progress":           `"note":"n"`,
			"tool_partial_result":     `"segment":{"a":1}`,
			"tool_result":             `"output":"x"`,
			"job.cancel":              `"x":1`,
			"tool_interaction_update": `"interaction_id":"ia_1","state":"resolved"`,
		}[typ]
		cases = append(cases,
			rejectCase{name: typ + " neither", in: `{"type":"` + typ + `","id":"x1",` + rest + `}`, ref: "x1", want: []string{"call_id", "handle", neither}},
			rejectCase{name: typ + " both", in: `{"type":"` + typ + `","id":"x2","call_id":"` + cid + `","handle":"` + hdl + `",` + rest + `}`, ref: "x2", want: []string{"call_id", "handle", both}},
			rejectCase{name: typ + " empty handle", in: `{"type":"` + typ + `","handle":"",` + rest + `}`, want: []string{"call_id", "handle", neither}},
		)
		for _, target := range []string{`"call_id":"` + cid + `"`, `"handle":"` + hdl + `"`, `"call_id":"` + cid + `","handle":""`} {
			in := `{"type":"` + typ + `",` + target + `,` + rest + `}`
			if _, err := Decode([]byte(in)); err != nil {
				t.Errorf("Decode(%s): %v", in, err)
			}
		}
	}
	cases = append(cases,
		rejectCase{name: "result no payload", in: `{"type":"tool_result","id":"no-payload","call_id":"c"}`, ref: "no-payload", want: []string{"output", "error", neither}},
		rejectCase{name: "result both payloads", in: `{"type":"tool_result","id":"both-payload","call_id":"c","output":"x","error":"y"}`, ref: "both-payload", want: []string{"output", "error", both}},
		rejectCase{name: "result null output", in: `{"type":"tool_result","call_id":"c","output":null}`, want: []string{"output", "error", neither}},
		rejectCase{name: "result empty error", in: `{"type":"tool_result","call_id":"c","error":""}`, want: []string{"output", "error", neither}},
		rejectCase{name: "target checked first", in: `{"type":"tool_result","id":"both-target","call_id":"c","handle":"h","output":"x"}`, ref: "both-target", want: []string{"call_id", "handle", both}},
		rejectCase{name: "local result neither", in: `{"type":"agent.local_result","call_id":"c","conversation_id":"root"}`, want: []string{"output", "error", neither}},
		rejectCase{name: "local result both", in: `{"type":"agent.local_result","call_id":"c","conversation_id":"root","output":{},"error":"e"}`, want: []string{"output", "error", both}},
	)
	runRejects(t, cases)
	for _, in := range []string{
		`{"type":"tool_result","call_id":"c","output":null,"error":"boom"}`,
		`{"type":"tool_result","call_id":"c","output":"","error":""}`,
		`{"type":"tool_result","call_id":"c","output":false}`,
		`{"type":"tool_result","call_id":"c","output":0}`,
		`{"type":"tool_result","call_id":"c","output":[]}`,
		`{"type":"agent.local_result","call_id":"c","conversation_id":"root","output":"done"}`,
		`{"type":"agent.local_result","call_id":"c","conversation_id":"root","error":"failed"}`,
	} {
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
}

func TestDecodeEnums(t *testing.T) {
	runRejects(t, []rejectCase{
		{name: "role", in: `{"type":"hello","id":"h1","protocol":"backchannel.v1","role":"admin"}`, ref: "h1", want: []string{"field role must be one of host, caller, agent"}},
		{name: "role case", in: `{"type":"hello","protocol":"backchannel.v1","role":"Host"}`, want: []string{"role"}},
		{name: "protocol", in: `{"type":"hello","protocol":"backchannel.v2","role":"host"}`, want: []string{`field protocol must be "backchannel.v1"`}},
		{name: "protocol empty", in: `{"type":"hello","protocol":"","role":"host"}`, want: []string{"protocol"}},
		{name: "interaction state", in: `{"type":"tool_interaction_update","call_id":"c","interaction_id":"i","state":"answered"}`,
			want: []string{"field state must be one of resolved, cancelled, superseded"}},
		{name: "expected_duration", in: `{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{}},{"name":"slow","description":"d","parameters":{},"expected_duration":"days"}]}`,
			want: []string{"field tools[1].expected_duration must be one of instant, seconds, minutes, hours", `(tool "slow")`}},
		{name: "expected_duration in hello", in: `{"type":"hello","protocol":"backchannel.v1","role":"host","tools":[{"name":"a","description":"d","parameters":{},"expected_duration":"Minutes"}]}`,
			want: []string{"tools[0].expected_duration"}},
	})
	for _, role := range []Role{RoleHost, RoleCaller, RoleAgent} {
		in := `{"type":"hello","protocol":"backchannel.v1","role":"` + string(role) + `"}`
		f, err := Decode([]byte(in))
		if err != nil || f.(*Hello).Role != role {
			t.Errorf("Decode(%s) = %v, %v", in, f, err)
		}
	}
	for _, st := range interactionStates {
		in := `{"type":"tool_interaction_update","handle":"h","interaction_id":"i","state":"` + string(st) + `"}`
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
	for _, d := range expectedDurations {
		in := `{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{},"expected_duration":"` + string(d) + `"}]}`
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
	// Broker frames are not checked against their enums: a client keeps working when the
	// broker adds a value.
	if _, err := Decode([]byte(`{"type":"tool_cancel","call_id":"c","reason":"maintenance"}`)); err != nil {
		t.Errorf("broker enum checked: %v", err)
	}
}

func TestDecodeUnknownFieldsIgnored(t *testing.T) {
	in := `{"type":"tool_result","x_unknown":{"a":[1,2]},"CALL_ID":5,"Output":"shadow","call_id":"` + cid + `","output":{"ok":true},"Error":"ignored"}`
	f, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r := f.(*ToolResult)
	if r.CallID != cid || string(r.Output) != `{"ok":true}` || r.Error != "" {
		t.Errorf("decoded %#v", r)
	}
	in = `{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{},"x_vendor_hint":"ignored","Timeout":"bad"}]}`
	if _, err := Decode([]byte(in)); err != nil {
		t.Errorf("unknown nested member: %v", err)
	}
}

func TestDecodeValues(t *testing.T) {
	in := `{"type":"hello","id":"h","protocol":"backchannel.v1","role":"caller","session_id":"s","last_seq":-0,
		"tools":[{"name":"b","description":"naïve \"quoted\" \u00e9 \ud83d\ude00","parameters":{"type":"object"},"timeout":"1.5s","deferred":true,
		"deferred_timeout":"2h","notify_on_complete":false}]}`
	f, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	h := f.(*Hello)
	d := h.Tools[0]
	if d.Description != "naïve \"quoted\" é 😀" {
		t.Errorf("description %q", d.Description)
	}
	if d.Timeout.Milliseconds() != 1500 || d.DeferredTimeout.Std().Hours() != 2 {
		t.Errorf("durations %v %v", d.Timeout, d.DeferredTimeout)
	}
	if d.NotifyOnComplete == nil || *d.NotifyOnComplete || d.NotifiesOnComplete() {
		t.Errorf("notify_on_complete %v", d.NotifyOnComplete)
	}
	if string(d.Parameters) != `{"type":"object"}` {
		t.Errorf("parameters %s", d.Parameters)
	}
	if (ToolDecl{Deferred: true}).NotifiesOnComplete() != true || (ToolDecl{}).NotifiesOnComplete() {
		t.Error("notify_on_complete default")
	}
	// Invalid UTF-8 is refused (SPEC 2; utf8_test.go has the cases); a lone surrogate escape is
	// JSON and decodes to U+FFFD as encoding/json decodes it.
	f, err = Decode([]byte(`{"type":"caller.text","text":"a\ud800b"}`))
	if err != nil || f.(*CallerText).Text != "a\uFFFDb" {
		t.Errorf("lone surrogate escape: %#v %v", f, err)
	}
	// Inject.Spoken follows the default.
	no := false
	if !(Inject{}).Spoken() || (Inject{Speak: &no}).Spoken() {
		t.Error("Inject.Spoken")
	}
	// Decoded raw values do not alias the input.
	buf := []byte(`{"type":"tool_result","call_id":"c","output":{"a":1}}`)
	f, _ = Decode(buf)
	copy(buf, strings.Repeat("x", len(buf)))
	if string(f.(*ToolResult).Output) != `{"a":1}` {
		t.Error("Output aliases the input buffer")
	}
	// Whitespace around values is fine.
	if _, err := Decode([]byte(" {\n \"type\" : \"tool_progress\" ,\t\"handle\" : \"h\" , \"note\" : \"n\" }\n")); err != nil {
		t.Errorf("whitespace: %v", err)
	}
}

func TestValidateErrorsAreBadFrames(t *testing.T) {
	for _, v := range []Validator{
		Hello{}, ToolsDeclare{Tools: []ToolDecl{{ExpectedDuration: "x"}}}, ToolProgress{}, ToolPartialResult{},
		ToolResult{}, JobCancel{}, ToolInteractionUpdate{}, AgentLocalResult{}, ToolDecl{ExpectedDuration: "x"},
	} {
		err := v.Validate()
		e, ok := err.(*Error)
		if !ok || e.Code != CodeBadFrame || e.Message == "" {
			t.Errorf("%T.Validate() = %v", v, err)
		}
	}
	if err := (ToolDecl{}).Validate(); err != nil {
		t.Errorf("ToolDecl{}.Validate() = %v", err)
	}
	var v Validator = ToolResult{CallID: "c", Output: json.RawMessage(`1`)}
	if err := v.Validate(); err != nil {
		t.Errorf("valid result: %v", err)
	}
}

// A frame nested past MaxNesting whose type member is missing, or not a string, is bad_frame —
// the check for the deeper frames the broker sends reads the type of any frame (found by
// FuzzDecode: it panicked on a missing type).
func TestDeepFrameWithoutAStringType(t *testing.T) {
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	for _, in := range []string{`{"":` + deep + `}`, `{"type":5,"x":` + deep + `}`, `{"type":null,"x":` + deep + `}`, `{"type":{},"x":` + deep + `}`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%.40s…) took it", in)
		} else if e, ok := err.(*Error); !ok || e.Code != CodeBadFrame {
			t.Errorf("Decode(%.40s…): %v, want bad_frame", in, err)
		}
	}
}
