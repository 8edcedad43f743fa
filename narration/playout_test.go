package narration_test

import (
	"testing"

	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/narration"
)

// frames20 cuts µ-law audio into 20 ms frames.
func frames20(audio []byte) [][]byte {
	var out [][]byte
	for len(audio) > 0 {
		n := min(len(audio), g711.SamplesPer20ms)
		out = append(out, audio[:n])
		audio = audio[n:]
	}
	return out
}

func tone(ms int, amplitude float64) [][]byte { return frames20(g711.Tone(440, ms, amplitude)) }

func silence(ms int) [][]byte { return frames20(g711.Silence(ms)) }

func cat(parts ...[][]byte) [][]byte {
	var out [][]byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestAudibleThreshold pins the silence threshold the playout uses: speech-level tones are
// audible, silence and a faint hiss are not.
func TestAudibleThreshold(t *testing.T) {
	tests := []struct {
		name    string
		frame   []byte
		audible bool
	}{
		{"loud tone", g711.Tone(440, 20, 0.3), true},
		{"full scale tone", g711.Tone(1000, 20, 1), true},
		{"tone just above the threshold", g711.Tone(440, 20, 0.03), true},
		{"tone just below the threshold", g711.Tone(440, 20, 0.012), false},
		{"faint tone", g711.Tone(440, 20, 0.002), false},
		{"silence", g711.Silence(20), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rms := g711.RMS(tc.frame)
			if got := rms >= narration.AudibleRMS; got != tc.audible {
				t.Fatalf("RMS %.0f: audible %v, want %v (threshold %d)", rms, got, tc.audible, narration.AudibleRMS)
			}
			var p narration.Playout
			p.Add(tc.frame)
			want := 0
			if tc.audible {
				want = 1
			}
			if p.Frames != 1 || p.Audible != want {
				t.Fatalf("Playout after one frame: %+v, want Frames 1, Audible %d", p, want)
			}
		})
	}
}

// TestPlayoutDelivered checks SPEC 8's audible speech: a narration is delivered only with at
// least 200 ms of audible agent audio actually sent (RMS over 20 ms frames), or for a text-only
// model a non-empty spoken transcript.
func TestPlayoutDelivered(t *testing.T) {
	tests := []struct {
		name     string
		frames   [][]byte
		text     bool
		textOnly bool
		audible  int
		want     bool
	}{
		{"nothing sent", nil, false, false, 0, false},
		{"180 ms of tone", tone(180, 0.3), false, false, 9, false},
		{"200 ms of tone", tone(200, 0.3), false, false, 10, true},
		{"220 ms of tone", tone(220, 0.3), false, false, 11, true},
		{"2 s of silence", silence(2000), false, false, 0, false},
		{"2 s of a faint tone", tone(2000, 0.002), false, false, 0, false},
		{"180 ms of tone in 2 s of silence", cat(silence(1000), tone(180, 0.3), silence(1000)), false, false, 9, false},
		{"200 ms of tone split by silence", cat(tone(100, 0.3), silence(500), tone(100, 0.3)), false, false, 10, true},
		{"a transcript does not make silence delivered", silence(1000), true, false, 0, false},
		{"a transcript with audible audio", tone(300, 0.3), true, false, 15, true},
		{"text-only model: a transcript", nil, true, true, 0, true},
		{"text-only model: no transcript", nil, false, true, 0, false},
		{"text-only model: audio without a transcript", tone(1000, 0.3), false, true, 50, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := narration.Playout{Text: tc.text}
			for _, f := range tc.frames {
				p.Add(f)
			}
			if p.Frames != len(tc.frames) {
				t.Fatalf("Frames %d, want %d", p.Frames, len(tc.frames))
			}
			if p.Audible != tc.audible {
				t.Fatalf("Audible %d, want %d", p.Audible, tc.audible)
			}
			if got := p.Delivered(tc.textOnly); got != tc.want {
				t.Fatalf("Delivered(textOnly %v) = %v, want %v (%+v)", tc.textOnly, got, tc.want, p)
			}
		})
	}
	if narration.AudibleFrames*20 != 200 {
		t.Fatalf("AudibleFrames %d is not 200 ms of 20 ms frames", narration.AudibleFrames)
	}
}
