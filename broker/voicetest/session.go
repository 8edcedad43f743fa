package voicetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// hostTools are the tools every session's host declares (SPEC 4): a background job, an instant
// lookup, and a confirmed action that needs spoken permission.
var hostTools = []map[string]any{
	{"name": "slow", "description": "Runs a slow job in the background.", "parameters": map[string]any{"type": "object"},
		"deferred": true, "expected_duration": "minutes"},
	{"name": "lookup", "description": "Looks something up at once.", "parameters": map[string]any{"type": "object"}},
	{"name": "pay", "description": "Pays an amount.", "requires_permission": true, "expected_duration": "seconds",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"amount": map[string]any{"type": "number"}}}},
	{"name": "book", "description": "Books a trip in the background, once the caller approved it.", "parameters": map[string]any{"type": "object"},
		"requires_permission": true, "deferred": true, "expected_duration": "minutes"},
	{"name": "fire", "description": "A background job whose completion is not voiced.", "parameters": map[string]any{"type": "object"},
		"deferred": true, "notify_on_complete": false},
	{"name": "brief", "description": "A background job with a short clock.", "parameters": map[string]any{"type": "object"},
		"deferred": true, "deferred_timeout": "1s"},
}

// counter mints names unique in the test binary (handles are unique per tenant for ever).
var counter atomic.Int64

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, counter.Add(1))
}

// voiceSession is one voice session of a scenario: a host connection that declares hostTools
// and a caller connection, on the suite's broker.
type voiceSession struct {
	t        testing.TB
	b        *brokertest.Broker
	scripted bool
	sid      string
	join     string
	host     *conn
	caller   *conn
	callerW  frame // the caller's welcome
	hostW    frame // the host's welcome
	mic      *mic
	clock    *brokertest.Clock // the broker's clock: the scenario moves it
}

// job is a deferred job of the session.
type job struct {
	callID string
	handle string
	label  string
}

// newVoiceSession creates a session with its host (which creates it) and its caller.
func newVoiceSession(t testing.TB, b *brokertest.Broker, scripted bool) *voiceSession {
	vs := &voiceSession{t: t, b: b, scripted: scripted}
	vs.clock, _ = b.Node.Config().Clock.(*brokertest.Clock)
	vs.host = dial(t, b.WSURL, "host")
	w := vs.host.hello(map[string]any{"role": "host", "api_key": brokertest.KeyA, "tools": hostTools, "id": "h1"})
	vs.hostW = w
	vs.sid, vs.join = w.str("session_id"), w.str("join_token")
	if vs.sid == "" || vs.join == "" {
		t.Fatalf("host welcome without session_id or join_token: %s", w)
	}
	vs.host.expect(typ("tools.declared", "ref", "h1"))
	vs.caller = dial(t, b.WSURL, "caller")
	vs.callerW = vs.caller.hello(map[string]any{"role": "caller", "session_id": vs.sid, "join_token": vs.join})
	t.Cleanup(func() { checkLifecycles(t, vs.host) })
	t.Cleanup(vs.finish)
	return vs
}

// finish ends the session at the end of its scenario, unless the scenario did (SPEC 3.6): every
// connection gets session.ended and is closed.
func (vs *voiceSession) finish() {
	if vs.host.sessionEnded() {
		return
	}
	if err := vs.host.trySend(map[string]any{"type": "session.end"}); err != nil {
		return
	}
	if _, err := vs.host.waitFrom(0, waitTimeout, typ("session.ended")); err != nil {
		vs.t.Errorf("ending the session: %v", err)
	}
}

// advance moves the broker's clock forward by d (the scenario's broker has a clock of its
// own) and waits until the session handled what that made due (settled).
func (vs *voiceSession) advance(d time.Duration) {
	vs.t.Helper()
	if vs.clock == nil {
		vs.t.Fatal("voicetest: the scenario's broker has no brokertest.Clock")
	}
	vs.clock.Advance(d)
	vs.settled()
}

// startMic starts the caller's microphone (silent).
func (vs *voiceSession) startMic() *mic {
	if vs.mic == nil {
		vs.mic = startMic(vs.t, vs.caller)
	}
	return vs.mic
}

// talk makes the caller speak (a loud tone) and waits until the broker's VAD has surely heard
// it start: 10 loud frames sent (it needs 3), and handled (settled: the caller's barrier goes
// after them on the same connection, so no time is guessed even on a loaded machine).
func (vs *voiceSession) talk() {
	m := vs.startMic()
	m.setLoud(true)
	m.waitSent(10)
	vs.settled()
}

