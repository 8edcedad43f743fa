package textagent

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// SPEC 13 Background: a call not finished within background_after_ms (default 2000) is answered
// with the placeholder, exactly at that moment.
func TestAgentBackgroundPlaceholderAfterBackgroundAfter(t *testing.T) {
	tests := []struct {
		name  string
		opt   time.Duration
		after time.Duration
	}{
		{"default 2 s", 0, 2 * time.Second},
		{"configured 500 ms", 500 * time.Millisecond, 500 * time.Millisecond},
		{"configured 10 s", 10 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{BackgroundAfter: tt.opt})
			h.call(RootConversation, "c1", "slow", `{}`)
			h.expectNone()
			h.advance(tt.after - time.Nanosecond)
			h.expectNone()
			h.advance(time.Nanosecond)
			h.expect(agPH("c1"))
			h.advance(time.Hour)
			h.expectNone()
			// Its completion is then announced, not answered directly.
			h.complete(RootConversation, "c1", `"done"`)
			h.expect(agPI(RootConversation, specCompletion("c1")))
		})
	}
}

// The placeholder text and kind, literally (SPEC 13), with a call id that needs no escaping in
// a body (ids are never escaped in bodies or prompts).
func TestAgentPlaceholderExactText(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "tool-call_42", "slow", `{}`)
	h.advance(2 * time.Second)
	fs := h.take()
	if len(fs) != 1 {
		t.Fatalf("got %s", agDescribeAll(fs))
	}
	r := fs[0].(*frames.AgentToolResult)
	if r.Kind != "background_placeholder" || r.CallID != "tool-call_42" ||
		r.Content != "internal: true\n\nTool call `tool-call_42` is running in the background." {
		t.Errorf("placeholder = %+v", r)
	}
}

// SPEC 13 / SPEC 6: as soon as its host defers it, a call is answered with the placeholder, once.
func TestAgentDeferredPlaceholderAtOnce(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "job", `{}`)
	h.advance(time.Second)
	h.expectNone()
	h.a.Deferred(h.bid(RootConversation, "c1"))
	h.expect(agPH("c1"))
	h.a.Deferred(h.bid(RootConversation, "c1"))
	h.advance(time.Minute)
	h.expectNone()
	h.a.Deferred("call_unknown")
	h.expectNone()
}

