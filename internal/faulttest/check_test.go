package faulttest

import (
	"strings"
	"testing"
	"time"
)

// step is one event of a synthetic history.
type step struct {
	conn int
	dir  Dir
	raw  string
}

const (
	cHost  = 0
	cAgent = 1
)

// baseline is a small clean history: a host and an agent; a deferred call completed and
// consumed by an exact wait; a quick call answered directly; final barriers on both.
func baseline() []step {
	return []step{
		{cHost, Sent, `{"type":"hello","id":"h1","protocol":"backchannel.v1","role":"host","session_id":"S","join_token":"J","tools":[]}`},
		{cHost, Recv, `{"type":"welcome","ref":"h1","session_id":"S","resume_token":"T0"}`},
		{cHost, Recv, `{"type":"tools.declared","seq":1,"ref":"h1","names":["quick","job"]}`},
		{cAgent, Sent, `{"type":"hello","id":"a1","protocol":"backchannel.v1","role":"agent","session_id":"S","join_token":"J"}`},
		{cAgent, Recv, `{"type":"welcome","ref":"a1","session_id":"S","resume_token":"A0"}`},
		{cAgent, Sent, `{"type":"agent.tool_call","id":"t1","call_id":"c1","conversation_id":"root","name":"job","arguments":{"acid":"c1","op":"defer"}}`},
		{cHost, Recv, `{"type":"tool_call","seq":2,"call_id":"call_a","name":"job","arguments":{"acid":"c1","op":"defer"}}`},
		{cHost, Sent, `{"type":"tool_deferred","id":"d1","call_id":"call_a","handle":"H1"}`},
		{cHost, Recv, `{"type":"tool_deferred_ack","seq":3,"ref":"d1","call_id":"call_a","handle":"H1","accepted":true,"deadline_ms":100}`},
		{cAgent, Recv, `{"type":"agent.tool_result","seq":1,"call_id":"c1","kind":"background_placeholder","content":"internal: true\n\nTool call ` + "`c1`" + ` is running in the background."}`},
		{cHost, Sent, `{"type":"tool_result","id":"r1","handle":"H1","output":"ok-c1-1"}`},
		{cHost, Sent, `{"type":"job.cancel","id":"b1","call_id":"call_00000000000000000000"}`},
		{cHost, Recv, `{"type":"job.cancel_result","seq":4,"ref":"b1","call_id":"","result":"unknown_call"}`},
		{cAgent, Recv, `{"type":"agent.prompt","seq":2,"prompt_id":"p1","conversation_id":"root","internal":true,"text":"[internal] Tool call ` + "`c1`" + ` completed. Its result is queued; use ` + "`wait`" + ` to consume it."}`},
		{cAgent, Sent, `{"type":"agent.tool_call","id":"t2","call_id":"w2","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c1"}}`},
		{cAgent, Recv, `{"type":"agent.tool_result","seq":3,"call_id":"w2","kind":"result","content":"ok-c1-1"}`},
		{cAgent, Sent, `{"type":"agent.tool_call","id":"t3","call_id":"c3","conversation_id":"root","name":"quick","arguments":{"acid":"c3","op":"fast"}}`},
		{cHost, Recv, `{"type":"tool_call","seq":5,"call_id":"call_b","name":"quick","arguments":{"acid":"c3","op":"fast"}}`},
		{cHost, Sent, `{"type":"tool_result","id":"r2","call_id":"call_b","output":"ok-c3-1"}`},
		{cAgent, Recv, `{"type":"agent.tool_result","seq":4,"call_id":"c3","kind":"result","content":"ok-c3-1"}`},
		{cAgent, Sent, `{"type":"job.cancel","id":"fa","call_id":"call_00000000000000000000"}`},
		{cAgent, Recv, `{"type":"job.cancel_result","seq":5,"ref":"fa","call_id":"","result":"unknown_call"}`},
		{cHost, Sent, `{"type":"job.cancel","id":"fh","call_id":"call_00000000000000000000"}`},
		{cHost, Recv, `{"type":"job.cancel_result","seq":6,"ref":"fh","call_id":"","result":"unknown_call"}`},
	}
}

