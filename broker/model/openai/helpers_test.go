package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/internal/g711"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait of the tests.
const waitFor = 5 * time.Second

// testKey is the API key of the test simulators.
const testKey = "sk-test-key"

// ev is one event the adapter reported.
type ev struct {
	kind      string // speech_started, speech_stopped, caller_transcript, started, audio, transcript, done, tool_call, error
	id        string
	text      string
	final     bool
	bytes     int
	chunk     []byte
	cancelled bool
	err       error
	callID    string
	name      string
	args      json.RawMessage
}

func (e ev) String() string {
	switch e.kind {
	case "audio":
		return fmt.Sprintf("audio(%s, %d bytes)", e.id, e.bytes)
	case "error":
		return fmt.Sprintf("error(%v)", e.err)
	case "tool_call":
		return fmt.Sprintf("tool_call(%s %s %s)", e.callID, e.name, e.args)
	case "done":
		return fmt.Sprintf("done(%s cancelled=%v err=%v)", e.id, e.cancelled, e.err)
	}
	return fmt.Sprintf("%s(%s %q final=%v)", e.kind, e.id, e.text, e.final)
}

// recorder is a model.Events that records what the adapter reports.
type recorder struct {
	mu      sync.Mutex
	evs     []ev
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(e ev) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) SpeechStarted() { r.add(ev{kind: "speech_started"}) }
func (r *recorder) SpeechStopped() { r.add(ev{kind: "speech_stopped"}) }
func (r *recorder) CallerTranscript(text string, final bool) {
	r.add(ev{kind: "caller_transcript", text: text, final: final})
}
func (r *recorder) ResponseStarted(id string) { r.add(ev{kind: "started", id: id}) }
func (r *recorder) Audio(id string, chunk []byte) {
	r.add(ev{kind: "audio", id: id, bytes: len(chunk), chunk: chunk})
}
func (r *recorder) Transcript(id, text string, final bool) {
	r.add(ev{kind: "transcript", id: id, text: text, final: final})
}
func (r *recorder) ResponseDone(id string, cancelled bool, err error) {
	r.add(ev{kind: "done", id: id, cancelled: cancelled, err: err})
}
func (r *recorder) ToolCall(callID, name string, args json.RawMessage) {
	r.add(ev{kind: "tool_call", callID: callID, name: name, args: args})
}
func (r *recorder) Error(err error) { r.add(ev{kind: "error", err: err}) }

// all returns the events so far.
func (r *recorder) all() []ev {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ev(nil), r.evs...)
}

// of returns the events of a kind (and response id, when id is set).
func (r *recorder) of(kind, id string) []ev {
	var out []ev
	for _, e := range r.all() {
		if e.kind == kind && (id == "" || e.id == id) {
			out = append(out, e)
		}
	}
	return out
}

// wait waits until an event satisfies ok and returns it.
func (r *recorder) wait(t testing.TB, what string, ok func(ev) bool) ev {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		r.mu.Lock()
		for _, e := range r.evs {
			if ok(e) {
				r.mu.Unlock()
				return e
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; events: %v", what, r.all())
		}
	}
}

// waitKind waits for an event of kind (for response id, when set).
func (r *recorder) waitKind(t testing.TB, kind, id string) ev {
	t.Helper()
	return r.wait(t, kind+" "+id, func(e ev) bool { return e.kind == kind && (id == "" || e.id == id) })
}

// waitDone waits for the end of a response.
func (r *recorder) waitDone(t testing.TB, id string) ev {
	t.Helper()
	return r.waitKind(t, "done", id)
}

// finalTranscript waits for a response's final transcript.
func (r *recorder) finalTranscript(t testing.TB, id string) string {
	t.Helper()
	return r.wait(t, "final transcript of "+id, func(e ev) bool { return e.kind == "transcript" && e.id == id && e.final }).text
}