// SPEC 13 Results: a call that finishes within background_after is answered directly, kind
// result (or error exactly with an error header); body rendering; duration_seconds only over
// 5 s, rounded down; a cancelled call is `error: Tool call canceled`.
func TestAgentForegroundResults(t *testing.T) {
	tests := []struct {
		name string
		o    Outcome
		want string
	}{
		{"string as is", Outcome{State: jobs.Completed, Output: json.RawMessage(`"hello\nworld \"q\""`)},
			agOK("c1", "hello\nworld \"q\"")},
		{"string with escapes", Outcome{State: jobs.Completed, Output: json.RawMessage(`"a\u0041\t\\"`)},
			agOK("c1", "aA\t\\")},
		{"object compact", Outcome{State: jobs.Completed, Output: json.RawMessage("{ \"a\" : [ 1, 2 ],\n  \"b\" : { \"c\" : null } }")},
			agOK("c1", `{"a":[1,2],"b":{"c":null}}`)},
		{"array compact", Outcome{State: jobs.Completed, Output: json.RawMessage(` [ "x" , true ] `)},
			agOK("c1", `["x",true]`)},
		{"number", Outcome{State: jobs.Completed, Output: json.RawMessage(`42`)}, agOK("c1", "42")},
		{"boolean", Outcome{State: jobs.Completed, Output: json.RawMessage(`false`)}, agOK("c1", "false")},
		{"string that looks like a header", Outcome{State: jobs.Completed, Output: json.RawMessage(`"x"`)}, agOK("c1", "x")},
		{"failed", Outcome{State: jobs.Failed, Error: "boom"}, agErr("c1", "error: boom")},
		{"failed message escaped", Outcome{State: jobs.Failed, Error: "line1\nline2\tx\\y\r"},
			agErr("c1", `error: line1\nline2\tx\\y\r`)},
		{"failed with output", Outcome{State: jobs.Failed, Error: "boom", Output: json.RawMessage(`{ "code" : 7 }`)},
			agErr("c1", "error: boom\n\n{\"code\":7}")},
		{"exactly 5 s: no duration", Outcome{State: jobs.Completed, Output: json.RawMessage(`"ok"`), Duration: 5 * time.Second},
			agOK("c1", "ok")},
		{"just over 5 s", Outcome{State: jobs.Completed, Output: json.RawMessage(`"ok"`), Duration: 5*time.Second + time.Millisecond},
			agOK("c1", "duration_seconds: 5\n\nok")},
		{"rounded down", Outcome{State: jobs.Completed, Output: json.RawMessage(`"ok"`), Duration: 7999 * time.Millisecond},
			agOK("c1", "duration_seconds: 7\n\nok")},
		{"long", Outcome{State: jobs.Completed, Output: json.RawMessage(`{"n":1}`), Duration: 3*time.Hour + 59*time.Second + 999*time.Millisecond},
			agOK("c1", "duration_seconds: 10859\n\n{\"n\":1}")},
		{"failed with duration and output", Outcome{State: jobs.Failed, Error: "boom", Output: json.RawMessage(`[1]`), Duration: 9 * time.Second},
			agErr("c1", "error: boom\nduration_seconds: 9\n\n[1]")},
		{"cancelled", Outcome{State: jobs.Cancelled}, agErr("c1", specCanceled)},
		{"cancelled with duration", Outcome{State: jobs.Cancelled, Duration: 12500 * time.Millisecond},
			agErr("c1", specCanceled+"\nduration_seconds: 12")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			h.call(RootConversation, "c1", "lookup", `{"q":1}`)
			h.advance(1999 * time.Millisecond)
			h.expectNone()
			h.a.Finished(h.bid(RootConversation, "c1"), tt.o)
			h.expect(tt.want)
			// Answered: it never goes to the background, and nothing else follows.
			h.advance(time.Hour)
			h.a.Finished(h.bid(RootConversation, "c1"), tt.o)
			h.a.Deferred(h.bid(RootConversation, "c1"))
			h.expectNone()
			// Its result was delivered: a wait for it finds it consumed.
			h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
			h.expect(agErr("w", specConsumed))
		})
	}
}

// The same renderings reach the agent through `wait` for a background call.
func TestAgentBackgroundResultsThroughWait(t *testing.T) {
	tests := []struct {
		name string
		o    Outcome
		want string
	}{
		{"string", Outcome{State: jobs.Completed, Output: json.RawMessage(`"done"`), Duration: 3 * time.Second}, agOK("w", "done")},
		{"object with duration", Outcome{State: jobs.Completed, Output: json.RawMessage(`{ "k" : "v" }`), Duration: 61 * time.Second},
			agOK("w", "duration_seconds: 61\n\n{\"k\":\"v\"}")},
		{"failed", Outcome{State: jobs.Failed, Error: "disk full", Duration: 4 * time.Second}, agErr("w", "error: disk full")},
		{"cancelled", Outcome{State: jobs.Cancelled, Duration: 30 * time.Second}, agErr("w", specCanceled+"\nduration_seconds: 30")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			h.call(RootConversation, "c1", "job", `{}`)
			h.advance(2 * time.Second)
			h.expect(agPH("c1"))
			h.a.Finished(h.bid(RootConversation, "c1"), tt.o)
			h.expect(agPI(RootConversation, specCompletion("c1")))
			h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
			h.expect(tt.want)
		})
	}
}

