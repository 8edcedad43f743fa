package narration_test

import (
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/narration"
)

// TestFloorFree checks SPEC 8's floor: free only with a caller attached, the caller not
// speaking and stopped at least the grace period ago, and no response in flight — to the
// millisecond, with explicit times.
func TestFloorFree(t *testing.T) {
	stopped := at(1000) // the caller stopped speaking at +1000ms
	tests := []struct {
		name  string
		floor narration.Floor
		now   time.Time
		want  bool
	}{
		{"no caller attached", narration.Floor{}, at(0), false},
		{"no caller attached, long after speech", narration.Floor{SpeechStopped: stopped}, at(60000), false},
		{"caller attached, never spoke", narration.Floor{CallerAttached: true}, at(0), true},
		{"caller speaking", narration.Floor{CallerAttached: true, CallerSpeaking: true}, at(0), false},
		{"caller speaking, an older stop long ago", narration.Floor{CallerAttached: true, CallerSpeaking: true, SpeechStopped: stopped}, at(9000), false},
		{"response in flight", narration.Floor{CallerAttached: true, InFlight: true}, at(0), false},
		{"response in flight after the grace", narration.Floor{CallerAttached: true, InFlight: true, SpeechStopped: stopped}, at(5000), false},
		{"at the stop", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(1000), false},
		{"1 ms after the stop", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(1001), false},
		{"default grace: 399 ms after", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(1399), false},
		{"default grace: 399.999 ms after", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(1400).Add(-time.Microsecond), false},
		{"default grace: exactly 400 ms after", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(1400), true},
		{"default grace: 401 ms after", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(1401), true},
		{"zero grace means the default 400 ms", narration.Floor{Grace: 0, CallerAttached: true, SpeechStopped: stopped}, at(1399), false},
		{"negative grace means the default 400 ms", narration.Floor{Grace: -time.Second, CallerAttached: true, SpeechStopped: stopped}, at(1399), false},
		{"grace 250 ms: 249 ms after", narration.Floor{Grace: 250 * time.Millisecond, CallerAttached: true, SpeechStopped: stopped}, at(1249), false},
		{"grace 250 ms: 250 ms after", narration.Floor{Grace: 250 * time.Millisecond, CallerAttached: true, SpeechStopped: stopped}, at(1250), true},
		{"grace 1 s: 999 ms after", narration.Floor{Grace: time.Second, CallerAttached: true, SpeechStopped: stopped}, at(1999), false},
		{"grace 1 s: 1000 ms after", narration.Floor{Grace: time.Second, CallerAttached: true, SpeechStopped: stopped}, at(2000), true},
		{"a clock before the stop", narration.Floor{CallerAttached: true, SpeechStopped: stopped}, at(500), false},
		{"all taken", narration.Floor{CallerAttached: false, CallerSpeaking: true, InFlight: true, SpeechStopped: stopped}, at(9000), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.floor
			if got := f.Free(tc.now); got != tc.want {
				t.Fatalf("Free(+%v) = %v, want %v (floor %+v)", tc.now.Sub(t0), got, tc.want, f)
			}
		})
	}
	if narration.DefaultGrace != 400*time.Millisecond {
		t.Fatalf("DefaultGrace %v, want 400ms (SPEC 8 floor_grace_ms)", narration.DefaultGrace)
	}
}

// TestFloorFreeAt is when the grace after the last speech ends: zero before any speech.
func TestFloorFreeAt(t *testing.T) {
	tests := []struct {
		name  string
		floor narration.Floor
		want  time.Time
	}{
		{"never spoke", narration.Floor{CallerAttached: true}, time.Time{}},
		{"default grace", narration.Floor{SpeechStopped: at(1000)}, at(1400)},
		{"own grace", narration.Floor{Grace: 250 * time.Millisecond, SpeechStopped: at(1000)}, at(1250)},
		{"independent of the other fields", narration.Floor{CallerSpeaking: true, InFlight: true, SpeechStopped: at(7)}, at(407)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.floor
			if got := f.FreeAt(); !got.Equal(tc.want) {
				t.Fatalf("FreeAt %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFloorSequence walks one floor through a conversation, millisecond by millisecond at the
// edges: the caller speaks, stops, a response is in flight, the caller drops.
func TestFloorSequence(t *testing.T) {
	f := narration.Floor{Grace: narration.DefaultGrace}
	steps := []struct {
		what  string
		apply func()
		now   int
		want  bool
	}{
		{"no caller yet", func() {}, 0, false},
		{"caller attaches", func() { f.CallerAttached = true }, 10, true},
		{"caller starts speaking", func() { f.CallerSpeaking = true }, 100, false},
		{"still speaking a minute later", func() {}, 60100, false},
		{"caller stops at +61000", func() { f.CallerSpeaking, f.SpeechStopped = false, at(61000) }, 61000, false},
		{"+61399", func() {}, 61399, false},
		{"+61400", func() {}, 61400, true},
		{"a response is requested", func() { f.InFlight = true }, 61401, false},
		{"its last audio frame was sent", func() { f.InFlight = false }, 63000, true},
		{"caller speaks again", func() { f.CallerSpeaking = true }, 63100, false},
		{"stops at +63500", func() { f.CallerSpeaking, f.SpeechStopped = false, at(63500) }, 63700, false},
		{"caller drops before the grace ends", func() { f.CallerAttached = false }, 63900, false},
		{"caller resumes", func() { f.CallerAttached = true }, 63950, true},
	}
	for _, s := range steps {
		s.apply()
		if got := f.Free(at(s.now)); got != s.want {
			t.Fatalf("%s: Free(+%dms) = %v, want %v (floor %+v)", s.what, s.now, got, s.want, f)
		}
	}
}
