package frames

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// specFrames is every frame of docs/spec.md with its members, written from the SPEC's text: "name"
// is required, "name?" optional, each with its JSON type after a colon. The envelope members
// (id of client frames, ref and seq of broker frames) are checked apart. Where a rule allows
// either of two members (call_id|handle, output|error), both are optional here and Validate
// enforces the rule.
var specFrames = map[string][]string{
	// client → broker
	"hello":                    {"protocol:string", "role:string", "session_id?:string", "api_key?:string", "join_token?:string", "caller_token?:string", "resume_token?:string", "last_seq?:int", "tools?:[]ToolDecl"},
	"tools.declare":            {"tools:[]ToolDecl"},
	"tool_deferred":            {"call_id:string", "handle:string", "status_label?:string"},
	"tool_progress":            {"call_id?:string", "handle?:string", "note:string"},
	"tool_partial_result":      {"call_id?:string", "handle?:string", "segment:any", "reply?:bool", "phase?:string", "interaction?:Interaction"},
	"tool_result":              {"call_id?:string", "handle?:string", "output?:any", "error?:string"},
	"job.cancel":               {"call_id?:string", "handle?:string"},
	"tool_interaction_update":  {"call_id?:string", "handle?:string", "interaction_id:string", "state:string"},
	"inject":                   {"text:string", "speak?:bool"},
	"session.end":              {},
	"caller.text":              {"text:string"},
	"agent.tool_call":          {"call_id:string", "conversation_id:string", "name:string", "arguments:any", "local?:bool"},
	"agent.turn_start":         {"conversation_id:string"},
	"agent.turn_end":           {"conversation_id:string"},
	"agent.message":            {"conversation_id:string", "to_conversation_id:string", "text:string"},
	"agent.local_result":       {"call_id:string", "conversation_id:string", "output?:any", "error?:string"},
	"agent.interaction_answer": {"conversation_id:string", "interaction_id:string", "option?:string", "text:string"},
	"agent.final":              {"conversation_id:string", "text:string"},
	"conversation.create":      {"parent_conversation_id:string", "parent_call_id?:string"},
	"conversation.cancel":      {"conversation_id:string"},
	// broker → client
	"welcome":                  {"session_id:string", "connection_id:string", "resume_token:string", "resume_window_ms:int", "heartbeat_ms:int", "server_time_ms:int", "join_token?:string"},
	"error":                    {"code:string", "message:string", "retryable:bool", "call_id?:string", "handle?:string"},
	"tools.declared":           {"names:[]string"},
	"tool_call":                {"call_id:string", "name:string", "arguments:any", "deferred:bool", "timeout_ms:int", "session_id:string"},
	"tool_deferred_ack":        {"call_id:string", "handle:string", "accepted:bool", "reason?:string", "deadline_ms?:int"},
	"job.cancel_result":        {"call_id:string", "handle?:string", "result:string"},
	"tool_cancel":              {"call_id:string", "handle?:string", "reason:string"},
	"tool_job_narration":       {"call_id:string", "handle?:string", "kind:string", "interaction_id?:string", "state:string", "attempt:int", "response_id?:string"},
	"tool_job_delivery_failed": {"call_id:string", "handle:string", "attempts:int", "reason:string"},
	"tool_interaction_answer":  {"call_id:string", "handle?:string", "interaction_id:string", "option?:string", "text:string"},
	// SPEC 9 lists interaction_id, state and result; SPEC 8 adds call_id (and handle) to every
	// broker → host frame about a job.
	"tool_interaction_update_ack": {"call_id?:string", "handle?:string", "interaction_id:string", "state:string", "result:string"},
	"tool_deferred_resume":        {"jobs:[]ResumedJob"},
	"session.ended":               {"reason:string"},
	"transcript":                  {"role:string", "text:string", "response_id?:string", "final:bool"},
	"agent.tool_result":           {"call_id:string", "kind:string", "content:string"},
	"agent.prompt":                {"prompt_id:string", "conversation_id:string", "internal:bool", "text:string"},
	"agent.message_committed":     {"message_id:string"},
	"agent.local_cancel":          {"call_id:string", "conversation_id:string"},
	"conversation.created":        {"conversation_id:string"},
}

