package voice

import (
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/narration"
)

// vad detects the caller's speech in 20 ms µ-law frames by energy: speech starts after
// startFrames loud frames in a row and stops after stopFrames quiet ones. A frame is loud by
// the same silence threshold as the agent's audible speech (narration.AudibleRMS).
type vad struct {
	speaking bool
	loud     int
	quiet    int
}

const (
	vadStartFrames = 3  // 60 ms
	vadStopFrames  = 15 // 300 ms
)

// feed takes one frame and reports a change: +1 speech started, -1 speech stopped, 0 none.
func (v *vad) feed(frame []byte) int {
	loud := g711.RMS(frame) >= narration.AudibleRMS
	if loud {
		v.loud++
		v.quiet = 0
	} else {
		v.quiet++
		v.loud = 0
	}
	switch {
	case !v.speaking && v.loud >= vadStartFrames:
		v.speaking = true
		return +1
	case v.speaking && v.quiet >= vadStopFrames:
		v.speaking = false
		return -1
	}
	return 0
}
