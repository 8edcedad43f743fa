package voice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/permissions"
)

// The harness: a Voice on a fake clock that moves only when a test says so, a fake Env that
// records what the voice side did, and a fake model that records its commands and speaks when
// the test makes it. Everything runs on the test's goroutine, as on a session's event loop.

// fakeClock is a clock that moves only by advance: timers fire in order of their time (then of
// their arming), each at its time.
type fakeClock struct {
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	every   time.Duration
	seq     int
	fn      func()
	stopped bool
}

func (c *fakeClock) add(d, every time.Duration, fn func()) func() {
	c.seq++
	t := &fakeTimer{at: c.now.Add(d), every: every, seq: c.seq, fn: fn}
	c.timers = append(c.timers, t)
	return func() { t.stopped = true }
}

// advance moves the clock d forward, firing every timer due on the way.
func (c *fakeClock) advance(d time.Duration) {
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.stopped {
				continue
			}
			live = append(live, t)
			if !t.at.After(end) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			c.now = end
			return
		}
		c.now = next.at
		if next.every > 0 {
			next.at = next.at.Add(next.every)
		} else {
			next.stopped = true
		}
		next.fn()
	}
}

// sent is a frame the voice side sent to a slot ("caller" for the caller).
type sent struct {
	slot string
	f    frames.Frame
}

// record is a timeline entry the voice side recorded.
type record struct {
	callID, kind string
	detail       map[string]any
}

// fakeEnv is the voice side's Env.
type fakeEnv struct {
	t       *testing.T
	clock   *fakeClock
	frames  []sent
	audio   int // frames of agent audio played to the caller
	caller  bool
	records []record
	delays  []time.Duration

	calls      int
	startErr   string
	awaitPerm  bool
	started    []string // broker call ids
	dispatched []string
	cancelled  []string
	answers    []string
	askedAt    []time.Time
	decisions  []jobs.Decision
	verifier   permissions.Verifier
}

func (e *fakeEnv) Now() time.Time { return e.clock.now }
func (e *fakeEnv) After(d time.Duration, fn func()) func() {
	return e.clock.add(d, 0, fn)
}
func (e *fakeEnv) Every(d time.Duration, fn func()) func() { return e.clock.add(d, d, fn) }
func (e *fakeEnv) SendToSlot(slot string, f frames.Frame) {
	e.frames = append(e.frames, sent{slot, f})
}
func (e *fakeEnv) ToCaller(f frames.Frame) { e.frames = append(e.frames, sent{"caller", f}) }
func (e *fakeEnv) SendAudio([]byte, time.Time) bool {
	if e.caller {
		e.audio++
	}
	return e.caller
}
func (e *fakeEnv) Record(callID, _, kind string, detail map[string]any) {
	e.records = append(e.records, record{callID, kind, detail})
}
func (e *fakeEnv) StartCall(modelCallID, name string, args json.RawMessage) (StartedCall, string) {
	if e.startErr != "" {
		return StartedCall{}, e.startErr
	}
	e.calls++
	id := fmt.Sprintf("call_%d", e.calls)
	e.started = append(e.started, id)
	st := jobs.Pending
	if e.awaitPerm {
		st = jobs.AwaitingPermission
	} else {
		e.dispatched = append(e.dispatched, id)
	}
	return StartedCall{CallID: id, Slot: "host", State: st, Notify: true}, ""
}
func (e *fakeEnv) Dispatch(j *jobs.Job) { e.dispatched = append(e.dispatched, j.CallID) }
func (e *fakeEnv) CancelJob(ref string) frames.CancelResult {
	e.cancelled = append(e.cancelled, ref)
	return frames.CancelResultCancelled
}
func (e *fakeEnv) AnswerInteraction(callID, id, option, _ string) (frames.InteractionUpdateResult, error) {
	e.answers = append(e.answers, callID+"/"+id+"="+option)
	return frames.UpdateApplied, nil
}
func (e *fakeEnv) PermissionAsked(string) error {
	e.askedAt = append(e.askedAt, e.clock.now)
	return nil
}
func (e *fakeEnv) Decide(_ string, d jobs.Decision) error {
	e.decisions = append(e.decisions, d)
	return nil
}
func (e *fakeEnv) Verify(a permissions.Action, reply string) (permissions.Judgement, error) {
	return e.verifier.Verify(context.Background(), a, reply)
}
func (e *fakeEnv) NarrationStarted(d time.Duration) { e.delays = append(e.delays, d) }
func (e *fakeEnv) BargedIn(time.Duration)           {}
func (e *fakeEnv) CutAudio()                        {}

// narrations lists the tool_job_narration frames sent, as "kind state attempt".
func (e *fakeEnv) narrations() []string {
	var out []string
	for _, s := range e.frames {
		if f, ok := s.f.(*frames.ToolJobNarration); ok {
			out = append(out, fmt.Sprintf("%s %s %d", f.Kind, f.State, f.Attempt))
		}
	}
	return out
}

// deliveryFailed returns the tool_job_delivery_failed frames sent.
func (e *fakeEnv) deliveryFailed() []*frames.ToolJobDeliveryFailed {
	var out []*frames.ToolJobDeliveryFailed
	for _, s := range e.frames {
		if f, ok := s.f.(*frames.ToolJobDeliveryFailed); ok {
			out = append(out, f)
		}
	}
	return out
}

// fakeModel is the session's model: it records the commands; a test makes it speak.
type fakeModel struct {
	requests    []model.Request
	ids         []string
	respondErr  error
	cancels     []string
	results     []string // "callID: output"
	context     map[string]string
	turns       []string
	autoRespond []bool
	tools       []string
	audio       int // bytes of caller audio
	closed      bool
}