// duration_seconds counts from the call to its end, as the Env's outcome says; the fake engine
// reports the time on its clock.
func TestAgentDurationFromTheClock(t *testing.T) {
	h := newAg(t, Options{BackgroundAfter: time.Hour})
	h.call(RootConversation, "c1", "lookup", `{}`)
	h.advance(6*time.Second + 900*time.Millisecond)
	h.complete(RootConversation, "c1", `"ok"`)
	h.expect(agOK("c1", "duration_seconds: 6\n\nok"))
}

// A call its Env refuses to start is answered at once with the error, never goes to the
// background, and counts as delivered.
func TestAgentStartCallError(t *testing.T) {
	h := newAg(t, Options{})
	h.startErr["missing"] = "Tool missing is not available\nreally"
	h.call(RootConversation, "c1", "missing", `{"a":1}`)
	h.expect(agErr("c1", `error: Tool missing is not available\nreally`))
	if _, ok := h.a.Running(RootConversation, "c1"); ok {
		t.Error("Running reports a call that never started")
	}
	h.advance(time.Minute)
	h.expectNone()
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.expect(agErr("w", specConsumed))
	h.call(RootConversation, "w2", "wait", `{}`)
	h.expect(agErr("w2", specNoBackground))
}

// StartCall gets the conversation, the agent's id, the name and the arguments as sent.
func TestAgentStartCallRequest(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "search", `{"q": "x"}`)
	h.local(RootConversation, "c2", "wait", `{}`) // a local call named like a built-in is a local call
	want := []CallRequest{
		{ConversationID: RootConversation, CallID: "c1", Name: "search", Arguments: json.RawMessage(`{"q": "x"}`)},
		{ConversationID: RootConversation, CallID: "c2", Name: "wait", Arguments: json.RawMessage(`{}`), Local: true},
	}
	if !reflect.DeepEqual(h.starts, want) {
		t.Errorf("StartCall requests:\n got  %+v\n want %+v", h.starts, want)
	}
	// Built-ins never reach StartCall.
	h.call(RootConversation, "s", "status", `{"state":"working","title":"t"}`)
	h.call(RootConversation, "w", "wait", `{"timeout_minutes":5}`)
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":""}`)
	if len(h.starts) != 2 {
		t.Errorf("built-ins started jobs: %+v", h.starts[2:])
	}
}

