package voice

import (
	"encoding/json"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// The model's events (model.Events), as the session's event loop hands them on. SpeechStarted
// and SpeechStopped are Voice's own (the caller's speech, whoever detected it).

// CallerTranscript is the model's transcript of the caller: a final one is shown to the caller
// (SPEC 17) and is a caller turn.
func (v *Voice) CallerTranscript(text string, final bool) {
	if !final {
		return
	}
	v.env.ToCaller(&frames.Transcript{Role: frames.RoleCaller, Text: text, Final: true})
	v.finalTranscript(text)
}

// ResponseStarted: a response began (requested, or the model's own): it holds the floor.
func (v *Voice) ResponseStarted(id string) { v.responseFor(id) }

// Audio is agent audio of a response, arriving now: cut into 20 ms frames and played in real
// time.
func (v *Voice) Audio(id string, chunk []byte) { v.AudioAt(id, chunk, v.env.Now()) }

// AudioAt is Audio of a chunk that arrived from the model at at (its frames are due from then).
func (v *Voice) AudioAt(id string, chunk []byte, at time.Time) {
	r := v.responseFor(id)
	if r == nil || r.interrupted || !v.floor.CallerAttached {
		return
	}
	for len(chunk) > 0 {
		n := min(len(chunk), g711.SamplesPer20ms)
		r.frames = append(r.frames, frame{audio: chunk[:n], at: at})
		chunk = chunk[n:]
	}
	v.play()
}

// Transcript is the text of a response's speech: the caller sees the agent's words (SPEC 17) —
// not those of a response the caller barged in on before any of it was played.
func (v *Voice) Transcript(id, text string, final bool) {
	r := v.responseFor(id)
	if (r == nil && v.unheard.has(id)) || (r != nil && r.interrupted && r.firstFrame.IsZero()) {
		return
	}
	if final && r != nil {
		r.text = text
		r.playout.Text = text != ""
	}
	v.env.ToCaller(&frames.Transcript{Role: frames.RoleAgent, Text: text, ResponseID: id, Final: final})
}

// ResponseDone: the model finished producing a response; err is set when it failed.
func (v *Voice) ResponseDone(id string, cancelled bool, err error) {
	r := v.responseFor(id)
	if r == nil {
		return
	}
	r.modelDone = true
	r.failed = err
	if cancelled {
		r.interrupted = true
	}
	v.play()
}

// ToolCall: the model calls a tool — cancel_job (SPEC 11), or a host tool (SPEC 4).
func (v *Voice) ToolCall(callID, name string, args json.RawMessage) { v.toolCall(callID, name, args) }
