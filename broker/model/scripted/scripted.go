// Package scripted is the deterministic local model of SPEC 19: a rule table that maps caller
// text to tool calls and replies, and speech that takes real time (60 ms per word, at least
// 300 ms) as G.711 µ-law audio — espeak-ng speech when that program is installed, else a 440 Hz
// tone, audible either way — with the `mute N` fault knob that makes its next N responses
// silent. It makes the broker usable and testable with no keys and no network. It hears text
// only: caller audio is ignored (the broker's own VAD handles it).
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/backchannel-io/backchannel/broker/model"
)

// Model is the scripted model of one session. Its commands never wait for espeak-ng: a
// response is reported started, with its transcript, at once, and its speech is made by a
// goroutine of the model, which runs only while there is speech to make. The events of each
// response come in the order started, transcript, audio, done, and the responses' audio and
// ends in the order the responses started.
type Model struct {
	events  model.Events
	program func() string   // espeak-ng's path, "" when it is not installed
	ctx     context.Context // ends with Close: stops espeak-ng
	stop    context.CancelFunc

	mu      sync.Mutex
	muted   int               // responses left to produce silently
	calls   map[string]string // the model's tool call ids → tool names
	seq     int
	closed  bool
	pending []*response // responses waiting for their speech, in order
	working bool        // the speech goroutine runs
	current *response   // the response whose speech is being made
	abort   func()      // stops the making of current's speech
	wg      sync.WaitGroup
}

// New starts a scripted model reporting to events. It is a model.Factory. Ending ctx stops it
// as Close does.
func New(ctx context.Context, _ model.Config, events model.Events) (model.Model, error) {
	return newModel(ctx, events, espeak), nil
}

func newModel(ctx context.Context, events model.Events, program func() string) *Model {
	m := &Model{events: events, program: program, calls: make(map[string]string)}
	m.ctx, m.stop = context.WithCancel(ctx)
	return m
}

var (
	callRule   = regexp.MustCompile(`(?s)^call\s+([A-Za-z0-9_-]+)\s*(.*)$`)
	cancelRule = regexp.MustCompile(`^cancel\s+(\S+)\s*$`)
	sayRule    = regexp.MustCompile(`(?s)^say\s+(.+)$`)
	muteRule   = regexp.MustCompile(`^mute\s+(\d+)\s*$`)
)

// TurnKind is the rule of SPEC 19's grammar a caller turn matched.
type TurnKind int

// The rules of the grammar, in the order they are tried.
const (
	TurnOther  TurnKind = iota // anything else: `I heard: TEXT`
	TurnCall                   // `call TOOL {json}`: a tool call
	TurnCancel                 // `cancel REF`: cancel_job
	TurnSay                    // `say TEXT`: speak TEXT
	TurnMute                   // `mute N`: the next N responses are silent
)

// Turn is a caller turn read by the grammar of SPEC 19.
type Turn struct {
	Kind TurnKind
	Tool string          // TurnCall: the tool's name
	Args json.RawMessage // TurnCall: the arguments as compact JSON (`{}` when none were given)
	Ref  string          // TurnCancel: the handle or broker call id
	Text string          // TurnSay: what to speak; TurnOther: the trimmed turn
	N    int             // TurnMute: how many responses produce no audio and no transcript
}

// Parse reads a final caller transcript by the grammar of SPEC 19, first match wins. A `call`
// whose arguments are not valid JSON matches no call.
func Parse(text string) Turn {
	t := strings.TrimSpace(text)
	if g := callRule.FindStringSubmatch(t); g != nil {
		args := strings.TrimSpace(g[2])
		if args == "" {
			args = "{}"
		}
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(args)) == nil {
			return Turn{Kind: TurnCall, Tool: g[1], Args: compact.Bytes()}
		}
	}
	if g := cancelRule.FindStringSubmatch(t); g != nil {
		return Turn{Kind: TurnCancel, Ref: g[1]}
	}
	if g := sayRule.FindStringSubmatch(t); g != nil {
		return Turn{Kind: TurnSay, Text: strings.TrimSpace(g[1])}
	}
	if g := muteRule.FindStringSubmatch(t); g != nil {
		n, err := strconv.Atoi(g[1])
		if err != nil {
			n = math.MaxInt // digits beyond int: as good as for ever
		}
		return Turn{Kind: TurnMute, N: n}
	}
	return Turn{Kind: TurnOther, Text: t}
}