// audioBytes is the audio reported for a response.
func (r *recorder) audioBytes(id string) int {
	n := 0
	for _, e := range r.of("audio", id) {
		n += e.bytes
	}
	return n
}

// errors are the Error events so far.
func (r *recorder) errors() []ev { return r.of("error", "") }

// harness is a simulator with one adapter connected to it.
type harness struct {
	srv  *sim.Server
	sess *sim.Session
	m    *Model
	rec  *recorder
}

// setup configures a test harness.
type setup struct {
	sim      sim.Options
	opts     Options
	cfg      model.Config
	clashing bool // the test provokes conversation_already_has_active_response on purpose
}

// start runs a simulator and dials it; at the end every event of the simulator is checked
// against the schema, and — unless the test provokes it — no response.create ever clashed.
func start(t *testing.T, s setup) *harness {
	t.Helper()
	if s.sim.APIKey == "" {
		s.sim.APIKey = testKey
	}
	srv := sim.New(s.sim)
	t.Cleanup(func() {
		srv.Close()
		checkEvents(t, srv.Events())
		if !s.clashing {
			if n := countErrors(srv, codeActiveResponse); n > 0 {
				t.Errorf("the adapter provoked %s %d times", codeActiveResponse, n)
			}
		}
	})
	o := s.opts
	o.URL = srv.URL()
	if o.APIKey == "" {
		o.APIKey = testKey
	}
	rec := newRecorder()
	m, err := Dial(context.Background(), o, s.cfg, rec)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sess, err := srv.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{srv: srv, sess: sess, m: m, rec: rec}
	eventually(t, "the session is configured", func() bool { return sess.Config().Updates >= 1 })
	return h
}

// countErrors counts the simulator's error events with code.
func countErrors(srv *sim.Server, code string) int {
	n := 0
	for _, e := range srv.Events() {
		if e.Dir != sim.ServerToClient || e.Type != "error" {
			continue
		}
		var x struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(e.Raw, &x) == nil && x.Error.Code == code {
			n++
		}
	}
	return n
}

// clientEvents are the events of type typ the adapter sent.
func clientEvents(srv *sim.Server, typ string) []json.RawMessage {
	var out []json.RawMessage
	for _, e := range srv.Events() {
		if e.Dir == sim.ClientToServer && e.Type == typ {
			out = append(out, e.Raw)
		}
	}
	return out
}

// eventually polls cond until it holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// barrier returns once the simulator has handled every event the adapter sent before it:
// a context item is added and waited for.
func (h *harness) barrier(t testing.TB) {
	t.Helper()
	text := fmt.Sprintf("barrier %d", time.Now().UnixNano())
	h.m.SetContext(model.ContextItem{ID: "barrier", Text: text})
	eventually(t, "the barrier item arrives", func() bool {
		for _, it := range h.sess.Conversation() {
			if it.Role == "system" && it.Text == text {
				return true
			}
		}
		return false
	})
}

// response is the simulator's record of a response.
func (h *harness) response(t testing.TB, id string) sim.Response {
	t.Helper()
	for _, r := range h.sess.Responses() {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("the simulator has no response %s", id)
	return sim.Response{}
}

// speak sends a burst of caller speech: ms of tone, then silence long enough to end the turn,
// in 20 ms chunks as the broker does.
func (h *harness) speak(ms int) {
	audio := append(g711.Tone(300, ms, 0.5), g711.Silence(700)...)
	for len(audio) > 0 {
		n := min(len(audio), g711.SamplesPer20ms)
		h.m.CallerAudio(audio[:n])
		audio = audio[n:]
	}
}

// userItems are the texts of the user messages of the conversation.
func (h *harness) userItems() []string {
	var out []string
	for _, it := range h.sess.Conversation() {
		if it.Type == "message" && it.Role == "user" {
			out = append(out, it.Text)
		}
	}
	return out
}

// words is a sentence of n words.
func words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("word%d", i+1)
	}
	return strings.Join(w, " ")
}
