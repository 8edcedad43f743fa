package scripted_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/narration"
)

// Every test ends with no goroutine left: no speech being made, no espeak-ng being waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a model.Events that writes down what the model reports, one line per event.
type recorder struct {
	mu      sync.Mutex
	lines   []string
	audio   map[string][]byte   // by response id
	events  map[string][]string // by response id: started, says, audio, done
	ended   []string            // response ids in the order they were done
	started int
	done    int
	changed chan struct{} // closed (and replaced) on every event
}

func (r *recorder) add(id, event, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
	if id != "" {
		if r.events == nil {
			r.events = map[string][]string{}
		}
		r.events[id] = append(r.events[id], event)
	}
	switch event {
	case "started":
		r.started++
	case "done":
		r.done++
		r.ended = append(r.ended, id)
	}
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

func (r *recorder) SpeechStarted()                       { r.add("", "", "speech started") }
func (r *recorder) SpeechStopped()                       { r.add("", "", "speech stopped") }
func (r *recorder) CallerTranscript(text string, _ bool) { r.add("", "", "caller %s", text) }
func (r *recorder) ResponseStarted(id string)            { r.add(id, "started", "started") }
func (r *recorder) Error(err error)                      { r.add("", "", "error %v", err) }

func (r *recorder) Audio(id string, chunk []byte) {
	r.mu.Lock()
	if r.audio == nil {
		r.audio = map[string][]byte{}
	}
	r.audio[id] = append(r.audio[id], chunk...)
	r.mu.Unlock()
	r.add(id, "audio", "audio")
}

func (r *recorder) Transcript(id, text string, final bool) {
	if final {
		r.add(id, "says", "says %s", text)
	}
}

func (r *recorder) ResponseDone(id string, cancelled bool, err error) {
	r.add(id, "done", "done cancelled=%v err=%v", cancelled, err)
}

func (r *recorder) ToolCall(_, name string, args json.RawMessage) {
	r.add("", "", "call %s %s", name, args)
}

// hang bounds every wait for an event: only a broken model takes that long.
const hang = time.Minute

// until waits until cond holds of the recorder (checked under its lock) after an event.
func (r *recorder) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(hang)
	for {
		r.mu.Lock()
		if cond() {
			r.mu.Unlock()
			return
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s within %v: %s", what, hang, r.take())
		}
	}
}

// settle waits until every response that started is done (its speech is made off the
// caller's goroutine).
func (r *recorder) settle(t *testing.T) {
	t.Helper()
	r.until(t, "end of every response", func() bool { return r.done == r.started })
}

// take returns the lines recorded since the last take.
func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := strings.Join(r.lines, " | ")
	r.lines = nil
	return out
}

// audioOf is the audio of response id.
func (r *recorder) audioOf(id string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.audio[id]
}