func (m *fakeModel) CallerAudio(chunk []byte) { m.audio += len(chunk) }
func (m *fakeModel) CallerTurn(text string, clarify []string) {
	m.turns = append(m.turns, text+" "+fmt.Sprint(clarify))
}
func (m *fakeModel) SetContext(it model.ContextItem) {
	if m.context == nil {
		m.context = map[string]string{}
	}
	m.context[it.ID] = it.Text
}
func (m *fakeModel) Respond(req model.Request) (string, error) {
	if m.respondErr != nil {
		return "", m.respondErr
	}
	m.requests = append(m.requests, req)
	id := fmt.Sprintf("resp_%d", len(m.requests))
	m.ids = append(m.ids, id)
	return id, nil
}
func (m *fakeModel) Cancel(id string) { m.cancels = append(m.cancels, id) }
func (m *fakeModel) ToolResult(callID, output string, isError, respond bool) {
	m.results = append(m.results, callID+": "+output)
}
func (m *fakeModel) SetTools(tools []model.Tool) {
	m.tools = nil
	for _, t := range tools {
		m.tools = append(m.tools, t.Name)
	}
	sort.Strings(m.tools)
}
func (m *fakeModel) SetAutoRespond(on bool) { m.autoRespond = append(m.autoRespond, on) }
func (m *fakeModel) Close() error           { m.closed = true; return nil }

// last is the id of the latest requested response.
func (m *fakeModel) last() string { return m.ids[len(m.ids)-1] }

// rig is one voice side under test.
type rig struct {
	t   *testing.T
	env *fakeEnv
	m   *fakeModel
	v   *Voice
}

var epoch = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func newRig(t *testing.T) *rig {
	t.Helper()
	env := &fakeEnv{t: t, clock: &fakeClock{now: epoch}, caller: true, verifier: permissions.NewRules()}
	m := &fakeModel{}
	return &rig{t: t, env: env, m: m, v: New(env, m, Options{})}
}

// attached is a rig with its caller attached.
func attached(t *testing.T) *rig {
	r := newRig(t)
	r.v.CallerAttached()
	return r
}

func (r *rig) advance(d time.Duration) { r.env.clock.advance(d) }

// loud is ms of audible agent (or caller) audio; quiet is silence.
func loud(ms int) []byte  { return g711.Tone(440, ms, 0.5) }
func quiet(ms int) []byte { return g711.Silence(ms) }

// speak has the model voice response id with audio, then end it, and plays it out: the clock
// stops the moment its last frame was played (when the floor frees, the next item queued is
// requested at once).
func (r *rig) speak(id string, audio []byte, text string) {
	r.t.Helper()
	r.v.ResponseStarted(id)
	r.v.Audio(id, audio)
	if text != "" {
		r.v.Transcript(id, text, true)
	}
	r.v.ResponseDone(id, false, nil)
	for range len(audio)/160 + 2 {
		if r.v.playingResponse(id) == nil {
			return
		}
		r.advance(FrameInterval)
	}
	r.t.Fatalf("response %s still plays after its audio", id)
}

// deferCall makes a voice tool call and defers it with handle h; it returns the broker call id.
func (r *rig) deferCall(modelID, name, h string) (string, *jobs.Job) {
	r.v.ToolCall(modelID, name, json.RawMessage(`{}`))
	id := r.env.started[len(r.env.started)-1]
	j := &jobs.Job{CallID: id, Slot: "host", Tool: jobs.Tool{Name: name, NotifyOnComplete: true}, State: jobs.Deferred, Handle: h}
	r.v.JobChanged(jobs.Change{Event: jobs.EventDeferred, From: jobs.Pending, Job: j})
	return id, j
}

// end ends job j in state st, with output.
func (r *rig) end(j *jobs.Job, st jobs.State, output string) {
	done := *j
	done.State = st
	if output != "" {
		done.Output = json.RawMessage(output)
	}
	ev := map[jobs.State]jobs.Event{jobs.Completed: jobs.EventCompleted, jobs.Failed: jobs.EventFailed,
		jobs.Cancelled: jobs.EventCancelled, jobs.TimedOut: jobs.EventTimedOut, jobs.Declined: jobs.EventDeclined}[st]
	r.v.JobChanged(jobs.Change{Event: ev, From: j.State, Job: &done})
}

// wantNarrations checks the tool_job_narration frames sent so far.
func (r *rig) wantNarrations(want ...string) {
	r.t.Helper()
	got := r.env.narrations()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		r.t.Fatalf("narrations:\n got %q\nwant %q", got, want)
	}
}

// errTest is an error of a fake part.
var errTest = errors.New("test failure")

// lastKind is the kind of the latest requested response.
func (r *rig) lastKind() model.Kind { return r.m.requests[len(r.m.requests)-1].Kind }

// quietFor checks that the model is asked for nothing more while the clock moves d.
func (r *rig) quietFor(d time.Duration, why string) {
	r.t.Helper()
	n := len(r.m.requests)
	r.advance(d)
	if len(r.m.requests) != n {
		r.t.Fatalf("%s: the model was asked for %+v", why, r.m.requests[n:])
	}
}

// approve reports the verdict's job approved, as the engine does after an approve decision.
func (r *rig) approve(callID string) {
	r.v.JobChanged(jobs.Change{Event: jobs.EventApproved, From: jobs.AwaitingPermission,
		Job: &jobs.Job{CallID: callID, Slot: "host", Tool: jobs.Tool{Name: "transfer"}, State: jobs.Pending}})
}