// quietFramesToStop is more quiet frames than the broker's VAD waits for to hear speech stop
// (300 ms).
const quietFramesToStop = 20

// stopTalking makes the caller fall silent and waits until the broker's VAD has surely heard the
// speech stop: more quiet frames sent than it needs, and handled (settled). The floor's grace
// runs from then, on the broker's clock. It returns when the last loud frame was due.
func (vs *voiceSession) stopTalking() time.Time {
	last := vs.mic.silence()
	vs.mic.waitSent(quietFramesToStop)
	vs.settled()
	return last
}

// say sends a caller turn as text (SPEC 17) and waits for its echo; it returns the caller's
// index before the turn.
func (vs *voiceSession) say(text string) int {
	vs.t.Helper()
	from, _ := vs.sayEcho(text)
	return from
}

// sayEcho is say, also returning the index of the turn's echo. The broker sends the echo as it
// takes the turn, before the voice side handles it (host.go callerText), so what comes after
// the echo the broker made after it had the turn; what comes between from and the echo it made
// before (audio of a response playing while the turn was on its way, say).
func (vs *voiceSession) sayEcho(text string) (from, echo int) {
	vs.t.Helper()
	from = vs.caller.mark()
	vs.caller.send(map[string]any{"type": "caller.text", "text": text})
	e := vs.caller.expectAfter(from, func(f frame) bool {
		return f.Type == "transcript" && f.str("role") == "caller" && f.str("text") == text
	})
	if final, ok := e.F.boolean("final"); !ok || !final {
		vs.t.Errorf("caller.text echo is not final: %s", e.F)
	}
	return from, e.Idx
}

// agentTranscript matches a final agent transcript; with the scripted model, one saying exactly
// want (when want is not empty).
func (vs *voiceSession) agentTranscript(want string) match {
	return func(f frame) bool {
		if f.Type != "transcript" || f.str("role") != "agent" {
			return false
		}
		if final, _ := f.boolean("final"); !final {
			return false
		}
		return !vs.scripted || want == "" || f.str("text") == want
	}
}

// heard waits for the agent to say want (any final agent transcript with another model) on the
// caller's connection, from index from on.
func (vs *voiceSession) heard(from int, want string) event {
	vs.t.Helper()
	return vs.caller.expectAfter(from, vs.agentTranscript(want))
}

// scriptedFrames is how many 20 ms frames of audio the scripted model speaks text in (SPEC 19:
// about 60 ms a word, and at least 300 ms).
func scriptedFrames(text string) int {
	return max(len(strings.Fields(text))*scripted.MSPerWord, scripted.MinSpeechMS) / 20
}