// start starts a scripted model as the broker does: speaking with espeak-ng when it is
// installed.
func start(t *testing.T) (*scripted.Model, *recorder) {
	t.Helper()
	rec := &recorder{}
	m, err := scripted.New(context.Background(), model.Config{Kind: "scripted"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m.(*scripted.Model), rec
}

// missing is a speech program that is not installed anywhere.
const missing = "espeak-ng-not-installed-here"

// startWith starts a scripted model that speaks with voice: "espeak-ng" (which must be
// installed), "tone" (the fallback: espeak-ng is not found) or "failing" (a program that exits
// with an error, as espeak-ng failing for a text would).
func startWith(t *testing.T, voice string) (*scripted.Model, *recorder) {
	t.Helper()
	program := map[string]string{"espeak-ng": "espeak-ng", "tone": missing, "failing": "false"}[voice]
	if program == "espeak-ng" {
		needEspeak(t)
	}
	rec := &recorder{}
	m := scripted.NewWithProgram(context.Background(), rec, program)
	t.Cleanup(func() { _ = m.Close() })
	return m, rec
}

// needEspeak fails the test when espeak-ng is missing: the scripted model's speech is part of
// what is tested (scripts/test installs it), never skipped.
func needEspeak(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Fatalf("install espeak-ng: apt-get install espeak-ng (%v)", err)
	}
}

// spoken is the event lines of one audible response saying text.
func spoken(text string) string {
	return "started | says " + text + " | audio | done cancelled=false err=<nil>"
}

// silent is the event lines of one muted response.
const silent = "started | done cancelled=false err=<nil>"

// TestSentences pins every sentence of SPEC 19's table (and SPEC 12's permission texts), exactly:
// LABEL is the status_label, OUTPUT, SEGMENT and ARGS strings as they are and other JSON compact.
func TestSentences(t *testing.T) {
	spaced := json.RawMessage(`{ "files": 3,  "ok": true }`)
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{"hand-off", model.Request{Kind: model.HandOff, Label: "the report", Name: "slow"}, "Started the report in the background."},
		{"milestone, string segment", model.Request{Kind: model.Milestone, Label: "scan", Segment: json.RawMessage(`"ten percent"`)}, "Update on scan: ten percent"},
		{"milestone, JSON segment", model.Request{Kind: model.Milestone, Label: "scan", Segment: spaced}, `Update on scan: {"files":3,"ok":true}`},
		{"interaction ask without options", model.Request{Kind: model.InteractionAsk, Prompt: "What name?"}, "What name?"},
		{"interaction ask with options", model.Request{Kind: model.InteractionAsk, Prompt: "Which size?", Options: []string{"small", "large"}}, "Which size? Options: small, large."},
		{"completion, string output", model.Request{Kind: model.Completion, Label: "backup", State: "completed", Output: json.RawMessage(`"all files saved"`)}, "backup is done: all files saved"},
		{"completion, JSON output", model.Request{Kind: model.Completion, Label: "export", State: "completed", Output: spaced}, `export is done: {"files":3,"ok":true}`},
		{"completion, failed", model.Request{Kind: model.Completion, Label: "import", State: "failed", Error: "disk full"}, "import failed: disk full"},
		{"completion, timed out", model.Request{Kind: model.Completion, Label: "sprint", State: "timed_out"}, "sprint timed out."},
		{"inject", model.Request{Kind: model.Inject, Text: "Your table is ready."}, "Your table is ready."},
		{"permission ask", model.Request{Kind: model.PermissionAsk, Name: "pay", Args: json.RawMessage(`{ "amount": 5 }`)}, `Shall I run pay with {"amount":5}? Please say yes or no.`},
		{"permission ask without arguments", model.Request{Kind: model.PermissionAsk, Name: "pay"}, `Shall I run pay with {}? Please say yes or no.`},
		{"clarification", model.Request{Kind: model.Clarification, Name: "pay", Args: json.RawMessage(`{"amount": 5}`)}, `I need a clear yes or no. Shall I run pay with {"amount":5}?`},
		{"decline", model.Request{Kind: model.Decline, Name: "pay", Args: json.RawMessage(`{"amount":5}`)}, "OK, I won't run pay."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := model.Wording(tc.req); got != tc.want {
				t.Fatalf("Wording = %q, want %q", got, tc.want)
			}
			// Respond says exactly that, as one response.
			m, rec := start(t)
			if _, err := m.Respond(tc.req); err != nil {
				t.Fatal(err)
			}
			rec.settle(t)
			if got := rec.take(); got != spoken(tc.want) {
				t.Fatalf("Respond: %s, want %s", got, spoken(tc.want))
			}
		})
	}
}

// TestGrammar pins how the scripted model reacts to caller turns (SPEC 19: first match wins):
// call, cancel, say, mute, and anything else; an unmatched interaction reply is clarified.
func TestGrammar(t *testing.T) {
	tests := []struct {
		turn    string
		clarify []string
		want    string
	}{
		{`call lookup {"q": "weather"}`, nil, `call lookup {"q":"weather"}`},
		{`call lookup`, nil, `call lookup {}`},
		{"  call pay {\"amount\":5}  ", nil, `call pay {"amount":5}`},
		{`call lookup {not json`, nil, spoken(`I heard: call lookup {not json`)},
		{`cancel h-report`, nil, `call cancel_job {"ref":"h-report"}`},
		{`cancel call_abcdefghijklmnopqrst`, nil, `call cancel_job {"ref":"call_abcdefghijklmnopqrst"}`},
		{`cancel two words`, nil, spoken(`I heard: cancel two words`)},
		{`say let us talk`, nil, spoken("let us talk")},
		{`say cancel h-1`, nil, spoken("cancel h-1")},
		{`mute 2`, nil, ""},
		{`mute two`, nil, spoken("I heard: mute two")},
		{`hello there`, nil, spoken("I heard: hello there")},
		{`green`, []string{"small", "large"}, spoken("Please choose one of: small, large.")},
		{`say green`, []string{"small", "large"}, spoken("green")},
	}
	for _, tc := range tests {
		t.Run(tc.turn, func(t *testing.T) {
			m, rec := start(t)
			m.CallerTurn(tc.turn, tc.clarify)
			rec.settle(t)
			if got := rec.take(); got != tc.want {
				t.Fatalf("CallerTurn(%q): %q, want %q", tc.turn, got, tc.want)
			}
		})
	}
	if p := scripted.Parse("mute 99999999999999999999999"); p.Kind != scripted.TurnMute || p.N <= 0 {
		t.Errorf("a huge mute: %+v, want a mute for ever", p)
	}
}

