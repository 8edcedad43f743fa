package scripted_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/narration"
)

// recorder is a model.Events that writes down what the model reports, one line per event.
type recorder struct {
	mu    sync.Mutex
	lines []string
	audio map[string][]byte // by response id
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) SpeechStarted()                       { r.add("speech started") }
func (r *recorder) SpeechStopped()                       { r.add("speech stopped") }
func (r *recorder) CallerTranscript(text string, _ bool) { r.add("caller %s", text) }
func (r *recorder) ResponseStarted(id string)            { r.add("started") }
func (r *recorder) Error(err error)                      { r.add("error %v", err) }

func (r *recorder) Audio(id string, chunk []byte) {
	r.mu.Lock()
	if r.audio == nil {
		r.audio = map[string][]byte{}
	}
	r.audio[id] = append(r.audio[id], chunk...)
	r.mu.Unlock()
	r.add("audio")
}

func (r *recorder) Transcript(_, text string, final bool) {
	if final {
		r.add("says %s", text)
	}
}

func (r *recorder) ResponseDone(_ string, cancelled bool, err error) {
	r.add("done cancelled=%v err=%v", cancelled, err)
}

func (r *recorder) ToolCall(_, name string, args json.RawMessage) { r.add("call %s %s", name, args) }

// take returns the lines recorded since the last take.
func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := strings.Join(r.lines, " | ")
	r.lines = nil
	return out
}

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
			if got := scripted.Sentence(tc.req); got != tc.want {
				t.Fatalf("Sentence = %q, want %q", got, tc.want)
			}
			// Respond says exactly that, as one response.
			m, rec := start(t)
			if _, err := m.Respond(tc.req); err != nil {
				t.Fatal(err)
			}
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
	if got, want := rec.take(), strings.Join([]string{silent, silent, silent}, " | "); got != want {
		t.Fatalf("three muted responses: %q, want %q", got, want)
	}
	m.CallerTurn("say hi", nil)
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
	if got, want := rec.take(), spoken(`lookup returned: {"sky":"clear"}`); got != want {
		t.Fatalf("instant result: %q, want %q", got, want)
	}
	m.ToolResult("sc_call_2", "running in the background", false, false)
	if got := rec.take(); got != "" {
		t.Fatalf("a silent result was spoken: %q", got)
	}
}

// TestSpeech: the speech takes real time, about 60 ms a word (at least 300 ms), as audible µ-law
// audio (SPEC 19: audible either way) — at least the 200 ms that make a narration delivered.
func TestSpeech(t *testing.T) {
	for _, text := range []string{"OK.", "one two three four five", strings.Repeat("word ", 30)} {
		m, rec := start(t)
		id, err := m.Respond(model.Request{Kind: model.Inject, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		audio := rec.audio[id]
		rec.mu.Unlock()
		ms := max(len(strings.Fields(text))*scripted.MSPerWord, scripted.MinSpeechMS)
		if len(audio) != ms*8 {
			t.Errorf("%q: %d bytes of audio, want %d (%d ms at 8 kHz)", text, len(audio), ms*8, ms)
		}
		var p narration.Playout
		for len(audio) > 0 {
			n := min(len(audio), g711.SamplesPer20ms)
			p.Add(audio[:n])
			audio = audio[n:]
		}
		if !p.Delivered(false) || p.Audible != p.Frames {
			t.Errorf("%q: %d of %d frames audible, want all and at least %d", text, p.Audible, p.Frames, narration.AudibleFrames)
		}
	}
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
	if got := rec.take(); got != "" {
		t.Fatalf("events after Close: %q", got)
	}
}