// deferredJob is a job c9 deferred under H9 with a deadline a minute after the synthetic
// clock's start, followed by more.
func deferredJob(more ...step) []step {
	return append([]step{
		{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"c9","conversation_id":"root","name":"job","arguments":{"acid":"c9","op":"defer"}}`},
		{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_d","name":"job","timeout_ms":1500,"arguments":{"acid":"c9","op":"defer"}}`},
		{cHost, Sent, `{"type":"tool_deferred","id":"d9","call_id":"call_d","handle":"H9"}`},
		{cHost, Recv, `{"type":"tool_deferred_ack","seq":8,"ref":"d9","call_id":"call_d","handle":"H9","accepted":true,"deadline_ms":1060000}`},
		{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c9","kind":"background_placeholder","content":"internal: true"}`},
	}, more...)
}

// history builds a History from steps (connections named by the roles of their hellos).
func history(steps []step) History {
	h := History{Run: "test/seed0", Session: "s00", SessionID: "S"}
	t0 := time.Unix(1000, 0)
	for i, s := range steps {
		for len(h.Conns) <= s.conn {
			h.Conns = append(h.Conns, ConnInfo{Node: "http://n1"})
		}
		if s.dir == Sent && strings.Contains(s.raw, `"type":"hello"`) {
			h.Conns[s.conn].Role = parseFrame([]byte(s.raw)).str("role")
		}
		if s.dir == Note && strings.Contains(s.raw, `"sleep"`) {
			t0 = t0.Add(10 * time.Second) // time passes
			continue
		}
		h.Events = append(h.Events, Event{Conn: s.conn, Dir: s.dir, At: t0.Add(time.Duration(i) * time.Millisecond), Raw: []byte(s.raw)})
	}
	return h
}

// without returns steps without the one whose raw contains sub.
func without(steps []step, sub string) []step {
	var out []step
	for _, s := range steps {
		if !strings.Contains(s.raw, sub) {
			out = append(out, s)
		}
	}
	return out
}

// insertBefore inserts extra before the step whose raw contains sub.
func insertBefore(steps []step, sub string, extra ...step) []step {
	for i, s := range steps {
		if strings.Contains(s.raw, sub) {
			out := append([]step(nil), steps[:i]...)
			out = append(out, extra...)
			return append(out, steps[i:]...)
		}
	}
	panic("no step with " + sub)
}

func kinds(vs []Violation) map[string]int {
	m := map[string]int{}
	for _, v := range vs {
		m[v.Kind]++
	}
	return m
}

func TestCheckCleanHistory(t *testing.T) {
	if vs := Check([]History{history(baseline())}); len(vs) > 0 {
		t.Fatalf("a clean history has violations:\n%s", Summarize(vs, 5))
	}
}