// played waits until the response whose final transcript is tr was played out to the caller:
// with the scripted model until all of its frames arrived (an order, not a time: a stalled
// machine cannot fool it); with another model until no agent audio came for 700 ms.
func (vs *voiceSession) played(tr event) {
	vs.t.Helper()
	if !vs.scripted {
		vs.caller.quiet(700 * time.Millisecond)
		return
	}
	n := scriptedFrames(tr.F.str("text"))
	deadline := time.Now().Add(waitTimeout)
	for vs.caller.audioFrames(tr.Idx, -1) < n {
		if time.Now().After(deadline) {
			vs.t.Fatalf("caller: %d audio frames of %q never arrived:%s", n, tr.F.str("text"), vs.caller.dump(tr.Idx))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hear waits for the agent to say want (see heard) and for that speech to end.
func (vs *voiceSession) hear(from int, want string) event {
	vs.t.Helper()
	e := vs.heard(from, want)
	vs.played(e)
	return e
}

// transcriptOf waits for the caller's final agent transcript of response id.
func (vs *voiceSession) transcriptOf(id string) event {
	vs.t.Helper()
	return vs.caller.expect(func(f frame) bool {
		final, _ := f.boolean("final")
		return f.Type == "transcript" && f.str("role") == "agent" && f.str("response_id") == id && final
	})
}

// transcriptsFrom lists the final agent transcripts received from index from on.
func (vs *voiceSession) transcriptsFrom(from int) []event {
	var out []event
	for _, e := range vs.caller.events() {
		if e.Idx >= from && !e.isAudio() && e.F.Type == "transcript" && e.F.str("role") == "agent" {
			if final, _ := e.F.boolean("final"); final {
				out = append(out, e)
			}
		}
	}
	return out
}

// audioOf counts the agent audio frames of response id: from its first transcript to the next
// agent transcript of another response (or to now).
func (vs *voiceSession) audioOf(id string) int {
	start, end := -1, -1
	for _, e := range vs.caller.events() {
		if e.isAudio() || e.F.Type != "transcript" || e.F.str("role") != "agent" {
			continue
		}
		if start < 0 && e.F.str("response_id") == id {
			start = e.Idx
		} else if start >= 0 && e.F.str("response_id") != id {
			end = e.Idx
			break
		}
	}
	if start < 0 {
		return 0
	}
	return vs.caller.audioFrames(start, end)
}

// callTool makes the caller ask for a call of tool (the scripted grammar `call TOOL {json}`)
// and returns the host's tool_call.
func (vs *voiceSession) callTool(tool, args string) event {
	vs.t.Helper()
	from := vs.host.mark()
	vs.say("call " + tool + " " + args)
	return vs.host.expectAfter(from, func(f frame) bool {
		return f.Type == "tool_call" && f.str("name") == tool && compact(f.M["arguments"]) == args
	})
}

// defer defers a pending call under a fresh handle and returns the job.
func (vs *voiceSession) deferCall(callID, label string) job {
	vs.t.Helper()
	j := job{callID: callID, handle: unique("h-" + label), label: label}
	id := unique("d")
	vs.host.send(map[string]any{"type": "tool_deferred", "id": id, "call_id": callID, "handle": j.handle, "status_label": label})
	ack := vs.host.expect(typ("tool_deferred_ack", "call_id", callID))
	if a, _ := ack.F.boolean("accepted"); !a || ack.F.str("handle") != j.handle {
		vs.t.Fatalf("defer of %s not accepted: %s", callID, ack.F)
	}
	return j
}

// startJob runs a background job up to its spoken hand-off (SPEC 6, 8): the caller asks for
// `slow`, the host defers it with status_label label, the agent says
// `Started LABEL in the background.`, and the audio stops.
func (vs *voiceSession) startJob(label string) job { return vs.startJobOf("slow", label) }

// startJobOf is startJob with another deferred tool.
func (vs *voiceSession) startJobOf(tool, label string) job {
	vs.t.Helper()
	from := vs.caller.mark()
	tc := vs.callTool(tool, fmt.Sprintf(`{"job":%q}`, label))
	if d, _ := tc.F.boolean("deferred"); !d {
		vs.t.Fatalf("tool_call of a deferred tool says deferred false: %s", tc.F)
	}
	j := vs.deferCall(tc.F.str("call_id"), label)
	vs.hear(from, "Started "+label+" in the background.")
	return j
}

// partial sends a tool_partial_result for j.
func (vs *voiceSession) partial(j job, segment any, reply bool, interaction map[string]any) {
	vs.t.Helper()
	f := map[string]any{"type": "tool_partial_result", "handle": j.handle, "segment": segment, "reply": reply}
	if interaction != nil {
		f["interaction"] = interaction
	}
	vs.host.send(f)
}

// result completes j with output.
func (vs *voiceSession) result(j job, output any) {
	vs.t.Helper()
	vs.host.send(map[string]any{"type": "tool_result", "handle": j.handle, "output": output})
}

// fail fails j with message.
func (vs *voiceSession) fail(j job, message string) {
	vs.t.Helper()
	vs.host.send(map[string]any{"type": "tool_result", "handle": j.handle, "error": message})
}

// inject sends an inject frame and returns its id.
func (vs *voiceSession) inject(text string, speak *bool) string {
	vs.t.Helper()
	id := unique("inj")
	f := map[string]any{"type": "inject", "id": id, "text": text}
	if speak != nil {
		f["speak"] = *speak
	}
	vs.host.send(f)
	return id
}

// end ends the session from the host (SPEC 3.6).
func (vs *voiceSession) end() {
	vs.t.Helper()
	vs.host.send(map[string]any{"type": "session.end"})
}

// advanceUntil moves the broker's clock by step (see advance) until done holds, at most 20
// times.
func (vs *voiceSession) advanceUntil(step time.Duration, done func() bool) {
	vs.t.Helper()
	for range 20 {
		if done() {
			return
		}
		vs.advance(step)
	}
	if !done() {
		vs.t.Fatalf("voicetest: still not there after 20 steps of %v of the clock", step)
	}
}

// barriers numbers the ids of settled's frames.
var barriers atomic.Int64

// settled waits until the session has handled every event queued before now, and the host and
// the caller have received every frame it sent before: on each connection a job.cancel of a
// call that does not exist is answered in order, after them (a barrier, no sleep). The session
// handles its events one at a time, in order, and the caller's audio goes through the same
// queue as its frames; the scripted model reports a response's transcript as it is asked for
// it, so what the broker asked of it is seen too (its audio follows in real time).
func (vs *voiceSession) settled() {
	vs.t.Helper()
	for _, c := range []*conn{vs.host, vs.caller} {
		if c == nil || c.sessionEnded() || c.IsClosed() {
			continue
		}
		id := fmt.Sprintf("barrier-%d", barriers.Add(1))
		from := c.mark()
		c.send(map[string]any{"type": "job.cancel", "id": id, "call_id": "call_zzzzzzzzzzzzzzzzzzzz"})
		c.expectAfter(from, typ("job.cancel_result", "ref", id))
	}
	if !vs.scripted {
		// Another model is a peer over the network: what it says in answer to the broker is not
		// ordered by the barrier, so give it the time a model takes to answer.
		time.Sleep(otherModelAnswers)
	}
}

// otherModelAnswers is how long a model other than the scripted one is given to answer what
// the broker asked of it before a scenario checks that nothing was said.
const otherModelAnswers = 500 * time.Millisecond

// narr matches the tool_job_narration of a job's kind in state (interaction: any id).
func narr(callID, kind, state string) match {
	return typ("tool_job_narration", "call_id", callID, "kind", kind, "state", state)
}

// narrations lists the tool_job_narration frames of a job's kind the host received, as
// "state/attempt".
func (vs *voiceSession) narrations(callID, kind string) []string {
	var out []string
	for _, e := range vs.host.events() {
		if !e.isAudio() && e.F.Type == "tool_job_narration" && e.F.str("call_id") == callID && e.F.str("kind") == kind {
			out = append(out, fmt.Sprintf("%s/%d", e.F.str("state"), e.F.num("attempt")))
		}
	}
	return out
}

// expectNarrations waits until the host received exactly want (states "state/attempt") for
// the job's kind, and that nothing more follows within settle of the broker's clock.
func (vs *voiceSession) expectNarrations(callID, kind string, settle time.Duration, want ...string) {
	vs.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		got := vs.narrations(callID, kind)
		if len(got) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			vs.t.Fatalf("%s narration of %s: got %v, want %v", kind, callID, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if settle > 0 {
		vs.advance(settle)
	}
	if got := vs.narrations(callID, kind); strings.Join(got, " ") != strings.Join(want, " ") {
		vs.t.Fatalf("%s narration of %s: got %v, want %v", kind, callID, got, want)
	}
}

// expectDeliveredOnRetry waits until the kind narration of callID is delivered and checks how:
// interrupted on its first attempt, delivered on the second.
func (vs *voiceSession) expectDeliveredOnRetry(callID, kind string) {
	vs.t.Helper()
	vs.host.expect(narr(callID, kind, "delivered"))
	vs.expectNarrations(callID, kind, 300*time.Millisecond,
		"queued/1", "speaking/1", "interrupted/1", "queued/2", "speaking/2", "delivered/2")
}

// audioStopped waits until the caller has had no agent audio for 300 ms and fails the test if
// any arrived more than a second after at, when the agent's speech was stopped (spec names the
// rule, after what stopped it).
func (vs *voiceSession) audioStopped(at time.Time, spec, after string) {
	vs.t.Helper()
	vs.caller.quiet(300 * time.Millisecond)
	for _, e := range vs.caller.events() {
		if e.isAudio() && e.At.After(at.Add(time.Second)) {
			vs.t.Errorf("%s: agent audio %v after %s", spec, e.At.Sub(at).Round(time.Millisecond), after)
			break
		}
	}
}

// ---------------------------------------------------------------------------------------------
// timeline

// entry is one timeline entry (SPEC 16).
type entry struct {
	AtMS   int64          `json:"at_ms"`
	Kind   string         `json:"kind"`
	CallID string         `json:"call_id"`
	Handle string         `json:"handle"`
	Detail map[string]any `json:"detail"`
}

func (e entry) String() string {
	d, _ := json.Marshal(e.Detail)
	return fmt.Sprintf("%s call=%s %s", e.Kind, e.CallID, d)
}

// callID is the entry's call id, top level or in its detail.
func (e entry) callID() string {
	if e.CallID != "" {
		return e.CallID
	}
	s, _ := e.Detail["call_id"].(string)
	return s
}

func (e entry) str(k string) string { s, _ := e.Detail[k].(string); return s }

func (e entry) num(k string) float64 { n, _ := e.Detail[k].(float64); return n }

// timeline reads the session's timeline.
func (vs *voiceSession) timeline() []entry {
	vs.t.Helper()
	status, _, body := wiretest.HTTPDo(vs.t, "GET", vs.b.URL+"/v1/sessions/"+vs.sid+"/timeline", brokertest.KeyA, "", "")
	if status != http.StatusOK {
		vs.t.Fatalf("timeline: status %d: %s", status, body)
	}
	var doc struct {
		Entries []entry `json:"entries"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		vs.t.Fatalf("timeline: %v: %.300s", err, body)
	}
	return doc.Entries
}

// expectEntry polls the timeline until an entry of kind satisfies ok, and returns it.
func (vs *voiceSession) expectEntry(what, kind string, ok func(entry) bool) entry {
	vs.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		es := vs.timeline()
		for _, e := range es {
			if e.Kind == kind && ok(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, e := range es {
				b.WriteString("\n  " + e.String())
			}
			vs.t.Fatalf("timeline: no %s entry (%s):%s", kind, what, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------------------------
// checks every scenario gets

// checkLifecycles checks every tool_job_narration the host received against SPEC 8: per
// narrated item, `queued → speaking → delivered | interrupted | failed`, `queued → skipped |
// stopped` or `speaking → stopped`, a retry only as a new `queued` with the next attempt,
// response_id from speaking on (the same one to the end of the attempt) and never before, and
// handle on every job frame once the job is deferred.
func checkLifecycles(t testing.TB, host *conn) {
	type item struct {
		state    string
		attempt  int64
		response string
	}
	items := map[string]*item{}
	handles := map[string]string{}
	for _, e := range host.events() {
		if e.isAudio() {
			continue
		}
		f := e.F
		switch f.Type {
		case "tool_deferred_ack":
			if a, _ := f.boolean("accepted"); a {
				handles[f.str("call_id")] = f.str("handle")
			}
			continue
		case "tool_job_narration", "tool_job_delivery_failed", "tool_cancel", "tool_interaction_answer", "tool_interaction_update_ack", "job.cancel_result":
		default:
			continue
		}
		if h, ok := handles[f.str("call_id")]; ok && f.str("handle") != h {
			t.Errorf("SPEC 8: a frame about deferred job %s without its handle %q: %s", f.str("call_id"), h, f)
		}
		if f.Type != "tool_job_narration" {
			continue
		}
		key := f.str("call_id") + "/" + f.str("kind") + "/" + f.str("interaction_id")
		it := items[key]
		if it == nil {
			it = &item{state: "none"}
			items[key] = it
		}
		state, attempt, rid := f.str("state"), f.num("attempt"), f.str("response_id")
		bad := func(why string) {
			t.Errorf("SPEC 8 lifecycle of %s: %s (after %s/%d): %s", key, why, it.state, it.attempt, f)
		}
		if attempt < 1 {
			bad("attempt must be an integer ≥ 1")
		}
		switch state {
		case "queued":
			if it.state == "queued" || it.state == "speaking" {
				bad("queued again before the attempt ended")
			}
			if rid != "" {
				bad("response_id before speaking")
			}
			if it.state == "none" && attempt != 1 {
				bad("the first attempt must be 1")
			}
			if it.state != "none" && it.state != "skipped" && it.state != "stopped" && attempt != it.attempt+1 && attempt != 1 {
				bad("a retry must carry the next attempt")
			}
		case "speaking":
			if it.state != "queued" {
				bad("speaking without queued")
			} else if attempt != it.attempt {
				bad("speaking with another attempt than queued")
			}
			if rid == "" {
				bad("speaking without response_id")
			}
		case "delivered", "interrupted", "failed":
			if it.state != "speaking" {
				bad(state + " without speaking")
			} else if attempt != it.attempt || rid != it.response {
				bad(state + " of another attempt or response than speaking")
			}
		case "skipped":
			if it.state != "queued" {
				bad("skipped without queued")
			}
			if rid != "" {
				bad("response_id on a skipped item")
			}
		case "stopped":
			if it.state != "queued" && it.state != "speaking" {
				bad("stopped without queued or speaking")
			}
			if it.state == "speaking" && rid != it.response {
				bad("stopped while speaking without the response_id")
			}
			if it.state == "queued" && rid != "" {
				bad("stopped before speaking with a response_id")
			}
		default:
			bad("unknown state")
		}
		it.state, it.attempt = state, attempt
		if state == "speaking" {
			it.response = rid
		}
	}
}

// compact renders a decoded JSON value as compact JSON.
func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// words returns n distinct words.
func words(prefix string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return strings.Join(w, " ")
}