// specNested is the nested objects of docs/spec.md: ToolDecl (4), Interaction (9) and the jobs of
// tool_deferred_resume (10).
var specNested = map[string][]string{
	"ToolDecl": {"name:string", "description:string", "parameters:object", "timeout?:duration", "deferred?:bool",
		"deferred_timeout?:duration", "requires_permission?:bool", "expected_duration?:string", "notify_on_complete?:bool"},
	"Interaction": {"id?:string", "prompt:string", "options?:[]string"},
	"ResumedJob": {"call_id:string", "handle:string", "name:string", "arguments:any", "status_label:string",
		"state:string", "deadline_ms:int", "open_interaction?:Interaction"},
}

// isEnvelope reports whether f is a member of the embedded Request or Reply, which every frame
// type embeds first (TestRegistry).
func isEnvelope(f fieldInfo) bool { return len(f.index) == 2 && f.index[0] == 0 }

// wireShape renders the members of info as specFrames does; envelope members are left out.
func wireShape(info *structInfo) []string {
	var out []string
	for _, f := range info.fields {
		if isEnvelope(f) {
			continue
		}
		var typ string
		switch f.kind {
		case kindString:
			typ = "string"
		case kindBool, kindPtrBool:
			typ = "bool"
		case kindInt:
			typ = "int"
		case kindRaw:
			typ = "any"
			if f.object {
				typ = "object"
			}
		case kindUnmarshaler:
			typ = "duration"
		case kindStruct, kindPtrStruct:
			typ = f.elem.typ.Name()
		case kindSliceStruct:
			typ = "[]" + f.elem.typ.Name()
		case kindSliceString:
			typ = "[]string"
		default:
			typ = "?" + f.typ.String()
		}
		opt := "?"
		if f.required {
			opt = ""
		}
		out = append(out, f.name+opt+":"+typ)
	}
	return out
}

// TestFramesHaveTheMembersOfSpec checks every frame type, and the nested objects, against the
// members docs/spec.md gives it: names, required or optional, JSON types — and that there is no frame
// type docs/spec.md does not name.
func TestFramesHaveTheMembersOfSpec(t *testing.T) {
	for _, typ := range Types() {
		want, ok := specFrames[typ]
		if !ok {
			t.Errorf("frame type %s is not a frame of docs/spec.md", typ)
			continue
		}
		f, _ := New(typ)
		info := infoFor(reflect.TypeOf(f).Elem())
		if got := wireShape(info); !slices.Equal(got, want) {
			t.Errorf("%s members\n got %s\nwant %s", typ, strings.Join(got, " "), strings.Join(want, " "))
		}
		// The envelope: client frames may carry id, broker frames ref and seq (SPEC 2).
		var env []string
		for _, fi := range info.fields {
			if isEnvelope(fi) {
				env = append(env, fi.name)
			}
		}
		wantEnv := []string{"ref", "seq"}
		if d, _ := DirectionOf(typ); d == ClientToBroker {
			wantEnv = []string{"id"}
		}
		if !slices.Equal(env, wantEnv) {
			t.Errorf("%s envelope %v, want %v", typ, env, wantEnv)
		}
	}
	for typ := range specFrames {
		if _, ok := DirectionOf(typ); !ok {
			t.Errorf("docs/spec.md frame %s is not a frame type of package frames", typ)
		}
	}
	for name, want := range specNested {
		var info *structInfo
		switch name {
		case "ToolDecl":
			info = infoFor(reflect.TypeFor[ToolDecl]())
		case "Interaction":
			info = infoFor(reflect.TypeFor[Interaction]())
		case "ResumedJob":
			info = infoFor(reflect.TypeFor[ResumedJob]())
		}
		if got := wireShape(info); !slices.Equal(got, want) {
			t.Errorf("%s members\n got %s\nwant %s", name, strings.Join(got, " "), strings.Join(want, " "))
		}
	}
}