// Local calls (SPEC 13): tracked like any other call; agent.local_result reports the outcome
// through LocalResult; a cancel reaches the agent as agent.local_cancel.
func TestAgentLocalCalls(t *testing.T) {
	t.Run("result in the foreground", func(t *testing.T) {
		h := newAg(t, Options{})
		h.local(RootConversation, "l1", "subagent", `{}`)
		bid := h.bid(RootConversation, "l1")
		if id, ok := h.a.Running(RootConversation, "l1"); !ok || id != bid {
			t.Errorf("Running = %q, %v; want %q", id, ok, bid)
		}
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "r1"}, CallID: "l1", ConversationID: RootConversation,
			Output: json.RawMessage(`{"answer": 42}`)})
		if len(h.locals) != 1 || h.locals[0] != (agLocal{id: bid, output: `{"answer": 42}`}) {
			t.Errorf("LocalResult calls = %+v", h.locals)
		}
		h.expect(agOK("l1", `{"answer":42}`))
	})
	t.Run("error in the background", func(t *testing.T) {
		h := newAg(t, Options{})
		h.local(RootConversation, "l1", "subagent", `{}`)
		h.advance(2 * time.Second)
		h.expect(agPH("l1"))
		h.handle(&frames.AgentLocalResult{CallID: "l1", ConversationID: RootConversation, Error: "it broke"})
		bid := h.bid(RootConversation, "l1")
		if len(h.locals) != 1 || h.locals[0] != (agLocal{id: bid, errText: "it broke", isError: true}) {
			t.Errorf("LocalResult calls = %+v", h.locals)
		}
		h.expect(agPI(RootConversation, specCompletion("l1")))
		h.call(RootConversation, "w", "wait", `{}`)
		h.expect(agErr("w", "original_tool_call_id: l1\nerror: it broke"))
	})
	t.Run("cancelled", func(t *testing.T) {
		h := newAg(t, Options{})
		h.local(RootConversation, "l1", "subagent", `{}`)
		h.advance(2 * time.Second)
		h.skip()
		h.call(RootConversation, "x", "cancel", `{"tool_call_id":"l1"}`)
		h.expect(agOK("x", specCancelOK), "local_cancel root l1", agPI(RootConversation, specCompletion("l1")))
		h.call(RootConversation, "w", "wait", `{"tool_call_id":"l1"}`)
		h.expect(agErr("w", specCanceled))
	})
	t.Run("LocalCancelled of an unknown or host job", func(t *testing.T) {
		h := newAg(t, Options{})
		h.call(RootConversation, "c1", "host", `{}`)
		h.a.LocalCancelled(h.bid(RootConversation, "c1"))
		h.a.LocalCancelled("call_nope")
		h.expectNone()
	})
	t.Run("bad local results", func(t *testing.T) {
		h := newAg(t, Options{})
		h.call(RootConversation, "c1", "host", `{}`)
		h.local(RootConversation, "l1", "sub", `{}`)
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "a"}, CallID: "nope", ConversationID: RootConversation, Output: json.RawMessage(`1`)})
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "b"}, CallID: "c1", ConversationID: RootConversation, Output: json.RawMessage(`1`)})
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "c"}, CallID: "l1", ConversationID: "conv_nope", Output: json.RawMessage(`1`)})
		h.expect(agE("a", frames.CodeUnknownCall), agE("b", frames.CodeUnknownCall), agE("c", frames.CodeNotFound))
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "d"}, CallID: "l1", ConversationID: RootConversation, Output: json.RawMessage(`1`)})
		h.expect(agOK("l1", "1"))
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "e"}, CallID: "l1", ConversationID: RootConversation, Output: json.RawMessage(`2`)})
		h.expect(agE("e", frames.CodeCallFinished))
		if len(h.locals) != 1 {
			t.Errorf("LocalResult calls = %+v", h.locals)
		}
	})
	t.Run("LocalResult refused", func(t *testing.T) {
		h := newAg(t, Options{})
		h.local(RootConversation, "l1", "sub", `{}`)
		h.localErr = jobsErr("call finished")
		h.handle(&frames.AgentLocalResult{Request: frames.Request{ID: "a"}, CallID: "l1", ConversationID: RootConversation, Output: json.RawMessage(`1`)})
		h.expect(agE("a", frames.CodeCallFinished))
	})
}

type jobsErr string

func (e jobsErr) Error() string { return string(e) }

// Running and CallOf (used by the MCP facade).
func TestAgentRunningAndCallOf(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "host", `{}`)
	h.call(RootConversation, "s", "status", `{"state":"working","title":"x"}`)
	bid := h.bid(RootConversation, "c1")
	if id, ok := h.a.Running(RootConversation, "c1"); !ok || id != bid {
		t.Errorf("Running(c1) = %q, %v", id, ok)
	}
	for _, tc := range []struct{ conv, id string }{{RootConversation, "s"}, {RootConversation, "nope"}, {"conv_nope", "c1"}} {
		if id, ok := h.a.Running(tc.conv, tc.id); ok {
			t.Errorf("Running(%s, %s) = %q, true", tc.conv, tc.id, id)
		}
	}
	if conv, id, ok := h.a.CallOf(bid); !ok || conv != RootConversation || id != "c1" {
		t.Errorf("CallOf = %q, %q, %v", conv, id, ok)
	}
	if _, _, ok := h.a.CallOf("call_nope"); ok {
		t.Error("CallOf of an unknown job")
	}
	child := h.create(RootConversation, "")
	h.call(child, "k1", "host", `{}`)
	if conv, id, ok := h.a.CallOf(h.bid(child, "k1")); !ok || conv != child || id != "k1" {
		t.Errorf("CallOf(child) = %q, %q, %v", conv, id, ok)
	}
	h.complete(RootConversation, "c1", `1`)
	if _, ok := h.a.Running(RootConversation, "c1"); ok {
		t.Error("Running after the call finished")
	}
	if _, _, ok := h.a.CallOf(bid); ok {
		t.Error("CallOf after the call finished")
	}
}