// TestMute: `mute N` answers nothing and makes the next N responses of any kind silent (no
// audio, no transcript); a tool call alone is not a response (SPEC 19).
func TestMute(t *testing.T) {
	m, rec := start(t)
	m.CallerTurn("mute 3", nil)
	m.CallerTurn("call lookup {}", nil) // not a response: the mute is not spent on it
	if got := rec.take(); got != "call lookup {}" {
		t.Fatalf("tool call while muted: %q", got)
	}
	if _, err := m.Respond(model.Request{Kind: model.HandOff, Label: "x"}); err != nil { // a hand-off
		t.Fatal(err)
	}
	m.ToolResult("sc_call_1", "ok", false, true) // an instant result
	m.CallerTurn("say hi", nil)                  // a reply
	rec.settle(t)
	if got, want := rec.take(), strings.Join([]string{silent, silent, silent}, " | "); got != want {
		t.Fatalf("three muted responses: %q, want %q", got, want)
	}
	m.CallerTurn("say hi", nil)
	rec.settle(t)
	if got := rec.take(); got != spoken("hi") {
		t.Fatalf("after the mute: %q, want %q", got, spoken("hi"))
	}
}

// TestToolResult: an instant result is spoken as `NAME returned: OUTPUT` (SPEC 19); a result
// given as silent context (a hand-off, a cancel_job answer) says nothing.
func TestToolResult(t *testing.T) {
	m, rec := start(t)
	m.CallerTurn(`call lookup {"q":"x"}`, nil)
	m.CallerTurn(`call slow {}`, nil)
	rec.take()
	m.ToolResult("sc_call_1", `{"sky":"clear"}`, false, true)
	rec.settle(t)
	if got, want := rec.take(), spoken(`lookup returned: {"sky":"clear"}`); got != want {
		t.Fatalf("instant result: %q, want %q", got, want)
	}
	m.ToolResult("sc_call_2", "running in the background", false, false)
	if got := rec.take(); got != "" {
		t.Fatalf("a silent result was spoken: %q", got)
	}
}

// TestSpeech: the speech takes real time, exactly 60 ms a word and at least 300 ms (SPEC 19,
// and the broker's tests count on that length), as audible µ-law audio — at least the 200 ms
// that make a narration delivered (SPEC 8) — with espeak-ng and with the tone alike.
func TestSpeech(t *testing.T) {
	for _, voice := range []string{"espeak-ng", "tone"} {
		t.Run(voice, func(t *testing.T) {
			texts := []string{"OK.", "one two three four five", strings.Repeat("word ", 30),
				"Shall I run pay with {\"amount\":5}? Please say yes or no.", "backup is done: ok"}
			for _, text := range texts {
				m, rec := startWith(t, voice)
				id, err := m.Respond(model.Request{Kind: model.Inject, Text: text})
				if err != nil {
					t.Fatal(err)
				}
				rec.settle(t)
				audio := rec.audioOf(id)
				ms := max(len(strings.Fields(text))*scripted.MSPerWord, scripted.MinSpeechMS)
				if got := scripted.SpeechMS(text); got != ms {
					t.Errorf("%q: SpeechMS %d, want %d", text, got, ms)
				}
				if len(audio) != ms*8 {
					t.Errorf("%q: %d bytes of audio, want %d (%d ms at 8 kHz)", text, len(audio), ms*8, ms)
				}
				p := playout(audio)
				if !p.Delivered(false) {
					t.Errorf("%q: %d of %d frames audible, want at least %d", text, p.Audible, p.Frames, narration.AudibleFrames)
				}
				if voice == "tone" && p.Audible != p.Frames {
					t.Errorf("%q: %d of %d frames of the tone audible, want all", text, p.Audible, p.Frames)
				}
				t.Logf("%q: %d of %d frames audible", text, p.Audible, p.Frames)
			}
		})
	}
}

// playout counts audio in 20 ms frames as the broker does when it plays it (SPEC 8).
func playout(audio []byte) narration.Playout {
	var p narration.Playout
	for len(audio) > 0 {
		n := min(len(audio), g711.SamplesPer20ms)
		p.Add(audio[:n])
		audio = audio[n:]
	}
	return p
}

// TestQuietUntilAskedAndAfterClose: the scripted model never speaks unprompted (no greeting),
// and reports nothing once closed.
func TestQuietUntilAskedAndAfterClose(t *testing.T) {
	m, rec := start(t)
	m.CallerAudio(g711.Tone(300, 20, 0.5))
	m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:"})
	m.SetTools([]model.Tool{model.CancelJobTool})
	m.SetAutoRespond(true)
	if got := rec.take(); got != "" {
		t.Fatalf("spoke unprompted: %q", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.CallerTurn("say hi", nil)
	m.CallerTurn("call lookup {}", nil)
	if _, err := m.Respond(model.Request{Kind: model.Inject, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	m.ToolResult("sc_call_1", "ok", false, true)
	if got := rec.take(); got != "" {
		t.Fatalf("events after Close: %q", got)
	}
}
