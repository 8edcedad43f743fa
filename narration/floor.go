package narration

import "time"

// DefaultGrace is how long after the caller stopped speaking the floor stays taken (SPEC 8:
// floor_grace_ms, default 400).
const DefaultGrace = 400 * time.Millisecond

// Floor tracks who may speak (SPEC 8): it is free when a caller is attached, the caller is not
// speaking and stopped at least Grace ago, and no agent response is in flight.
type Floor struct {
	Grace          time.Duration
	CallerAttached bool
	CallerSpeaking bool
	SpeechStopped  time.Time
	InFlight       bool
}

// Free reports whether the floor is free at now.
func (f *Floor) Free(now time.Time) bool {
	return f.CallerAttached && !f.CallerSpeaking && !f.InFlight && !now.Before(f.FreeAt())
}

// FreeAt is when the grace after the caller's last speech ends.
func (f *Floor) FreeAt() time.Time {
	if f.SpeechStopped.IsZero() {
		return time.Time{}
	}
	g := f.Grace
	if g <= 0 {
		g = DefaultGrace
	}
	return f.SpeechStopped.Add(g)
}