// A call id is unique within its conversation (SPEC 13); the same id in another conversation is
// another call.
func TestAgentDuplicateCallID(t *testing.T) {
	h := newAg(t, Options{})
	h.reused = true
	child := h.create(RootConversation, "")
	h.call(RootConversation, "c1", "host", `{}`)
	h.handle(&frames.AgentToolCall{Request: frames.Request{ID: "dup"}, CallID: "c1", ConversationID: RootConversation, Name: "host", Arguments: json.RawMessage(`{}`)})
	h.expect(agE("dup", frames.CodeBadFrame))
	h.call(child, "c1", "host", `{}`)
	h.expect(agP(child, specReminder)) // the child never set a status

	if len(h.starts) != 2 || h.starts[1].ConversationID != child {
		t.Errorf("starts = %+v", h.starts)
	}
}

// A frame that is not a text-agent frame, and frames naming an unknown conversation.
func TestAgentBadFrames(t *testing.T) {
	h := newAg(t, Options{})
	h.handle(&frames.ToolProgress{CallID: "x", Note: "n"})
	h.handle(&frames.AgentTurnStart{Request: frames.Request{ID: "t1"}, ConversationID: "conv_nope"})
	h.handle(&frames.AgentTurnEnd{Request: frames.Request{ID: "t2"}, ConversationID: "conv_nope"})
	h.handle(&frames.AgentFinal{Request: frames.Request{ID: "t3"}, ConversationID: "conv_nope", Text: "x"})
	h.handle(&frames.AgentMessage{Request: frames.Request{ID: "t4"}, ConversationID: RootConversation, ToConversationID: "conv_nope", Text: "x"})
	h.handle(&frames.ConversationCreate{Request: frames.Request{ID: "t5"}, ParentConversationID: "conv_nope"})
	h.handle(&frames.ConversationCancel{Request: frames.Request{ID: "t6"}, ConversationID: "conv_nope"})
	h.handle(&frames.ConversationCancel{Request: frames.Request{ID: "t7"}, ConversationID: RootConversation})
	h.expect(agE("", frames.CodeBadFrame), agE("t1", frames.CodeNotFound), agE("t2", frames.CodeNotFound),
		agE("t3", frames.CodeNotFound), agE("t4", frames.CodeNotFound), agE("t5", frames.CodeNotFound),
		agE("t6", frames.CodeNotFound), agE("t7", frames.CodeForbidden))
	// A tool call in an unknown conversation is answered with an error result, not started.
	h.call("conv_nope", "c1", "host", `{}`)
	fs := h.take()
	if len(fs) != 1 || fs[0].(*frames.AgentToolResult).Kind != frames.ResultKindError || len(h.starts) != 0 {
		t.Errorf("call in an unknown conversation: %s, starts %+v", agDescribeAll(fs), h.starts)
	}
}

// Ending stops the timers: nothing is sent afterwards.
func TestAgentEnding(t *testing.T) {
	h := newAg(t, Options{})
	h.call(RootConversation, "c1", "host", `{}`)
	h.call(RootConversation, "w", "wait", `{"timeout_minutes":5}`)
	h.a.Ending()
	h.advance(24 * time.Hour)
	h.expectNone()
	if n := h.liveTimers(); n != 0 {
		t.Errorf("%d timers still armed after Ending", n)
	}
}