// TestCheckFindsEachKind mutates the clean history so that it breaks one rule at a time.
func TestCheckFindsEachKind(t *testing.T) {
	closeByClient := `{"by":"client","err":"use of closed network connection"}`
	cases := []struct {
		name  string
		steps []step
		want  string
	}{
		{"a frame missing", without(baseline(), `"ref":"d1","call_id"`), KindSeqGap},
		{"a frame twice on one connection", insertBefore(baseline(), `"ref":"b1","call_id"`,
			step{cHost, Recv, `{"type":"tool_deferred_ack","seq":3,"ref":"d1","call_id":"call_a","handle":"H1","accepted":true,"deadline_ms":100}`}), KindSeqRepeat},
		{"a replay with other bytes", append(baseline(),
			step{cHost, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"h2","protocol":"backchannel.v1","role":"host","session_id":"S","resume_token":"T0","last_seq":5}`},
			step{2, Recv, `{"type":"welcome","ref":"h2","session_id":"S","resume_token":"T1"}`},
			step{2, Recv, `{"type":"job.cancel_result","seq":6,"ref":"fh","call_id":"","result":"already_done"}`}), KindReplayDiffers},
		{"a replay from the wrong seq", append(baseline(),
			step{cHost, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"h2","protocol":"backchannel.v1","role":"host","session_id":"S","resume_token":"T0","last_seq":3}`},
			step{2, Recv, `{"type":"welcome","ref":"h2","session_id":"S","resume_token":"T1"}`},
			step{2, Recv, `{"type":"job.cancel_result","seq":6,"ref":"fh","call_id":"","result":"unknown_call"}`}), KindSeqGap},
		{"a second tool_cancel", append(baseline(),
			step{cHost, Recv, `{"type":"tool_cancel","seq":7,"call_id":"call_a","handle":"H1","reason":"timeout"}`},
			step{cHost, Recv, `{"type":"tool_cancel","seq":8,"call_id":"call_a","handle":"H1","reason":"discard"}`}), KindSecondCancel},
		{"a burned handle accepted", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"c9","conversation_id":"root","name":"job","arguments":{"acid":"c9","op":"defer_reuse"}}`},
			step{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_z","name":"job","arguments":{"acid":"c9","op":"defer_reuse"}}`},
			step{cHost, Sent, `{"type":"tool_deferred","id":"d9","call_id":"call_z","handle":"H1"}`},
			step{cHost, Recv, `{"type":"tool_deferred_ack","seq":8,"ref":"d9","call_id":"call_z","handle":"H1","accepted":true,"deadline_ms":200}`}), KindBurnedHandle},
		{"a result delivered to two waits", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"w9","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c1"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"w9","kind":"result","content":"ok-c1-1"}`}), KindResultTwice},
		{"a direct result twice", append(baseline(),
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c3","kind":"result","content":"ok-c3-1"}`}), KindResultTwice},
		{"an accepted call forgotten", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"w9","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c1"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"w9","kind":"error","content":"error: Unknown tool call id\ntool_call_id: c1"}`}), KindUnknownAccepted},
		{"consumed but never delivered", append(without(baseline(), `"call_id":"w2","kind"`),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"w9","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c1"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":3,"call_id":"w9","kind":"error","content":"error: Tool call result already consumed"}`}), KindPhantomConsumed},
		{"a valid resume refused", append(baseline(),
			step{cAgent, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"a2","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{2, Recv, `{"type":"error","ref":"a2","code":"resume_invalid","message":"resume_token was already used or is not valid","retryable":false}`}), KindHelloRefused},
		{"a token lost with a welcome the broker never sent", append(baseline(),
			step{cAgent, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"a2","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{2, Closed, `{"by":"server","code":1012,"reason":"relay interrupted"}`},
			step{3, Sent, `{"type":"hello","id":"a3","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{3, Recv, `{"type":"error","ref":"a3","code":"resume_invalid","message":"resume_token was already used or is not valid","retryable":false}`}), KindHelloRefused},
		{"a frame after session.ended", append(baseline(),
			step{cHost, Sent, `{"type":"session.end","id":"e1"}`},
			step{cHost, Recv, `{"type":"session.ended","seq":7,"reason":"ended"}`},
			step{cHost, Recv, `{"type":"tool_cancel","seq":8,"call_id":"call_b","reason":"discard"}`}), KindAfterEnded},
		{"session.ended unasked", append(baseline(),
			step{cHost, Recv, `{"type":"session.ended","seq":7,"reason":"resume_expired"}`}), KindUnexpectedEnd},
		{"a request applied but unanswered", insertBefore(baseline(), `"id":"fh"`,
			step{cHost, Sent, `{"type":"job.cancel","id":"x1","handle":"H1"}`}), KindRequestLost},
		{"a call without outcome", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"c9","conversation_id":"root","name":"slow","arguments":{"acid":"c9","op":"slow"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c9","kind":"background_placeholder","content":"internal: true\n\nTool call ` + "`c9`" + ` is running in the background."}`}), KindNoOutcome},
		{"an outcome the host contradicts", insertBefore(baseline(), `"ref":"fh"`,
			step{cHost, Recv, `{"type":"tool_cancel","seq":6,"call_id":"call_b","reason":"timeout"}`}), KindOutcomeMismatch},
		{"a timeout without tool_cancel", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"c9","conversation_id":"root","name":"slow","arguments":{"acid":"c9","op":"never"}}`},
			step{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_n","name":"slow","arguments":{"acid":"c9","op":"never"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c9","kind":"error","content":"error: Tool call timed out"}`},
			step{cHost, Sent, `{"type":"job.cancel","id":"fh2","call_id":"call_00000000000000000000"}`},
			step{cHost, Recv, `{"type":"job.cancel_result","seq":8,"ref":"fh2","call_id":"","result":"unknown_call"}`}), KindCancelLost},
		{"a job that never timed out", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"c9","conversation_id":"root","name":"slow","arguments":{"acid":"c9","op":"never"}}`},
			step{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_n","name":"slow","timeout_ms":1,"arguments":{"acid":"c9","op":"never"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c9","kind":"background_placeholder","content":"internal: true"}`},
			step{cHost, Note, `{"note":"sleep"}`},
			step{cHost, Sent, `{"type":"job.cancel","id":"fh2","call_id":"call_00000000000000000000"}`},
			step{cHost, Recv, `{"type":"job.cancel_result","seq":8,"ref":"fh2","call_id":"","result":"unknown_call"}`}), KindDeadlineMissed},
		{"a deferred job timed out by its ordinary clock", append(baseline(), deferredJob(
			step{cHost, Recv, `{"type":"tool_cancel","seq":9,"call_id":"call_d","handle":"H9","reason":"timeout"}`})...), KindDeferLost},
		{"a deferred job left out of tool_deferred_resume", append(baseline(), deferredJob(
			step{cHost, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"h2","protocol":"backchannel.v1","role":"host","session_id":"S","resume_token":"T0","last_seq":8}`},
			step{2, Recv, `{"type":"welcome","ref":"h2","session_id":"S","resume_token":"T1"}`},
			step{2, Recv, `{"type":"tool_deferred_resume","seq":9,"jobs":[]}`},
			step{2, Sent, `{"type":"tool_result","id":"r9","handle":"H9","output":"ok-c9-1"}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t10","call_id":"w10","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c9"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":7,"call_id":"w10","kind":"result","content":"ok-c9-1"}`})...), KindDeferLost},
		{"a harness stall note", append(baseline(),
			step{cAgent, Note, `{"note":"stalled","role":"agent","text":"call c9 got no answer"}`}), KindStalled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := Check([]History{history(c.steps)})
			if kinds(vs)[c.want] == 0 {
				t.Fatalf("want a %s violation, got %v:\n%s", c.want, kinds(vs), Summarize(vs, 5))
			}
			for _, v := range vs {
				if !strings.Contains(v.Trace, "test/seed0 session s00") || !strings.Contains(v.Trace, ">") {
					t.Errorf("trace without the seed, the session or the marked frames:\n%s", v.Trace)
				}
			}
		})
	}
}

// TestCheckAllowsWhatTheSpecAllows: answers the spec gives are no violations.
func TestCheckAllowsWhatTheSpecAllows(t *testing.T) {
	closeByClient := `{"by":"client","err":"use of closed network connection"}`
	cases := []struct {
		name  string
		steps []step
	}{
		{"a late result answered call_finished", append(baseline(),
			step{cHost, Sent, `{"type":"tool_result","id":"r9","handle":"H1","output":"ok-c1-2"}`},
			step{cHost, Recv, `{"type":"error","seq":7,"ref":"r9","code":"call_finished","message":"finished","retryable":false,"call_id":"call_a","handle":"H1"}`})},
		{"a resume with a lower last_seq replays the same bytes", append(baseline(),
			step{cHost, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"h2","protocol":"backchannel.v1","role":"host","session_id":"S","resume_token":"T0","last_seq":5}`},
			step{2, Recv, `{"type":"welcome","ref":"h2","session_id":"S","resume_token":"T1"}`},
			step{2, Recv, `{"type":"job.cancel_result","seq":6,"ref":"fh","call_id":"","result":"unknown_call"}`},
			step{2, Recv, `{"type":"tool_deferred_resume","seq":7,"jobs":[]}`})},
		{"a token that a hello on a dropped connection may have used", append(baseline(),
			step{cAgent, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"a2","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{2, Closed, `{"by":"server","err":"EOF"}`},
			step{3, Sent, `{"type":"hello","id":"a3","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{3, Recv, `{"type":"error","ref":"a3","code":"resume_invalid","message":"resume_token was already used or is not valid","retryable":false}`})},
		{"a moving session retried", append(baseline(),
			step{cAgent, Closed, closeByClient},
			step{2, Sent, `{"type":"hello","id":"a2","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{2, Recv, `{"type":"error","ref":"a2","code":"internal","message":"session S is moving","retryable":true}`},
			step{3, Sent, `{"type":"hello","id":"a3","protocol":"backchannel.v1","role":"agent","session_id":"S","resume_token":"A0","last_seq":5}`},
			step{3, Recv, `{"type":"welcome","ref":"a3","session_id":"S","resume_token":"A1"}`})},
		{"a call resent after a drop refused as a duplicate", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"c3","conversation_id":"root","name":"quick","arguments":{"acid":"c3","op":"fast"}}`},
			step{cAgent, Recv, `{"type":"error","seq":6,"ref":"t9","code":"bad_frame","message":"field call_id \"c3\" is already used in conversation root","retryable":false}`})},
		{"parallel waits", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t8","call_id":"c8","conversation_id":"root","name":"slow","arguments":{"acid":"c8","op":"slow"}}`},
			step{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_s","name":"slow","arguments":{"acid":"c8","op":"slow"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c8","kind":"background_placeholder","content":"internal: true"}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"w9","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c8"}}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t10","call_id":"w10","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c8"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":7,"call_id":"w10","kind":"error","content":"error: Tool call result is already being waited for"}`},
			step{cHost, Sent, `{"type":"tool_result","id":"r8","call_id":"call_s","output":"ok-c8-1"}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":8,"call_id":"w9","kind":"result","content":"ok-c8-1"}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t11","call_id":"w11","conversation_id":"root","name":"wait","arguments":{"tool_call_id":"c8"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":9,"call_id":"w11","kind":"error","content":"error: Tool call result already consumed"}`})},
		{"a cancelled background call", append(baseline(),
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t8","call_id":"c8","conversation_id":"root","name":"job","arguments":{"acid":"c8","op":"defer"}}`},
			step{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_s","name":"job","arguments":{"acid":"c8","op":"defer"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":6,"call_id":"c8","kind":"background_placeholder","content":"internal: true"}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t9","call_id":"x9","conversation_id":"root","name":"cancel","arguments":{"tool_call_id":"c8"}}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t10","call_id":"x10","conversation_id":"root","name":"cancel","arguments":{"tool_call_id":"c8"}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":7,"call_id":"x9","kind":"result","content":"Tool cancellation requested"}`},
			step{cHost, Recv, `{"type":"tool_cancel","seq":8,"call_id":"call_s","reason":"agent_request"}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":8,"call_id":"x10","kind":"error","content":"error: Tool call already canceled"}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t11","call_id":"w11","conversation_id":"root","name":"wait","arguments":{}}`},
			step{cAgent, Recv, `{"type":"agent.tool_result","seq":9,"call_id":"w11","kind":"error","content":"original_tool_call_id: c8\nerror: Tool call canceled"}`},
			step{cHost, Sent, `{"type":"job.cancel","id":"fh2","call_id":"call_00000000000000000000"}`},
			step{cHost, Recv, `{"type":"job.cancel_result","seq":9,"ref":"fh2","call_id":"","result":"unknown_call"}`})},
		{"an ended session discards its open jobs", append(baseline(),
			step{-1, Note, `{"note":"end_phase"}`},
			step{cAgent, Sent, `{"type":"agent.tool_call","id":"t8","call_id":"c8","conversation_id":"root","name":"slow","arguments":{"acid":"c8","op":"never"}}`},
			step{cHost, Recv, `{"type":"tool_call","seq":7,"call_id":"call_s","name":"slow","arguments":{"acid":"c8","op":"never"}}`},
			step{cAgent, Sent, `{"type":"session.end","id":"e1"}`},
			step{cHost, Recv, `{"type":"tool_cancel","seq":8,"call_id":"call_s","reason":"discard"}`},
			step{cHost, Recv, `{"type":"session.ended","seq":9,"reason":"ended"}`},
			step{cAgent, Recv, `{"type":"session.ended","seq":6,"reason":"ended"}`},
			step{cHost, Closed, `{"by":"server","code":1000,"reason":"session ended"}`},
			step{cAgent, Closed, `{"by":"server","code":1000,"reason":"session ended"}`})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if vs := Check([]History{history(c.steps)}); len(vs) > 0 {
				t.Fatalf("want no violations:\n%s", Summarize(vs, 5))
			}
		})
	}
}

func TestParseContent(t *testing.T) {
	c := parseContent("original_tool_call_id: c8\nerror: Tool call canceled\nduration_seconds: 7")
	if c.headers["original_tool_call_id"] != "c8" || c.headers["error"] != msgCanceled || c.body != "" {
		t.Errorf("headers only: %+v", c)
	}
	c = parseContent("duration_seconds: 7\n\nok-c1-1")
	if c.headers["duration_seconds"] != "7" || c.body != "ok-c1-1" {
		t.Errorf("headers and body: %+v", c)
	}
	c = parseContent("ok: not a header\nline 2")
	if len(c.headers) != 0 || c.body != "ok: not a header\nline 2" {
		t.Errorf("body only: %+v", c)
	}
}
