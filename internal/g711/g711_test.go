package g711

import (
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range []int16{0, 1, -1, 100, -100, 1000, -1000, 8000, -8000, 32000, -32000, 32767, -32768} {
		got := Decode(Encode(s))
		tol := math.Max(8, math.Abs(float64(s))/16) // µ-law keeps about 4 bits of mantissa
		if math.Abs(float64(got)-float64(s)) > tol {
			t.Errorf("Decode(Encode(%d)) = %d", s, got)
		}
	}
	if Decode(0xFF) != 0 || Decode(0x7F) != 0 {
		t.Errorf("µ-law silence bytes decode to %d and %d, want 0", Decode(0xFF), Decode(0x7F))
	}
}

func TestLoudness(t *testing.T) {
	if r := RMS(Silence(20)); r != 0 {
		t.Errorf("RMS of silence = %v", r)
	}
	tone := Tone(440, 20, 0.3)
	if len(tone) != SamplesPer20ms {
		t.Fatalf("20 ms tone has %d samples", len(tone))
	}
	want := 0.3 * 32767 / math.Sqrt2
	if r := RMS(tone); math.Abs(r-want) > want*0.1 {
		t.Errorf("RMS of a 0.3 tone = %v, want ≈ %v", r, want)
	}
}