// CallerTurn reacts to a final caller transcript by the grammar of SPEC 19, first match wins;
// an unmatched answer to an open interaction (clarify) gets `Please choose one of: A, B.`.
func (m *Model) CallerTurn(text string, clarify []string) {
	switch t := Parse(text); t.Kind {
	case TurnCall:
		m.toolCall(t.Tool, t.Args)
	case TurnCancel:
		args, _ := json.Marshal(map[string]string{"ref": t.Ref})
		m.toolCall(model.CancelJobTool.Name, args)
	case TurnSay:
		m.speak(t.Text)
	case TurnMute:
		m.mu.Lock()
		m.muted = t.N
		m.mu.Unlock()
	default:
		if len(clarify) > 0 {
			m.speak(ChooseSentence(clarify))
			return
		}
		m.speak("I heard: " + t.Text)
	}
}

func (m *Model) toolCall(name string, args []byte) {
	m.mu.Lock()
	m.seq++
	id := fmt.Sprintf("sc_call_%d", m.seq)
	m.calls[id] = name
	closed := m.closed
	m.mu.Unlock()
	if !closed {
		m.events.ToolCall(id, name, args)
	}
}

// Respond voices exactly the request: its model.Wording, the sentences of SPEC 19.
func (m *Model) Respond(req model.Request) (string, error) {
	return m.speak(model.Wording(req)), nil
}

// ChooseSentence is what the scripted model says to a reply that answers none of the options
// of the open interaction (SPEC 9, 19): `Please choose one of: A, B.`.
func ChooseSentence(options []string) string {
	return "Please choose one of: " + strings.Join(options, ", ") + "."
}

// speak produces one response saying text (at most its first MaxSpokenWords words), or
// nothing audible while muted, and returns its id. Its audio may be reported after speak
// returns; the broker plays it out in real time.
func (m *Model) speak(text string) string {
	m.mu.Lock()
	m.seq++
	id := fmt.Sprintf("sc_resp_%d", m.seq)
	muted := m.muted > 0
	if muted {
		m.muted--
	}
	closed := m.closed || m.ctx.Err() != nil
	m.mu.Unlock()
	if !closed {
		m.start(&response{id: id, text: spokenPart(text), muted: muted})
	}
	return id
}

// ToolResult speaks an instant result when respond is set: `NAME returned: OUTPUT` (or
// `NAME failed: ERROR`).
func (m *Model) ToolResult(callID, output string, isError, respond bool) {
	m.mu.Lock()
	name := m.calls[callID]
	delete(m.calls, callID)
	m.mu.Unlock()
	if !respond {
		return
	}
	if isError {
		m.speak(name + " failed: " + output)
		return
	}
	m.speak(name + " returned: " + output)
}

// CallerAudio implements model.Model: the scripted model hears text only.
func (m *Model) CallerAudio([]byte) {}

// SetContext implements model.Model: the scripted model keeps no context.
func (m *Model) SetContext(model.ContextItem) {}

// Cancel implements model.Model: a response whose speech is still being made (or waits to be)
// ends cancelled, with no audio; one whose audio was reported is left alone (the broker stops
// playing it).
func (m *Model) Cancel(responseID string) { m.cancel(responseID) }

// SetTools implements model.Model.
func (m *Model) SetTools([]model.Tool) {}

// SetAutoRespond implements model.Model: the scripted model only answers turns it is given.
func (m *Model) SetAutoRespond(bool) {}

// Close implements model.Model: it stops espeak-ng and returns once no event can follow.
func (m *Model) Close() error {
	m.mu.Lock()
	m.closed = true
	m.pending = nil
	if m.abort != nil {
		m.abort()
	}
	m.mu.Unlock()
	m.stop()
	m.wg.Wait()
	return nil
}
