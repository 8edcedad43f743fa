package narration

import "github.com/backchannel-io/backchannel/internal/g711"

// AudibleRMS is the silence threshold: a 20 ms frame of agent audio is audible when its RMS
// is at least this (linear 16-bit units, about -36 dBFS).
const AudibleRMS = 500

// AudibleFrames is how many audible 20 ms frames make a delivered narration (SPEC 8: 200 ms).
const AudibleFrames = 10

// Playout counts the agent audio of one response actually sent to the caller.
type Playout struct {
	Frames  int  // 20 ms frames sent
	Audible int  // of which audible
	Text    bool // the response had a non-empty spoken transcript
}

// Add accounts one frame sent to the caller.
func (p *Playout) Add(frame []byte) {
	p.Frames++
	if g711.RMS(frame) >= AudibleRMS {
		p.Audible++
	}
}

// Delivered reports whether audible speech reached the caller: at least 200 ms of audible
// audio. A model that speaks text only (textOnly) delivers with a non-empty transcript.
func (p *Playout) Delivered(textOnly bool) bool {
	if textOnly {
		return p.Text
	}
	return p.Audible >= AudibleFrames
}
